/* k3/tokenizer.h - the Kimi K3 tokenizer (docs/MODEL.md §5), byte-exact with
 * the release's tiktoken encoder.
 *
 * Ids are uint32_t. Text is UTF-8; encoders refuse invalid UTF-8 with
 * K3_EINPUT and a message naming the byte offset. */
#ifndef K3_TOKENIZER_H
#define K3_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

typedef struct k3_tokenizer k3_tokenizer;

/* Loads DIR/tiktoken.model and DIR/tokenizer_config.json. */
int k3_tok_load(k3_tokenizer **out, const char *dir, k3_err *e);
void k3_tok_free(k3_tokenizer *tok);

/* Total ids: BPE ranks plus the special range (163,840 for the release). */
uint32_t k3_tok_vocab_size(const k3_tokenizer *tok);

/* Encodes text[0..len). allow_special != 0: special-token strings in the
 * text become their ids ("allow special", structural chat segments);
 * 0: they are ordinary text (user, tool and file text). On success *ids is
 * malloc'd (caller frees) and *n is its length (0 for empty text). */
int k3_tok_encode(const k3_tokenizer *tok, const char *text, size_t len,
                  int allow_special, uint32_t **ids, size_t *n, k3_err *e);

/* The bytes of one id (a special id yields its text). K3_EINPUT for an id
 * outside the vocabulary. The bytes stay valid while tok lives. */
int k3_tok_piece(const k3_tokenizer *tok, uint32_t id, const unsigned char **bytes,
                 size_t *len, k3_err *e);

/* Whether id is in the special range (ids of special and reserved tokens,
 * not BPE ranks). */
int k3_tok_is_special(const k3_tokenizer *tok, uint32_t id);

/* Id of a special token by its text (e.g. "<|end_of_msg|>"), or -1. */
int64_t k3_tok_special_id(const k3_tokenizer *tok, const char *text);

/* Streaming output that never splits a UTF-8 character across writes:
 * bytes of an incomplete trailing sequence are held until completed.
 * k3_utf8_stream_push returns how many bytes of out[] are ready to write
 * (out must hold n + 4 bytes); k3_utf8_stream_flush returns held bytes
 * at end of stream (an incomplete sequence is emitted as-is). */
typedef struct k3_utf8_stream {
    unsigned char held[4];
    size_t nheld;
} k3_utf8_stream;
size_t k3_utf8_stream_push(k3_utf8_stream *s, const unsigned char *in, size_t n,
                           unsigned char *out);
size_t k3_utf8_stream_flush(k3_utf8_stream *s, unsigned char *out);

#endif
