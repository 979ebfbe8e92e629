/* forward.c - the forward pass: the decoder stack with attention
 * residuals (docs/MODEL.md §4.3; the output head, §4.9).
 *
 * Each token carries a bank of block summaries (the embedding, then the sum
 * of each finished block of attn_res_block_size layers) and `prefix`, the
 * running sum of the current block. A layer mixes bank + [prefix] with a
 * learned softmax over sources (AttnRes) before its attention and before its
 * MLP, and hands prefix + MLP output to the next layer. The bank lives only
 * inside one forward pass: it mixes over depth, not over time.
 *
 * All T tokens of a call go through one layer before the next (layer-major),
 * which is what weight streaming needs; each token's arithmetic is the same
 * as in a one-token call, so logits are bit-identical either way. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernels.h"
#include "model/model.h"
#include "util/error.h"

/* Per-call working memory for T tokens of H floats (one allocation of floats,
 * in this order, plus src). Rows are token-major: row t of a [T][H] buffer
 * starts at t * H. */
typedef struct {
    float *hin;    /* [T][H] the layer's input h_in: embeddings, then prefix + MLP out */
    float *prefix; /* [T][H] running sum of the current block, after attention */
    float *h;      /* [T][H] output of the latest AttnRes mix */
    float *x;      /* [T][H] RMS-normed input of the attention, MLP or head */
    float *a;      /* [T][H] output of the attention, then of the MLP */
    float *bank;   /* [T][nbank_max][H] per token, the banked block sums; rows [0, nbank) */
    float *tmp;    /* [H] AttnRes scratch: one normed source */
    float *score;  /* [nbank_max + 1] AttnRes scratch: one score per source */
    const float **src; /* [nbank_max + 1] the sources of one mix */
    size_t nbank_max;  /* bank rows per token: ceil(L / block) + 1 >= the rows ever banked */
} work;

/* The AttnRes mix of token t, into its row of w->h: the sources are its bank
 * rows [0, nbank), in bank order, then cur (H floats, not in w->h), which is
 * the order k3_attn_res sums them in. */
static void bank_mix(work *w, size_t t, size_t nbank, const float *cur, const float *norm,
                     const float *proj, size_t H, float eps)
{
    const float *bank = w->bank + t * w->nbank_max * H;
    for (size_t b = 0; b < nbank; b++)
        w->src[b] = bank + b * H;
    w->src[nbank] = cur;
    k3_attn_res(w->h + t * H, w->src, nbank + 1, norm, proj, H, eps, w->tmp, w->score);
}

int k3_forward(k3_model *m, k3_state *s, const uint32_t *ids, size_t T, float *logits,
               int all_positions, k3_err *e)
{
    const k3_config *c = &m->cfg;
    const k3_weights *W = &m->w;
    size_t H = (size_t)c->hidden_size, V = (size_t)c->vocab_size;
    size_t block = (size_t)c->attn_res_block_size, L = (size_t)W->n_layers;
    float eps = (float)c->rms_norm_eps;
    if (T == 0)
        return k3_fail(e, K3_EINPUT, "no tokens to process");
    if (T > K3_MAX_CALL_TOKENS || s->pos > K3_MAX_POSITIONS - (int64_t)T) /* config.h */
        return k3_fail(e, K3_EINPUT, "%zu tokens at position %lld: over the limit of %zu tokens "
                       "a call, %lld positions", T, (long long)s->pos, K3_MAX_CALL_TOKENS,
                       (long long)K3_MAX_POSITIONS);
    for (size_t t = 0; t < T; t++)
        if (ids[t] >= V)
            return k3_fail(e, K3_EINPUT, "token id %u is outside the vocabulary (%zu ids)",
                           ids[t], V);
    if (k3_state_reserve(s, s->pos + (int64_t)T, e) != K3_OK)
        return e->code;
    work w;
    w.nbank_max = (L + block - 1) / block + 1;
    size_t nf = 5 * T * H + T * w.nbank_max * H + H + w.nbank_max + 1;
    float *buf = k3_malloc(e, nf * sizeof *buf, "activations");
    w.src = k3_malloc(e, (w.nbank_max + 1) * sizeof *w.src, "activations");
    if (!buf || !w.src) {
        free(buf);
        free(w.src);
        return e->code;
    }
    w.hin = buf;
    w.prefix = w.hin + T * H;
    w.h = w.prefix + T * H;
    w.x = w.h + T * H;
    w.a = w.x + T * H;
    w.bank = w.a + T * H;
    w.tmp = w.bank + T * w.nbank_max * H;
    w.score = w.tmp + H;

    int rc = K3_OK;
    for (size_t t = 0; t < T && rc == K3_OK; t++)
        rc = k3_weights_embed_row(W, m->ix, ids[t], w.hin + t * H, e);

    size_t nbank = 0;
    for (size_t li = 0; li < L && rc == K3_OK; li++) {
        /* The layer's matrices; the reader loads the next ones meanwhile. */
        const uint8_t *image = k3_trunk_acquire(m->trunk, li, e);
        if (!image) {
            rc = e->code;
            break;
        }
        for (int ahead = 1; ahead <= m->plan.ring_slots - 1; ahead++)
            k3_trunk_prefetch(m->trunk, (li + (size_t)ahead) % (L + 1));
        k3_layer_weights view;
        k3_weights_layer_view(W, (int)li, image, &view);
        const k3_layer_weights *lw = &view;
        /* §4.3 steps 1-2: mix for attention; at a block boundary the incoming sum is banked. */
        int boundary = li % block == 0;
        for (size_t t = 0; t < T; t++) {
            float *hin = w.hin + t * H, *bank = w.bank + t * w.nbank_max * H;
            if (nbank > 0) {
                bank_mix(&w, t, nbank, hin, lw->attn_res_norm, lw->attn_res_proj, H, eps);
            } else {
                memcpy(w.h + t * H, hin, H * sizeof(float));
            }
            if (boundary)
                memcpy(bank + nbank * H, hin, H * sizeof(float));
        }
        if (boundary)
            nbank++;
        /* §4.3 steps 3-4: attention; prefix = a (after a boundary) or h_in + a. */
        for (size_t t = 0; t < T; t++)
            k3_rmsnorm(w.x + t * H, w.h + t * H, lw->input_norm, H, eps);
        rc = lw->kind == K3_LAYER_KDA ? k3_kda_forward(c, lw, s, (int)li, w.x, T, w.a, e)
                                      : k3_mla_forward(c, lw, s, (int)li, w.x, T, w.a, e);
        if (rc != K3_OK) {
            k3_trunk_release(m->trunk, li);
            break;
        }
        for (size_t i = 0; i < T * H; i++)
            w.prefix[i] = boundary ? w.a[i] : w.hin[i] + w.a[i];
        /* §4.3 steps 5-6: mix for the MLP (the bank is never empty here), then the MLP. */
        for (size_t t = 0; t < T; t++) {
            bank_mix(&w, t, nbank, w.prefix + t * H, lw->mlp_res_norm, lw->mlp_res_proj, H, eps);
            k3_rmsnorm(w.x + t * H, w.h + t * H, lw->post_norm, H, eps);
        }
        k3_expert_source src = { NULL, m->experts, (int)li };
        rc = lw->dense ? k3_dense_mlp_forward(c, lw, w.x, T, w.a, e)
                       : k3_moe_block(c, &lw->moe, &src, w.x, T, w.a, e);
        k3_trunk_release(m->trunk, li);
        /* §4.3 step 7: the next layer's input. */
        for (size_t i = 0; i < T * H; i++)
            w.hin[i] = w.prefix[i] + w.a[i];
    }
    if (rc == K3_OK) {
        /* Final mix, norm and head, for the positions asked for. */
        size_t t0 = all_positions ? 0 : T - 1;
        for (size_t t = t0; t < T; t++) {
            bank_mix(&w, t, nbank, w.hin + t * H, W->out_res_norm, W->out_res_proj, H, eps);
            k3_rmsnorm(w.x + t * H, w.h + t * H, W->final_norm, H, eps);
        }
        const uint8_t *image = k3_trunk_acquire(m->trunk, L, e);
        if (image) {
            k3_mat head = k3_weights_lm_head(W, image);
            k3_matmul(&head, w.x + t0 * H, T - t0, logits);
            k3_trunk_release(m->trunk, L);
            /* Fault-sweep fix (tests/gates/72-fault-sweep.sh, docs/SECURITY.md):
             * a NaN or Inf logit means a weight (most have no checksum in the
             * release format) or a loaded state holds one; any token chosen
             * from such logits is arbitrary (all-NaN logits gave id 0), so the
             * run is invalid rather than continued. */
            for (size_t i = 0; i < (T - t0) * V && rc == K3_OK; i++)
                if (!isfinite(logits[i]))
                    rc = k3_fail(e, K3_EINVALID, "RUN INVALID: logit %zu of position %lld is not "
                                 "finite: a weight or the loaded state holds NaN or Inf",
                                 i % V, (long long)(s->pos + (int64_t)(t0 + i / V)));
            if (rc == K3_OK)
                k3_state_commit(s, ids, T, logits + (all_positions ? (T - 1) * V : 0));
        } else {
            rc = e->code;
        }
    }
    free(buf);
    free(w.src);
    return rc;
}
