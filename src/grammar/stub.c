/* stub.c - placeholder bodies so the tree builds while the engine is
 * written (removed as each part lands). */
#include "grammar/grammar.h"

#include "util/error.h"

int k3_gram_chat_reply(k3_grammar **out, const k3_gram_reply_spec *spec, k3_buf *warn,
                       k3_err *e)
{
    (void)spec, (void)warn;
    *out = NULL;
    return k3_fail(e, K3_EINPUT, "grammar: not implemented yet");
}

