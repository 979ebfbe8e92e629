/* dspark.h - the DSpark drafter model (docs/MODEL.md §10): a small dense
 * MLA stack with RoPE that reads the target's hidden states at a few
 * layers (the taps, kept by the target's own forward: k3_state_set_taps)
 * and drafts a block of block_size ids per pass, its rows' logits from
 * the target's lm_head plus a low-rank Markov bias on the previous id.
 *
 * Layout and arithmetic are MODEL.md §10's (tools/dspark_ref.py is its
 * float64 reference). Every product follows the kernels' order contract
 * (core/kernels.h), so the rows are the same bits at every thread count.
 *
 * Memory: the drafter's matrices, and a copy of the target's lm_head (the
 * target may stream its own), are read whole at open (BF16, as stored);
 * a sequence's drafter cache (k3_dspark_seq) holds one MLA row per layer
 * and context position. Threading: one k3_dspark_* call at a time per
 * drafter (it owns one workspace); matrix products use the target's plan
 * threads. */
#ifndef K3_MODEL_DSPARK_H
#define K3_MODEL_DSPARK_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"
#include "k3/k3.h"

typedef struct k3_dspark k3_dspark;
typedef struct k3_dspark_seq k3_dspark_seq;

/* Opens the drafter in DIR (config.json, model.safetensors) for target m:
 * checks every field and tensor (dtype, shape; K3_EINPUT naming it) and
 * that its width, vocabulary and taps fit m; reads its weights and m's
 * lm_head. */
int k3_dspark_open(k3_dspark **out, const char *dir, const k3_model *m, k3_err *e);
void k3_dspark_close(k3_dspark *d);

/* The target layers it reads (0-based), for k3_state_set_taps; returns n. */
int k3_dspark_taps(const k3_dspark *d, const int **layers);
/* Makes the target state s (empty: pos 0) keep the drafter's taps
 * (k3_state_set_taps); K3_EINPUT for a state that is not empty or of
 * another model. */
int k3_dspark_attach(const k3_dspark *d, k3_state *s, k3_err *e);
/* Ids drafted per pass (config block_size). */
size_t k3_dspark_block(const k3_dspark *d);
/* Bytes of the drafter's weights held in memory (plan and reports). */
uint64_t k3_dspark_bytes(const k3_dspark *d);

/* A sequence's drafter cache: context rows as computed from the taps of
 * the ids it saw (it recomputes from the first position whose id
 * changed, so a rewound and refed target is followed exactly). */
int k3_dspark_seq_new(k3_dspark_seq **out, const k3_dspark *d, k3_err *e);
void k3_dspark_seq_free(k3_dspark_seq *q);

/* The block's rows before the Markov bias: rows [block][vocab] for the
 * block after seq[0..n) (n >= 2), where the target state s has consumed
 * exactly seq[0..n-1) with the drafter's taps kept (the last id is the
 * anchor, pending). K3_EINPUT when s does not hold that prefix or keeps
 * other taps. */
int k3_dspark_forward(k3_dspark *d, k3_dspark_seq *q, const k3_state *s, const uint32_t *seq,
                      size_t n, float *rows, k3_err *e);
/* Adds the Markov bias of previous id `prev` to one row (row k's prev is
 * the anchor for k = 0, else the id picked at row k - 1). */
void k3_dspark_markov(k3_dspark *d, uint32_t prev, float *row);

#endif
