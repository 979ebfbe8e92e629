/* kernels.c - the plain (portable, reference) kernels; see kernels.h for
 * the summation contract every fast path must reproduce. */
#include "core/kernels.h"

#include <math.h>
#include <string.h>

#include "core/mathfn.h"

float k3_bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* E2M1 magnitudes by bits 0-2 of a nibble; bit 3 is the sign. */
static const float E2M1[16] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };

/* 2^(e-127) for an E8M0 byte e < 255, exactly (2^-127 is subnormal). */
static float e8m0(uint8_t e) { return ldexpf(1.0f, (int)e - 127); }

float k3_mxfp4_value(const uint8_t *packed_row, const uint8_t *scale_row, int64_t i)
{
    uint8_t byte = packed_row[i >> 1];
    uint8_t nib = (i & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
    return E2M1[nib] * e8m0(scale_row[i >> 5]);
}

int64_t k3_mxfp4_find_nan_scale(const uint8_t *scales, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (scales[i] == 255)
            return (int64_t)i;
    return -1;
}

static float reduce16(float acc[16])
{
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++)
            acc[j] = acc[j] + acc[j + w];
    return acc[0];
}

float k3_dot(const float *a, const float *b, size_t n)
{
    float acc[16] = { 0 };
    for (size_t i = 0; i < n; i++)
        acc[i & 15] = fmaf(a[i], b[i], acc[i & 15]);
    return reduce16(acc);
}

static float dot_bf16(const uint16_t *w, const float *x, size_t n)
{
    float acc[16] = { 0 };
    for (size_t i = 0; i < n; i++)
        acc[i & 15] = fmaf(k3_bf16_to_f32(w[i]), x[i], acc[i & 15]);
    return reduce16(acc);
}

/* One MXFP4 row: the scale of each 32-element group is applied to the
 * weight before the FMA (decoding is exact), never factored out of a
 * partial sum: factoring would change the rounding, hence the answer. */
static float dot_mxfp4(const uint8_t *packed, const uint8_t *scales, const float *x, size_t n)
{
    float acc[16] = { 0 };
    for (size_t g = 0; g < n / 32; g++) {
        float s = e8m0(scales[g]);
        for (size_t k = 0; k < 32; k++) {
            size_t i = g * 32 + k;
            uint8_t byte = packed[i >> 1];
            uint8_t nib = (i & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
            acc[i & 15] = fmaf(E2M1[nib] * s, x[i], acc[i & 15]);
        }
    }
    return reduce16(acc);
}

static float row_dot(const k3_mat *m, int64_t r, const float *x)
{
    size_t n = (size_t)m->cols;
    switch (m->kind) {
    case K3_MAT_BF16:
        return dot_bf16((const uint16_t *)m->w + (size_t)r * n, x, n);
    case K3_MAT_MXFP4:
        return dot_mxfp4((const uint8_t *)m->w + (size_t)r * (n / 2),
                         m->scales + (size_t)r * (n / 32), x, n);
    case K3_MAT_F32:
    default:
        return k3_dot((const float *)m->w + (size_t)r * n, x, n);
    }
}

/* Threads only pay off above this many multiply-adds. */
#define PAR_MIN_WORK (1 << 15)

void k3_matvec(const k3_mat *m, const float *x, float *y)
{
    int64_t rows = m->rows;
#pragma omp parallel for schedule(static) if (rows * m->cols >= PAR_MIN_WORK)
    for (int64_t r = 0; r < rows; r++)
        y[r] = row_dot(m, r, x);
}

void k3_matmul(const k3_mat *m, const float *X, size_t T, float *Y)
{
    int64_t rows = m->rows;
    size_t cols = (size_t)m->cols;
#pragma omp parallel for schedule(static) if (rows * m->cols * (int64_t)T >= PAR_MIN_WORK)
    for (int64_t r = 0; r < rows; r++)
        for (size_t t = 0; t < T; t++)
            Y[t * (size_t)rows + (size_t)r] = row_dot(m, r, X + t * cols);
}

k3_mat k3_mat_rows(const k3_mat *m, int64_t r0, int64_t n)
{
    k3_mat v = *m;
    size_t cols = (size_t)m->cols;
    v.rows = n;
    switch (m->kind) {
    case K3_MAT_BF16: v.w = (const uint16_t *)m->w + (size_t)r0 * cols; break;
    case K3_MAT_F32: v.w = (const float *)m->w + (size_t)r0 * cols; break;
    case K3_MAT_MXFP4:
        v.w = (const uint8_t *)m->w + (size_t)r0 * (cols / 2);
        v.scales = m->scales + (size_t)r0 * (cols / 32);
        break;
    }
    return v;
}

static float element(const k3_mat *m, int64_t r, int64_t c)
{
    size_t cols = (size_t)m->cols;
    switch (m->kind) {
    case K3_MAT_BF16: return k3_bf16_to_f32(((const uint16_t *)m->w)[(size_t)r * cols + (size_t)c]);
    case K3_MAT_MXFP4:
        return k3_mxfp4_value((const uint8_t *)m->w + (size_t)r * (cols / 2),
                              m->scales + (size_t)r * (cols / 32), c);
    case K3_MAT_F32:
    default: return ((const float *)m->w)[(size_t)r * cols + (size_t)c];
    }
}

void k3_matvec_t(const k3_mat *m, const float *x, float *y)
{
    for (int64_t c = 0; c < m->cols; c++)
        y[c] = 0.0f;
    for (int64_t r = 0; r < m->rows; r++)
        for (int64_t c = 0; c < m->cols; c++)
            y[c] = fmaf(element(m, r, c), x[r], y[c]);
}

void k3_rmsnorm(float *out, const float *x, const float *w, size_t n, float eps)
{
    float ss = k3_dot(x, x, n);
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (size_t i = 0; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

void k3_situ(float *gate, const float *up, size_t n, float b1, float b2)
{
    for (size_t i = 0; i < n; i++) {
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
