/* mathfn.c - see mathfn.h. */
#include "core/mathfn.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* 2^n for n in [-126, 127], built from the exponent bits (exact). */
static float pow2i(int n)
{
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* exp(x) = 2^n * e^r with r = x - n ln2, |r| <= ln2/2. ln2 is split in a
 * high part with trailing zero bits (so n * LN2_HI is exact for |n| < 256)
 * and a low part (Cody-Waite). e^r by Taylor to degree 7: the first omitted
 * term is below 6e-9 relative, under half an ulp. */
float k3_expf(float x)
{
    if (x != x)
        return x;
    if (x > 88.7228394f)
        return INFINITY;
    if (x < -103.972084f)
        return 0.0f;
    const float LOG2E = 1.44269504f, LN2_HI = 0.693145752f, LN2_LO = 1.42860677e-6f;
    float fn = floorf(x * LOG2E + 0.5f);
    int n = (int)fn;
    float r = (x - fn * LN2_HI) - fn * LN2_LO;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* Two steps keep both factors normal for n in [-150, 128]. */
    int n1 = n / 2, n2 = n - n1;
    return p * pow2i(n1) * pow2i(n2);
}

/* tanh: near zero from expm1 by Taylor (no cancellation); elsewhere from
 * e^(-2|x|), where 1 - e keeps at least 28% of its magnitude. */
float k3_tanhf(float x)
{
    if (x != x)
        return x;
    float ax = fabsf(x), t;
    if (ax > 9.0f) {
        t = 1.0f;
    } else if (ax < 0.17f) {
        float y = 2.0f * ax;
        float em = 1.0f / 40320.0f;
        em = em * y + 1.0f / 5040.0f;
        em = em * y + 1.0f / 720.0f;
        em = em * y + 1.0f / 120.0f;
        em = em * y + 1.0f / 24.0f;
        em = em * y + 1.0f / 6.0f;
        em = em * y + 0.5f;
        em = em * y + 1.0f;
        em = em * y;
        t = em / (em + 2.0f);
    } else {
        float e = k3_expf(-2.0f * ax);
        t = (1.0f - e) / (1.0f + e);
    }
    return x < 0 ? -t : t;
}

float k3_sigmoidf(float x) { return 1.0f / (1.0f + k3_expf(-x)); }

float k3_siluf(float x) { return x * k3_sigmoidf(x); }
