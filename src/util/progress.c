/* progress.c - see progress.h. */
#include "util/progress.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/clock.h"

/* Redraws per second on a terminal: smooth enough, cheap enough. */
#define TTY_INTERVAL 0.25

void k3_progress_start(k3_progress *p, FILE *out, const char *what, uint64_t total)
{
    k3_progress_start_count(p, out, what, total, "GB");
    p->scale = 1e9;
}

void k3_progress_start_count(k3_progress *p, FILE *out, const char *what, uint64_t total,
                             const char *unit)
{
    p->unit = unit;
    p->scale = 1;
    p->out = out;
    p->what = what;
    p->total = total;
    p->done = 0;
    p->start = p->last = k3_seconds();
    p->tty = out && isatty(fileno(out));
}

static void draw(k3_progress *p, double now)
{
    double dt = now - p->start, rate = dt > 0 ? (double)p->done / dt : 0;
    double eta = rate > 0 ? (double)(p->total - p->done) / rate : 0;
    int prec = p->scale > 1 ? 2 : 0; /* GB with decimals, counts without */
    fprintf(p->out, "%s%s: %.*f of %.*f %s (%.0f%%), %.2f %s/s, ETA %.0f s%s", p->tty ? "\r" : "",
            p->what, prec, p->done / p->scale, prec, p->total / p->scale, p->unit,
            p->total ? 100.0 * (double)p->done / (double)p->total : 100.0, rate / p->scale,
            p->unit, eta, p->tty ? "   " : "\n");
    fflush(p->out);
}

void k3_progress_add(k3_progress *p, uint64_t n)
{
    if (!p->out)
        return;
    p->done += n;
    double now = k3_seconds();
    if (now - p->last >= (p->tty ? TTY_INTERVAL : K3_PROGRESS_PLAIN_SECONDS)) {
        p->last = now;
        draw(p, now);
    }
}

void k3_progress_end(k3_progress *p)
{
    if (!p->out)
        return;
    double dt = k3_seconds() - p->start;
    fprintf(p->out, "%s%s: %.*f %s in %.2f s (%.2f %s/s)%s\n", p->tty ? "\r" : "", p->what,
            p->scale > 1 ? 2 : 0, p->done / p->scale, p->unit, dt,
            dt > 0 ? p->done / dt / p->scale : 0.0, p->unit, p->tty ? "                    " : "");
    fflush(p->out);
}

void k3_layer_progress_init(k3_layer_progress *p, FILE *out)
{
    const char *env = getenv("K3_PROGRESS_AFTER_MS");
    char *end;
    p->out = out && isatty(fileno(out)) ? out : NULL;
    p->after = K3_LAYER_PROGRESS_AFTER;
    if (env && *env) {
        errno = 0;
        long ms = strtol(env, &end, 10);
        if (!*end && errno == 0 && ms >= 0)
            p->after = (double)ms / 1000.0;
    }
    p->start = p->last = 0;
    p->shown = 0;
}

void k3_layer_progress_step(void *ctx, size_t li, size_t L)
{
    k3_layer_progress *p = ctx;
    if (!p->out)
        return;
    if (li == L) { /* the layers are done: erase the line */
        if (p->shown)
            fputs("\r\033[K", p->out);
        fflush(p->out);
        p->shown = 0;
        return;
    }
    double now = k3_seconds();
    if (li == 0)
        p->start = now;
    if (now - p->start < p->after || (p->shown && now - p->last < TTY_INTERVAL / 5))
        return;
    fprintf(p->out, "\r\033[2mlayer %zu/%zu\033[0m\033[K", li + 1, L);
    fflush(p->out);
    p->shown = 1;
    p->last = now;
}
