/* kernels_x86.c - the AVX2+FMA and AVX-512F tables (kernels_isa.h): the
 * 16-lane primitives of kernels_simd.h for each, then its shared loops.
 *
 * Every function carries its own target attribute, so this file needs no
 * -m flag: a portable build contains both tables and dispatch.c picks one
 * at run time from the CPU's features.
 *
 * Lanes: AVX-512 holds the contract's 16 lanes in one zmm register; AVX2 in
 * a pair of ymm registers (lanes 0-7, 8-15).
 *
 * MXFP4 decoding: packed byte j of a group holds element 2j in its LOW
 * nibble and 2j+1 in its HIGH nibble. Interleaving the bytes with copies
 * shifted right by 4 (NIB_ORDER) puts element i's nibble in bits 0-3 of
 * byte i; widened to 32-bit lanes, it indexes a table of E2M1 * scale
 * computed as the same fp32 products the scalar code rounds. */
#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#include "core/kernels_isa.h"

/* ---------------------------------------------------------------- AVX-512 */

#define A512 __attribute__((target("avx512f,avx2,fma")))
#define A512_AI static inline __attribute__((always_inline)) A512

A512_AI __m512 z512(void) { return _mm512_setzero_ps(); }
A512_AI __m512 ld512(const float *p) { return _mm512_loadu_ps(p); }
A512_AI void st512(float *p, __m512 v) { _mm512_storeu_ps(p, v); }
A512_AI __m512 fma512(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }

A512_AI __m512 bf16_512(const uint16_t *p)
{
    __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}

A512_AI __m512 mxbase512(const float *values) { return _mm512_loadu_ps(values); }
A512_AI __m512 mxtab512(__m512 base, float s) { return _mm512_mul_ps(base, _mm512_set1_ps(s)); }

A512_AI void mxfp4_512(const uint8_t *p, __m512 tab, __m512 *lo, __m512 *hi)
{
    __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i high = _mm_srli_epi16(bytes, 4); /* byte j: bits 0-3 = high nibble of j */
    /* NIB_ORDER: byte j, then byte j shifted: element 2j, then 2j+1. */
    __m512i ilo = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(bytes, high)); /* elements 0-15 */
    __m512i ihi = _mm512_cvtepu8_epi32(_mm_unpackhi_epi8(bytes, high)); /* elements 16-31 */
    /* vpermps reads only bits 0-3 of each index: the element's nibble. */
    *lo = _mm512_permutexvar_ps(ilo, tab);
    *hi = _mm512_permutexvar_ps(ihi, tab);
}

/* 16 int8 values times s: exact (kernels.h, Q8), as the scalar product. */
A512_AI __m512 q8_512(const int8_t *p, float s)
{
    __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(s));
}

#define SIMD_FN(name) name##_avx512
#define SIMD_TARGET A512
#define SIMD_NAME "avx512"
#define SIMD_MR 4
#define SIMD_NR 6
/* Zen 4, one thread: 3 passes beat panels up to 18 tokens (BF16 3072x7168:
 * 65 vs 62 GFLOP/s at 16 tokens; MXFP4 3072x3584: 79 vs 55 at 9). */
#define SIMD_ROW_TOKENS 18
#define v16 __m512
#define v16_zero z512
#define v16_load ld512
#define v16_store st512
#define v16_fma fma512
#define v16_bf16 bf16_512
#define mx_base __m512
#define mx_base_load mxbase512
#define mx_table __m512
#define mx_table_of mxtab512
#define v16_mxfp4 mxfp4_512
#define v16_q8 q8_512
#include "core/kernels_simd.h"
#undef SIMD_FN
#undef SIMD_TARGET
#undef SIMD_NAME
#undef SIMD_MR
#undef SIMD_NR
#undef SIMD_ROW_TOKENS
#undef v16
#undef v16_zero
#undef v16_load
#undef v16_store
#undef v16_fma
#undef v16_bf16
#undef mx_base
#undef mx_base_load
#undef mx_table
#undef mx_table_of
#undef v16_mxfp4
#undef v16_q8

/* ------------------------------------------------------------------- AVX2 */

#define A256 __attribute__((target("avx2,fma")))
#define A256_AI static inline __attribute__((always_inline)) A256

typedef struct {
    __m256 lo, hi; /* lanes 0-7, lanes 8-15 */
} v16x2;

A256_AI v16x2 z256(void)
{
    v16x2 v = { _mm256_setzero_ps(), _mm256_setzero_ps() };
    return v;
}

A256_AI v16x2 ld256(const float *p)
{
    v16x2 v = { _mm256_loadu_ps(p), _mm256_loadu_ps(p + 8) };
    return v;
}

A256_AI void st256(float *p, v16x2 v)
{
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
}

A256_AI v16x2 fma256(v16x2 a, v16x2 b, v16x2 c)
{
    v16x2 v = { _mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi) };
    return v;
}

A256_AI __m256 bf16x8(const uint16_t *p)
{
    __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}

A256_AI v16x2 bf16_256(const uint16_t *p)
{
    v16x2 v = { bf16x8(p), bf16x8(p + 8) };
    return v;
}

/* AVX2 permutes 8 entries, so the table holds the 8 magnitudes E2M1[0..7]
 * times the scale, and bit 3 of the nibble flips the sign afterwards:
 * -(m * s) is exactly (-m) * s, the scalar E2M1[8 + m] * s, signed zero
 * included. */
A256_AI __m256 mxbase256(const float *values) { return _mm256_loadu_ps(values); }
A256_AI __m256 mxtab256(__m256 base, float s) { return _mm256_mul_ps(base, _mm256_set1_ps(s)); }

/* Eight elements from the low 8 bytes of nib, one nibble in bits 0-3 of
 * each (bits 4-7 are ignored). */
A256_AI __m256 mxfp4x8(__m128i nib, __m256 tab)
{
    __m256i idx = _mm256_cvtepu8_epi32(nib);
    __m256 mag = _mm256_permutevar8x32_ps(tab, idx); /* reads bits 0-2 only */
    __m256i sign = _mm256_and_si256(_mm256_slli_epi32(idx, 28), _mm256_set1_epi32(INT32_MIN));
    return _mm256_xor_ps(mag, _mm256_castsi256_ps(sign));
}

A256_AI void mxfp4_256(const uint8_t *p, __m256 tab, v16x2 *lo, v16x2 *hi)
{
    __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i high = _mm_srli_epi16(bytes, 4); /* byte j: bits 0-3 = high nibble of j */
    /* NIB_ORDER: byte j, then byte j shifted: element 2j, then 2j+1. */
    __m128i n0 = _mm_unpacklo_epi8(bytes, high); /* elements 0-15 */
    __m128i n1 = _mm_unpackhi_epi8(bytes, high); /* elements 16-31 */
    lo->lo = mxfp4x8(n0, tab);
    lo->hi = mxfp4x8(_mm_srli_si128(n0, 8), tab);
    hi->lo = mxfp4x8(n1, tab);
    hi->hi = mxfp4x8(_mm_srli_si128(n1, 8), tab);
}

A256_AI __m256 q8x8(const int8_t *p, __m256 s)
{
    __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(v), s);
}

A256_AI v16x2 q8_256(const int8_t *p, float s)
{
    __m256 sv = _mm256_set1_ps(s);
    v16x2 v = { q8x8(p, sv), q8x8(p + 8, sv) };
    return v;
}

#define SIMD_FN(name) name##_avx2
#define SIMD_TARGET A256
#define SIMD_NAME "avx2"
#define SIMD_MR 2
#define SIMD_NR 2
/* Zen 4, one thread: panels win from 4 tokens on (BF16 3072x7168: 2 passes
 * 19.7 GFLOP/s at 4 tokens, panels 28 at 7). */
#define SIMD_ROW_TOKENS 2
#define v16 v16x2
#define v16_zero z256
#define v16_load ld256
#define v16_store st256
#define v16_fma fma256
#define v16_bf16 bf16_256
#define mx_base __m256
#define mx_base_load mxbase256
#define mx_table __m256
#define mx_table_of mxtab256
#define v16_mxfp4 mxfp4_256
#define v16_q8 q8_256
#include "core/kernels_simd.h"

#endif
