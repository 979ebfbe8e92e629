/* xxh3.c - see xxh3.h. The only file that includes xxhash.h; the Makefile
 * gives it (and only it) -idirafter /usr/include so cross compilers find the
 * header after their own system headers.
 *
 * On x86-64 with GCC or clang, the long-input loop is compiled twice: the
 * build's baseline (SSE2) and an AVX2 copy through the header's own
 * dispatch hooks (XXH_DISPATCH_AVX2 and XXH_TARGET_AVX2, as xxHash's
 * xxh_x86dispatch.c uses them; Debian ships that header but not its .c).
 * k3_xxh3_64 takes the AVX2 copy when the CPU has AVX2: about twice the
 * baseline's speed on blocks in cache (tests/unit/test_codec prints it),
 * the same hash (XXH3 is defined by its output; test_codec compares both
 * paths with libxxhash's values and with each other). Not AVX-512: the
 * header's AVX-512 loop measured 23 GB/s here against AVX2's 44. */
#include "util/xxh3.h"

#if (defined(__x86_64__) || defined(__amd64__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__AVX2__)
#define K3_XXH3_AVX2 1
#include <immintrin.h> /* the AVX2 types, usable in target("avx2") functions */
#define XXH_DISPATCH_AVX2 1
#define XXH_TARGET_AVX2 __attribute__((__target__("avx2")))
#else
#define K3_XXH3_AVX2 0
#endif

#define XXH_INLINE_ALL
#include <xxhash.h>

#if K3_XXH3_AVX2
/* XXH3_hashLong_64b_default with the AVX2 accumulate and scramble (seed 0,
 * the default secret), compiled for AVX2. */
XXH_NO_INLINE XXH_TARGET_AVX2 XXH64_hash_t hash_long_avx2(const void *XXH_RESTRICT input,
                                                         size_t len, XXH64_hash_t seed,
                                                         const xxh_u8 *XXH_RESTRICT secret,
                                                         size_t secret_len)
{
    (void)seed;
    (void)secret;
    (void)secret_len;
    XXH64_hash_t h = XXH3_hashLong_64b_internal(input, len, XXH3_kSecret, sizeof(XXH3_kSecret),
                                                XXH3_accumulate_512_avx2, XXH3_scrambleAcc_avx2);
    /* GCC 12 inserts no vzeroupper here (it does in the kernels): without
     * it the SSE code that runs next pays the AVX-SSE transition on every
     * instruction (measured: the baseline hash after this one fell from
     * 15 to 3.8 GB/s). */
    _mm256_zeroupper();
    return h;
}
#endif

uint64_t k3_xxh3_64(const void *data, size_t n)
{
#if K3_XXH3_AVX2
    if (n > XXH3_MIDSIZE_MAX && __builtin_cpu_supports("avx2"))
        return (uint64_t)XXH3_64bits_internal(data, n, 0, XXH3_kSecret, sizeof(XXH3_kSecret),
                                              hash_long_avx2);
#endif
    return (uint64_t)XXH3_64bits(data, n);
}

uint64_t k3_xxh3_64_baseline(const void *data, size_t n)
{
    return (uint64_t)XXH3_64bits(data, n);
}

const char *k3_xxh3_path(void)
{
#if K3_XXH3_AVX2
    if (__builtin_cpu_supports("avx2"))
        return "avx2";
#endif
    return "baseline";
}
