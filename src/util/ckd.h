/* ckd.h - saturating size arithmetic for sizes derived from input.
 *
 * k3_sat_add and k3_sat_mul return the exact result when it fits in 64 bits
 * and UINT64_MAX when it does not. A size computed with them is therefore
 * either exact or UINT64_MAX, never a wrapped small number, so comparing it
 * against any limit below UINT64_MAX is a complete overflow check: this is
 * how model/config.c proves that the sizes the engine derives from a config
 * fit (see model/config.h), and how model/plan.c adds up a plan whose
 * factors come from options. */
#ifndef K3_UTIL_CKD_H
#define K3_UTIL_CKD_H

#include <stddef.h>
#include <stdint.h>

/* The engine multiplies config-bounded sizes as size_t (model/config.h). */
typedef char k3_size_t_holds_64_bits[sizeof(size_t) >= 8 ? 1 : -1];

static inline uint64_t k3_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline uint64_t k3_sat_mul(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

#endif
