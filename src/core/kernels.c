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
    .rows_f32 = rows_f32, .rows_bf16 = rows_bf16, .rows_mxfp4 = rows_mxfp4,
    .decode_bf16 = decode_bf16, .decode_mxfp4 = decode_mxfp4, .tile = tile, .axpy = axpy,
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
