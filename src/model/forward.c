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
#include "model/scratch.h"
#include "util/error.h"

/* k3_forward's working memory for one chunk of T tokens (H = hidden size),
 * carved from the model's arena in this order. Rows are token-major: row t
 * of a [T][H] buffer starts at t * H. */
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
    float *head;   /* [vocab] the last row's logits when the caller takes none */
    uint16_t *raw; /* [H] one streamed embedding row as read (BF16) */
    float *mm;     /* the matmul workspace (kernels.h) for threads, mm_cols and T */
    size_t mm_cols;       /* the widest input of any matrix k3_matmul gets */
    unsigned char *block; /* [block_bytes] the attention's, then the MLP's, scratch */
    uint64_t block_bytes; /* the largest k3_*_scratch of any layer's blocks */
    size_t nbank_max;     /* bank rows per token: ceil(L / block) + 1 >= the rows ever banked */
} work;

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Columns of the widest matrix the blocks multiply by (their inputs:
 * hidden, KDA's D and C, q_lora, MLA's heads x v, latent, expert, shared
 * and dense widths). */
static uint64_t widest(const k3_config *c)
{
#define U(x) ((x) > 0 ? (uint64_t)(x) : 0)
    const uint64_t v[] = { U(c->hidden_size), U(c->kda_head_dim),
                           k3_sat_mul(U(c->kda_num_heads), U(c->kda_head_dim)), U(c->q_lora_rank),
                           k3_sat_mul(U(c->num_attention_heads), U(c->v_head_dim)),
                           U(c->routed_expert_hidden_size), U(c->moe_intermediate_size),
                           k3_sat_mul(U(c->moe_intermediate_size), U(c->num_shared_experts)),
                           U(c->intermediate_size) };
#undef U
    uint64_t w = 0;
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        w = max_u64(w, v[i]);
    return w;
}

/* The one layout of work (model/scratch.h): sizes with base NULL. The
 * blocks run one after another, so they share one region, as large as the
 * largest of them over the first `layers` layers. */
static uint64_t fwd_layout(const k3_config *c, int64_t layers, uint64_t T, uint64_t end,
                           int threads, unsigned char *base, work *w)
{
    uint64_t H = c->hidden_size > 0 ? (uint64_t)c->hidden_size : 0;
    uint64_t V = c->vocab_size > 0 ? (uint64_t)c->vocab_size : 0;
    uint64_t L = layers > 0 ? (uint64_t)layers : 0, f = sizeof(float);
    uint64_t block = c->attn_res_block_size > 0 ? (uint64_t)c->attn_res_block_size : 1;
    uint64_t nbank = k3_sat_add(L / block + (L % block != 0), 1), TH = k3_sat_mul(T, H);
    int kda = 0, mla = 0; /* the attention kinds among the layers (both if unknown) */
    for (uint64_t i = 0; i < L && !(kda && mla); i++) {
        kda |= !c->layer_kind || c->layer_kind[i] == K3_LAYER_KDA;
        mla |= !c->layer_kind || c->layer_kind[i] == K3_LAYER_MLA;
    }
    uint64_t dense = c->first_k_dense_replace > 0 ? (uint64_t)c->first_k_dense_replace : 0;
    uint64_t need = max_u64(kda ? k3_kda_scratch(c, T) : 0, mla ? k3_mla_scratch(c, T, end) : 0);
    need = max_u64(need, L > 0 && dense > 0 ? k3_dense_mlp_scratch(c, T) : 0);
    need = max_u64(need, L > dense ? k3_moe_scratch(c, T) : 0);
    k3_carve a = { base, 0 };
    w->hin = k3_carve_take(&a, TH, f);
    w->prefix = k3_carve_take(&a, TH, f);
    w->h = k3_carve_take(&a, TH, f);
    w->x = k3_carve_take(&a, TH, f);
    w->a = k3_carve_take(&a, TH, f);
    w->bank = k3_carve_take(&a, k3_sat_mul(TH, nbank), f);
    w->tmp = k3_carve_take(&a, H, f);
    w->score = k3_carve_take(&a, k3_sat_add(nbank, 1), f);
    w->src = k3_carve_take(&a, k3_sat_add(nbank, 1), sizeof(const float *));
    w->head = k3_carve_take(&a, V, f);
    w->raw = k3_carve_take(&a, H, sizeof(uint16_t));
    w->mm_cols = (size_t)widest(c);
    w->mm = k3_carve_take(&a, k3_mm_ws_bytes(threads, w->mm_cols, (size_t)T), 1);
    w->block = k3_carve_take(&a, need, 1);
    w->block_bytes = need;
    w->nbank_max = (size_t)nbank;
    return a.used;
}

/* The layout grows with T from 2 tokens on; one token may need more than
 * two (moe.c: its expert outputs and SiTU inputs side by side), so the
 * need for "up to T" is the larger of T's and one token's. */
uint64_t k3_forward_scratch(const k3_config *c, int64_t layers, uint64_t T, uint64_t end,
                            int threads)
{
    work w;
    uint64_t n = fwd_layout(c, layers, T, end, threads, NULL, &w);
    return T > 1 ? max_u64(n, fwd_layout(c, layers, 1, end, threads, NULL, &w)) : n;
}

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

/* One chunk of T <= plan.max_batch checked ids, whose room in the state is
 * reserved and whose working memory fits the arena. */
static int forward_chunk(k3_model *m, k3_state *s, const uint32_t *ids, size_t T, float *logits,
                         int all_positions, k3_err *e)
{
    const k3_config *c = &m->cfg;
    const k3_weights *W = &m->w;
    size_t H = (size_t)c->hidden_size, V = (size_t)c->vocab_size;
    size_t block = (size_t)c->attn_res_block_size, L = (size_t)W->n_layers;
    float eps = (float)c->rms_norm_eps;
    work w;
    fwd_layout(c, W->n_layers, T, (uint64_t)s->pos + T, m->plan.threads, m->arena, &w);
    k3_mm_ws mm = { w.mm, m->plan.threads, w.mm_cols, T };
    k3_work wk = { w.block, (size_t)w.block_bytes, &mm };

    int rc = K3_OK;
    for (size_t t = 0; t < T && rc == K3_OK; t++)
        rc = k3_weights_embed_row(W, m->ix, ids[t], w.hin + t * H, w.raw, e);

    size_t nbank = 0;
    for (size_t li = 0; li < L && rc == K3_OK; li++) {
        if (m->on_layer)
            m->on_layer(m->on_layer_ctx, li, L);
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
        rc = lw->kind == K3_LAYER_KDA ? k3_kda_forward(c, lw, s, (int)li, w.x, T, w.a, &wk, e)
                                      : k3_mla_forward(c, lw, s, (int)li, w.x, T, w.a, &wk, e);
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
        rc = lw->dense ? k3_dense_mlp_forward(c, lw, w.x, T, w.a, &wk, e)
                       : k3_moe_block(c, &lw->moe, &src, w.x, T, w.a, &wk, e);
        k3_trunk_release(m->trunk, li);
        /* §4.3 step 7: the next layer's input. */
        for (size_t i = 0; i < T * H; i++)
            w.hin[i] = w.prefix[i] + w.a[i];
    }
    if (m->on_layer)
        m->on_layer(m->on_layer_ctx, L, L);
    if (rc == K3_OK) {
        /* Final mix, norm and head, for the positions asked for (only the
         * last when the caller takes no logits: it goes to w.head). */
        if (!logits) {
            all_positions = 0;
            logits = w.head;
        }
        size_t t0 = all_positions ? 0 : T - 1;
        for (size_t t = t0; t < T; t++) {
            bank_mix(&w, t, nbank, w.hin + t * H, W->out_res_norm, W->out_res_proj, H, eps);
            k3_rmsnorm(w.x + t * H, w.h + t * H, W->final_norm, H, eps);
        }
        const uint8_t *image = k3_trunk_acquire(m->trunk, L, e);
        if (image) {
            k3_mat head = k3_weights_lm_head(W, image);
            k3_matmul(&head, w.x + t0 * H, T - t0, logits, &mm);
            k3_trunk_release(m->trunk, L);
            /* A NaN or Inf logit means a weight (most have no checksum in
             * the release format) or a loaded state holds one; any token
             * chosen from such logits is arbitrary, so the run is invalid
             * rather than continued (tests/gates/72-fault-sweep.sh). */
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
    return rc;
}

/* Makes the arena hold a chunk of `chunk` tokens whose last attends to
 * `end` positions. The plan sized it for the planned context; a sequence
 * that goes past that (its KV cache grows past the plan too,
 * k3_state_reserve) grows it, for the state's capacity at once. */
static int arena_fit(k3_model *m, const k3_state *s, size_t chunk, uint64_t end, k3_err *e)
{
    const k3_config *c = &m->cfg;
    int64_t L = m->w.n_layers;
    if (k3_forward_scratch(c, L, chunk, end, m->plan.threads) <= m->arena_bytes)
        return K3_OK;
    uint64_t cap = s->kv_cap > 0 && (uint64_t)s->kv_cap > end ? (uint64_t)s->kv_cap : end;
    uint64_t need = k3_forward_scratch(c, L, (uint64_t)m->plan.max_batch, cap, m->plan.threads);
    unsigned char *grown = k3_arena_alloc(need, e);
    if (!grown)
        return e->code;
    free(m->arena);
    m->arena = grown;
    m->arena_bytes = (size_t)need;
    return K3_OK;
}

int k3_forward(k3_model *m, k3_state *s, const uint32_t *ids, size_t T, float *logits,
               int all_positions, k3_err *e)
{
    size_t V = (size_t)m->cfg.vocab_size;
    if (T == 0)
        return k3_fail(e, K3_EINPUT, "no tokens to process");
    if (!m->arena)
        return k3_fail(e, K3_EINPUT, "the model was opened to plan only: it cannot run");
    if (T > K3_MAX_CALL_TOKENS || s->pos > K3_MAX_POSITIONS - (int64_t)T) /* config.h */
        return k3_fail(e, K3_EINPUT, "%zu tokens at position %lld: over the limit of %zu tokens "
                       "a call, %lld positions", T, (long long)s->pos, K3_MAX_CALL_TOKENS,
                       (long long)K3_MAX_POSITIONS);
    for (size_t t = 0; t < T; t++)
        if (ids[t] >= V)
            return k3_fail(e, K3_EINPUT, "token id %u is outside the vocabulary (%zu ids)",
                           ids[t], V);
    size_t chunk = (size_t)m->plan.max_batch;
    if (k3_state_reserve(s, s->pos + (int64_t)T, e) != K3_OK ||
        arena_fit(m, s, T < chunk ? T : chunk, (uint64_t)s->pos + T, e) != K3_OK)
        return e->code;
    /* Pieces of at most max_batch tokens: the same bits as one call. */
    for (size_t t0 = 0; t0 < T; t0 += chunk) {
        size_t n = T - t0 < chunk ? T - t0 : chunk;
        float *out = logits && all_positions ? logits + t0 * V : logits;
        if (forward_chunk(m, s, ids + t0, n, out, all_positions, e) != K3_OK)
            return e->code;
    }
    return K3_OK;
}
