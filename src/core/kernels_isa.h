/* kernels_isa.h - internal to src/core: the per-ISA inner loops behind the
 * public kernels, and the one dispatch point that picks them.
 *
 * An ISA table holds inner loops only. The drivers (k3_dot, k3_matvec,
 * k3_matmul, k3_matvec_t, k3_axpy in matmul.c) exist once and call through
 * the active table, so adding an ISA never copies a driver. Every entry
 * reproduces the order contract of kernels.h bit for bit: the choice of
 * table changes speed, never results (tests/unit/test_simd.c checks this
 * for every table the CPU can run).
 *
 * Tables: "scalar" (kernels.c, the plain reference; always there), "avx2"
 * and "avx512" (kernels_x86.c, built on every x86-64 compiler that knows
 * function target attributes, so a build without -march still has them),
 * "neon" (kernels_neon.c, aarch64 only). dispatch.c picks the best one the
 * CPU supports at first use, or the one named by env K3_KERNELS. */
#ifndef K3_CORE_KERNELS_ISA_H
#define K3_CORE_KERNELS_ISA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct k3_isa {
    const char *name;
    /* Largest register block of tile() and of the row dots: rows x tokens. */
    size_t mr, nr;
    /* k3_matmul of up to this many tokens runs passes of row dots (nr
     * tokens each, every pass streaming the weights once) instead of
     * decoded panels: they overlap the weight stream with the arithmetic,
     * a panel is decoded before its tiles run. Measured per table. */
    size_t row_tokens;
    /* Row dots of nt <= nr tokens: y[t*ldy + r] = row r . x[t*n ..] for
     * r < rows, t < nt. The rows are stored one after the other (n floats /
     * n BF16 / n/2 packed bytes and n/32 scales apart), and each is read and
     * decoded once for all nt tokens. MXFP4 needs n % 32 == 0. nt = 1 is
     * k3_matvec. */
    void (*rows_f32)(const float *w, size_t n, size_t rows, const float *x, size_t nt, float *y,
                     size_t ldy);
    void (*rows_bf16)(const uint16_t *w, size_t n, size_t rows, const float *x, size_t nt,
                      float *y, size_t ldy);
    void (*rows_mxfp4)(const uint8_t *packed, const uint8_t *scales, size_t n, size_t rows,
                       const float *x, size_t nt, float *y, size_t ldy);
    /* Q8 (kernels.h): rows n int8 and ceil(n/32) BF16 scales apart. Q4:
     * rows n/2 packed bytes and n/32 BF16 scales apart, n % 32 == 0. */
    void (*rows_q8)(const int8_t *q, const uint16_t *scales, size_t n, size_t rows,
                    const float *x, size_t nt, float *y, size_t ldy);
    void (*rows_q4)(const uint8_t *packed, const uint16_t *scales, size_t n, size_t rows,
                    const float *x, size_t nt, float *y, size_t ldy);
    /* Exact decoding of n elements of one row to float (MXFP4: n % 32 == 0,
     * starting at a group boundary). */
    void (*decode_bf16)(const uint16_t *w, size_t n, float *out);
    void (*decode_mxfp4)(const uint8_t *packed, const uint8_t *scales, size_t n, float *out);
    /* Elements [k0, k0 + n) of a Q8 row as k3_q8_decode (k0 % 32 == 0). */
    void (*decode_q8)(const int8_t *q, const uint16_t *scales, size_t k0, size_t n, float *out);
    /* Elements [0, n) of Q4 from a group boundary (n % 32 == 0), as MXFP4. */
    void (*decode_q4)(const uint8_t *packed, const uint16_t *scales, size_t n, float *out);
    /* Multi-token row dot over decoded rows, the core of k3_matmul for more
     * than nr tokens: continues the 16 lane accumulators of mr <= this->mr
     * rows times nr <= this->nr tokens over k elements. Row r is w + r*ldw,
     * token t is x + t*ldx, and the lanes of (r, t) are
     * acc[(r*lda + t)*16 + 0..15]; element i goes to lane i % 16, i
     * ascending, one fmaf each. The caller's chunk starts at a multiple of
     * 16 of the full row, so lane numbers agree with the whole-row dot. */
    void (*tile)(const float *w, size_t ldw, size_t mr, const float *x, size_t ldx, size_t nr,
                 size_t k, float *acc, size_t lda);
    /* y[i] = fmaf(a, x[i], y[i]). */
    void (*axpy)(float *y, float a, const float *x, size_t n);
} k3_isa;

/* The table in use (dispatch.c). First use picks it: K3_KERNELS if set (an
 * unknown or unavailable name prints an error and exits with status 2),
 * else the best the CPU runs. Safe to call from any thread. */
const k3_isa *k3_isa_active(void);
/* Makes the named table the active one; returns 0, or -1 (and changes
 * nothing) if this build or CPU cannot run it. For tests and benchmarks. */
int k3_isa_select(const char *name);
/* The named table if this build and CPU can run it, else NULL. */
const k3_isa *k3_isa_find(const char *name);
/* Names of every table this build knows, NULL-terminated. */
extern const char *const k3_isa_names[];

extern const k3_isa k3_isa_scalar;
#if defined(__x86_64__) && defined(__GNUC__)
#define K3_HAVE_X86_TABLES 1
extern const k3_isa k3_isa_avx2, k3_isa_avx512;
#endif
#if defined(__aarch64__)
#define K3_HAVE_NEON_TABLE 1
extern const k3_isa k3_isa_neon;
#endif

/* --- Shared pieces of the contract, used by every table. --------------- */

/* The fixed tree: w = 8, 4, 2, 1; acc[j] += acc[j + w] for j < w. */
static inline float k3_reduce16(float acc[16])
{
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++)
            acc[j] = acc[j] + acc[j + w];
    return acc[0];
}

/* BF16 bits to float: the upper half of the float's bits (exact). */
static inline float k3_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* 2^(e-127) for an E8M0 byte e < 255, exactly: the exponent field for
 * e >= 1; e = 0 is the subnormal 2^-127 (bit pattern 0x00400000). */
static inline float k3_e8m0(uint8_t e)
{
    uint32_t u = e ? (uint32_t)e << 23 : 0x00400000u;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* E2M1 values by nibble: bits 0-2 index the magnitude, bit 3 is the sign. */
extern const float k3_e2m1[16];
/* Q4 values by nibble (kernels.h), the same layout: magnitude 0-7, sign. */
extern const float k3_q4_values[16];

/* Scale g of a nibble format's row: E8M0 bytes (MXFP4) or BF16 (Q4). */
static inline float k3_nib_scale(const void *scales, int bf16, size_t g)
{
    return bf16 ? k3_bf16(((const uint16_t *)scales)[g]) : k3_e8m0(((const uint8_t *)scales)[g]);
}

/* Elements i0..n-1 of a dot into their lanes i % 16, one fmaf each. The
 * scalar table runs whole rows through these; the SIMD tables run the part
 * after their last full 16-element step (i0 a multiple of 16), so a tail is
 * computed by the same code everywhere. */
static inline void k3_lanes_f32(float acc[16], const float *a, const float *b, size_t i0,
                                size_t n)
{
    for (size_t i = i0; i < n; i++)
        acc[i & 15] = fmaf(a[i], b[i], acc[i & 15]);
}

static inline void k3_lanes_bf16(float acc[16], const uint16_t *w, const float *x, size_t i0,
                                 size_t n)
{
    for (size_t i = i0; i < n; i++)
        acc[i & 15] = fmaf(k3_bf16(w[i]), x[i], acc[i & 15]);
}

/* Q8 elements i0..n-1 of a row (scale of element i: s[i / 32]). */
static inline void k3_lanes_q8(float acc[16], const int8_t *q, const uint16_t *s, const float *x,
                               size_t i0, size_t n)
{
    for (size_t i = i0; i < n; i++)
        acc[i & 15] = fmaf((float)q[i] * k3_bf16(s[i / 32]), x[i], acc[i & 15]);
}

#endif
