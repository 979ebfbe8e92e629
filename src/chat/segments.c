/* segments.c - see segments.h; also k3_chat_segments_free and
 * k3_chat_encode of k3/chat.h. */
#include "chat/segments.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/json_write.h"

int k3_seg_grow(k3_chat_segments *s, const char *t, size_t n, k3_err *e)
{
    /* The text is a k3_buf in all but type (the public header cannot name
     * util types), so the buffer logic is borrowed rather than repeated. */
    k3_buf b = { s->text, s->len, s->cap };
    int rc = k3_buf_put(&b, t, n, e);
    s->text = b.data;
    s->len = b.len;
    s->cap = b.cap;
    return rc;
}

int k3_seg_close(k3_chat_segments *s, size_t start, int allow_special, k3_err *e)
{
    if (s->len == start)
        return K3_OK;
    if (s->n == s->seg_cap) {
        size_t cap = s->seg_cap ? 2 * s->seg_cap : 64;
        k3_chat_seg *p = realloc(s->seg, cap * sizeof *p);
        if (!p)
            return k3_fail(e, K3_ERUNTIME, "out of memory growing a chat segment list");
        s->seg = p;
        s->seg_cap = cap;
    }
    s->seg[s->n++] = (k3_chat_seg){ start, s->len - start, allow_special };
    return K3_OK;
}

int k3_seg_add(k3_chat_segments *s, const char *t, size_t n, int allow_special, k3_err *e)
{
    size_t start = s->len;
    if (k3_seg_grow(s, t, n, e))
        return e->code;
    return k3_seg_close(s, start, allow_special, e);
}

void k3_chat_segments_free(k3_chat_segments *s)
{
    free(s->text);
    free(s->seg);
    memset(s, 0, sizeof *s);
}

int k3_chat_encode(const k3_tokenizer *tok, const k3_chat_segments *s, uint32_t **ids,
                   size_t *n, k3_err *e)
{
    *ids = NULL;
    *n = 0;
    size_t cap = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint32_t *part;
        size_t np;
        const k3_chat_seg *g = &s->seg[i];
        if (k3_tok_encode(tok, s->text + g->off, g->len, g->allow_special, &part, &np, e))
            break;
        if (*n + np > cap) {
            size_t want = cap ? cap : 256;
            while (want < *n + np)
                want *= 2;
            uint32_t *grown = realloc(*ids, want * sizeof *grown);
            if (!grown) {
                free(part);
                k3_fail(e, K3_ERUNTIME, "out of memory collecting %zu chat token ids", want);
                break;
            }
            *ids = grown;
            cap = want;
        }
        if (np)
            memcpy(*ids + *n, part, np * sizeof *part);
        *n += np;
        free(part);
    }
    if (e->code) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return e->code;
}
