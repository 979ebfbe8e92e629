/* draft.c - see draft.h. */
#include "gen/draft.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

typedef struct {
    size_t min_n, max_n;
} ngram;

/* The latest start j < n - k of an earlier copy of seq's last k ids whose
 * continuation is not empty (j + k < n), or n when there is none. */
static size_t latest_match(const uint32_t *seq, size_t n, size_t k)
{
    const uint32_t *tail = seq + n - k;
    for (size_t j = n - k; j-- > 0;)
        if (!memcmp(seq + j, tail, k * sizeof *seq))
            return j;
    return n;
}

static size_t ngram_propose(void *ctx, const uint32_t *seq, size_t n, uint32_t *out, size_t max,
                            const k3_draft_pick *pick, k3_err *e)
{
    const ngram *g = ctx;
    (void)pick;
    (void)e;
    for (size_t k = g->max_n; k >= g->min_n && max > 0; k--) {
        if (k >= n)
            continue;
        size_t j = latest_match(seq, n, k);
        if (j == n)
            continue;
        /* The copy at j is followed by seq[j + k ..]; it may run into the
         * tail itself (a repeating pattern), which is still a fine guess. */
        size_t from = j + k, got = n - from < max ? n - from : max;
        memcpy(out, seq + from, got * sizeof *out);
        return got;
    }
    return 0;
}

int k3_drafter_ngram(k3_drafter *d, size_t min_n, size_t max_n, k3_err *e)
{
    memset(d, 0, sizeof *d);
    if (min_n < 1 || min_n > max_n || max_n > 16)
        return k3_fail(e, K3_EINPUT, "n-gram drafter: want 1 <= min %zu <= max %zu <= 16", min_n,
                       max_n);
    ngram *g = k3_malloc(e, sizeof *g, "drafter");
    if (!g)
        return e->code;
    g->min_n = min_n;
    g->max_n = max_n;
    d->name = "ngram";
    d->ctx = g;
    d->propose = ngram_propose;
    d->free = free;
    return K3_OK;
}

int k3_drafter_make(k3_drafter *d, const char *name, k3_model *m, int route_k, size_t max,
                    const char *model_dir, k3_err *e)
{
    memset(d, 0, sizeof *d);
    if (!name || !strcmp(name, "ngram"))
        return k3_drafter_ngram(d, 1, K3_NGRAM_MAX, e);
    if (!strcmp(name, "dspark"))
        return m ? k3_drafter_dspark(d, m, model_dir, max, e)
                 : k3_fail(e, K3_EINPUT, "the dspark drafter needs the model");
    if (strcmp(name, "self") != 0)
        return k3_fail(e, K3_EINPUT, "drafter \"%s\": the drafters are ngram, self and dspark",
                       name);
    if (!m)
        return k3_fail(e, K3_EINPUT, "the self drafter needs the model");
    if (route_k < 0) {
        route_k = k3_model_experts_per_token(m) / 4;
        route_k = route_k > 0 ? route_k : 1;
    }
    return k3_drafter_self(d, m, route_k, max, e);
}

uint32_t k3_draft_greedy(const float *row, size_t V)
{
    size_t best = 0;
    for (size_t i = 1; i < V; i++)
        if (row[i] > row[best])
            best = i;
    return (uint32_t)best;
}

int k3_draft_view(uint32_t **ids, size_t *cap, const uint32_t *seq, size_t n, size_t extra,
                  k3_err *e)
{
    if (n + extra > *cap) {
        uint32_t *grown = realloc(*ids, 2 * (n + extra) * sizeof *grown);
        if (!grown)
            return k3_fail(e, K3_ERUNTIME, "out of memory for the drafter's sequence");
        *ids = grown;
        *cap = 2 * (n + extra);
    }
    memcpy(*ids, seq, n * sizeof *seq);
    return K3_OK;
}

int k3_drafter_attach(k3_drafter *d, k3_state *s, k3_err *e)
{
    return d->attach ? d->attach(d->ctx, s, e) : K3_OK;
}

void k3_drafter_free(k3_drafter *d)
{
    if (d->free)
        d->free(d->ctx);
    memset(d, 0, sizeof *d);
}

/* Expected ids emitted by a step verifying n drafts at acceptance a: the
 * accepted prefix plus the model's own next id, sum_{i=0..n} a^i. */
static double emitted(double a, size_t n)
{
    double sum = 0, p = 1;
    for (size_t i = 0; i <= n; i++, p *= a)
        sum += p;
    return sum;
}

size_t k3_spec_choose(const k3_spec_stats *st, const k3_spec_cost *cost, size_t max,
                      double margin)
{
    double a = (1.0 + (double)st->accepted) / (2.0 + (double)st->drafted);
    double base = emitted(a, 0) / (cost->per_call + cost->per_row);
    size_t best = 0;
    double best_rate = base;
    for (size_t n = 1; n <= max; n++) {
        double rate = emitted(a, n) / (cost->per_call + (double)(n + 1) * cost->per_row);
        if (rate > best_rate) {
            best_rate = rate;
            best = n;
        }
    }
    return best_rate > base * (1.0 + margin) ? best : 0;
}

static const k3_spec_agree *agree;

void k3_spec_set_agree(const k3_spec_agree *a)
{
    agree = a;
}

size_t k3_spec_agreed(size_t n)
{
    return agree ? agree->fn(agree->ctx, n) : n;
}
