/* kernels_neon.c - the NEON table (kernels_isa.h): the 16-lane primitives
 * of kernels_simd.h on aarch64, then its shared loops. NEON is part of the
 * aarch64 baseline, so no target attribute is needed; on other machines
 * this file compiles to nothing.
 *
 * Lanes: the contract's 16 lanes are four q registers (lanes 0-3, 4-7,
 * 8-11, 12-15); vfmaq_f32 is a fused multiply-add with one rounding.
 *
 * MXFP4 decoding: packed byte j of a group holds element 2j in its LOW
 * nibble and 2j+1 in its HIGH nibble; interleaving the low and high nibbles
 * of the 16 bytes (NIB_ORDER) gives the 32 nibbles in element order. Each
 * nibble then picks the 4 bytes of its float from a 64-byte table of
 * E2M1 * scale, the same fp32 products the scalar code rounds. */
#if defined(__aarch64__)

#include <arm_neon.h>

#include "core/kernels_isa.h"

#define NEON_AI static inline __attribute__((always_inline))

NEON_AI float32x4x4_t zn(void)
{
    float32x4x4_t v;
    for (int q = 0; q < 4; q++)
        v.val[q] = vdupq_n_f32(0.0f);
    return v;
}

NEON_AI float32x4x4_t ldn(const float *p)
{
    float32x4x4_t v;
    for (int q = 0; q < 4; q++)
        v.val[q] = vld1q_f32(p + 4 * q);
    return v;
}

NEON_AI void stn(float *p, float32x4x4_t v)
{
    for (int q = 0; q < 4; q++)
        vst1q_f32(p + 4 * q, v.val[q]);
}

NEON_AI float32x4x4_t fman(float32x4x4_t a, float32x4x4_t b, float32x4x4_t c)
{
    float32x4x4_t v;
    for (int q = 0; q < 4; q++)
        v.val[q] = vfmaq_f32(c.val[q], a.val[q], b.val[q]);
    return v;
}

NEON_AI float32x4x4_t bf16n(const uint16_t *p)
{
    float32x4x4_t v;
    for (int q = 0; q < 4; q++)
        v.val[q] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p + 4 * q), 16));
    return v;
}

NEON_AI float32x4x4_t mxbasen(const float *values) { return ldn(values); }

NEON_AI uint8x16x4_t mxtabn(float32x4x4_t base, float s)
{
    uint8x16x4_t t;
    for (int q = 0; q < 4; q++)
        t.val[q] = vreinterpretq_u8_f32(vmulq_n_f32(base.val[q], s));
    return t;
}

/* 16 elements from their 16 nibbles (one per byte, element order). */
NEON_AI float32x4x4_t mxfp4x16(uint8x16_t nib, uint8x16x4_t tab)
{
    static const uint8_t REP[4][16] = { { 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3 },
                                        { 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7 },
                                        { 8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11 },
                                        { 12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15,
                                          15, 15 } };
    static const uint8_t BYTE_OF_FLOAT[16] = { 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3 };
    uint8x16_t off4 = vshlq_n_u8(nib, 2), within = vld1q_u8(BYTE_OF_FLOAT);
    float32x4x4_t v;
    for (int q = 0; q < 4; q++) {
        uint8x16_t idx = vaddq_u8(vqtbl1q_u8(off4, vld1q_u8(REP[q])), within);
        v.val[q] = vreinterpretq_f32_u8(vqtbl4q_u8(tab, idx));
    }
    return v;
}

NEON_AI void mxfp4n(const uint8_t *p, uint8x16x4_t tab, float32x4x4_t *lo, float32x4x4_t *hi)
{
    uint8x16_t bytes = vld1q_u8(p);
    uint8x16_t low = vandq_u8(bytes, vdupq_n_u8(15)), high = vshrq_n_u8(bytes, 4);
    /* NIB_ORDER: low nibble of byte j, then its high nibble. */
    *lo = mxfp4x16(vzip1q_u8(low, high), tab);
    *hi = mxfp4x16(vzip2q_u8(low, high), tab);
}

/* 16 int8 values times s: exact (kernels.h, Q8), as the scalar product. */
NEON_AI float32x4x4_t q8n(const int8_t *p, float s)
{
    int8x16_t b = vld1q_s8(p);
    int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_high_s8(b);
    float32x4x4_t v;
    v.val[0] = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), s);
    v.val[1] = vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), s);
    v.val[2] = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), s);
    v.val[3] = vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), s);
    return v;
}

#define SIMD_FN(name) name##_neon
#define SIMD_TARGET
#define SIMD_NAME "neon"
#define SIMD_MR 2
#define SIMD_NR 2
/* Not measured on hardware (qemu only): as AVX2, whose register block it
 * shares. */
#define SIMD_ROW_TOKENS 2
#define v16 float32x4x4_t
#define v16_zero zn
#define v16_load ldn
#define v16_store stn
#define v16_fma fman
#define v16_bf16 bf16n
#define mx_base float32x4x4_t
#define mx_base_load mxbasen
#define mx_table uint8x16x4_t
#define mx_table_of mxtabn
#define v16_mxfp4 mxfp4n
#define v16_q8 q8n
#include "core/kernels_simd.h"

#endif
