/* draft_dspark.c - the DSpark drafter (gen/draft.h k3_drafter_dspark):
 * a separate small model (model/dspark.h, docs/MODEL.md §10) that reads
 * the verifier's own hidden states at a few layers, kept by the
 * verifier's forward passes (k3_state_set_taps, set when the drafter is
 * attached to the verifier's state), and drafts a block per pass.
 *
 * A proposal: the block's rows from one drafter pass over the verifier's
 * taps of seq[0..n-1) and the anchor seq[n-1]; then row by row, the Markov
 * bias of the previous id (the anchor, then each draft) and the verifier's
 * own pick (k3_draft_pick: its sampler at that position, so a draft is the
 * exact model's id wherever the rows agree; greedy without one). The
 * drafter keeps no state but its cache of context rows, which follows the
 * verifier's ids (model/dspark.h), so observe has nothing to do. */
#include <stdlib.h>
#include <string.h>

#include "gen/draft.h"
#include "model/dspark.h"
#include "util/error.h"

typedef struct {
    k3_dspark *d;
    k3_dspark_seq *q;
    const k3_state *s; /* the verifier's state (attach), or NULL */
    size_t V, B, max;
    float *rows;       /* [B][V] */
    uint32_t *ids;     /* [ids_cap]: the sequence, then the drafts (the pick's view) */
    size_t ids_cap;
} dspark_drafter;

static size_t dspark_propose(void *ctx, const uint32_t *seq, size_t n, uint32_t *out,
                             size_t max, const k3_draft_pick *pick, k3_err *e)
{
    dspark_drafter *g = ctx;
    size_t k = max < g->B ? max : g->B;
    if (!g->s || n < 2 || k == 0)
        return 0;
    if (k3_draft_view(&g->ids, &g->ids_cap, seq, n, k, e) ||
        k3_dspark_forward(g->d, g->q, g->s, seq, n, g->rows, e) != K3_OK)
        return 0;
    uint32_t prev = seq[n - 1];
    for (size_t i = 0; i < k; i++) {
        float *row = g->rows + i * g->V;
        k3_dspark_markov(g->d, prev, row);
        prev = pick && pick->fn ? pick->fn(pick->ctx, g->ids, n + i, row)
                                : k3_draft_greedy(row, g->V);
        out[i] = g->ids[n + i] = prev;
    }
    return k;
}

static int dspark_attach(void *ctx, k3_state *s, k3_err *e)
{
    dspark_drafter *g = ctx;
    if (k3_dspark_attach(g->d, s, e) != K3_OK)
        return e->code;
    g->s = s;
    return K3_OK;
}

static void dspark_free(void *ctx)
{
    dspark_drafter *g = ctx;
    if (!g)
        return;
    k3_dspark_seq_free(g->q);
    k3_dspark_close(g->d);
    free(g->rows);
    free(g->ids);
    free(g);
}

int k3_drafter_dspark(k3_drafter *dr, k3_model *m, const char *dir, size_t max, k3_err *e)
{
    memset(dr, 0, sizeof *dr);
    if (!dir)
        return k3_fail(e, K3_EINPUT, "the dspark drafter needs its directory (--draft-model)");
    if (max < 1 || max > 16)
        return k3_fail(e, K3_EINPUT, "dspark drafter: want 1..16 drafts a step, not %zu", max);
    dspark_drafter *g = k3_calloc(e, 1, sizeof *g, "drafter");
    if (!g)
        return e->code;
    g->V = k3_model_vocab(m);
    g->max = max;
    if (k3_dspark_open(&g->d, dir, m, e) != K3_OK || k3_dspark_seq_new(&g->q, g->d, e) != K3_OK ||
        !(g->rows = k3_malloc(e, k3_dspark_block(g->d) * g->V * sizeof *g->rows,
                              "drafter logits"))) {
        dspark_free(g);
        return e->code;
    }
    g->B = k3_dspark_block(g->d);
    dr->name = "dspark";
    dr->ctx = g;
    dr->propose = dspark_propose;
    dr->attach = dspark_attach;
    dr->free = dspark_free;
    return K3_OK;
}
