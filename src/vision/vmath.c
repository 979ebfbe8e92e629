/* vmath.c - see vmath.h. */
#include "core/mathfn.h"
#include "vision/vmath.h"

double k3_vis_erf(double x)
{
    if (x >= 4.0)
        return 1.0;
    if (x <= -4.0)
        return -1.0;
    /* erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)); term = x·Π(-x²/k). */
    const double two_over_sqrt_pi = 1.1283791670955126;
    double x2 = x * x, term = x, sum = x;
    for (int n = 1; n < 200; n++) {
        term = term * (-x2) / n;
        double add = term / (2 * n + 1);
        double next = sum + add;
        if (next == sum)
            break;
        sum = next;
    }
    return two_over_sqrt_pi * sum;
}

float k3_vis_gelu_erf(float x)
{
    const double inv_sqrt2 = 0.70710678118654752;
    double v = (double)x;
    return (float)(0.5 * v * (1.0 + k3_vis_erf(v * inv_sqrt2)));
}

float k3_vis_gelu_tanh(float x)
{
    const float c = 0.7978845608028654f; /* √(2/π) */
    float x3 = x * x * x;
    float inner = c * (x + 0.044715f * x3);
    return 0.5f * x * (1.0f + k3_tanhf(inner));
}
