/* tokenize.h - POST /tokenize and POST /detokenize, in llama-server's
 * shapes, as pure functions from a request body to a response body.
 *
 *   /tokenize   {"content": TEXT, "parse_special": bool (default true: the
 *               text of a special token becomes its id), "with_pieces": bool
 *               (default false), "add_special": bool (accepted; K3's
 *               tokenizer adds no BOS or EOS, so it changes nothing)}
 *            -> {"tokens": [id, ...]}, or with_pieces
 *               {"tokens": [{"id": id, "piece": TEXT or [byte, ...]}, ...]}
 *               (a piece that is not valid UTF-8 on its own is its bytes)
 *   /detokenize {"tokens": [id, ...]} -> {"content": TEXT} (the ids' bytes
 *               joined; bytes that start no valid UTF-8 character become
 *               U+FFFD)
 *
 * Any other field, a wrong type or an id outside the vocabulary is 400. */
#ifndef K3_SERVER_TOKENIZE_H
#define K3_SERVER_TOKENIZE_H

#include <stddef.h>

#include "k3/tokenizer.h"
#include "server/api.h"
#include "util/json_write.h"

/* Each returns 0 with the response body appended to out, or the HTTP
 * status of the error described in *err. */
int k3_tokenize_answer(const k3_tokenizer *tok, const char *body, size_t n, k3_buf *out,
                       k3_api_error *err);
int k3_detokenize_answer(const k3_tokenizer *tok, const char *body, size_t n, k3_buf *out,
                         k3_api_error *err);

#endif
