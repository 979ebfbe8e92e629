/* kernels.c - the plain kernels: portable C written straight from the
 * contract in kernels.h. They are the "scalar" ISA table (the fallback on
 * every CPU, and K3_KERNELS=scalar), the reference the SIMD tables are
 * tested against bit for bit, and the elementwise functions of the model.
 * The drivers that call through the tables are in matmul.c. */
#include "core/kernels.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/kernels_isa.h"
#include "core/mathfn.h"

float k3_bf16_to_f32(uint16_t b) { return k3_bf16(b); }

const float k3_e2m1[16] = { 0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };

/* Sign-magnitude int4 (kernels.h, Q4): the same nibble layout as E2M1. */
const float k3_q4_values[16] = { 0.0f,  1.0f,  2.0f,  3.0f,  4.0f,  5.0f,  6.0f,  7.0f,
                                 -0.0f, -1.0f, -2.0f, -3.0f, -4.0f, -5.0f, -6.0f, -7.0f };

float k3_q4_value(const uint8_t *packed_row, const uint16_t *scale_row, int64_t i)
{
    uint8_t byte = packed_row[i >> 1];
    uint8_t nib = (i & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
    return k3_q4_values[nib] * k3_bf16(scale_row[i >> 5]);
}

float k3_mxfp4_value(const uint8_t *packed_row, const uint8_t *scale_row, int64_t i)
{
    uint8_t byte = packed_row[i >> 1];
    uint8_t nib = (i & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
    return k3_e2m1[nib] * k3_e8m0(scale_row[i >> 5]);
}

int64_t k3_mxfp4_find_nan_scale(const uint8_t *scales, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (scales[i] == 255)
            return (int64_t)i;
    return -1;
}

void k3_q8_decode(const int8_t *q, const uint16_t *scales, size_t k0, size_t n, float *out)
{
    for (size_t b = 0; b < n; b += K3_Q8_BLOCK) { /* block by block: k0 % 32 == 0 */
        float s = k3_bf16(scales[(k0 + b) / K3_Q8_BLOCK]);
        size_t len = n - b < K3_Q8_BLOCK ? n - b : K3_Q8_BLOCK;
        for (size_t i = 0; i < len; i++)
            out[b + i] = (float)q[k0 + b + i] * s;
    }
}

/* fp32 to BF16 bits, round to nearest even (finite inputs). */
static uint16_t bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Per block of 32 (the last may be shorter): scale = BF16(max |w| / top),
 * q = round(w / scale) clamped to -top..top, 0 where the scale is 0. */
static void quantize_blocks(const uint16_t *w, size_t n, float top, int8_t *q, uint16_t *scales)
{
    for (size_t b0 = 0; b0 < n; b0 += K3_Q8_BLOCK) {
        size_t len = n - b0 < K3_Q8_BLOCK ? n - b0 : K3_Q8_BLOCK;
        float amax = 0;
        for (size_t i = 0; i < len; i++) {
            float a = fabsf(k3_bf16(w[b0 + i]));
            amax = a > amax ? a : amax;
        }
        uint16_t sb = bf16_round(amax / top);
        float s = k3_bf16(sb);
        scales[b0 / K3_Q8_BLOCK] = sb;
        for (size_t i = 0; i < len; i++) {
            float v = s > 0 ? roundf(k3_bf16(w[b0 + i]) / s) : 0.0f;
            q[b0 + i] = (int8_t)(v > top ? top : v < -top ? -top : v);
        }
    }
}

void k3_q8_quantize_row(const uint16_t *w, size_t n, int8_t *q, uint16_t *scales)
{
    quantize_blocks(w, n, 127.0f, q, scales);
}

void k3_q4_quantize_row(const uint16_t *w, size_t n, uint8_t *packed, uint16_t *scales)
{
    int8_t q[K3_Q8_BLOCK];
    for (size_t b0 = 0; b0 < n; b0 += K3_Q8_BLOCK) {
        quantize_blocks(w + b0, K3_Q8_BLOCK, 7.0f, q, scales + b0 / K3_Q8_BLOCK);
        for (size_t i = 0; i < K3_Q8_BLOCK; i += 2) {
            uint8_t lo = (uint8_t)(q[i] < 0 ? 8 - q[i] : q[i]);
            uint8_t hi = (uint8_t)(q[i + 1] < 0 ? 8 - q[i + 1] : q[i + 1]);
            packed[(b0 + i) / 2] = (uint8_t)(lo | hi << 4);
        }
    }
}

/* --- The scalar table ---------------------------------------------------- */

static float dot_f32(const float *a, const float *b, size_t n)
{
    float acc[16] = { 0 };
    k3_lanes_f32(acc, a, b, 0, n);
    return k3_reduce16(acc);
}

static float dot_bf16(const uint16_t *w, const float *x, size_t n)
{
    float acc[16] = { 0 };
    k3_lanes_bf16(acc, w, x, 0, n);
    return k3_reduce16(acc);
}

/* One MXFP4 row: the scale of each 32-element group is applied to the
 * weight before the FMA (decoding is exact), never factored out of a
 * partial sum: factoring would change the rounding, hence the answer. */
static float dot_mxfp4(const uint8_t *packed, const uint8_t *scales, const float *x, size_t n)
{
    float acc[16] = { 0 };
    for (size_t g = 0; g < n / 32; g++) {
        float s = k3_e8m0(scales[g]);
        for (size_t k = 0; k < 32; k++) {
            size_t i = g * 32 + k;
            uint8_t byte = packed[i >> 1];
            uint8_t nib = (i & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
            acc[i & 15] = fmaf(k3_e2m1[nib] * s, x[i], acc[i & 15]);
        }
    }
    return k3_reduce16(acc);
}

static void rows_f32(const float *w, size_t n, size_t rows, const float *x, size_t nt, float *y,
                     size_t ldy)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t t = 0; t < nt; t++)
            y[t * ldy + r] = dot_f32(w + r * n, x + t * n, n);
}

static void rows_bf16(const uint16_t *w, size_t n, size_t rows, const float *x, size_t nt,
                      float *y, size_t ldy)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t t = 0; t < nt; t++)
            y[t * ldy + r] = dot_bf16(w + r * n, x + t * n, n);
}

static void rows_mxfp4(const uint8_t *packed, const uint8_t *scales, size_t n, size_t rows,
                       const float *x, size_t nt, float *y, size_t ldy)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t t = 0; t < nt; t++)
            y[t * ldy + r] = dot_mxfp4(packed + r * (n / 2), scales + r * (n / 32), x + t * n, n);
}

static void rows_q4(const uint8_t *packed, const uint16_t *scales, size_t n, size_t rows,
                    const float *x, size_t nt, float *y, size_t ldy)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t t = 0; t < nt; t++) {
            float acc[16] = { 0 };
            for (size_t i = 0; i < n; i++)
                acc[i & 15] = fmaf(k3_q4_value(packed + r * (n / 2), scales + r * (n / 32),
                                               (int64_t)i),
                                   x[t * n + i], acc[i & 15]);
            y[t * ldy + r] = k3_reduce16(acc);
        }
}

static void decode_q4(const uint8_t *packed, const uint16_t *scales, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = k3_q4_value(packed, scales, (int64_t)i);
}

static void rows_q8(const int8_t *q, const uint16_t *scales, size_t n, size_t rows,
                    const float *x, size_t nt, float *y, size_t ldy)
{
    size_t nb = (n + 31) / 32;
    for (size_t r = 0; r < rows; r++)
        for (size_t t = 0; t < nt; t++) {
            float acc[16] = { 0 };
            k3_lanes_q8(acc, q + r * n, scales + r * nb, x + t * n, 0, n);
            y[t * ldy + r] = k3_reduce16(acc);
        }
}

static void decode_bf16(const uint16_t *w, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = k3_bf16(w[i]);
}

static void decode_mxfp4(const uint8_t *packed, const uint8_t *scales, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = k3_mxfp4_value(packed, scales, (int64_t)i);
}

static void tile(const float *w, size_t ldw, size_t mr, const float *x, size_t ldx, size_t nr,
                 size_t k, float *acc, size_t lda)
{
    for (size_t r = 0; r < mr; r++)
        for (size_t t = 0; t < nr; t++)
            k3_lanes_f32(acc + (r * lda + t) * 16, w + r * ldw, x + t * ldx, 0, k);
}

static void axpy(float *y, float a, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

const k3_isa k3_isa_scalar = {
    .name = "scalar", .mr = 1, .nr = 1, .row_tokens = 1,
    .rows_f32 = rows_f32, .rows_bf16 = rows_bf16, .rows_mxfp4 = rows_mxfp4, .rows_q8 = rows_q8,
    .rows_q4 = rows_q4, .decode_q4 = decode_q4,
    .decode_bf16 = decode_bf16, .decode_mxfp4 = decode_mxfp4, .decode_q8 = k3_q8_decode,
    .tile = tile, .axpy = axpy,
};

/* --- Elementwise functions ------------------------------------------------ */

void k3_rmsnorm(float *out, const float *x, const float *w, size_t n, float eps)
{
    float ss = k3_dot(x, x, n);
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (size_t i = 0; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

/* Elementwise, so threads may split it anywhere without changing a bit;
 * worth it for a prompt's blocks (T x width, each element three
 * exponentials), not for one token's row. */
void k3_situ(float *gate, const float *up, size_t n, float b1, float b2)
{
    ptrdiff_t m = (ptrdiff_t)n;
#pragma omp parallel for schedule(static) if (m >= 65536)
    for (ptrdiff_t i = 0; i < m; i++) {
        float g = gate[i];
        gate[i] = b1 * k3_tanhf(g / b1) * k3_sigmoidf(g) * (b2 * k3_tanhf(up[i] / b2));
    }
}

void k3_softmax(float *x, size_t n)
{
    float mx = x[0];
    for (size_t i = 1; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        x[i] = k3_expf(x[i] - mx);
        sum += x[i];
    }
    for (size_t i = 0; i < n; i++)
        x[i] /= sum;
}

size_t k3_argmax(const float *x, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}
