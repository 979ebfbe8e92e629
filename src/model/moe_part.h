/* moe_part.h - the routed experts split over cooperating processes
 * (src/mpi), by expert: the process of rank r of N computes the chosen
 * experts whose id % N == r (k3_moe_owner), for every token of the call
 * that chose them, and a gather gives every process every chosen expert's
 * output for every token. The expert sum then runs on every process over
 * all outputs in the single-process order (per token, ascending expert id,
 * moe.c), so no floating-point sum crosses processes and the bits do not
 * depend on N. A process only ever reads and caches the experts it owns:
 * about 1/N of each layer's, at decode and in prompts alike.
 *
 * A call of T tokens gathers T x k outputs (k picks a token); a call whose
 * T x k x Z floats exceed an int count applies its experts through
 * k3_matmul, split by rows instead (core/kernels.h, k3_mm_part): the same
 * bits. None installed (the default): every process computes every
 * expert. */
#ifndef K3_MODEL_MOE_PART_H
#define K3_MODEL_MOE_PART_H

#include <stddef.h>
#include <stdint.h>

typedef struct k3_moe_part {
    int rank, size; /* this process, how many (size >= 2) */
    /* ids[0..n) the chosen experts (one token's k ascending, or T tokens'
     * k each, token after token), o [n][Z] their outputs, row q filled
     * here iff k3_moe_owner(ids[q], size) == rank:
     * fills the other rows from the processes that own them. Called by
     * the forward thread outside parallel regions; every process makes the
     * same calls with the same ids. */
    void (*gather)(void *ctx, const int32_t *ids, size_t n, float *o, size_t Z);
    void *ctx;
} k3_moe_part;

/* The rank that computes expert `id`. */
static inline int k3_moe_owner(int32_t id, int size) { return (int)(id % size); }

/* Installs p (NULL: none) for every later MoE block; p must outlive them.
 * Not thread-safe: set it before any forward pass. */
void k3_moe_set_part(const k3_moe_part *p);
/* The installed split, or NULL. */
const k3_moe_part *k3_moe_get_part(void);

#endif
