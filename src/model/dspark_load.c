/* dspark_load.c - a DSpark drafter's config.json and tensors (MODEL.md
 * §10.1, §10.2), checked against its target, read whole into memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/dspark_impl.h"
#include "util/error.h"
#include "util/json.h"

/* Every field a drafter's config.json must have: positive integers, then
 * positive numbers (MODEL.md §10.1). */
static const char *const INT_FIELDS[] = { "vocab_size", "hidden_size", "num_hidden_layers",
                                          "num_attention_heads", "q_lora_rank", "kv_lora_rank",
                                          "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                          "intermediate_size", "block_size", "mask_token_id",
                                          "markov_rank" };
static const char *const NUM_FIELDS[] = { "rms_norm_eps", "activation_situ_beta",
                                          "activation_situ_linear_beta", "rope_theta" };
#define N_INT (sizeof INT_FIELDS / sizeof *INT_FIELDS)
#define N_NUM (sizeof NUM_FIELDS / sizeof *NUM_FIELDS)

/* Each integer field's largest accepted value: bounds every size below
 * 2^62 (hidden, ranks and widths <= 2^16, vocab <= 2^24, layers <= 64). */
static const int64_t INT_MAX_OF[N_INT] = { (int64_t)1 << 24, 1 << 16, 64, 1024, 1 << 16,
                                           1 << 16, 4096, 4096, 4096, 1 << 18, 64,
                                           (int64_t)1 << 24, 4096 };

static int read_config(k3_dspark *d, const char *dir, k3_err *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    k3_json_doc *doc = k3_json_load(path, 1u << 20, e);
    if (!doc)
        return e->code;
    const k3_json *top = k3_json_root(doc), *v;
    int64_t iv[N_INT];
    double nv[N_NUM];
    int rc = K3_OK;
    v = k3_json_get(top, "model_type");
    if (!v || v->type != K3J_STRING || strcmp(v->str, "k3_dspark"))
        rc = k3_fail(e, K3_EINPUT, "%s: model_type must be \"k3_dspark\"", path);
    v = k3_json_get(top, "markov_head_type");
    if (rc == K3_OK && v && (v->type != K3J_STRING || strcmp(v->str, "vanilla")))
        rc = k3_fail(e, K3_EINPUT, "%s: markov_head_type: only \"vanilla\" is implemented",
                     path);
    for (size_t i = 0; i < N_INT && rc == K3_OK; i++) {
        v = k3_json_get(top, INT_FIELDS[i]);
        if (!v || v->type != K3J_NUMBER || !v->is_int || v->integer < 1 ||
            v->integer > INT_MAX_OF[i])
            rc = k3_fail(e, K3_EINPUT, "%s: %s must be an integer in 1..%lld", path,
                         INT_FIELDS[i], (long long)INT_MAX_OF[i]);
        else
            iv[i] = v->integer;
    }
    for (size_t i = 0; i < N_NUM && rc == K3_OK; i++) {
        v = k3_json_get(top, NUM_FIELDS[i]);
        if (!v || v->type != K3J_NUMBER || !(v->number > 0) || !isfinite(v->number))
            rc = k3_fail(e, K3_EINPUT, "%s: %s must be a positive number", path, NUM_FIELDS[i]);
        else
            nv[i] = v->number;
    }
    v = k3_json_get(top, "target_layer_ids");
    if (rc == K3_OK && (!v || v->type != K3J_ARRAY || v->count < 1 || v->count > K3_MAX_TAPS))
        rc = k3_fail(e, K3_EINPUT, "%s: target_layer_ids must list 1..%d layers", path,
                     K3_MAX_TAPS);
    for (size_t i = 0; rc == K3_OK && i < v->count; i++) {
        const k3_json *x = &v->items[i];
        if (x->type != K3J_NUMBER || !x->is_int || x->integer < 0 ||
            x->integer >= d->m->w.n_layers)
            rc = k3_fail(e, K3_EINPUT, "%s: target_layer_ids: %g is not a layer of the target "
                         "(0..%d)", path, x->number, d->m->w.n_layers - 1);
        else
            d->taps[d->ntaps++] = (int)x->integer;
    }
    k3_json_free(doc);
    if (rc != K3_OK)
        return rc;
    const k3_config *t = &d->m->cfg;
    if (iv[0] != t->vocab_size || iv[1] != t->hidden_size)
        return k3_fail(e, K3_EINPUT, "%s: vocab_size %lld and hidden_size %lld must be the "
                       "target's (%lld, %lld)", path, (long long)iv[0], (long long)iv[1],
                       (long long)t->vocab_size, (long long)t->hidden_size);
    if (iv[7] % 2)
        return k3_fail(e, K3_EINPUT, "%s: qk_rope_head_dim must be even (RoPE rotates pairs)",
                       path);
    if (iv[11] >= iv[0])
        return k3_fail(e, K3_EINPUT, "%s: mask_token_id is outside the vocabulary", path);
    k3_config *c = &d->c;
    c->vocab_size = iv[0];
    c->hidden_size = iv[1];
    c->num_hidden_layers = iv[2];
    c->num_attention_heads = iv[3];
    c->q_lora_rank = iv[4];
    c->kv_lora_rank = iv[5];
    c->qk_nope_head_dim = iv[6];
    c->qk_rope_head_dim = iv[7];
    c->v_head_dim = iv[8];
    c->intermediate_size = iv[9];
    d->block = iv[10];
    d->mask_id = iv[11];
    d->rank = iv[12];
    c->rms_norm_eps = nv[0];
    c->situ_beta = nv[1];
    c->situ_linear_beta = nv[2];
    d->rope_theta = nv[3];
    return K3_OK;
}

/* Binding: one index, every allocation kept in d->blocks. */
typedef struct {
    k3_dspark *d;
    const k3_st_index *ix;
    const char *where; /* the directory, for messages */
    k3_err *e;
} binder;

static void *keep(binder *b, size_t n)
{
    k3_dspark *d = b->d;
    if (b->e->code)
        return NULL;
    if (d->nblocks == d->capblocks) {
        size_t cap = d->capblocks ? 2 * d->capblocks : 64;
        void **g = realloc(d->blocks, cap * sizeof *g);
        if (!g) {
            k3_fail(b->e, K3_ERUNTIME, "out of memory binding the drafter");
            return NULL;
        }
        d->blocks = g;
        d->capblocks = cap;
    }
    void *p = k3_malloc(b->e, n ? n : 1, "drafter weights");
    if (p) {
        d->blocks[d->nblocks++] = p;
        d->bytes += n;
    }
    return p;
}

/* The BF16 tensor `name` of shape [rows, cols] (cols 0: a vector [rows]),
 * read whole. NULL with an error naming it when absent or of another
 * dtype or shape. */
static uint16_t *read_bf16(binder *b, const char *name, int64_t rows, int64_t cols)
{
    if (b->e->code)
        return NULL;
    const k3_tensor_info *t = k3_st_find(b->ix, name);
    uint32_t nd = cols ? 2 : 1;
    if (!t) {
        k3_fail(b->e, K3_EINPUT, "%s: no tensor %s", b->where, name);
        return NULL;
    }
    if (t->dtype != K3_DT_BF16 || t->ndim != nd || t->shape[0] != rows ||
        (cols && t->shape[1] != cols)) {
        k3_fail(b->e, K3_EINPUT, "%s: %s is %s with %u dims [%lld, %lld], needs BF16 [%lld%s%lld]",
                b->where, name, k3_dtype_name(t->dtype), t->ndim, (long long)t->shape[0],
                (long long)(t->ndim > 1 ? t->shape[1] : 0), (long long)rows, cols ? ", " : "",
                (long long)cols);
        return NULL;
    }
    uint16_t *p = keep(b, (size_t)t->nbytes);
    if (p && k3_st_read(b->ix, t, 0, t->nbytes, p, b->e) != K3_OK)
        return NULL;
    return p;
}

static k3_mat mat(binder *b, const char *name, int64_t rows, int64_t cols)
{
    k3_mat m = { K3_MAT_BF16, rows, cols, NULL, NULL, 0, 0, 0 };
    m.w = read_bf16(b, name, rows, cols);
    return m;
}

/* A norm weight as floats; every value must be finite. */
static float *vec(binder *b, const char *name, int64_t n)
{
    uint16_t *raw = read_bf16(b, name, n, 0);
    float *f = raw ? keep(b, (size_t)n * sizeof *f) : NULL;
    for (int64_t i = 0; f && i < n; i++)
        if (!isfinite(f[i] = k3_bf16_to_f32(raw[i]))) {
            k3_fail(b->e, K3_EINPUT, "%s: %s[%lld] is not finite", b->where, name, (long long)i);
            return NULL;
        }
    return f;
}

static void bind_layer(binder *b, int i, dspark_layer *L)
{
    const k3_config *c = &b->d->c;
    int64_t H = c->hidden_size, NA = c->num_attention_heads, R = c->kv_lora_rank;
    int64_t DQ = c->qk_nope_head_dim + c->qk_rope_head_dim, DV = c->v_head_dim;
    char n[160];
#define NAME(s) (snprintf(n, sizeof n, "layers.%d.%s", i, s), n)
    L->input_norm = vec(b, NAME("input_layernorm.weight"), H);
    L->post_norm = vec(b, NAME("post_attention_layernorm.weight"), H);
    k3_mla_weights *a = &L->mla;
    a->q_a = mat(b, NAME("self_attn.q_a_proj.weight"), c->q_lora_rank, H);
    a->q_a_norm = vec(b, NAME("self_attn.q_a_layernorm.weight"), c->q_lora_rank);
    a->q_b = mat(b, NAME("self_attn.q_b_proj.weight"), NA * DQ, c->q_lora_rank);
    a->kv_a = mat(b, NAME("self_attn.kv_a_proj_with_mqa.weight"), R + c->qk_rope_head_dim, H);
    a->kv_a_norm = vec(b, NAME("self_attn.kv_a_layernorm.weight"), R);
    a->kv_b = mat(b, NAME("self_attn.kv_b_proj.weight"), NA * (c->qk_nope_head_dim + DV), R);
    a->g = mat(b, NAME("self_attn.g_proj.weight"), NA * DV, H);
    a->o = mat(b, NAME("self_attn.o_proj.weight"), H, NA * DV);
    L->mlp.dense = 1;
    L->mlp.gate = mat(b, NAME("mlp.gate_proj.weight"), c->intermediate_size, H);
    L->mlp.up = mat(b, NAME("mlp.up_proj.weight"), c->intermediate_size, H);
    L->mlp.down = mat(b, NAME("mlp.down_proj.weight"), H, c->intermediate_size);
#undef NAME
}

/* The target's lm_head (or its embedding when tied), read whole. */
static void bind_head(binder *b)
{
    const k3_model *m = b->d->m;
    binder t = { b->d, m->ix, "the target", b->e };
    const char *name = m->cfg.tie_word_embeddings ? "language_model.model.embed_tokens.weight"
                                                  : "language_model.lm_head.weight";
    b->d->head = mat(&t, name, m->cfg.vocab_size, m->cfg.hidden_size);
}

int k3_dspark_load(k3_dspark *d, const char *dir, k3_err *e)
{
    if (read_config(d, dir, e) != K3_OK)
        return e->code;
    k3_st_index *ix = NULL;
    if (k3_st_open(&ix, dir, e) != K3_OK)
        return e->code;
    binder b = { d, ix, dir, e };
    const k3_config *c = &d->c;
    int64_t H = c->hidden_size, V = c->vocab_size;
    d->fc = mat(&b, "fc.weight", H, (int64_t)d->ntaps * H);
    d->hidden_norm = vec(&b, "hidden_norm.weight", H);
    d->final_norm = vec(&b, "norm.weight", H);
    d->mk_embed = mat(&b, "markov_head.embed.weight", V, d->rank);
    d->mk_proj = mat(&b, "markov_head.proj.weight", V, d->rank);
    d->layers = keep(&b, (size_t)c->num_hidden_layers * sizeof *d->layers);
    for (int64_t i = 0; d->layers && i < c->num_hidden_layers && !e->code; i++) {
        memset(&d->layers[i], 0, sizeof d->layers[i]);
        bind_layer(&b, (int)i, &d->layers[i]);
    }
    bind_head(&b);
    k3_st_close(ix);
    return e->code;
}

void k3_dspark_unload(k3_dspark *d)
{
    for (size_t i = 0; i < d->nblocks; i++)
        free(d->blocks[i]);
    free(d->blocks);
    d->blocks = NULL;
    d->nblocks = d->capblocks = 0;
}
