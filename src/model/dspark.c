/* dspark.c - the DSpark drafter's forward pass (MODEL.md §10.3), on the
 * model's kernels: k3_matmul for every projection, k3_mla_attend for the
 * attention (absorbed, as the target's MLA), the dense SiTU MLP block.
 *
 * A pass drafts the block after seq[0..n) while the target has consumed
 * seq[0..n-1) (P = n - 1 context positions):
 *   context row j < P: f_j = rms(fc . taps_j, hidden_norm); per layer its
 *     MLA row [rms(latent, kv_a_layernorm) | RoPE(rope key, j)] from
 *     kv_a_proj_with_mqa f_j, cached in the sequence's k3_dspark_seq;
 *   block rows k < B at positions P + k: h = embed([seq[n-1], mask, ...]);
 *     per layer h += MLA(rms(h, input_layernorm)) with the queries' rope
 *     parts rotated at P + k, over the P context rows and the B block rows
 *     (non-causal: every row sees all P + B), then h += MLP(rms(h,
 *     post_attention_layernorm));
 *   rows = lm_head rms(h, norm) (the target's head), the Markov bias added
 *     per row by k3_dspark_markov once the previous row's id is picked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mathfn.h"
#include "model/dspark_impl.h"
#include "model/scratch.h"
#include "util/error.h"

/* The buffers of one call for T rows (T = max(block, K3_DSPARK_ROWS)). */
typedef struct {
    float *F, *h, *x, *a; /* [T][H] tap features; block state; normed input; block output */
    float *QA;            /* [T][q_lora_rank] */
    float *Q;             /* [T][NA][nope + rope] */
    float *CKV;           /* [T][R + rope] context rows' latents before the norm */
    float *G, *O;         /* [T][NA][v] gate logits; attention outputs */
    unsigned char *mlp;   /* the MLP block's scratch */
    uint64_t mlp_bytes;
    float *bias;          /* [V] a Markov bias */
    float *emb;           /* [rank] a Markov embedding row; then [H] BF16 raw embedding row */
} ds_bufs;

static uint64_t ds_layout(const k3_dspark *d, unsigned char *base, ds_bufs *b)
{
    const k3_config *c = &d->c;
    uint64_t T = (uint64_t)(d->block > K3_DSPARK_ROWS ? d->block : K3_DSPARK_ROWS);
    uint64_t H = (uint64_t)c->hidden_size, NA = (uint64_t)c->num_attention_heads;
    uint64_t DQ = (uint64_t)(c->qk_nope_head_dim + c->qk_rope_head_dim);
    uint64_t KW = (uint64_t)(c->kv_lora_rank + c->qk_rope_head_dim), f = sizeof(float);
    uint64_t TO = T * NA * (uint64_t)c->v_head_dim;
    k3_carve a = { base, 0 };
    b->F = k3_carve_take(&a, T * H, f);
    b->h = k3_carve_take(&a, T * H, f);
    b->x = k3_carve_take(&a, T * H, f);
    b->a = k3_carve_take(&a, T * H, f);
    b->QA = k3_carve_take(&a, T * (uint64_t)c->q_lora_rank, f);
    b->Q = k3_carve_take(&a, T * NA * DQ, f);
    b->CKV = k3_carve_take(&a, T * KW, f);
    b->G = k3_carve_take(&a, TO, f);
    b->O = k3_carve_take(&a, TO, f);
    b->mlp_bytes = k3_dense_mlp_scratch(c, T);
    b->mlp = k3_carve_take(&a, b->mlp_bytes, 1);
    b->bias = k3_carve_take(&a, (uint64_t)c->vocab_size, f);
    b->emb = k3_carve_take(&a, (uint64_t)d->rank + H, f);
    return a.used;
}

int k3_dspark_open(k3_dspark **out, const char *dir, const k3_model *m, k3_err *e)
{
    *out = NULL;
    k3_dspark *d = k3_calloc(e, 1, sizeof *d, "drafter");
    if (!d)
        return e->code;
    d->m = m;
    if (k3_dspark_load(d, dir, e) != K3_OK) {
        k3_dspark_close(d);
        return e->code;
    }
    const k3_config *c = &d->c;
    size_t half = (size_t)c->qk_rope_head_dim / 2;
    size_t cols = (size_t)d->ntaps * (size_t)c->hidden_size;
    const size_t widths[] = { (size_t)c->q_lora_rank, (size_t)c->kv_lora_rank,
                              (size_t)(c->num_attention_heads * c->v_head_dim),
                              (size_t)c->intermediate_size, (size_t)d->rank };
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++)
        cols = widths[i] > cols ? widths[i] : cols;
    ds_bufs b;
    d->mm_cols = cols;
    d->mm_rows = (size_t)(d->block > K3_DSPARK_ROWS ? d->block : K3_DSPARK_ROWS);
    size_t mm = k3_mm_ws_bytes(m->plan.threads, d->mm_cols, d->mm_rows);
    uint64_t ws = ds_layout(d, NULL, &b);
    if (!(d->inv_freq = k3_malloc(e, (half ? half : 1) * sizeof *d->inv_freq, "drafter")) ||
        !(d->ws = k3_arena_alloc(ws, e)) || !(d->mm = (float *)(void *)k3_arena_alloc(mm, e))) {
        k3_dspark_close(d);
        return e->code;
    }
    /* theta^(-2i/rope), in double: the rotation's angles are pos * these */
    for (size_t i = 0; i < half; i++)
        d->inv_freq[i] =
            (float)pow(d->rope_theta, -2.0 * (double)i / (double)c->qk_rope_head_dim);
    *out = d;
    return K3_OK;
}

void k3_dspark_close(k3_dspark *d)
{
    if (!d)
        return;
    k3_dspark_unload(d);
    free(d->inv_freq);
    free(d->ws);
    free(d->mm);
    free(d);
}

int k3_dspark_taps(const k3_dspark *d, const int **layers)
{
    *layers = d->taps;
    return d->ntaps;
}

int k3_dspark_attach(const k3_dspark *d, k3_state *s, k3_err *e)
{
    if (s->m != d->m)
        return k3_fail(e, K3_EINPUT, "the drafter is for another model's states");
    if (s->pos)
        return k3_fail(e, K3_EINPUT, "the dspark drafter reads the hidden states of every "
                       "position fed: attach it to an empty state (not one loaded or fed "
                       "already)");
    return k3_state_set_taps(s, d->taps, d->ntaps, e);
}

size_t k3_dspark_block(const k3_dspark *d) { return (size_t)d->block; }

uint64_t k3_dspark_bytes(const k3_dspark *d) { return d->bytes; }

int k3_dspark_seq_new(k3_dspark_seq **out, const k3_dspark *d, k3_err *e)
{
    k3_dspark_seq *q = k3_calloc(e, 1, sizeof *q, "drafter cache");
    if (q && !(q->kv = k3_calloc(e, (size_t)d->c.num_hidden_layers, sizeof *q->kv,
                                 "drafter cache"))) {
        free(q);
        q = NULL;
    }
    if (q)
        q->layers = (int)d->c.num_hidden_layers;
    *out = q;
    return q ? K3_OK : e->code;
}

void k3_dspark_seq_free(k3_dspark_seq *q)
{
    if (!q)
        return;
    for (int i = 0; i < q->layers; i++)
        free(q->kv[i]);
    free(q->kv);
    free(q->ids);
    free(q->attend);
    free(q);
}

/* Room for `need` rows in every layer's cache (and the attention's scores). */
static int seq_reserve(const k3_dspark *d, k3_dspark_seq *q, int64_t need, k3_err *e)
{
    if (need <= q->cap)
        return K3_OK;
    int64_t cap = q->cap ? q->cap : 64;
    while (cap < need)
        cap *= 2;
    size_t KW = (size_t)(d->c.kv_lora_rank + d->c.qk_rope_head_dim);
    for (int i = 0; i < q->layers; i++) {
        float *g = realloc(q->kv[i], (size_t)cap * KW * sizeof *g);
        if (!g)
            return k3_fail(e, K3_ERUNTIME, "out of memory growing the drafter's cache");
        q->kv[i] = g;
    }
    uint32_t *ids = realloc(q->ids, (size_t)cap * sizeof *ids);
    if (ids)
        q->ids = ids;
    float *att = realloc(q->attend, ((size_t)cap + 2 * (size_t)d->c.kv_lora_rank) * sizeof *att);
    if (att)
        q->attend = att;
    if (!ids || !att)
        return k3_fail(e, K3_ERUNTIME, "out of memory growing the drafter's cache");
    q->cap = cap;
    return K3_OK;
}

/* RoPE, half-split (MODEL.md §10.3): pair (x_i, x_{i+D/2}) turned by pos * inv_freq[i]. */
static void rope(const k3_dspark *d, float *x, int64_t pos)
{
    size_t half = (size_t)d->c.qk_rope_head_dim / 2;
    for (size_t i = 0; i < half; i++) {
        double ang = (double)pos * (double)d->inv_freq[i];
        float cs = (float)cos(ang), sn = (float)sin(ang), a = x[i], b = x[i + half];
        x[i] = a * cs - b * sn;
        x[i + half] = a * sn + b * cs;
    }
}

/* One layer's cache rows from T rows of kv_a products (CKV) at positions pos0...:
 * the latent normed, the rope key rotated. */
static void cache_rows(const k3_dspark *d, const dspark_layer *L, const float *ckv, size_t T,
                       float *dst, int64_t pos0)
{
    size_t R = (size_t)d->c.kv_lora_rank, KW = R + (size_t)d->c.qk_rope_head_dim;
    for (size_t t = 0; t < T; t++) {
        float *row = dst + t * KW;
        k3_rmsnorm(row, ckv + t * KW, L->mla.kv_a_norm, R, 1e-6f);
        memcpy(row + R, ckv + t * KW + R, (KW - R) * sizeof *row);
        rope(d, row + R, pos0 + (int64_t)t);
    }
}

/* The cache rows of context positions [q->n, P) from the state's taps. */
static void extend_context(k3_dspark *d, k3_dspark_seq *q, const k3_state *s, int64_t P,
                           const ds_bufs *b, const k3_mm_ws *mm)
{
    const k3_config *c = &d->c;
    size_t H = (size_t)c->hidden_size, KW = (size_t)(c->kv_lora_rank + c->qk_rope_head_dim);
    float eps = (float)c->rms_norm_eps;
    while (q->n < P) {
        size_t T = (size_t)(P - q->n < K3_DSPARK_ROWS ? P - q->n : K3_DSPARK_ROWS);
        const float *taps = s->taps + (size_t)q->n * (size_t)d->ntaps * H;
        k3_matmul(&d->fc, taps, T, b->F, mm);
        for (size_t t = 0; t < T; t++)
            k3_rmsnorm(b->F + t * H, b->F + t * H, d->hidden_norm, H, eps);
        for (int i = 0; i < q->layers; i++) {
            const dspark_layer *L = &d->layers[i];
            k3_matmul(&L->mla.kv_a, b->F, T, b->CKV, mm);
            cache_rows(d, L, b->CKV, T, q->kv[i] + (size_t)q->n * KW, q->n);
        }
        memcpy(q->ids + q->n, s->ids + q->n, T * sizeof *q->ids);
        q->n += (int64_t)T;
    }
}

/* One layer over the B block rows in b->h (context rows [0, P) cached). */
static int block_layer(k3_dspark *d, k3_dspark_seq *q, int li, int64_t P, const ds_bufs *b,
                       const k3_mm_ws *mm, k3_err *e)
{
    const k3_config *c = &d->c;
    const dspark_layer *L = &d->layers[li];
    size_t B = (size_t)d->block, H = (size_t)c->hidden_size, QL = (size_t)c->q_lora_rank;
    size_t NA = (size_t)c->num_attention_heads, DN = (size_t)c->qk_nope_head_dim;
    size_t DQ = DN + (size_t)c->qk_rope_head_dim, DV = (size_t)c->v_head_dim;
    size_t KW = (size_t)(c->kv_lora_rank + c->qk_rope_head_dim);
    float eps = (float)c->rms_norm_eps;
    for (size_t t = 0; t < B; t++)
        k3_rmsnorm(b->x + t * H, b->h + t * H, L->input_norm, H, eps);
    k3_matmul(&L->mla.q_a, b->x, B, b->QA, mm);
    for (size_t t = 0; t < B; t++)
        k3_rmsnorm(b->QA + t * QL, b->QA + t * QL, L->mla.q_a_norm, QL, 1e-6f);
    k3_matmul(&L->mla.q_b, b->QA, B, b->Q, mm);
    for (size_t t = 0; t < B; t++)
        for (size_t hd = 0; hd < NA; hd++)
            rope(d, b->Q + (t * NA + hd) * DQ + DN, P + (int64_t)t);
    k3_matmul(&L->mla.kv_a, b->x, B, b->CKV, mm);
    cache_rows(d, L, b->CKV, B, q->kv[li] + (size_t)P * KW, P);
    k3_matmul(&L->mla.g, b->x, B, b->G, mm);
    for (size_t t = 0; t < B; t++) {
        float *o = b->O + t * NA * DV;
        k3_mla_attend(c, &L->mla.kv_b, q->kv[li], (size_t)P + B, b->Q + t * NA * DQ, o,
                      q->attend);
        for (size_t j = 0; j < NA * DV; j++)
            o[j] *= k3_sigmoidf(b->G[t * NA * DV + j]);
    }
    k3_matmul(&L->mla.o, b->O, B, b->a, mm);
    for (size_t i = 0; i < B * H; i++)
        b->h[i] += b->a[i];
    for (size_t t = 0; t < B; t++)
        k3_rmsnorm(b->x + t * H, b->h + t * H, L->post_norm, H, eps);
    k3_work wk = { b->mlp, (size_t)b->mlp_bytes, mm };
    if (k3_dense_mlp_forward(c, &L->mlp, b->x, B, b->a, &wk, NULL, NULL, e) != K3_OK)
        return e->code;
    for (size_t i = 0; i < B * H; i++)
        b->h[i] += b->a[i];
    return K3_OK;
}

int k3_dspark_forward(k3_dspark *d, k3_dspark_seq *q, const k3_state *s, const uint32_t *seq,
                      size_t n, float *rows, k3_err *e)
{
    const k3_config *c = &d->c;
    size_t H = (size_t)c->hidden_size, B = (size_t)d->block;
    if (n < 2)
        return k3_fail(e, K3_EINPUT, "the drafter needs a context: %zu ids", n);
    int64_t P = (int64_t)n - 1;
    if (s->m != d->m || s->ntaps != d->ntaps ||
        memcmp(s->tap_layer, d->taps, (size_t)d->ntaps * sizeof *d->taps))
        return k3_fail(e, K3_EINPUT, "the drafter reads a state of another model or taps");
    if (s->pos != P || memcmp(s->ids, seq, (size_t)P * sizeof *seq))
        return k3_fail(e, K3_EINPUT, "the target's state does not hold the %lld ids before the "
                       "anchor", (long long)P);
    if (seq_reserve(d, q, P + (int64_t)B, e) != K3_OK)
        return e->code;
    /* rows computed from taps of other ids (a rewound target) are recomputed */
    int64_t keep = 0;
    while (keep < q->n && keep < P && q->ids[keep] == seq[keep])
        keep++;
    q->n = keep;
    ds_bufs b;
    ds_layout(d, d->ws, &b);
    k3_mm_ws mm = { d->mm, d->m->plan.threads, d->mm_cols, d->mm_rows };
    extend_context(d, q, s, P, &b, &mm);
    for (size_t t = 0; t < B; t++) {
        uint32_t id = t == 0 ? seq[n - 1] : (uint32_t)d->mask_id;
        if (k3_weights_embed_row(&d->m->w, d->m->ix, id, b.h + t * H,
                                 (uint16_t *)(void *)b.emb, e) != K3_OK)
            return e->code;
    }
    for (int li = 0; li < q->layers; li++)
        if (block_layer(d, q, li, P, &b, &mm, e) != K3_OK)
            return e->code;
    for (size_t t = 0; t < B; t++)
        k3_rmsnorm(b.x + t * H, b.h + t * H, d->final_norm, H, (float)c->rms_norm_eps);
    k3_matmul(&d->head, b.x, B, rows, &mm);
    return K3_OK;
}

void k3_dspark_markov(k3_dspark *d, uint32_t prev, float *row)
{
    if (prev >= (uint32_t)d->c.vocab_size)
        return; /* not an id: no bias (the caller's ids are checked by the target) */
    ds_bufs b;
    ds_layout(d, d->ws, &b);
    const uint16_t *w1 = (const uint16_t *)d->mk_embed.w + (size_t)prev * (size_t)d->rank;
    for (int64_t i = 0; i < d->rank; i++)
        b.emb[i] = k3_bf16_to_f32(w1[i]);
    k3_matvec(&d->mk_proj, b.emb, b.bias);
    for (int64_t v = 0; v < d->c.vocab_size; v++)
        row[v] += b.bias[v];
}
