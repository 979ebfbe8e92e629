/* attnres.c - attention residuals: a softmax over depth (MODEL.md §4.4). */
#include "core/kernels.h"
#include "model/model.h"

/* AttnRes over n sources of H floats: score_s = rms(s, norm) . proj,
 * out = sum_s softmax(score)_s * s (raw sources, in source order; out
 * must not alias a source). */
void k3_attn_res(float *out, const float *const *src, size_t n, const float *norm,
                     const float *proj, size_t H, float eps, float *tmp, float *score)
{
    for (size_t s = 0; s < n; s++) {
        k3_rmsnorm(tmp, src[s], norm, H, eps);
        score[s] = k3_dot(tmp, proj, H);
    }
    k3_softmax(score, n);
    /* out[i] = sum over s in source order, one fmaf each, starting from 0;
     * elementwise, so k3_axpy runs it 16 elements at a time. out must not
     * alias a source. */
    for (size_t i = 0; i < H; i++)
        out[i] = 0.0f;
    for (size_t s = 0; s < n; s++)
        k3_axpy(out, score[s], src[s], H);
}
