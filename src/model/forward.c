/* forward.c - opening a model and the decoder stack with attention
 * residuals (SPEC section 4, "Decoder layer i").
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

int k3_model_open(k3_model **out, const char *dir, const k3_model_opts *opts, k3_err *e)
{
    *out = NULL;
    k3_model *m = k3_calloc(e, 1, sizeof *m, "model");
    if (!m)
        return e->code;
    if (k3_config_load(&m->cfg, dir, e) != K3_OK)
        goto fail;
    int n = (int)m->cfg.num_hidden_layers;
    if (opts && opts->n_layers) {
        if (opts->n_layers < 0 || opts->n_layers > n) {
            k3_fail(e, K3_EINPUT, "--layers %d: the model has %d layers", opts->n_layers, n);
            goto fail;
        }
        n = opts->n_layers;
    }
    if (k3_st_open(&m->ix, dir, e) != K3_OK)
        goto fail;
    if (k3_weights_bind(&m->w, &m->cfg, m->ix, n, e) != K3_OK)
        goto fail;
    *out = m;
    return K3_OK;
fail:
    k3_model_close(m);
    return e->code;
}

void k3_model_close(k3_model *m)
{
    if (!m)
        return;
    k3_weights_free(&m->w);
    k3_st_close(m->ix);
    k3_config_free(&m->cfg);
    free(m);
}

uint32_t k3_model_vocab(const k3_model *m) { return (uint32_t)m->cfg.vocab_size; }
int k3_model_n_layers(const k3_model *m) { return m->w.n_layers; }
uint64_t k3_model_weight_bytes(const k3_model *m) { return m->w.bytes; }

int k3_model_is_eos(const k3_model *m, uint32_t id)
{
    for (int i = 0; i < m->cfg.n_eos; i++)
        if (m->cfg.eos_ids[i] == (int64_t)id)
            return 1;
    return 0;
}

/* Per-call working memory for T tokens. */
typedef struct {
    float *hin, *prefix, *h, *x, *a, *bank, *tmp, *score;
    const float **src;
    size_t nbank_max;
} work;

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
    for (size_t t = 0; t < T; t++)
        if (ids[t] >= V)
            return k3_fail(e, K3_EINPUT, "token id %u is outside the vocabulary (%zu ids)",
                           ids[t], V);
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

    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < H; i++)
            w.hin[t * H + i] = k3_bf16_to_f32(((const uint16_t *)W->embed.w)[(size_t)ids[t] * H + i]);

    size_t nbank = 0;
    int rc = K3_OK;
    for (size_t li = 0; li < L && rc == K3_OK; li++) {
        const k3_layer_weights *lw = &W->layers[li];
        /* 1-2: mix for attention; at a block boundary the incoming sum is banked. */
        int boundary = li % block == 0;
        for (size_t t = 0; t < T; t++) {
            float *hin = w.hin + t * H, *bank = w.bank + t * w.nbank_max * H;
            if (nbank > 0) {
                for (size_t b = 0; b < nbank; b++)
                    w.src[b] = bank + b * H;
                w.src[nbank] = hin;
                k3_attn_res(w.h + t * H, w.src, nbank + 1, lw->attn_res_norm, lw->attn_res_proj, H,
                         eps, w.tmp, w.score);
            } else {
                memcpy(w.h + t * H, hin, H * sizeof(float));
            }
            if (boundary)
                memcpy(bank + nbank * H, hin, H * sizeof(float));
        }
        if (boundary)
            nbank++;
        /* 3-4: attention; prefix = a (after a boundary) or h_in + a. */
        for (size_t t = 0; t < T; t++)
            k3_rmsnorm(w.x + t * H, w.h + t * H, lw->input_norm, H, eps);
        rc = lw->kind == K3_LAYER_KDA ? k3_kda_forward(m, s, (int)li, w.x, T, w.a, e)
                                      : k3_mla_forward(m, s, (int)li, w.x, T, w.a, e);
        if (rc != K3_OK)
            break;
        for (size_t i = 0; i < T * H; i++)
            w.prefix[i] = boundary ? w.a[i] : w.hin[i] + w.a[i];
        /* 5-6: mix for the MLP (the bank is never empty here), then the MLP. */
        for (size_t t = 0; t < T; t++) {
            float *bank = w.bank + t * w.nbank_max * H;
            for (size_t b = 0; b < nbank; b++)
                w.src[b] = bank + b * H;
            w.src[nbank] = w.prefix + t * H;
            k3_attn_res(w.h + t * H, w.src, nbank + 1, lw->mlp_res_norm, lw->mlp_res_proj, H, eps,
                     w.tmp, w.score);
            k3_rmsnorm(w.x + t * H, w.h + t * H, lw->post_norm, H, eps);
        }
        rc = lw->dense ? k3_dense_mlp_forward(m, (int)li, w.x, T, w.a, e)
                       : k3_moe_forward(m, (int)li, w.x, T, w.a, e);
        /* 7: the next layer's input. */
        for (size_t i = 0; i < T * H; i++)
            w.hin[i] = w.prefix[i] + w.a[i];
    }
    if (rc == K3_OK) {
        /* Final mix, norm and head, for the positions asked for. */
        size_t t0 = all_positions ? 0 : T - 1;
        for (size_t t = t0; t < T; t++) {
            float *bank = w.bank + t * w.nbank_max * H;
            for (size_t b = 0; b < nbank; b++)
                w.src[b] = bank + b * H;
            w.src[nbank] = w.hin + t * H;
            k3_attn_res(w.h + t * H, w.src, nbank + 1, W->out_res_norm, W->out_res_proj, H, eps,
                     w.tmp, w.score);
            k3_rmsnorm(w.x + t * H, w.h + t * H, W->final_norm, H, eps);
        }
        k3_matmul(&W->lm_head, w.x + t0 * H, T - t0, logits);
        s->pos += (int64_t)T;
    }
    free(buf);
    free(w.src);
    return rc;
}
