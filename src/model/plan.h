/* plan.h - the memory plan: what is resident, what streams, and whether
 * it fits, decided before anything large is allocated.
 *
 * Inputs are byte budgets for the pinned trunk and the expert cache (from
 * --trunk-gb / --cache-gb), exact counts (--trunk-layers, --cache-experts),
 * or one total budget (a preset, --budget-gb) that the plan splits: it
 * tries every number of pinned layers with the expert slots that fit beside
 * it and keeps the split that reads the fewest bytes per token (plan.c,
 * split_budget; a budget below the smallest plan is K3_EBUDGET). Layers
 * are pinned in order while they fit the trunk budget (all of a layer's
 * runs together: model/weights.h cuts large ones into sub-runs); the rest
 * stream through the ring, whose slots are each the size of the largest
 * streamed run. The expert cache gets budget / slot size slots (at
 * least one). Everything else is counted as it will be allocated:
 * embedding and lm_head (each resident or streamed), the small vectors,
 * KDA state, the MLA KV cache for the requested context, and the forward
 * pass's scratch arena (k3_forward_scratch, model.h) for a call of
 * max_batch tokens at that context.
 * The plan never changes what is computed, only what is read when. */
#ifndef K3_MODEL_PLAN_H
#define K3_MODEL_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "k3/k3.h"
#include "model/config.h"
#include "model/weights.h"
#include "resid/expert_cache.h"

typedef struct k3_plan {
    /* decisions */
    uint8_t *pinned;            /* [nruns]: run pinned in memory */
    int pinned_layers, streamed_layers, ring_slots;
    int embed_streamed, lm_head_streamed;
    uint64_t expert_slots, experts_total;
    uint64_t experts_here;      /* of them this process computes at decode (moe_part.h;
                                 * experts_total without a split): slots are capped by it */
    k3_ec_dims expert_dims;     /* the routed experts the cache is made for */
    /* bytes */
    uint64_t pinned_trunk, ring, embed, lm_head, small, expert_slot_bytes, expert_cache;
    uint64_t kda_state, kv_cache, scratch, total;
    uint64_t held;              /* the caller's (k3_model_opts.held_bytes) */
    uint64_t spec;              /* speculative steps: KDA copy + journal + logits rows,
                                 * one per sequence */
    uint64_t mark;              /* marks: KDA copy + logits row each, marks per sequence */
    int marks;                  /* marks one sequence keeps (k3_model_opts.marks) */
    int spec_drafts;            /* the drafts it is planned for (0: none) */
    uint64_t draft;             /* the self drafter's state + cache + journal (0: none) */
    uint64_t draft_trunk;       /* its quantized trunk, resident (--draft-trunk; 0: none) */
    int sequences;              /* states planned (kda_state and kv_cache count each) */
    uint64_t sequence_bytes;    /* one sequence: its KDA state + MLA cache for the
                                 * context + speculative step + marks */
    uint64_t trunk_total;       /* all layer runs, pinned or not */
    uint64_t slot_bytes;        /* the largest streamed run (a ring slot's size), 0: none */
    const char *slot_run;       /* ... its name (model/weights.h) */
    uint64_t stream_stored;     /* streamed compressed runs: bytes read from disk a pass */
    uint64_t stream_image;      /* ... and their decoded bytes (0: none compressed) */
    int64_t context;            /* positions the KV cache is sized for */
    double budget_gb;           /* the total budget split (a preset, --budget-gb), or -1 */
    int max_batch;              /* tokens per k3_forward piece (the arena's size) */
    int threads;                /* matmul threads the arena has workspace for */
    /* the machine */
    uint64_t mem_available;     /* MemAvailable, 0 if unknown */
    uint64_t cgroup_limit;      /* cgroup v2 memory.max, 0 if none */
} k3_plan;

/* Computes the plan; fails with K3_EBUDGET naming the shortfall when it
 * does not fit what the machine allows (unless opts->no_mem_check). */
int k3_plan_make(k3_plan *p, const k3_config *c, const k3_weights *w,
                 const k3_model_opts *opts, k3_err *e);
void k3_plan_free(k3_plan *p);
void k3_plan_print(const k3_plan *p, FILE *f);
/* The same numbers as JSON members (no braces), for the run report. */
void k3_plan_print_json(const k3_plan *p, FILE *f, const char *indent);

/* What the machine allows this process, in bytes (0 if unknown). */
uint64_t k3_mem_available(uint64_t *mem_available, uint64_t *cgroup_limit);

#endif
