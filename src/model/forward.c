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
 * as in a one-token call, so logits are bit-identical either way. The T rows
 * may be several sequences' (k3_forward_multi): they share every matrix
 * product, expert read and head product, and each sequence's recurrences
 * run on its own state (kda.c, mla.c), so its bits are those of a call of
 * its ids alone. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
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
    float *head;   /* [min(T, K3_HEAD_ROWS)][vocab] last rows' logits, computed together */
    uint16_t *raw; /* [H] one streamed embedding row as read (BF16) */
    float *mm;     /* the matmul workspace (kernels.h) for threads, mm_cols and T */
    size_t mm_cols;       /* the widest input of any matrix k3_matmul gets */
    unsigned char *block; /* [block_bytes] the attention's, then the MLP's, scratch */
    uint64_t block_bytes; /* the largest k3_*_scratch of any layer's blocks */
    size_t nbank_max;     /* bank rows per token: ceil(L / block) + 1 >= the rows ever banked */
} work;

/* Rows of the lm_head product run together for sequences that need only
 * their last row's logits (a decode step of several sequences): the head's
 * weights are then traversed once per K3_HEAD_ROWS sequences. */
#define K3_HEAD_ROWS 8

/* Segments (sequences) a piece holds at most: a call of more sequences runs
 * as several pieces, which the bits do not depend on. */
#define K3_PIECE_SEQS 64

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
    uint64_t hr = T < K3_HEAD_ROWS ? (T > 0 ? T : 1) : K3_HEAD_ROWS;
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
    w->head = k3_carve_take(&a, k3_sat_mul(hr, V), f);
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

/* One piece: the segments seg[0..nseg) (model.h) of T <= plan.max_batch
 * rows in all, each with its checked ids, its logits destination (NULL, the
 * last row, or all rows when all[g]), room reserved in its state, and a
 * working memory that fits the arena (end: the largest pos + n). */
typedef struct {
    k3_seg seg[K3_PIECE_SEQS];
    const uint32_t *ids[K3_PIECE_SEQS];
    const float *const *embeds[K3_PIECE_SEQS]; /* NULL, or row overrides (k3_seq) */
    float *logits[K3_PIECE_SEQS];
    int all[K3_PIECE_SEQS];
    size_t nseg, T;
    uint64_t end;
} piece;

/* A NaN or Inf logit means a weight (most have no checksum in the release
 * format) or a loaded state holds one; any token chosen from such logits is
 * arbitrary, so the run is invalid rather than continued
 * (tests/gates/72-fault-sweep.sh). rows [rows][V] are the logits of the
 * state's positions from pos + first on. */
static int check_finite(const float *rows, size_t nrows, size_t V, const k3_state *s,
                        size_t first, k3_err *e)
{
    for (size_t i = 0; i < nrows * V; i++)
        if (!isfinite(rows[i]))
            return k3_fail(e, K3_EINVALID, "RUN INVALID: logit %zu of position %lld is not "
                           "finite: a weight or the loaded state holds NaN or Inf",
                           i % V, (long long)(s->pos + (int64_t)(first + i / V)));
    return K3_OK;
}

/* The final mix and norm of row t, into row r of w->x (r <= t: rows only
 * move towards the front, and w->x is not a source of the mix). */
static void final_row(work *w, const k3_weights *W, size_t t, size_t r, size_t nbank, size_t H,
                      float eps)
{
    bank_mix(w, t, nbank, w->hin + t * H, W->out_res_norm, W->out_res_proj, H, eps);
    k3_rmsnorm(w->x + r * H, w->h + t * H, W->final_norm, H, eps);
}

/* Acquires run r (model/weights.h) and asks the reader for the
 * ring_slots - 1 runs after it, in the pass's order (the last run of
 * lm_head is followed by layer 0's first: the next token's). */
static const uint8_t *take_run(k3_model *m, size_t r, k3_err *e)
{
    const uint8_t *image = k3_trunk_acquire(m->trunk, r, e);
    for (int ahead = 1; image && ahead <= m->plan.ring_slots - 1; ahead++)
        k3_trunk_prefetch(m->trunk, (r + (size_t)ahead) % m->w.nruns);
    return image;
}

/* The runs of one layer as its blocks consume them: in order, one held at
 * a time (a run's matrices are used before the next run's), each pointed
 * into `view` when it arrives. */
typedef struct {
    k3_model *m;
    k3_layer_weights *view;
    size_t next, end;   /* the layer's next run to acquire; its last + 1 */
    size_t held;        /* the run held, or SIZE_MAX */
} layer_runs;

static void layer_release(layer_runs *lr)
{
    if (lr->held != SIZE_MAX)
        k3_trunk_release(lr->m->trunk, lr->held);
    lr->held = SIZE_MAX;
}

/* Releases the run held and waits for the layer's next one. */
static int layer_next(layer_runs *lr, k3_err *e)
{
    if (lr->next >= lr->end)
        return k3_fail(e, K3_ERUNTIME, "internal: a matrix of a layer lies in none of its runs");
    layer_release(lr);
    const uint8_t *image = take_run(lr->m, lr->next, e);
    if (!image)
        return e->code;
    lr->held = lr->next++;
    k3_weights_run_view(&lr->m->w, lr->held, image, lr->view);
    return K3_OK;
}

/* k3_mat_wait (model.h): the layer's next runs until mat is resident. */
static int layer_wait(void *ctx, const k3_mat *mat, k3_err *e)
{
    layer_runs *lr = ctx;
    while (!mat->w)
        if (layer_next(lr, e) != K3_OK)
            return e->code;
    return K3_OK;
}

/* The head's input rows, in w->x: for each segment in order, all its rows
 * when it wants all, else its last. Row r's logits go to the returned row
 * (the caller's buffer, or the state's last row, which k3_state_commit
 * keeps); *span: how many rows from r are consecutive rows of that buffer
 * (the rest of a segment that wants all), 1 for a last row. */
static float *head_dest(const piece *p, size_t r, size_t V, size_t *span)
{
    for (size_t g = 0; g < p->nseg; g++) {
        size_t n = p->all[g] ? p->seg[g].n : 1;
        if (r < n) {
            *span = n - r;
            if (p->all[g])
                return p->logits[g] + r * V;
            return p->logits[g] ? p->logits[g] : p->seg[g].s->last;
        }
        r -= n;
    }
    *span = 0;
    return NULL;
}

/* One lm_head block (rows [c0, c0 + head.rows) of the logits) over the nr
 * input rows: each row's product goes straight into its logits when the
 * block is the whole head and the rows are consecutive there, else through
 * w->head ([hrows][V] floats: up to hrows * V / block rows a product) into
 * its columns of each row. Each logit is one k3_matvec dot of its row and
 * head row either way. */
static void head_block(const piece *p, work *w, const k3_mat *head, size_t c0, size_t nr,
                       size_t hrows, size_t H, size_t V, const k3_mm_ws *mm)
{
    size_t nb = (size_t)head->rows, cap = hrows * V / (nb ? nb : 1), span, n;
    for (size_t r = 0; r < nr; r += n) {
        float *d = head_dest(p, r, V, &span);
        if (nb == V && span > 1) {
            n = span;
            k3_matmul(head, w->x + r * H, n, d, mm);
            continue;
        }
        for (n = 1; r + n < nr && n < cap; n++)
            if (head_dest(p, r + n, V, &span) && nb == V && span > 1)
                break;
        k3_matmul(head, w->x + r * H, n, w->head, mm);
        for (size_t i = 0; i < n; i++)
            memcpy(head_dest(p, r + i, V, &span) + c0, w->head + i * nb, nb * sizeof(float));
    }
}

/* The output head of a piece (§4.9) and the states' commits: the final
 * mix and norm of every row that needs logits (head_dest's order), then
 * lm_head's runs (model/weights.h: one, or row blocks) in order, each
 * applied to all those rows while it is held; then each segment's logits
 * are checked and committed, the segments that want all rows first. */
static int head_and_commit(k3_model *m, const piece *p, work *w, size_t nbank,
                           const k3_mm_ws *mm, k3_err *e)
{
    const k3_weights *W = &m->w;
    size_t H = (size_t)m->cfg.hidden_size, V = (size_t)m->cfg.vocab_size;
    float eps = (float)m->cfg.rms_norm_eps;
    size_t nr = 0;
    for (size_t g = 0; g < p->nseg; g++) {
        const k3_seg *sg = &p->seg[g];
        for (size_t i = p->all[g] ? 0 : sg->n - 1; i < sg->n; i++)
            final_row(w, W, sg->t0 + i, nr++, nbank, H, eps);
    }
    size_t first = W->layer_run[W->n_layers], hrows = p->T < K3_HEAD_ROWS ? p->T : K3_HEAD_ROWS;
    if (p->seg[0].s->draft_trunk) {
        /* A drafter state's head: the draft trunk's lm_head, whole and in
         * memory (nothing to acquire). */
        k3_mat head = k3_draft_lm_head(m->draft);
        head_block(p, w, &head, 0, nr, hrows, H, V, mm);
    } else {
        for (size_t j = 0; j < k3_weights_head_runs(W); j++) {
            const uint8_t *image = take_run(m, first + j, e);
            if (!image)
                return e->code;
            k3_mat head = k3_weights_lm_head(W, j, image);
            head_block(p, w, &head, (size_t)W->head_rows[j], nr, hrows, H, V, mm);
            k3_trunk_release(m->trunk, first + j);
        }
    }
    int rc = K3_OK;
    for (int pass = 0; pass < 2; pass++)
        for (size_t g = 0, r = 0; g < p->nseg && rc == K3_OK; g++) {
            const k3_seg *sg = &p->seg[g];
            size_t span, n = p->all[g] ? sg->n : 1;
            const float *row = head_dest(p, r, V, &span);
            r += n;
            if (p->all[g] != (pass == 0))
                continue;
            rc = check_finite(row, n, V, sg->s, sg->n - n, e);
            if (rc == K3_OK)
                k3_state_commit(sg->s, p->ids[g], sg->n, row + (n - 1) * V);
        }
    return rc;
}

/* The taps of the states that keep them (k3_state_set_taps): layer li's
 * output rows, each at its sequence position (the state's pos + i: the
 * commit comes after the head), so a drafter reads them with no pass of
 * its own. */
static void keep_taps(const piece *p, const work *w, size_t li, size_t H)
{
    for (size_t g = 0; g < p->nseg; g++) {
        const k3_state *s = p->seg[g].s;
        for (int q = 0; q < s->ntaps; q++) {
            if ((size_t)s->tap_layer[q] != li)
                continue;
            for (size_t i = 0; i < p->seg[g].n; i++) {
                size_t at = ((size_t)s->pos + i) * (size_t)s->ntaps + (size_t)q;
                memcpy(s->taps + at * H, w->hin + (p->seg[g].t0 + i) * H, H * sizeof(float));
            }
        }
    }
}

/* The decoder stack over a piece's rows, layer-major: row t's arithmetic is
 * that of its token in a call of its sequence alone. */
static int forward_piece(k3_model *m, const piece *p, k3_err *e)
{
    const k3_config *c = &m->cfg;
    const k3_weights *W = &m->w;
    size_t H = (size_t)c->hidden_size, T = p->T;
    size_t block = (size_t)c->attn_res_block_size, L = (size_t)W->n_layers;
    float eps = (float)c->rms_norm_eps;
    work w;
    fwd_layout(c, W->n_layers, T, p->end, m->plan.threads, m->arena, &w);
    k3_mm_ws mm = { w.mm, m->plan.threads, w.mm_cols, T };
    k3_work wk = { w.block, (size_t)w.block_bytes, &mm };
    /* The routing: the checkpoint's, or a drafter state's fewer experts
     * (k3_state_set_route_k; every sequence of a call has the same, checked
     * by k3_forward_multi); nothing else reads the copy. */
    k3_config fewer;
    const k3_config *route = c;
    int route_k = p->seg[0].s->route_k;
    if (route_k > 0 && route_k < c->num_experts_per_token) {
        fewer = *c;
        fewer.num_experts_per_token = route_k;
        route = &fewer;
    }

    /* The matrices: the trunk's, or a drafter state's draft trunk
     * (k3_state_set_draft_trunk; the same for every sequence of a call,
     * checked by k3_forward_multi), which is in memory: nothing to acquire. */
    int draft = p->seg[0].s->draft_trunk;

    int rc = K3_OK;
    for (size_t g = 0; g < p->nseg && rc == K3_OK; g++)
        for (size_t i = 0; i < p->seg[g].n && rc == K3_OK; i++) {
            float *row = w.hin + (p->seg[g].t0 + i) * H;
            if (p->embeds[g] && p->embeds[g][i])
                memcpy(row, p->embeds[g][i], H * sizeof *row); /* an image row (k3_seq) */
            else
                rc = k3_weights_embed_row(W, m->ix, p->ids[g][i], row, w.raw, e);
        }

    size_t nbank = 0;
    for (size_t li = 0; li < L && rc == K3_OK; li++) {
        if (m->on_layer)
            m->on_layer(m->on_layer_ctx, li, L);
        /* The layer's first run (its attention); the reader loads the next
         * runs meanwhile. A dense layer's MLP matrices may be runs of
         * their own: k3_dense_mlp_forward waits for each (layer_wait). A
         * drafter's view is the draft trunk's, whole: nothing to wait for
         * (lr holds no run, layer_release does nothing). */
        k3_layer_weights view = W->layers[li];
        layer_runs lr = { m, &view, W->layer_run[li], W->layer_run[li + 1], SIZE_MAX };
        if (draft)
            k3_draft_layer_view(m->draft, W, (int)li, &view);
        else if ((rc = layer_next(&lr, e)) != K3_OK)
            break;
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
        rc = lw->kind == K3_LAYER_KDA
                 ? k3_kda_forward(c, lw, p->seg, p->nseg, (int)li, w.x, T, w.a, &wk, e)
                 : k3_mla_forward(c, lw, p->seg, p->nseg, (int)li, w.x, T, w.a, &wk, e);
        if (rc != K3_OK) {
            layer_release(&lr);
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
        rc = lw->dense ? k3_dense_mlp_forward(c, lw, w.x, T, w.a, &wk, layer_wait, &lr, e)
                       : k3_moe_block(route, &lw->moe, &src, w.x, T, w.a, &wk, e);
        layer_release(&lr);
        /* §4.3 step 7: the next layer's input. */
        for (size_t i = 0; i < T * H; i++)
            w.hin[i] = w.prefix[i] + w.a[i];
        keep_taps(p, &w, li, H);
    }
    if (m->on_layer)
        m->on_layer(m->on_layer_ctx, L, L);
    return rc == K3_OK ? head_and_commit(m, p, &w, nbank, &mm, e) : rc;
}

/* Makes the arena hold a chunk of `chunk` tokens whose last attends to
 * `end` positions. The plan sized it for the planned context; a sequence
 * that goes past that (its KV cache grows past the plan too,
 * k3_state_reserve) grows it, for the largest state's capacity (kv_cap)
 * at once. */
static int arena_fit(k3_model *m, int64_t kv_cap, size_t chunk, uint64_t end, k3_err *e)
{
    const k3_config *c = &m->cfg;
    int64_t L = m->w.n_layers;
    if (k3_forward_scratch(c, L, chunk, end, m->plan.threads) <= m->arena_bytes)
        return K3_OK;
    uint64_t cap = kv_cap > 0 && (uint64_t)kv_cap > end ? (uint64_t)kv_cap : end;
    uint64_t need = k3_forward_scratch(c, L, (uint64_t)m->plan.max_batch, cap, m->plan.threads);
    unsigned char *grown = k3_arena_alloc(need, e);
    if (!grown)
        return e->code;
    free(m->arena);
    m->arena = grown;
    m->arena_bytes = (size_t)need;
    return K3_OK;
}

/* The checks of one sequence of a call, before anything runs; embeds: its
 * row overrides or NULL (k3_seq). */
static int check_seq(const k3_model *m, const k3_seq *q, const float *const *embeds, size_t i,
                     size_t nseq, k3_err *e)
{
    size_t V = (size_t)m->cfg.vocab_size;
    const char *w = nseq > 1 ? "sequence " : "";
    char at[32] = "";
    if (nseq > 1)
        snprintf(at, sizeof at, "%zu: ", i);
    if (!q->state || q->state->m != m)
        return k3_fail(e, K3_EINPUT, "%s%sno state of this model", w, at);
    if (q->n == 0 || !q->ids)
        return k3_fail(e, K3_EINPUT, "%s%sno tokens to process", w, at);
    const k3_state *s = q->state;
    if (q->n > K3_MAX_CALL_TOKENS || s->pos > K3_MAX_POSITIONS - (int64_t)q->n) /* config.h */
        return k3_fail(e, K3_EINPUT, "%s%s%zu tokens at position %lld: over the limit of %zu "
                       "tokens a call, %lld positions", w, at, q->n, (long long)s->pos,
                       K3_MAX_CALL_TOKENS, (long long)K3_MAX_POSITIONS);
    for (size_t t = 0; t < q->n; t++)
        if (q->ids[t] >= V)
            return k3_fail(e, K3_EINPUT, "%s%stoken id %u is outside the vocabulary (%zu ids)",
                           w, at, q->ids[t], V);
    size_t H = (size_t)m->cfg.hidden_size;
    for (size_t t = 0; embeds && t < q->n; t++)
        for (size_t j = 0; embeds[t] && j < H; j++)
            if (!isfinite(embeds[t][j]))
                return k3_fail(e, K3_EINPUT, "%s%sthe input row given for position %zu is not "
                               "finite at %zu", w, at, t, j);
    const k3_spec_journal *jr = s->spec && s->spec->active ? s->spec : NULL;
    if (jr && (size_t)(s->pos - jr->pos0) + q->n > jr->cap) /* kda.c journals every id */
        return k3_fail(e, K3_EINPUT, "%s%sa speculative step journals %zu ids, not %zu", w, at,
                       jr->cap, (size_t)(s->pos - jr->pos0) + q->n);
    return K3_OK;
}

/* k3_forward_multi: each sequence's row overrides are its embeds (k3_seq). */
static int forward_multi(k3_model *m, const k3_seq *seqs, size_t nseq, k3_err *e)
{
    size_t V = (size_t)m->cfg.vocab_size;
    if (nseq == 0)
        return k3_fail(e, K3_EINPUT, "no sequences to advance");
    if (!m->arena)
        return k3_fail(e, K3_EINPUT, "the model was opened to plan only: it cannot run");
    uint64_t total = 0;
    for (size_t i = 0; i < nseq; i++) {
        if (check_seq(m, &seqs[i], seqs[i].embeds, i, nseq, e) != K3_OK)
            return e->code;
        for (size_t j = 0; j < i; j++)
            if (seqs[j].state == seqs[i].state)
                return k3_fail(e, K3_EINPUT, "sequences %zu and %zu share one state", j, i);
        if (seqs[i].state->route_k != seqs[0].state->route_k)
            return k3_fail(e, K3_EINPUT, "sequences 0 and %zu route to different numbers of "
                                         "experts (k3_state_set_route_k): not in one call", i);
        if (seqs[i].state->draft_trunk != seqs[0].state->draft_trunk)
            return k3_fail(e, K3_EINPUT, "sequences 0 and %zu use different trunks "
                                         "(k3_state_set_draft_trunk): not in one call", i);
        total = k3_sat_add(total, seqs[i].n);
    }
    size_t chunk = (size_t)m->plan.max_batch;
    uint64_t end = 0;
    int64_t cap = 0;
    for (size_t i = 0; i < nseq; i++) {
        k3_state *s = seqs[i].state;
        if (k3_state_reserve(s, s->pos + (int64_t)seqs[i].n, e) != K3_OK)
            return e->code;
        end = max_u64(end, (uint64_t)s->pos + seqs[i].n);
        cap = s->kv_cap > cap ? s->kv_cap : cap;
    }
    if (arena_fit(m, cap, total < chunk ? (size_t)total : chunk, end, e) != K3_OK)
        return e->code;
    /* Pieces of at most max_batch rows and K3_PIECE_SEQS sequences, taking
     * the sequences in order from a cursor (sequence i, its ids from off):
     * each sequence's ids run in order, so the bits are those of one call
     * per sequence. */
    piece p;
    size_t i = 0, off = 0;
    while (i < nseq) {
        p.nseg = 0;
        p.T = 0;
        p.end = 0;
        while (i < nseq && p.T < chunk && p.nseg < K3_PIECE_SEQS) {
            const k3_seq *q = &seqs[i];
            size_t n = q->n - off < chunk - p.T ? q->n - off : chunk - p.T;
            size_t g = p.nseg++;
            p.seg[g].s = q->state;
            p.seg[g].t0 = p.T;
            p.seg[g].n = n;
            p.ids[g] = q->ids + off;
            p.embeds[g] = q->embeds ? q->embeds + off : NULL;
            p.all[g] = q->logits && q->all_positions;
            /* A sequence's last row goes to the caller; earlier pieces' to w->head. */
            p.logits[g] = p.all[g] ? q->logits + off * V : off + n == q->n ? q->logits : NULL;
            p.end = max_u64(p.end, (uint64_t)q->state->pos + n);
            p.T += n;
            off += n;
            if (off == q->n) {
                i++;
                off = 0;
            }
        }
        if (forward_piece(m, &p, e) != K3_OK)
            return e->code;
    }
    return K3_OK;
}

int k3_forward(k3_model *m, k3_state *s, const uint32_t *ids, size_t T, float *logits,
               int all_positions, k3_err *e)
{
    k3_seq q = { s, ids, T, logits, all_positions, NULL };
    return forward_multi(m, &q, 1, e);
}

int k3_forward_multi(k3_model *m, const k3_seq *seqs, size_t nseq, k3_err *e)
{
    return forward_multi(m, seqs, nseq, e);
}

int k3_forward_embeds(k3_model *m, k3_state *s, const uint32_t *ids,
                      const float *const *embeds, size_t n, float *logits, int all_positions,
                      k3_err *e)
{
    k3_seq q = { s, ids, n, logits, all_positions, embeds };
    return forward_multi(m, &q, 1, e);
}
