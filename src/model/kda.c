/* kda.c - Kimi Delta Attention (docs/MODEL.md §4.5).
 *
 * Per token, per head h (head_dim d, key channel c, value channel j):
 *   q, k, v  = SiLU(causal depthwise conv over the last K inputs)
 *   alpha_c  = exp(lower_bound * sigmoid(exp(A_log[h]) * (graw_c + dt_bias_c)))
 *   beta     = sigmoid(W_b x)[h]
 *   q, k     L2-normalised (eps 1e-6 inside the sqrt), q *= d^-0.5
 *   S        = diag(alpha) S                     decay first,
 *   S       += outer(beta k, v - S^T k)          then the delta rule,
 *   o        = S^T q                              then read the new state.
 *   o        = rms(o, o_norm) * sigmoid(W_g x)[head slice];  out = W_o o
 *
 * Order contract for the state products (S^T k, S^T q): for each value
 * channel j the sum over key channels c runs c = 0..d-1 with one fmaf per
 * term, so a vectorised path works across j and keeps the same bits. The
 * projections go through k3_matmul, so a T-token call and T one-token calls
 * produce identical results, and so do rows of several sequences in one
 * call (each sequence's recurrence runs on its own state). */
#include <math.h>
#include <string.h>

#include "core/mathfn.h"
#include "model/model.h"
#include "model/scratch.h"
#include "util/error.h"

/* Causal depthwise conv of one token for one of q/k/v, then SiLU.
 * hist holds the previous K-1 inputs (oldest first) and is shifted. */
static void short_conv(float *y, const float *in, float *hist, const float *taps, size_t C,
                       size_t K)
{
    for (size_t c = 0; c < C; c++) {
        const float *w = taps + c * K;
        float acc = 0.0f;
        for (size_t k = 0; k + 1 < K; k++)
            acc = fmaf(w[k], hist[k * C + c], acc);
        acc = fmaf(w[K - 1], in[c], acc);
        y[c] = k3_siluf(acc);
        for (size_t k = 0; k + 2 < K; k++)
            hist[k * C + c] = hist[(k + 1) * C + c];
        if (K > 1)
            hist[(K - 2) * C + c] = in[c];
    }
}

static void l2norm(float *x, size_t n, float extra_scale)
{
    float inv = 1.0f / sqrtf(k3_dot(x, x, n) + 1e-6f);
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] * inv * extra_scale;
}

/* One head's state update and read for one token (see the header comment). */
static void delta_step(float *S, const float *q, const float *k, const float *v,
                       const float *alpha, float beta, float *o, float *u, size_t d)
{
    for (size_t c = 0; c < d; c++)
        for (size_t j = 0; j < d; j++)
            S[c * d + j] *= alpha[c];
    /* u = S^T k, o = S^T q: over c in order, each row one k3_axpy (one
     * fmaf per element: the order contract above, vectorised across j). */
    memset(u, 0, d * sizeof *u);
    for (size_t c = 0; c < d; c++)
        k3_axpy(u, k[c], S + c * d, d);
    for (size_t j = 0; j < d; j++)
        u[j] = v[j] - u[j];
    for (size_t c = 0; c < d; c++)
        k3_axpy(S + c * d, beta * k[c], u, d);
    memset(o, 0, d * sizeof *o);
    for (size_t c = 0; c < d; c++)
        k3_axpy(o, q[c], S + c * d, d);
}

void k3_kda_step(const k3_config *cfg, const k3_kda_weights *w, float *hist, float *S,
                 const float *q_pre, const float *k_pre, const float *v_pre, const float *graw,
                 const float *beta_logit, float *o, float *scratch)
{
    size_t NH = (size_t)cfg->kda_num_heads, D = (size_t)cfg->kda_head_dim, C = NH * D;
    size_t K = (size_t)cfg->short_conv_kernel_size, hstride = (K - 1) * C;
    float lb = (float)cfg->gate_lower_bound, qscale = 1.0f / sqrtf((float)D);
    float *q = scratch, *k = q + C, *v = k + C, *alpha = v + C, *u = alpha + D;
    short_conv(q, q_pre, hist, w->conv[0], C, K);
    short_conv(k, k_pre, hist + hstride, w->conv[1], C, K);
    short_conv(v, v_pre, hist + 2 * hstride, w->conv[2], C, K);
    for (size_t h = 0; h < NH; h++) {
        const float *gr = graw + h * D, *dtb = w->dt_bias + h * D;
        float a = k3_expf(w->A_log[h]); /* A_log is indexed by head */
        for (size_t c = 0; c < D; c++)
            alpha[c] = k3_expf(lb * k3_sigmoidf(a * (gr[c] + dtb[c])));
        float beta = k3_sigmoidf(beta_logit[h]);
        l2norm(q + h * D, D, qscale);
        l2norm(k + h * D, D, 1.0f);
        delta_step(S + h * D * D, q + h * D, k + h * D, v + h * D, alpha, beta, o + h * D, u, D);
    }
}

/* k3_kda_forward's working memory for T tokens (C = heads x head_dim D):
 * the projections of all T tokens, then the recurrence's scratch. */
typedef struct {
    float *Q, *K, *V; /* [T][C] pre-conv q, k, v projections */
    float *G;         /* [T][C] output-gate logits (W_g x) */
    float *GR;        /* [T][C] decay-gate input (W_fb W_fa x) */
    float *O;         /* [T][C] the heads' outputs, gated, before W_o */
    float *FA;        /* [T][D] the decay gate's low-rank input (W_fa x) */
    float *B;         /* [T][NH] beta logits */
    float *step;      /* [3C + 2D] k3_kda_step's scratch */
} kda_bufs;

/* The one layout of kda_bufs (scratch.h): sizes with base NULL. */
static uint64_t kda_layout(const k3_config *cfg, uint64_t T, unsigned char *base, kda_bufs *b)
{
    uint64_t NH = cfg->kda_num_heads > 0 ? (uint64_t)cfg->kda_num_heads : 0;
    uint64_t D = cfg->kda_head_dim > 0 ? (uint64_t)cfg->kda_head_dim : 0;
    uint64_t C = k3_sat_mul(NH, D), TC = k3_sat_mul(T, C), f = sizeof(float);
    k3_carve a = { base, 0 };
    b->Q = k3_carve_take(&a, TC, f);
    b->K = k3_carve_take(&a, TC, f);
    b->V = k3_carve_take(&a, TC, f);
    b->G = k3_carve_take(&a, TC, f);
    b->GR = k3_carve_take(&a, TC, f);
    b->O = k3_carve_take(&a, TC, f);
    b->FA = k3_carve_take(&a, k3_sat_mul(T, D), f);
    b->B = k3_carve_take(&a, k3_sat_mul(T, NH), f);
    b->step = k3_carve_take(&a, k3_sat_add(k3_sat_mul(3, C), k3_sat_mul(2, D)), f);
    return a.used;
}

uint64_t k3_kda_scratch(const k3_config *c, uint64_t T)
{
    kda_bufs b;
    return kda_layout(c, T, NULL, &b);
}

int k3_kda_forward(const k3_config *cfg, const k3_layer_weights *lw, const k3_seg *seg,
                   size_t nseg, int layer, const float *x, size_t T, float *out,
                   const k3_work *wk, k3_err *e)
{
    const k3_kda_weights *w = &lw->kda;
    size_t NH = (size_t)cfg->kda_num_heads, D = (size_t)cfg->kda_head_dim, C = NH * D;
    float eps = (float)cfg->rms_norm_eps;
    kda_bufs b;
    if (k3_kda_scratch(cfg, T) > wk->bytes)
        return k3_fail(e, K3_ERUNTIME, "KDA scratch: %llu bytes needed, %zu given",
                       (unsigned long long)k3_kda_scratch(cfg, T), wk->bytes);
    kda_layout(cfg, T, wk->buf, &b);
    /* Projections of all T rows, then each sequence's recurrence over its
     * rows, token by token, on its own conv and recurrent state. */
    k3_matmul(&w->q, x, T, b.Q, wk->mm);
    k3_matmul(&w->k, x, T, b.K, wk->mm);
    k3_matmul(&w->v, x, T, b.V, wk->mm);
    k3_matmul(&w->g, x, T, b.G, wk->mm);
    k3_matmul(&w->f_a, x, T, b.FA, wk->mm);
    k3_matmul(&w->f_b, b.FA, T, b.GR, wk->mm);
    k3_matmul(&w->b, x, T, b.B, wk->mm);
    size_t rec = k3_spec_record_floats(cfg);
    for (size_t g = 0; g < nseg; g++) {
        k3_state *s = seg[g].s;
        size_t t0 = seg[g].t0, t1 = t0 + seg[g].n;
        k3_spec_journal *jr = s->spec && s->spec->active ? s->spec : NULL;
        size_t at = jr ? (size_t)(s->pos - jr->pos0) : 0;
        if (jr && at + seg[g].n > jr->cap)
            return k3_fail(e, K3_EINPUT, "a speculative step journals %zu ids, not %zu",
                           jr->cap, at + seg[g].n);
        for (size_t t = t0; jr && t < t1; t++) { /* k3_kda_step's inputs, for spec_end */
            float *r = jr->in[layer] + (at + t - t0) * rec;
            memcpy(r, b.Q + t * C, C * sizeof *r);
            memcpy(r + C, b.K + t * C, C * sizeof *r);
            memcpy(r + 2 * C, b.V + t * C, C * sizeof *r);
            memcpy(r + 3 * C, b.GR + t * C, C * sizeof *r);
            memcpy(r + 4 * C, b.B + t * NH, NH * sizeof *r);
        }
        for (size_t t = t0; t < t1; t++) {
            float *o = b.O + t * C;
            k3_kda_step(cfg, w, s->conv[layer], s->S[layer], b.Q + t * C, b.K + t * C,
                        b.V + t * C, b.GR + t * C, b.B + t * NH, o, b.step);
            for (size_t h = 0; h < NH; h++) {
                k3_rmsnorm(o + h * D, o + h * D, w->o_norm, D, eps);
                for (size_t j = 0; j < D; j++)
                    o[h * D + j] *= k3_sigmoidf(b.G[t * C + h * D + j]);
            }
        }
    }
    k3_matmul(&w->o, b.O, T, out, wk->mm);
    return K3_OK;
}
