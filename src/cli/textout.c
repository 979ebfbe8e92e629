/* textout.c - see textout.h. */
#include "cli/textout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

void k3_textout_init(k3_textout *t, FILE *f, const char *const *stop, size_t nstop)
{
    memset(t, 0, sizeof *t);
    t->f = f;
    k3_stop_init(&t->stop, stop, nstop);
}

/* Passes t->ready through the UTF-8 stream (flushing it at the end) to f. */
static int write_ready(k3_textout *t, int end, k3_err *e)
{
    size_t need = t->ready.len + 8; /* push may add 4 held bytes, flush 4 more */
    t->released += t->ready.len;
    if (need > t->out_cap) {
        unsigned char *p = realloc(t->out, need);
        if (!p)
            return k3_fail(e, K3_ERUNTIME, "out of memory writing the generated text");
        t->out = p;
        t->out_cap = need;
    }
    size_t n = k3_utf8_stream_push(&t->utf8, (const unsigned char *)t->ready.data, t->ready.len,
                                   t->out);
    if (end)
        n += k3_utf8_stream_flush(&t->utf8, t->out + n);
    t->ready.len = 0;
    if ((n && fwrite(t->out, 1, n, t->f) != n) || fflush(t->f) != 0)
        return k3_fail(e, K3_ERUNTIME, "writing the generated text: %s", strerror(errno));
    return K3_OK;
}

int k3_textout_put(k3_textout *t, const void *p, size_t n, k3_err *e)
{
    int stopped = 0;
    if (t->stopped)
        return K3_OK;
    if (k3_stop_push(&t->stop, p, n, &t->ready, &stopped, e))
        return e->code;
    t->stopped = stopped;
    return write_ready(t, stopped, e);
}

int k3_textout_end(k3_textout *t, k3_err *e)
{
    if (!t->stopped && k3_stop_flush(&t->stop, &t->ready, e))
        return e->code;
    return write_ready(t, 1, e);
}

void k3_textout_free(k3_textout *t)
{
    k3_stop_free(&t->stop);
    k3_buf_free(&t->ready);
    free(t->out);
}
