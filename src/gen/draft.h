/* draft.h - drafters for speculative decoding, and how many drafts a step
 * should verify.
 *
 * A drafter guesses the ids that follow a sequence; the engine verifies
 * the guesses in one forward call and keeps the longest prefix the exact
 * model would have produced itself (the sampler's draw depends only on the
 * seed and the position, k3/sample.h, so "would have produced" is a
 * comparison of ids). A wrong guess costs work, never a different answer.
 *
 * One small interface so any drafter plugs in: the context-lookup drafter
 * here, a cheaper run of the same checkpoint, or a separate small drafter
 * model (it keeps its own state in step through observe). */
#ifndef K3_GEN_DRAFT_H
#define K3_GEN_DRAFT_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"
#include "k3/k3.h"

/* How a drafter that computes logits (self) turns a row of them into the
 * id at sequence position pos after ids[0..pos): the verifier's own
 * sampler (the turn driver passes it), so a draft is exactly the id the
 * exact model emits wherever the two rows agree, greedy or sampled (the
 * draw depends only on the seed and pos, k3/sample.h). NULL: greedy. */
typedef struct k3_draft_pick {
    uint32_t (*fn)(void *ctx, const uint32_t *ids, size_t pos, const float *row);
    void *ctx;
} k3_draft_pick;

typedef struct k3_drafter {
    const char *name;  /* "ngram", ... (reported) */
    void *ctx;
    /* Up to max ids guessed to follow seq[0..n) (the whole sequence so far:
     * prompt and generated), into out; returns how many (0: no guess).
     * Must be a pure function of seq and the drafter's state. */
    size_t (*propose)(void *ctx, const uint32_t *seq, size_t n, uint32_t *out, size_t max,
                      const k3_draft_pick *pick, k3_err *e);
    /* After verification: of `proposed` guesses the first `accepted`
     * matched (NULL when the drafter keeps no state). */
    void (*observe)(void *ctx, size_t proposed, size_t accepted);
    /* Binds the drafter to the verifier's state s, empty (pos 0), before
     * anything is fed to it: a drafter that reads what the verifier's
     * forwards compute (dspark: its hidden states at a few layers) makes s
     * keep it. Proposals are then for s's sequence. NULL: nothing to bind
     * (k3_drafter_attach succeeds). */
    int (*attach)(void *ctx, k3_state *s, k3_err *e);
    void (*free)(void *ctx);
} k3_drafter;

/* Pieces a drafter that computes logits shares (draft.c): the greedy id
 * of a row of V logits (ties to the lower id), and the pick's view of a
 * proposal, *ids (grown to hold n + extra, *cap its room) holding seq[0..n)
 * for the drafts to be appended after. */
uint32_t k3_draft_greedy(const float *row, size_t V);
int k3_draft_view(uint32_t **ids, size_t *cap, const uint32_t *seq, size_t n, size_t extra,
                  k3_err *e);

/* The context-lookup ("prompt lookup", n-gram) drafter: finds the latest
 * earlier occurrence of the sequence's last k ids, for k from max_n down
 * to min_n (longest match first; 1 <= min_n <= max_n <= 16), and proposes
 * the ids that followed it. Costs a scan of the sequence, no model. */
int k3_drafter_ngram(k3_drafter *d, size_t min_n, size_t max_n, k3_err *e);

/* The self-drafter (draft_self.c): the checkpoint m itself, run on a state
 * of its own with route_k routed experts per token (k3_state_set_route_k;
 * 0 = all of them), proposing up to max (1..16) greedy ids a step. Its
 * forwards share m's working memory, so it runs between m's forwards on
 * the same thread. It pays where a token's cost is mostly its experts, or,
 * when m has a draft trunk (k3_model_has_draft_trunk: its state then uses
 * the quantized matrices in memory), where the exact trunk streams. */
int k3_drafter_self(k3_drafter *d, k3_model *m, int route_k, size_t max, k3_err *e);

/* The DSpark drafter (draft_dspark.c): the drafter model in dir
 * (docs/MODEL.md §10) for target m, proposing up to min(max, its block)
 * ids a step (max 1..16) from one pass over the verifier's hidden states;
 * it must be attached (k3_drafter_attach) to the verifier's empty state. */
int k3_drafter_dspark(k3_drafter *d, k3_model *m, const char *dir, size_t max, k3_err *e);

/* The drafter called name: "ngram" (or NULL), "self" (on m, with
 * route_k experts per token, < 0 for the default: a quarter of the
 * checkpoint's, at least 1; max drafts a step) or "dspark" (the drafter
 * model in model_dir). K3_EINPUT for another. */
int k3_drafter_make(k3_drafter *d, const char *name, k3_model *m, int route_k, size_t max,
                    const char *model_dir, k3_err *e);

/* d->attach on s, when d has one (see k3_drafter). */
int k3_drafter_attach(k3_drafter *d, k3_state *s, k3_err *e);

/* The most drafts a step verifies under `--spec auto` (the default): the
 * cost gate (k3_spec_choose) picks 0..K3_SPEC_AUTO per step from what it
 * measured, so drafting runs only where it pays. */
#define K3_SPEC_AUTO 8

/* The longest n-gram the command line's drafter matches. */
#define K3_NGRAM_MAX 4

void k3_drafter_free(k3_drafter *d);

/* What verifying costs, in any one unit (bytes read or seconds), measured:
 * per forward call whatever the rows (the trunk's share), and per row
 * verified (its routed experts, its arithmetic). */
typedef struct k3_spec_cost {
    double per_call, per_row;
} k3_spec_cost;

/* Acceptance seen so far: drafts verified and drafts accepted. */
typedef struct k3_spec_stats {
    uint64_t drafted, accepted;
} k3_spec_stats;

/* How many drafts the next step should verify, 0..max: the n that
 * maximises the expected ids emitted per unit of cost,
 *   (1 - a^(n+1)) / (1 - a)  /  (per_call + (n+1) per_row),
 * with a = the acceptance rate per draft (a prior of (1+accepted) /
 * (2+drafted) so a new run still tries drafting), and n > 0 chosen only when
 * it beats n = 0 by more than `margin` (e.g. 0.03: speculation is never
 * chosen on an estimate that it pays less than 3%). Pure. */
size_t k3_spec_choose(const k3_spec_stats *st, const k3_spec_cost *cost, size_t max,
                      double margin);

/* Agreement on a step's draft count between processes that must issue the
 * same forward calls (bin/k3-mpi's ranks, each running the same decode
 * loop): the cost gate's choice depends on the process's own measured
 * timings, so each process's choice is passed through `fn`, which returns
 * the one every process uses (rank 0's, broadcast). NULL (the default, and
 * bin/k3): a process's own choice. The drafters are pure functions of the
 * ids (ngram) or of forwards every process runs alike (self), so an agreed
 * count gives every process the same drafts. Set before any turn runs;
 * fn is called once per step that may draft, in the same order on every
 * process, and must not fail (it ends the job itself). */
typedef struct k3_spec_agree {
    size_t (*fn)(void *ctx, size_t n);
    void *ctx;
} k3_spec_agree;
void k3_spec_set_agree(const k3_spec_agree *a);
/* n passed through the installed agreement (n itself without one). */
size_t k3_spec_agreed(size_t n);

#endif
