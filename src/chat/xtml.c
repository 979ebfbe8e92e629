/* xtml.c - see xtml.h. */
#include "chat/xtml.h"

#include <string.h>

#include "chat/segments.h"

static int special(k3_chat_segments *s, const char *token, k3_err *e)
{
    return k3_seg_add(s, token, strlen(token), 1, e);
}

static int word(k3_chat_segments *s, const char *w, k3_err *e)
{
    return k3_seg_add(s, w, strlen(w), 0, e);
}

/* The value with & and " escaped, as one text segment. */
static int attr_value(k3_chat_segments *s, const char *v, size_t n, k3_err *e)
{
    size_t start = s->len, run = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rep = v[i] == '&' ? "&amp;" : v[i] == '"' ? "&quot;" : NULL;
        if (!rep) {
            run++;
            continue;
        }
        if (k3_seg_grow(s, v + i - run, run, e) || k3_seg_grow(s, rep, strlen(rep), e))
            return e->code;
        run = 0;
    }
    if (k3_seg_grow(s, v + n - run, run, e))
        return e->code;
    return k3_seg_close(s, start, 0, e);
}

int k3_xtml_open(k3_chat_segments *s, const char *tag, const k3_xtml_attr *attrs, size_t nattrs,
                 k3_err *e)
{
    if (special(s, K3_XTML_OPEN, e) || word(s, tag, e))
        return e->code;
    for (size_t i = 0; i < nattrs; i++) {
        size_t start = s->len;
        if (k3_seg_grow(s, " ", 1, e) || k3_seg_grow(s, attrs[i].key, strlen(attrs[i].key), e) ||
            k3_seg_close(s, start, 0, e) || word(s, "=\"", e) ||
            attr_value(s, attrs[i].value, attrs[i].len, e) || word(s, "\"", e))
            return e->code;
    }
    return special(s, K3_XTML_SEP, e);
}

int k3_xtml_close(k3_chat_segments *s, const char *tag, k3_err *e)
{
    if (special(s, K3_XTML_CLOSE, e) || word(s, tag, e))
        return e->code;
    return special(s, K3_XTML_SEP, e);
}

int k3_xtml_end_of_msg(k3_chat_segments *s, k3_err *e)
{
    return special(s, K3_XTML_END_OF_MSG, e);
}

int k3_xtml_text(k3_chat_segments *s, const char *t, size_t n, k3_err *e)
{
    return k3_seg_add(s, t, n, 0, e);
}
