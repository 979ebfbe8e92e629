/* xxh3.h - XXH3-64 (seed 0), the 64-bit XXH3 of xxHash 0.8, bit-exact with
 * the reference (xxhash.h XXH3_64bits, Python xxhash.xxh3_64).
 *
 * Why XXH3 beside XXH64 (util/xxh64.h): XXH3 runs at memory speed on long
 * inputs (per CPU-second of one core here, tests/unit/test_codec: 44 GB/s
 * with AVX2 on blocks in cache, 17 with the SSE2 baseline, XXH64 ~7), so a
 * packed trunk
 * of format 3 (io/trunk_format.h) verifies every streamed byte for a few
 * percent of a core. It is Debian's libxxhash-dev header, compiled in
 * header-only (inlined) form into util/xxh3.c alone, so nothing links
 * libxxhash and cross builds need only the header. One-shot only: format 3
 * hashes fixed-size blocks, each in one call, and then the array of their
 * hashes (io/trunk_format.h says exactly). */
#ifndef K3_UTIL_XXH3_H
#define K3_UTIL_XXH3_H

#include <stddef.h>
#include <stdint.h>

uint64_t k3_xxh3_64(const void *data, size_t n);

/* The same hash by the build's baseline code only (tests and benchmarks
 * compare it with k3_xxh3_64's vector path), and which path k3_xxh3_64
 * takes on this CPU for long inputs: "avx2" or "baseline" (xxh3.c). */
uint64_t k3_xxh3_64_baseline(const void *data, size_t n);
const char *k3_xxh3_path(void);

#endif
