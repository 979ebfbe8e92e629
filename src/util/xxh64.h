/* xxh64.h - XXH64, the 64-bit xxHash of Yann Collet (seed 0 unless given),
 * bit-exact with the reference (xxhash.h XXH64 / Python xxhash.xxh64).
 *
 * k3 uses it wherever it needs a fast fingerprint of bytes: the checksum of
 * every run of a packed trunk (io/trunk_format.h) is XXH64 of the run image,
 * and trunk.json identifies the model by XXH64 of config.json. Why XXH64: it
 * runs at several GB/s on one core with portable C (no SIMD needed), so a
 * streamed layer can be verified as it arrives for a fraction of its read
 * time, and its specification is public, so the values in trunk.json can be
 * checked by any other tool. It detects corruption, not tampering: it is
 * not a cryptographic hash. */
#ifndef K3_UTIL_XXH64_H
#define K3_UTIL_XXH64_H

#include <stddef.h>
#include <stdint.h>

/* Streaming state: init, any number of updates, digest (which does not
 * change the state, so a digest may be taken midway). */
typedef struct k3_xxh64_state {
    uint64_t v[4];
    uint64_t total;
    unsigned char buf[32];
    size_t nbuf;
} k3_xxh64_state;

void k3_xxh64_init(k3_xxh64_state *s, uint64_t seed);
void k3_xxh64_update(k3_xxh64_state *s, const void *data, size_t n);
uint64_t k3_xxh64_digest(const k3_xxh64_state *s);

/* XXH64(data, n, seed) in one call. */
uint64_t k3_xxh64(const void *data, size_t n, uint64_t seed);

#endif
