/* draft_self.c - the self-drafter: the same checkpoint run cheaply on a
 * state of its own (gen/draft.h k3_drafter_self).
 *
 * Why it can pay: a verified row costs its routed experts (16 per layer at
 * the release's size) while a draft row of this drafter reads only route_k
 * of them, and it shares the trunk already in memory. So it pays where the
 * experts dominate a token's cost (experts streamed, trunk resident), and
 * the cost gate (k3_spec_choose, fed the measured seconds of proposing and
 * verifying) turns it off where it does not.
 *
 * Keeping in step: the drafter's state always holds a prefix of the
 * sequence. propose() brings it to the whole sequence (k3_state_sync feeds
 * only what is new: usually the verifier's last emitted ids), takes the
 * greedy id, then feeds its own guesses inside a speculative step
 * (k3_state_spec_begin); observe() keeps the accepted ones
 * (k3_state_spec_end), so no guess the verifier rejected stays in the
 * drafter's state. Each draft is picked from the drafter's logits by the
 * verifier's own sampler (k3_draft_pick: penalties, temperature, the
 * position's draw), so it is the exact model's id wherever the two rows
 * agree, greedy or sampled; without a pick, greedy (ties to the lower id).
 *
 * With a draft trunk (the model opened with one, k3_model_opts.draft_trunk)
 * the drafter's state multiplies by its quantized matrices, held in memory
 * (k3_state_set_draft_trunk): a draft then reads no byte of the exact
 * trunk, which is what lets speculation pay when that trunk streams from
 * disk (N drafts from memory, one streamed pass verifies N + 1 rows). */
#include <stdlib.h>
#include <string.h>

#include "gen/draft.h"
#include "util/error.h"

typedef struct {
    k3_model *m;
    k3_state *s;     /* the drafter's own state: a prefix of the sequence */
    size_t V, max;   /* vocabulary; most drafts a proposal has */
    float *rows;     /* [max][V]: row 0 the logits at the step's start, row i
                      * those after feeding draft i-1 (i = 1 .. fed) */
    size_t fed;      /* drafts fed in the open speculative step */
    uint32_t *ids;   /* [ids_cap]: the sequence, then the drafts (the pick's view) */
    size_t ids_cap;
    int open;        /* a speculative step is open in s */
} self_drafter;

/* Ends an open step keeping `keep` of the fed drafts. */
static int close_step(self_drafter *d, size_t keep, k3_err *e)
{
    if (!d->open)
        return K3_OK;
    d->open = 0;
    if (keep > d->fed)
        keep = d->fed;
    return k3_state_spec_end(d->s, keep, d->rows + keep * d->V, e);
}

/* The id at position pos (after d->ids[0..pos)) from row. */
static uint32_t pick_id(const self_drafter *d, const k3_draft_pick *pick, size_t pos,
                        const float *row)
{
    return pick && pick->fn ? pick->fn(pick->ctx, d->ids, pos, row) : k3_draft_greedy(row, d->V);
}

static size_t self_propose(void *ctx, const uint32_t *seq, size_t n, uint32_t *out, size_t max,
                           const k3_draft_pick *pick, k3_err *e)
{
    self_drafter *d = ctx;
    size_t reused;
    if (max > d->max)
        max = d->max;
    /* A proposal nobody verified (an error in between) keeps nothing. */
    if (close_step(d, 0, e) || max == 0 || n == 0 ||
        k3_state_sync(d->m, d->s, NULL, seq, n, &reused, e))
        return 0;
    if (k3_draft_view(&d->ids, &d->ids_cap, seq, n, max, e))
        return 0;
    memcpy(d->rows, k3_state_logits(d->s), d->V * sizeof *d->rows);
    out[0] = d->ids[n] = pick_id(d, pick, n, d->rows);
    if (max == 1)
        return 1;
    if (k3_state_spec_begin(d->s, max - 1, e))
        return 0;
    d->open = 1;
    d->fed = 0;
    for (size_t i = 1; i < max; i++) {
        float *row = d->rows + i * d->V;
        if (k3_forward(d->m, d->s, &out[i - 1], 1, row, 0, e)) {
            close_step(d, 0, e);
            return 0;
        }
        d->fed = i;
        out[i] = d->ids[n + i] = pick_id(d, pick, n + i, row);
    }
    return max;
}

/* Of `proposed` drafts the first `accepted` were kept: draft i was fed as
 * the input of draft i + 1, so the kept inputs are the first accepted ones
 * (the last accepted draft itself was never fed; the next sync feeds it). */
static void self_observe(void *ctx, size_t proposed, size_t accepted)
{
    self_drafter *d = ctx;
    k3_err e = { 0 };
    (void)proposed;
    /* A failed cut leaves the state unusable for a prefix: start over. */
    if (close_step(d, accepted, &e))
        k3_state_reset(d->s);
}

static void self_free(void *ctx)
{
    self_drafter *d = ctx;
    if (!d)
        return;
    k3_state_free(d->s);
    free(d->rows);
    free(d->ids);
    free(d);
}

int k3_drafter_self(k3_drafter *dr, k3_model *m, int route_k, size_t max, k3_err *e)
{
    memset(dr, 0, sizeof *dr);
    if (max < 1 || max > 16)
        return k3_fail(e, K3_EINPUT, "self drafter: want 1..16 drafts a step, not %zu", max);
    self_drafter *d = k3_calloc(e, 1, sizeof *d, "drafter");
    if (!d)
        return e->code;
    d->m = m;
    d->V = k3_model_vocab(m);
    d->max = max;
    if (!(d->rows = k3_malloc(e, max * d->V * sizeof *d->rows, "drafter logits")) ||
        k3_state_new(&d->s, m, e) || k3_state_set_route_k(d->s, route_k, e) ||
        k3_state_set_draft_trunk(d->s, k3_model_has_draft_trunk(m), e)) {
        self_free(d);
        return e->code;
    }
    dr->name = "self";
    dr->ctx = d;
    dr->propose = self_propose;
    dr->observe = self_observe;
    dr->free = self_free;
    return K3_OK;
}
