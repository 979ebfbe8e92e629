/* stub.c - placeholder bodies so the tree builds while the engine is
 * written (removed as each part lands). */
#include "grammar/grammar.h"

#include "util/error.h"

int k3_gram_from_gbnf(k3_grammar **out, const char *text, size_t len, k3_err *e)
{
    (void)text, (void)len;
    *out = NULL;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

int k3_gram_from_schema(k3_grammar **out, const char *json, size_t len,
                        const k3_gram_schema_opts *opts, k3_buf *warn, k3_err *e)
{
    (void)json, (void)len, (void)opts, (void)warn;
    *out = NULL;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

int k3_gram_from_schema_json(k3_grammar **out, const k3_json *schema,
                             const k3_gram_schema_opts *opts, k3_buf *warn, k3_err *e)
{
    (void)schema, (void)opts, (void)warn;
    *out = NULL;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

int k3_gram_json_object(k3_grammar **out, int ws, k3_err *e)
{
    (void)ws;
    *out = NULL;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

void k3_gram_free(k3_grammar *g) { (void)g; }

int k3_gram_chat_reply(k3_grammar **out, const k3_gram_reply_spec *spec, k3_buf *warn,
                       k3_err *e)
{
    (void)spec, (void)warn;
    *out = NULL;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

int k3_gram_vocab_new(k3_gram_vocab **out, uint32_t n, const unsigned char *const *bytes,
                      const size_t *lens, const unsigned char *special, k3_err *e)
{
    (void)n, (void)bytes, (void)lens, (void)special;
    *out = NULL;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

int k3_gram_vocab_from_tokenizer(k3_gram_vocab **out, const k3_tokenizer *tok, k3_err *e)
{
    (void)tok;
    *out = NULL;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

uint32_t k3_gram_vocab_size(const k3_gram_vocab *v) { (void)v; return 0; }
void k3_gram_vocab_free(k3_gram_vocab *v) { (void)v; }

int k3_gram_matcher_new(k3_gram_matcher **out, const k3_grammar *g, const k3_gram_vocab *v,
                        const uint32_t *end_ids, size_t n_end, k3_err *e)
{
    (void)g, (void)v, (void)end_ids, (void)n_end;
    *out = NULL;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

void k3_gram_matcher_free(k3_gram_matcher *m) { (void)m; }
size_t k3_gram_mask_words(const k3_gram_vocab *v) { (void)v; return 0; }

int k3_gram_mask(k3_gram_matcher *m, int64_t budget, uint32_t *mask, k3_err *e)
{
    (void)m, (void)budget, (void)mask;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

int k3_gram_accept(k3_gram_matcher *m, uint32_t id, k3_err *e)
{
    (void)m, (void)id;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

void k3_gram_rollback(k3_gram_matcher *m, size_t n) { (void)m, (void)n; }
void k3_gram_reset(k3_gram_matcher *m) { (void)m; }
size_t k3_gram_count(const k3_gram_matcher *m) { (void)m; return 0; }
int k3_gram_is_accepting(const k3_gram_matcher *m) { (void)m; return 0; }
int k3_gram_is_done(const k3_gram_matcher *m) { (void)m; return 0; }
