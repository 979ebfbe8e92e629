/* constraint.h - a decoding constraint: which ids may come next.
 *
 * The one interface through which grammar-constrained decoding (a GBNF
 * grammar, a JSON Schema, a forced tool call: src/grammar/, wired up by
 * chat/constrain.h) reaches the decode loop. The turn driver
 * (chat/turn.h) holds at most one per turn and, before every draw (plain,
 * speculative verification, greedy or sampled):
 *
 *   mask    sets row[id] = -INFINITY for each id in [0, vocab) that may not
 *           come next, BEFORE the sampler's own steps (penalties, top_k,
 *           top_p, min_p, temperature: k3/sample.h), so a masked id is never
 *           drawn and the sampler treats the others exactly as it would a
 *           row without them. The end ids are the driver's business: it
 *           lets them through exactly where can_end says the text may end
 *           (whatever mask did to them), and masks them elsewhere;
 *   accept  advances over the id drawn (never an end id); a refused id
 *           (*ok = 0) leaves the state as it was;
 *   rollback undoes the last n accepted ids (n at most what was accepted
 *           since the constraint began), so speculative decoding can try
 *           its drafts and forget them.
 *
 * left is how many ids the turn may still generate counting the one being
 * drawn (so 1: the last), so a constraint can steer toward a complete text
 * before max_tokens (an "end budget"); SIZE_MAX: no limit (the turn's
 * open_ended). The state changes only through
 * accept and rollback: the same ids give the same masks, which is why a
 * speculative run, a run resumed from a saved state (the generated ids
 * replayed through accept) and a slot among others draw what a lone plain
 * run draws. Not thread-safe: one turn's. */
#ifndef K3_GEN_CONSTRAINT_H
#define K3_GEN_CONSTRAINT_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

typedef struct k3_constraint {
    void *ctx;
    int (*mask)(void *ctx, float *row, size_t vocab, size_t left, k3_err *e);
    int (*can_end)(void *ctx);
    int (*accept)(void *ctx, uint32_t id, int *ok, k3_err *e);
    int (*rollback)(void *ctx, size_t n, k3_err *e);
} k3_constraint;

#endif
