/* scratch.h - carving a block's buffers out of one scratch arena.
 *
 * Each block (forward.c, kda.c, mla.c, moe.c) lays its buffers out with ONE
 * function that both sizes and carves: run with base NULL it only adds up
 * the bytes (that is the block's k3_*_scratch, which the memory plan sums);
 * run with the arena's base it hands out the same offsets as pointers. So
 * what the plan counts and what the block uses cannot drift apart.
 *
 * Every buffer starts on a K3_CARVE_ALIGN boundary (a cache line: two
 * buffers never share one, which threads writing different buffers would
 * otherwise contend for). Sizes are saturating (util/ckd.h): a layout that
 * does not fit 64 bits is UINT64_MAX bytes, which no plan or arena allows;
 * a base is only ever passed once the total was checked to fit. */
#ifndef K3_MODEL_SCRATCH_H
#define K3_MODEL_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

#include "util/ckd.h"

#define K3_CARVE_ALIGN 64

typedef struct k3_carve {
    unsigned char *base; /* the arena (K3_CARVE_ALIGN-aligned), or NULL to size only */
    uint64_t used;       /* bytes laid out so far */
} k3_carve;

/* Lays out n elements of `size` bytes; their address, or NULL when sizing. */
static inline void *k3_carve_take(k3_carve *a, uint64_t n, uint64_t size)
{
    uint64_t at = a->used > UINT64_MAX - (K3_CARVE_ALIGN - 1)
                      ? UINT64_MAX
                      : (a->used + (K3_CARVE_ALIGN - 1)) & ~(uint64_t)(K3_CARVE_ALIGN - 1);
    a->used = k3_sat_add(at, k3_sat_mul(n, size));
    return a->base ? a->base + at : NULL;
}

#endif
