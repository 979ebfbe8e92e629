/* stub.c - placeholder bodies so the tree builds while the engine is
 * written (removed as each part lands). */
#include "grammar/grammar.h"

#include "util/error.h"

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


int k3_gram_chat_reply(k3_grammar **out, const k3_gram_reply_spec *spec, k3_buf *warn,
                       k3_err *e)
{
    (void)spec, (void)warn;
    *out = NULL;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

