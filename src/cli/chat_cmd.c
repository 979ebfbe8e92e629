/* chat_cmd.c - see chat_cmd.h. */
#include "cli/chat_cmd.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "k3/chat.h"
#include "util/error.h"

static int print_ids(const k3_tokenizer *tok, const k3_chat_segments *s, FILE *out, k3_err *e)
{
    uint32_t *ids;
    size_t n;
    if (k3_chat_encode(tok, s, &ids, &n, e))
        return e->code;
    for (size_t i = 0; i < n; i++)
        fprintf(out, i ? ",%u" : "%u", (unsigned)ids[i]);
    fputc('\n', out);
    free(ids);
    return K3_OK;
}

int k3_cmd_render_chat(const k3_tokenizer *tok, const char *path, int tokenize, FILE *out,
                       k3_err *e)
{
    if (tokenize && !tok)
        return k3_fail(e, K3_EINPUT, "--render-chat --tokenize needs a tokenizer (--tok DIR)");
    k3_chat *c;
    if (k3_chat_load(&c, path, e))
        return e->code;
    k3_chat_segments s = { 0 };
    k3_err inner = { 0, "" };
    if (k3_chat_render(c, &s, &inner))
        k3_fail(e, inner.code, "%s: %s", path, inner.msg); /* like k3_chat_load's messages */
    else if (tokenize)
        print_ids(tok, &s, out, e);
    else
        fwrite(s.text, 1, s.len, out);
    if (e->code == K3_OK && (fflush(out) || ferror(out)))
        k3_fail(e, K3_ERUNTIME, "writing the rendered chat: %s", strerror(errno));
    k3_chat_segments_free(&s);
    k3_chat_free(c);
    return e->code;
}
