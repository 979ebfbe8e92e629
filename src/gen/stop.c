/* stop.c - see stop.h. */
#include "gen/stop.h"

#include <string.h>

void k3_stop_init(k3_stop *s, const char *const *strs, size_t n)
{
    memset(s, 0, sizeof *s);
    s->strs = strs;
    s->n = n;
    s->matched = -1;
}

void k3_stop_free(k3_stop *s) { k3_buf_free(&s->held); }

/* First occurrence of any stop string in h[0..n): its offset, or n;
 * *which: that string's index. */
static size_t first_match(const k3_stop *s, const char *h, size_t n, int *which)
{
    size_t best = n;
    for (size_t i = 0; i < s->n; i++) {
        size_t len = strlen(s->strs[i]);
        for (size_t at = 0; len && at + len <= n && at < best; at++)
            if (!memcmp(h + at, s->strs[i], len)) {
                best = at;
                *which = (int)i;
                break;
            }
    }
    return best;
}

/* Length of the longest tail of h[0..n) that is a proper prefix of a stop string. */
static size_t partial_tail(const k3_stop *s, const char *h, size_t n)
{
    size_t best = 0;
    for (size_t i = 0; i < s->n; i++) {
        size_t len = strlen(s->strs[i]);
        for (size_t k = len ? len - 1 : 0; k > best; k--)
            if (k <= n && !memcmp(h + n - k, s->strs[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

int k3_stop_push(k3_stop *s, const char *text, size_t n, k3_buf *out, int *stopped, k3_err *e)
{
    *stopped = 0;
    if (k3_buf_put(&s->held, text, n, e))
        return e->code;
    char *h = s->held.data;
    int which = -1;
    size_t len = s->held.len, cut = first_match(s, h, len, &which);
    if (cut < len)
        s->matched = which;
    *stopped = cut < len;
    size_t release = *stopped ? cut : len - partial_tail(s, h, len);
    if (k3_buf_put(out, h, release, e))
        return e->code;
    s->held.len = *stopped ? 0 : len - release;
    memmove(h, h + release, s->held.len);
    h[s->held.len] = '\0';
    return K3_OK;
}

int k3_stop_flush(k3_stop *s, k3_buf *out, k3_err *e)
{
    int rc = k3_buf_put(out, s->held.data, s->held.len, e);
    s->held.len = 0;
    return rc;
}
