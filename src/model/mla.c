/* mla.c - multi-head latent attention, NoPE and output-gated (MODEL.md §4.6).
 *
 *   q  = W_qb rms(W_qa x, q_a_layernorm, 1e-6)        per head [nope | rope]
 *   c  = W_kva x = [latent | rope];  cn = rms(latent, kv_a_layernorm, 1e-6)
 *   key of head h at position s = [W_kb_h cn_s | rope_s]  (rope NOT rotated,
 *   shared by all heads);  value = W_vb_h cn_s
 *   o_h = softmax_s(q_h . key_s * (nope+rope)^-0.5) . value_s, causal
 *   out = W_o (o * sigmoid(W_g x))
 *
 * The cache holds [cn | rope] per position (576 floats in the release;
 * expanded keys and values would be 30,720). Attention runs in the latent
 * space ("absorbed"): q_h . (W_kb_h cn) = (W_kb_h^T q_h) . cn, and
 * sum_s p_s W_vb_h cn_s = W_vb_h (sum_s p_s cn_s). Same result as expanding,
 * without a per-position expansion. */
#include <math.h>
#include <string.h>

#include "core/mathfn.h"
#include "model/model.h"
#include "model/scratch.h"
#include "util/error.h"

void k3_mla_attend(const k3_config *cfg, const k3_mat *kv_b, const float *cache, size_t npos,
                   const float *q, float *o, float *scratch)
{
    size_t NH = (size_t)cfg->num_attention_heads, R = (size_t)cfg->kv_lora_rank;
    size_t DN = (size_t)cfg->qk_nope_head_dim, DR = (size_t)cfg->qk_rope_head_dim;
    size_t DV = (size_t)cfg->v_head_dim, DQ = DN + DR, KW = R + DR;
    float scale = 1.0f / sqrtf((float)DQ);
    float *qabs = scratch, *ctx = qabs + R, *p = ctx + R;
    for (size_t h = 0; h < NH; h++) {
        const float *qn = q + h * DQ, *qr = qn + DN;
        k3_mat kb = k3_mat_rows(kv_b, (int64_t)(h * (DN + DV)), (int64_t)DN);
        k3_mat vb = k3_mat_rows(kv_b, (int64_t)(h * (DN + DV) + DN), (int64_t)DV);
        k3_matvec_t(&kb, qn, qabs);
        for (size_t j = 0; j < npos; j++) {
            const float *kv = cache + j * KW;
            p[j] = (k3_dot(qabs, kv, R) + k3_dot(qr, kv + R, DR)) * scale;
        }
        k3_softmax(p, npos);
        for (size_t c = 0; c < R; c++)
            ctx[c] = 0.0f;
        for (size_t j = 0; j < npos; j++) /* ctx[c] += p[j] kv_j[c], j ascending */
            k3_axpy(ctx, p[j], cache + j * KW, R);
        k3_matvec(&vb, ctx, o + h * DV);
    }
}

/* k3_mla_forward's working memory for T tokens whose last attends to
 * `end` positions (NH heads; DQ = nope + rope, KW = kv_lora_rank R + rope). */
typedef struct {
    float *QA;     /* [T][q_lora_rank] W_qa x, normed in place */
    float *Q;      /* [T][NH][DQ] queries */
    float *CKV;    /* [T][KW] W_kva x: the latent before its norm, then rope */
    float *G;      /* [T][NH][v_head_dim] output-gate logits */
    float *O;      /* [T][NH][v_head_dim] attention outputs, gated, before W_o */
    float *attend; /* [2R + end] k3_mla_attend's scratch: qabs, ctx, one score per position */
} mla_bufs;

/* The one layout of mla_bufs (scratch.h): sizes with base NULL. */
static uint64_t mla_layout(const k3_config *cfg, uint64_t T, uint64_t end, unsigned char *base,
                           mla_bufs *b)
{
    uint64_t NH = cfg->num_attention_heads > 0 ? (uint64_t)cfg->num_attention_heads : 0;
    uint64_t QL = cfg->q_lora_rank > 0 ? (uint64_t)cfg->q_lora_rank : 0;
    uint64_t R = cfg->kv_lora_rank > 0 ? (uint64_t)cfg->kv_lora_rank : 0;
    uint64_t DN = cfg->qk_nope_head_dim > 0 ? (uint64_t)cfg->qk_nope_head_dim : 0;
    uint64_t DR = cfg->qk_rope_head_dim > 0 ? (uint64_t)cfg->qk_rope_head_dim : 0;
    uint64_t DV = cfg->v_head_dim > 0 ? (uint64_t)cfg->v_head_dim : 0, f = sizeof(float);
    uint64_t TO = k3_sat_mul(T, k3_sat_mul(NH, DV));
    k3_carve a = { base, 0 };
    b->QA = k3_carve_take(&a, k3_sat_mul(T, QL), f);
    b->Q = k3_carve_take(&a, k3_sat_mul(T, k3_sat_mul(NH, k3_sat_add(DN, DR))), f);
    b->CKV = k3_carve_take(&a, k3_sat_mul(T, k3_sat_add(R, DR)), f);
    b->G = k3_carve_take(&a, TO, f);
    b->O = k3_carve_take(&a, TO, f);
    b->attend = k3_carve_take(&a, k3_sat_add(k3_sat_mul(2, R), end), f);
    return a.used;
}

uint64_t k3_mla_scratch(const k3_config *c, uint64_t T, uint64_t end)
{
    mla_bufs b;
    return mla_layout(c, T, end, NULL, &b);
}

int k3_mla_forward(const k3_config *cfg, const k3_layer_weights *lw, const k3_seg *seg,
                   size_t nseg, int layer, const float *x, size_t T, float *out,
                   const k3_work *wk, k3_err *e)
{
    const k3_mla_weights *w = &lw->mla;
    size_t NH = (size_t)cfg->num_attention_heads, QL = (size_t)cfg->q_lora_rank;
    size_t R = (size_t)cfg->kv_lora_rank, DR = (size_t)cfg->qk_rope_head_dim;
    size_t DV = (size_t)cfg->v_head_dim, DQ = (size_t)cfg->qk_nope_head_dim + DR, KW = R + DR;
    uint64_t end = 0;
    for (size_t g = 0; g < nseg; g++) {
        uint64_t e_g = (uint64_t)seg[g].s->pos + seg[g].n;
        end = e_g > end ? e_g : end;
    }
    mla_bufs b;
    if (k3_mla_scratch(cfg, T, end) > wk->bytes)
        return k3_fail(e, K3_ERUNTIME, "MLA scratch: %llu bytes needed, %zu given",
                       (unsigned long long)k3_mla_scratch(cfg, T, end), wk->bytes);
    for (size_t g = 0; g < nseg; g++)
        if (k3_state_reserve(seg[g].s, seg[g].s->pos + (int64_t)seg[g].n, e) != K3_OK)
            return e->code;
    mla_layout(cfg, T, end, wk->buf, &b);

    k3_matmul(&w->q_a, x, T, b.QA, wk->mm);
    for (size_t t = 0; t < T; t++)
        k3_rmsnorm(b.QA + t * QL, b.QA + t * QL, w->q_a_norm, QL, 1e-6f);
    k3_matmul(&w->q_b, b.QA, T, b.Q, wk->mm);
    k3_matmul(&w->kv_a, x, T, b.CKV, wk->mm);
    k3_matmul(&w->g, x, T, b.G, wk->mm);
    /* Each sequence's rows go to its own cache, then attend over it. */
    for (size_t g = 0; g < nseg; g++) {
        const k3_state *s = seg[g].s;
        float *cache = s->kv[layer];
        size_t t0 = seg[g].t0, n = seg[g].n;
        for (size_t i = 0; i < n; i++) {
            float *row = cache + (size_t)(s->pos + (int64_t)i) * KW;
            k3_rmsnorm(row, b.CKV + (t0 + i) * KW, w->kv_a_norm, R, 1e-6f);
            memcpy(row + R, b.CKV + (t0 + i) * KW + R, DR * sizeof *row);
        }
        for (size_t i = 0; i < n; i++) {
            size_t t = t0 + i;
            float *o = b.O + t * NH * DV;
            /* causal: the sequence's token i sees its positions 0 .. pos + i */
            k3_mla_attend(cfg, &w->kv_b, cache, (size_t)s->pos + i + 1, b.Q + t * NH * DQ, o,
                          b.attend);
            for (size_t j = 0; j < NH * DV; j++)
                o[j] *= k3_sigmoidf(b.G[t * NH * DV + j]);
        }
    }
    k3_matmul(&w->o, b.O, T, out, wk->mm);
    return K3_OK;
}
