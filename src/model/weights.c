/* weights.c - see weights.h. The shapes below are products of config
 * fields: each fits int64 with room to spare by the config's size contract
 * (model/config.h), and a tensor's byte count comes from its header, where
 * io/safetensors.c computed it with overflow checks. */
#include "model/weights.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* Matrices start at multiples of this in a run image (cache lines; also
 * keeps every k3_mat's rows where SIMD loads like them). */
#define IMAGE_ALIGN 64

typedef struct {
    k3_weights *w;
    const k3_st_index *ix;
    k3_err *e;
    char name[256];
    size_t run;              /* run being described */
    size_t capslots;
    size_t cappieces;
    const k3_tensor_info *loaded; /* the tensor load() read last */
} binder;

static void *keep(binder *b, void *p)
{
    k3_weights *w = b->w;
    if (!p)
        return NULL;
    if (w->nblocks == w->capblocks) {
        size_t cap = w->capblocks ? w->capblocks * 2 : 256;
        void **nb = realloc(w->blocks, cap * sizeof *nb);
        if (!nb) {
            free(p);
            k3_fail(b->e, K3_ERUNTIME, "out of memory binding weights");
            return NULL;
        }
        w->blocks = nb;
        w->capblocks = cap;
    }
    w->blocks[w->nblocks++] = p;
    return p;
}

/* Finds b->name and checks dtype and shape (dims < 0 end the list). */
static const k3_tensor_info *check(binder *b, k3_dtype dt, int64_t d0, int64_t d1, int64_t d2)
{
    if (b->e->code)
        return NULL;
    const k3_tensor_info *t = k3_st_find(b->ix, b->name);
    if (!t) {
        k3_fail(b->e, K3_EINPUT, "missing tensor %s", b->name);
        return NULL;
    }
    int64_t want[3] = { d0, d1, d2 };
    uint32_t nd = d2 >= 0 ? 3 : d1 >= 0 ? 2 : 1;
    int ok = t->dtype == dt && t->ndim == nd;
    for (uint32_t i = 0; ok && i < nd; i++)
        ok = t->shape[i] == want[i];
    if (!ok) {
        char got[128] = "", exp[128] = "";
        for (uint32_t i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                     (long long)t->shape[i]);
        for (uint32_t i = 0; i < nd; i++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%lld", i ? "," : "",
                     (long long)want[i]);
        k3_fail(b->e, K3_EINPUT, "tensor %s is %s [%s] but the config implies %s [%s]", b->name,
                k3_dtype_name(t->dtype), got, k3_dtype_name(dt), exp);
        return NULL;
    }
    return t;
}

/* Checks and reads b->name into memory. */
static void *load(binder *b, k3_dtype dt, int64_t d0, int64_t d1, int64_t d2)
{
    const k3_tensor_info *t = check(b, dt, d0, d1, d2);
    if (!t)
        return NULL;
    void *p = keep(b, k3_malloc(b->e, (size_t)t->nbytes, b->name));
    if (p && k3_st_read(b->ix, t, 0, t->nbytes, p, b->e) != K3_OK)
        return NULL;
    b->w->small_bytes += t->nbytes;
    b->loaded = t;
    return p;
}

/* The small vectors are read once and used for the whole run, where a NaN
 * or an infinity does not always reach the logits (a NaN router bias only
 * removes its expert from every choice): each value read must be finite. */
static float *finite(binder *b, float *f, int64_t n)
{
    for (int64_t i = 0; f && i < n; i++)
        if (!isfinite(f[i])) {
            k3_fail(b->e, K3_EINPUT, "%s: tensor %s: element %lld is %s; norms, biases and "
                    "the other small vectors must be finite", k3_st_shard_path(b->ix,
                    b->loaded->shard), b->name, (long long)i, isnan(f[i]) ? "NaN" : "infinite");
            return NULL;
        }
    return f;
}

/* An F32 tensor of the given dims (d1, d2 < 0 end the list), read whole. */
static float *f32(binder *b, int64_t d0, int64_t d1, int64_t d2)
{
    float *f = load(b, K3_DT_F32, d0, d1, d2);
    return f ? finite(b, f, (int64_t)(b->loaded->nbytes / sizeof *f)) : NULL;
}

static void set_name(binder *b, int layer, const char *suffix)
{
    if (layer >= 0)
        snprintf(b->name, sizeof b->name, "language_model.model.layers.%d.%s", layer, suffix);
    else
        snprintf(b->name, sizeof b->name, "language_model.%s", suffix);
}

/* Appends rows [lo, hi) of the 2-D BF16 tensor t as the next piece of the
 * current run, for the k3_mat at byte `field` of the view structure (rows
 * are contiguous, so they are one byte range of the tensor). */
static void add_piece(binder *b, const k3_tensor_info *t, int64_t lo, int64_t hi, size_t field)
{
    k3_weights *w = b->w;
    k3_run *r = &w->runs[b->run];
    if (r->npieces == b->cappieces || w->nslots[b->run] == b->capslots) {
        b->cappieces = b->cappieces ? 2 * b->cappieces : 32;
        b->capslots = b->cappieces;
        k3_run_piece *np = realloc(r->pieces, b->cappieces * sizeof *np);
        k3_mat_slot *ns = np ? realloc(w->slots[b->run], b->capslots * sizeof *ns) : NULL;
        if (np)
            r->pieces = np;
        if (!np || !ns) {
            k3_fail(b->e, K3_ERUNTIME, "out of memory binding weights");
            return;
        }
        w->slots[b->run] = ns;
    }
    uint64_t row_bytes = (uint64_t)t->shape[1] * 2; /* BF16 */
    uint64_t off = (r->bytes + IMAGE_ALIGN - 1) / IMAGE_ALIGN * IMAGE_ALIGN;
    k3_run_piece *p = &r->pieces[r->npieces++];
    memset(p, 0, sizeof *p);
    p->fd = k3_st_shard_fd(b->ix, t->shard);
    p->path = k3_st_shard_path(b->ix, t->shard);
    p->tensor = t->name;
    p->src_off = t->offset + (uint64_t)lo * row_bytes;
    p->len = (uint64_t)(hi - lo) * row_bytes;
    p->dst_off = off;
    k3_mat_slot *s = &w->slots[b->run][w->nslots[b->run]++];
    s->field = field;
    s->image_off = off;
    r->bytes = off + p->len;
}

/* Describes a BF16 matrix as the next piece of the current run, to be
 * found at byte `field` of the view structure. Under a row partition that
 * keeps shares (k3_mm_share, src/mpi), a matrix used only through
 * k3_matmul (may_share) is described as this process's rows only. */
static k3_mat bf16_mat_part(binder *b, int layer, const char *suffix, size_t field,
                            int64_t rows, int64_t cols, int may_share)
{
    k3_mat m = { K3_MAT_BF16, rows, cols, NULL, NULL, 0, 0, 0 };
    set_name(b, layer, suffix);
    const k3_tensor_info *t = check(b, K3_DT_BF16, rows, cols, -1);
    if (!t)
        return m;
    int64_t lo = 0, hi = rows;
    if (may_share && k3_mm_share(rows, cols, &lo, &hi)) {
        m.share = 1;
        m.held_lo = lo;
        m.held_hi = hi;
    }
    add_piece(b, t, lo, hi, field);
    return m;
}

static k3_mat bf16_mat(binder *b, int layer, const char *suffix, size_t field, int64_t rows,
                       int64_t cols)
{
    return bf16_mat_part(b, layer, suffix, field, rows, cols, 1);
}

/* Starts describing run `run`, called name (kept with the weights). */
static void begin_run(binder *b, size_t run, const char *name)
{
    char *kept = keep(b, k3_malloc(b->e, strlen(name) + 1, "run name"));
    b->run = run;
    b->cappieces = b->capslots = 0;
    if (kept)
        b->w->runs[run].name = strcpy(kept, name);
}

/* Starts run `run`, the part of layer i called "layer I/PART". */
static void begin_part(binder *b, size_t run, int i, const char *part)
{
    char name[48];
    snprintf(name, sizeof name, "layer %d/%s", i, part);
    begin_run(b, run, name);
}

/* Runs layer i is cut into (weights.h): a dense layer's MLP matrices are a
 * run each. */
static size_t layer_runs(const k3_config *c, int i, int subruns)
{
    return subruns && i < c->first_k_dense_replace ? 4 : 1;
}

/* Row blocks lm_head is cut into (weights.h). */
static size_t head_runs(const k3_config *c, int subruns)
{
    int64_t V = c->vocab_size, I = c->intermediate_size;
    return subruns && I > 0 && V > I ? (size_t)((V + I - 1) / I) : 1;
}

/* A BF16 or F32 vector of n (or [1,n] when row) read and converted to float. */
static float *vec(binder *b, int layer, const char *suffix, k3_dtype dt, int64_t n, int row)
{
    set_name(b, layer, suffix);
    void *raw = row ? load(b, dt, 1, n, -1) : load(b, dt, n, -1, -1);
    if (!raw || dt == K3_DT_F32)
        return finite(b, raw, n);
    float *f = keep(b, k3_malloc(b->e, (size_t)n * sizeof *f, b->name));
    if (f)
        for (int64_t i = 0; i < n; i++)
            f[i] = k3_bf16_to_f32(((const uint16_t *)raw)[i]);
    return finite(b, f, n);
}

#define FIELD(member) offsetof(k3_layer_weights, member)

static void bind_kda(binder *b, const k3_config *c, int i, k3_kda_weights *k)
{
    int64_t H = c->hidden_size, D = c->kda_head_dim, C = c->kda_num_heads * D;
    int64_t K = c->short_conv_kernel_size;
    static const char *conv_names[3] = { "self_attn.q_conv1d.weight", "self_attn.k_conv1d.weight",
                                         "self_attn.v_conv1d.weight" };
    k->q = bf16_mat(b, i, "self_attn.q_proj.weight", FIELD(kda.q), C, H);
    k->k = bf16_mat(b, i, "self_attn.k_proj.weight", FIELD(kda.k), C, H);
    k->v = bf16_mat(b, i, "self_attn.v_proj.weight", FIELD(kda.v), C, H);
    k->g = bf16_mat(b, i, "self_attn.g_proj.weight", FIELD(kda.g), C, H);
    k->o = bf16_mat(b, i, "self_attn.o_proj.weight", FIELD(kda.o), H, C);
    k->f_a = bf16_mat(b, i, "self_attn.f_a_proj.weight", FIELD(kda.f_a), D, H);
    k->f_b = bf16_mat(b, i, "self_attn.f_b_proj.weight", FIELD(kda.f_b), C, D);
    k->b = bf16_mat(b, i, "self_attn.b_proj.weight", FIELD(kda.b), c->kda_num_heads, H);
    for (int j = 0; j < 3; j++) {
        set_name(b, i, conv_names[j]);
        k->conv[j] = f32(b, C, 1, K);
    }
    set_name(b, i, "self_attn.A_log");
    k->A_log = f32(b, D, -1, -1);
    set_name(b, i, "self_attn.dt_bias");
    k->dt_bias = f32(b, C, -1, -1);
    set_name(b, i, "self_attn.o_norm.weight");
    k->o_norm = f32(b, D, -1, -1);
}

static void bind_mla(binder *b, const k3_config *c, int i, k3_mla_weights *m)
{
    int64_t H = c->hidden_size, NH = c->num_attention_heads;
    int64_t dq = c->qk_nope_head_dim + c->qk_rope_head_dim;
    m->q_a = bf16_mat(b, i, "self_attn.q_a_proj.weight", FIELD(mla.q_a), c->q_lora_rank, H);
    m->q_a_norm = vec(b, i, "self_attn.q_a_layernorm.weight", K3_DT_BF16, c->q_lora_rank, 0);
    m->q_b = bf16_mat(b, i, "self_attn.q_b_proj.weight", FIELD(mla.q_b), NH * dq, c->q_lora_rank);
    m->kv_a = bf16_mat(b, i, "self_attn.kv_a_proj_with_mqa.weight", FIELD(mla.kv_a),
                       c->kv_lora_rank + c->qk_rope_head_dim, H);
    m->kv_a_norm = vec(b, i, "self_attn.kv_a_layernorm.weight", K3_DT_BF16, c->kv_lora_rank, 0);
    /* Whole on every process: attention uses it per head (k3_mla_attend). */
    m->kv_b = bf16_mat_part(b, i, "self_attn.kv_b_proj.weight", FIELD(mla.kv_b),
                            NH * (c->qk_nope_head_dim + c->v_head_dim), c->kv_lora_rank, 0);
    m->g = bf16_mat(b, i, "self_attn.g_proj.weight", FIELD(mla.g), NH * c->v_head_dim, H);
    m->o = bf16_mat(b, i, "self_attn.o_proj.weight", FIELD(mla.o), H, NH * c->v_head_dim);
}

static void bind_moe(binder *b, const k3_config *c, int i, k3_moe_weights *m)
{
    int64_t H = c->hidden_size, E = c->num_experts, Z = c->routed_expert_hidden_size;
    int64_t S = c->moe_intermediate_size * c->num_shared_experts;
    m->router = bf16_mat(b, i, "block_sparse_moe.gate.weight", FIELD(moe.router), E, H);
    set_name(b, i, "block_sparse_moe.gate.e_score_correction_bias");
    m->router_bias = f32(b, E, -1, -1);
    m->latent_down = bf16_mat(b, i, "block_sparse_moe.routed_expert_down_proj.weight",
                              FIELD(moe.latent_down), Z, H);
    m->latent_up = bf16_mat(b, i, "block_sparse_moe.routed_expert_up_proj.weight",
                            FIELD(moe.latent_up), H, Z);
    if (c->latent_moe_use_norm)
        m->latent_norm = vec(b, i, "block_sparse_moe.routed_expert_norm.weight", K3_DT_BF16, Z, 0);
    if (S > 0) {
        m->shared_gate = bf16_mat(b, i, "block_sparse_moe.shared_experts.gate_proj.weight",
                                  FIELD(moe.shared_gate), S, H);
        m->shared_up = bf16_mat(b, i, "block_sparse_moe.shared_experts.up_proj.weight",
                                FIELD(moe.shared_up), S, H);
        m->shared_down = bf16_mat(b, i, "block_sparse_moe.shared_experts.down_proj.weight",
                                  FIELD(moe.shared_down), H, S);
    }
}

static void bind_layer(binder *b, const k3_config *c, int i, k3_layer_weights *L)
{
    int64_t H = c->hidden_size, I = c->intermediate_size;
    size_t run = b->w->layer_run[i];
    char name[48];
    snprintf(name, sizeof name, "layer %d", i);
    begin_run(b, run, name);
    L->kind = c->layer_kind[i];
    L->dense = i < c->first_k_dense_replace;
    L->input_norm = vec(b, i, "input_layernorm.weight", K3_DT_BF16, H, 0);
    L->post_norm = vec(b, i, "post_attention_layernorm.weight", K3_DT_BF16, H, 0);
    L->attn_res_norm = vec(b, i, "self_attention_res_norm.weight", K3_DT_BF16, H, 0);
    L->attn_res_proj = vec(b, i, "self_attention_res_proj.weight", K3_DT_BF16, H, 1);
    L->mlp_res_norm = vec(b, i, "mlp_res_norm.weight", K3_DT_BF16, H, 0);
    L->mlp_res_proj = vec(b, i, "mlp_res_proj.weight", K3_DT_BF16, H, 1);
    if (L->kind == K3_LAYER_KDA)
        bind_kda(b, c, i, &L->kda);
    else
        bind_mla(b, c, i, &L->mla);
    if (L->dense) {
        /* In use order (gate, up, down: moe.c), a run each when cut. */
        int cut = b->w->layer_run[i + 1] - run > 1;
        if (cut)
            begin_part(b, ++run, i, "gate");
        L->gate = bf16_mat(b, i, "mlp.gate_proj.weight", FIELD(gate), I, H);
        if (cut)
            begin_part(b, ++run, i, "up");
        L->up = bf16_mat(b, i, "mlp.up_proj.weight", FIELD(up), I, H);
        if (cut)
            begin_part(b, ++run, i, "down");
        L->down = bf16_mat(b, i, "mlp.down_proj.weight", FIELD(down), H, I);
    } else {
        bind_moe(b, c, i, &L->moe);
    }
}

/* lm_head: one run, or (cut) a run per row block (weights.h). */
static void bind_head(binder *b, const k3_config *c, size_t first, size_t blocks)
{
    k3_weights *w = b->w;
    int64_t V = c->vocab_size, H = c->hidden_size;
    const char *name = c->tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    w->head_rows = keep(b, k3_calloc(b->e, blocks + 1, sizeof *w->head_rows, "runs"));
    if (!w->head_rows)
        return;
    if (blocks == 1) {
        begin_run(b, first, "lm_head");
        w->lm_head = bf16_mat(b, -1, name, 0, V, H);
        w->head_rows[1] = V;
        return;
    }
    set_name(b, -1, name);
    const k3_tensor_info *t = check(b, K3_DT_BF16, V, H, -1);
    w->lm_head = (k3_mat){ K3_MAT_BF16, V, H, NULL, NULL, 0, 0, 0 };
    int64_t rows = (V + (int64_t)blocks - 1) / (int64_t)blocks;
    for (size_t j = 0; j < blocks && t && !b->e->code; j++) {
        char run[48];
        int64_t lo = (int64_t)j * rows, hi = lo + rows < V ? lo + rows : V;
        snprintf(run, sizeof run, "lm_head/%zu", j);
        begin_run(b, first + j, run);
        add_piece(b, t, lo, hi, 0);
        w->head_rows[j + 1] = hi;
    }
}

int k3_weights_bind(k3_weights *w, const k3_config *c, const k3_st_index *ix, int n_layers,
                    int subruns, k3_err *e)
{
    memset(w, 0, sizeof *w);
    binder b;
    memset(&b, 0, sizeof b);
    b.w = w;
    b.ix = ix;
    b.e = e;
    int64_t V = c->vocab_size, H = c->hidden_size;
    w->n_layers = n_layers;
    w->subruns = subruns;
    w->layer_run = keep(&b, k3_calloc(e, (size_t)n_layers + 1, sizeof *w->layer_run, "runs"));
    for (int i = 0; i < n_layers && w->layer_run; i++)
        w->layer_run[i + 1] = w->layer_run[i] + layer_runs(c, i, subruns);
    size_t blocks = head_runs(c, subruns);
    w->nruns = w->layer_run ? w->layer_run[n_layers] + blocks : 0;
    w->runs = keep(&b, k3_calloc(e, w->nruns, sizeof *w->runs, "runs"));
    w->slots = keep(&b, k3_calloc(e, w->nruns, sizeof *w->slots, "runs"));
    w->nslots = keep(&b, k3_calloc(e, w->nruns, sizeof *w->nslots, "runs"));
    w->layers = keep(&b, k3_calloc(e, (size_t)n_layers, sizeof *w->layers, "layers"));
    if (e->code)
        goto fail;

    set_name(&b, -1, "model.embed_tokens.weight");
    w->embed_info = check(&b, K3_DT_BF16, V, H, -1);
    w->embed = (k3_mat){ K3_MAT_BF16, V, H, NULL, NULL, 0, 0, 0 };
    bind_head(&b, c, w->layer_run[n_layers], blocks);
    w->final_norm = vec(&b, -1, "model.norm.weight", K3_DT_BF16, H, 0);
    w->out_res_norm = vec(&b, -1, "model.output_attn_res_norm.weight", K3_DT_BF16, H, 0);
    w->out_res_proj = vec(&b, -1, "model.output_attn_res_proj.weight", K3_DT_BF16, H, 1);
    for (int i = 0; i < n_layers && !e->code; i++)
        bind_layer(&b, c, i, &w->layers[i]);
    if (!e->code)
        return K3_OK;
fail:
    k3_weights_free(w);
    return e->code;
}

int k3_weights_load_embed(k3_weights *w, const k3_st_index *ix, k3_err *e)
{
    binder b;
    memset(&b, 0, sizeof b);
    b.w = w;
    b.ix = ix;
    b.e = e;
    snprintf(b.name, sizeof b.name, "%s", w->embed_info->name);
    w->embed.w = load(&b, K3_DT_BF16, w->embed.rows, w->embed.cols, -1);
    w->small_bytes -= w->embed_info->nbytes; /* counted by the plan as the embedding */
    return e->code;
}

void k3_weights_free(k3_weights *w)
{
    for (size_t r = 0; w->runs && r < w->nruns; r++)
        free(w->runs[r].pieces);
    for (size_t r = 0; w->slots && r < w->nruns; r++)
        free(w->slots[r]);
    for (size_t i = 0; i < w->nblocks; i++)
        free(w->blocks[i]);
    free(w->blocks);
    memset(w, 0, sizeof *w);
}

void k3_weights_run_view(const k3_weights *w, size_t r, const uint8_t *image,
                         k3_layer_weights *view)
{
    for (size_t s = 0; s < w->nslots[r]; s++) {
        k3_mat *m = (k3_mat *)((char *)view + w->slots[r][s].field);
        m->w = image + w->slots[r][s].image_off;
    }
}

k3_mat k3_weights_lm_head(const k3_weights *w, size_t j, const uint8_t *image)
{
    k3_mat m = w->lm_head; /* a share (src/mpi) only when lm_head is one run */
    m.rows = w->head_rows[j + 1] - w->head_rows[j];
    m.w = image + w->slots[w->layer_run[w->n_layers] + j][0].image_off;
    return m;
}

size_t k3_weights_head_runs(const k3_weights *w) { return w->nruns - w->layer_run[w->n_layers]; }

int k3_weights_embed_row(const k3_weights *w, const k3_st_index *ix, uint32_t id, float *out,
                         uint16_t *raw, k3_err *e)
{
    size_t H = (size_t)w->embed.cols;
    const uint16_t *row = raw;
    if (w->embed.w)
        row = (const uint16_t *)w->embed.w + (size_t)id * H;
    else if (k3_st_read(ix, w->embed_info, (uint64_t)id * H * 2, H * 2, raw, e) != K3_OK)
        return e->code;
    for (size_t i = 0; i < H; i++)
        out[i] = k3_bf16_to_f32(row[i]);
    return K3_OK;
}
