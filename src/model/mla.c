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
#include <stdlib.h>
#include <string.h>

#include "core/mathfn.h"
#include "model/model.h"
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

int k3_mla_forward(const k3_config *cfg, const k3_layer_weights *lw, k3_state *s, int layer,
                   const float *x, size_t T, float *out, k3_err *e)
{
    const k3_mla_weights *w = &lw->mla;
    size_t NH = (size_t)cfg->num_attention_heads, QL = (size_t)cfg->q_lora_rank;
    size_t R = (size_t)cfg->kv_lora_rank, DR = (size_t)cfg->qk_rope_head_dim;
    size_t DV = (size_t)cfg->v_head_dim, DQ = (size_t)cfg->qk_nope_head_dim + DR, KW = R + DR;
    int64_t end = s->pos + (int64_t)T;
    if (k3_state_reserve(s, end, e) != K3_OK)
        return e->code;
    size_t need = T * QL + T * NH * DQ + T * KW + 2 * T * NH * DV + 2 * R + (size_t)end;
    float *buf = k3_malloc(e, need * sizeof *buf, "MLA scratch");
    if (!buf)
        return e->code;
    float *QA = buf, *Q = QA + T * QL, *CKV = Q + T * NH * DQ, *G = CKV + T * KW;
    float *O = G + T * NH * DV, *scratch = O + T * NH * DV;
    float *cache = s->kv[layer];

    k3_matmul(&w->q_a, x, T, QA);
    for (size_t t = 0; t < T; t++)
        k3_rmsnorm(QA + t * QL, QA + t * QL, w->q_a_norm, QL, 1e-6f);
    k3_matmul(&w->q_b, QA, T, Q);
    k3_matmul(&w->kv_a, x, T, CKV);
    k3_matmul(&w->g, x, T, G);
    for (size_t t = 0; t < T; t++) {
        float *row = cache + (size_t)(s->pos + (int64_t)t) * KW;
        k3_rmsnorm(row, CKV + t * KW, w->kv_a_norm, R, 1e-6f);
        memcpy(row + R, CKV + t * KW + R, DR * sizeof *row);
    }
    for (size_t t = 0; t < T; t++) {
        float *o = O + t * NH * DV;
        /* causal: token t sees positions 0 .. pos + t */
        k3_mla_attend(cfg, &w->kv_b, cache, (size_t)s->pos + t + 1, Q + t * NH * DQ, o, scratch);
        for (size_t j = 0; j < NH * DV; j++)
            o[j] *= k3_sigmoidf(G[t * NH * DV + j]);
    }
    k3_matmul(&w->o, O, T, out);
    free(buf);
    return K3_OK;
}
