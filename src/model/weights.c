/* weights.c - see weights.h. */
#include "model/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

typedef struct {
    k3_weights *w;
    const k3_st_index *ix;
    k3_err *e;
    char name[256];
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

/* Finds b->name, checks dtype and shape (dims < 0 end the list), reads it. */
static void *load(binder *b, k3_dtype dt, int64_t d0, int64_t d1, int64_t d2)
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
    void *p = keep(b, k3_malloc(b->e, (size_t)t->nbytes, b->name));
    if (p && k3_st_read(b->ix, t, 0, t->nbytes, p, b->e) != K3_OK)
        return NULL;
    b->w->bytes += t->nbytes;
    return p;
}

static void set_name(binder *b, const char *prefix, int layer, const char *suffix)
{
    if (layer >= 0)
        snprintf(b->name, sizeof b->name, "language_model.model.layers.%d.%s", layer, suffix);
    else
        snprintf(b->name, sizeof b->name, "%s%s", prefix, suffix);
}

static k3_mat bf16_mat(binder *b, int layer, const char *suffix, int64_t rows, int64_t cols)
{
    k3_mat m = { K3_MAT_BF16, rows, cols, NULL, NULL };
    set_name(b, "", layer, suffix);
    m.w = load(b, K3_DT_BF16, rows, cols, -1);
    return m;
}

/* A BF16 or F32 vector of n (optionally [1,n]) converted to float. */
static float *vec(binder *b, int layer, const char *suffix, k3_dtype dt, int64_t n, int row)
{
    set_name(b, "language_model.", layer, suffix);
    void *raw = row ? load(b, dt, 1, n, -1) : load(b, dt, n, -1, -1);
    if (!raw)
        return NULL;
    if (dt == K3_DT_F32)
        return raw;
    float *f = keep(b, k3_malloc(b->e, (size_t)n * sizeof *f, b->name));
    if (f)
        for (int64_t i = 0; i < n; i++)
            f[i] = k3_bf16_to_f32(((const uint16_t *)raw)[i]);
    return f;
}

static k3_mat mxfp4_mat(binder *b, int layer, int expert, const char *which, int64_t rows,
                        int64_t cols)
{
    k3_mat m = { K3_MAT_MXFP4, rows, cols, NULL, NULL };
    char suffix[128];
    snprintf(suffix, sizeof suffix, "block_sparse_moe.experts.%d.%s.weight_packed", expert, which);
    set_name(b, "", layer, suffix);
    m.w = load(b, K3_DT_U8, rows, cols / 2, -1);
    snprintf(suffix, sizeof suffix, "block_sparse_moe.experts.%d.%s.weight_scale", expert, which);
    set_name(b, "", layer, suffix);
    m.scales = load(b, K3_DT_U8, rows, cols / 32, -1);
    if (m.scales) {
        int64_t bad = k3_mxfp4_find_nan_scale(m.scales, (size_t)(rows * (cols / 32)));
        if (bad >= 0)
            k3_fail(b->e, K3_EINPUT, "tensor %s: scale byte %lld is 255 (E8M0 NaN)", b->name,
                    (long long)bad);
    }
    return m;
}

static void bind_kda(binder *b, const k3_config *c, int i, k3_kda_weights *k)
{
    int64_t H = c->hidden_size, D = c->kda_head_dim, C = c->kda_num_heads * D;
    int64_t K = c->short_conv_kernel_size;
    static const char *conv_names[3] = { "self_attn.q_conv1d.weight", "self_attn.k_conv1d.weight",
                                         "self_attn.v_conv1d.weight" };
    k->q = bf16_mat(b, i, "self_attn.q_proj.weight", C, H);
    k->k = bf16_mat(b, i, "self_attn.k_proj.weight", C, H);
    k->v = bf16_mat(b, i, "self_attn.v_proj.weight", C, H);
    k->g = bf16_mat(b, i, "self_attn.g_proj.weight", C, H);
    k->o = bf16_mat(b, i, "self_attn.o_proj.weight", H, C);
    k->f_a = bf16_mat(b, i, "self_attn.f_a_proj.weight", D, H);
    k->f_b = bf16_mat(b, i, "self_attn.f_b_proj.weight", C, D);
    k->b = bf16_mat(b, i, "self_attn.b_proj.weight", c->kda_num_heads, H);
    for (int j = 0; j < 3; j++) {
        set_name(b, "", i, conv_names[j]);
        k->conv[j] = load(b, K3_DT_F32, C, 1, K);
    }
    set_name(b, "", i, "self_attn.A_log");
    k->A_log = load(b, K3_DT_F32, D, -1, -1);
    set_name(b, "", i, "self_attn.dt_bias");
    k->dt_bias = load(b, K3_DT_F32, C, -1, -1);
    set_name(b, "", i, "self_attn.o_norm.weight");
    k->o_norm = load(b, K3_DT_F32, D, -1, -1);
}

static void bind_mla(binder *b, const k3_config *c, int i, k3_mla_weights *m)
{
    int64_t H = c->hidden_size, NH = c->num_attention_heads;
    int64_t dq = c->qk_nope_head_dim + c->qk_rope_head_dim;
    m->q_a = bf16_mat(b, i, "self_attn.q_a_proj.weight", c->q_lora_rank, H);
    m->q_a_norm = vec(b, i, "self_attn.q_a_layernorm.weight", K3_DT_BF16, c->q_lora_rank, 0);
    m->q_b = bf16_mat(b, i, "self_attn.q_b_proj.weight", NH * dq, c->q_lora_rank);
    m->kv_a = bf16_mat(b, i, "self_attn.kv_a_proj_with_mqa.weight",
                       c->kv_lora_rank + c->qk_rope_head_dim, H);
    m->kv_a_norm = vec(b, i, "self_attn.kv_a_layernorm.weight", K3_DT_BF16, c->kv_lora_rank, 0);
    m->kv_b = bf16_mat(b, i, "self_attn.kv_b_proj.weight",
                       NH * (c->qk_nope_head_dim + c->v_head_dim), c->kv_lora_rank);
    m->g = bf16_mat(b, i, "self_attn.g_proj.weight", NH * c->v_head_dim, H);
    m->o = bf16_mat(b, i, "self_attn.o_proj.weight", H, NH * c->v_head_dim);
}

static void bind_moe(binder *b, const k3_config *c, int i, k3_moe_weights *m)
{
    int64_t H = c->hidden_size, E = c->num_experts, Z = c->routed_expert_hidden_size;
    int64_t F = c->moe_intermediate_size, S = c->moe_intermediate_size * c->num_shared_experts;
    m->router = bf16_mat(b, i, "block_sparse_moe.gate.weight", E, H);
    set_name(b, "", i, "block_sparse_moe.gate.e_score_correction_bias");
    m->router_bias = load(b, K3_DT_F32, E, -1, -1);
    m->latent_down = bf16_mat(b, i, "block_sparse_moe.routed_expert_down_proj.weight", Z, H);
    m->latent_up = bf16_mat(b, i, "block_sparse_moe.routed_expert_up_proj.weight", H, Z);
    if (c->latent_moe_use_norm)
        m->latent_norm = vec(b, i, "block_sparse_moe.routed_expert_norm.weight", K3_DT_BF16, Z, 0);
    if (S > 0) {
        m->shared_gate = bf16_mat(b, i, "block_sparse_moe.shared_experts.gate_proj.weight", S, H);
        m->shared_up = bf16_mat(b, i, "block_sparse_moe.shared_experts.up_proj.weight", S, H);
        m->shared_down = bf16_mat(b, i, "block_sparse_moe.shared_experts.down_proj.weight", H, S);
    }
    m->experts = keep(b, k3_calloc(b->e, (size_t)E, sizeof *m->experts, "expert table"));
    for (int x = 0; m->experts && x < E && !b->e->code; x++) {
        m->experts[x].w1 = mxfp4_mat(b, i, x, "w1", F, Z);
        m->experts[x].w3 = mxfp4_mat(b, i, x, "w3", F, Z);
        m->experts[x].w2 = mxfp4_mat(b, i, x, "w2", Z, F);
    }
}

int k3_weights_bind(k3_weights *w, const k3_config *c, const k3_st_index *ix, int n_layers,
                    k3_err *e)
{
    memset(w, 0, sizeof *w);
    binder b = { w, ix, e, "" };
    int64_t V = c->vocab_size, H = c->hidden_size;
    w->n_layers = n_layers;
    w->embed = bf16_mat(&b, -1, "language_model.model.embed_tokens.weight", V, H);
    if (c->tie_word_embeddings)
        w->lm_head = w->embed;
    else
        w->lm_head = bf16_mat(&b, -1, "language_model.lm_head.weight", V, H);
    w->final_norm = vec(&b, -1, "model.norm.weight", K3_DT_BF16, H, 0);
    w->out_res_norm = vec(&b, -1, "model.output_attn_res_norm.weight", K3_DT_BF16, H, 0);
    w->out_res_proj = vec(&b, -1, "model.output_attn_res_proj.weight", K3_DT_BF16, H, 1);
    w->layers = keep(&b, k3_calloc(e, (size_t)n_layers, sizeof *w->layers, "layers"));
    for (int i = 0; w->layers && i < n_layers && !e->code; i++) {
        k3_layer_weights *L = &w->layers[i];
        L->kind = c->layer_kind[i];
        L->dense = i < c->first_k_dense_replace;
        L->input_norm = vec(&b, i, "input_layernorm.weight", K3_DT_BF16, H, 0);
        L->post_norm = vec(&b, i, "post_attention_layernorm.weight", K3_DT_BF16, H, 0);
        L->attn_res_norm = vec(&b, i, "self_attention_res_norm.weight", K3_DT_BF16, H, 0);
        L->attn_res_proj = vec(&b, i, "self_attention_res_proj.weight", K3_DT_BF16, H, 1);
        L->mlp_res_norm = vec(&b, i, "mlp_res_norm.weight", K3_DT_BF16, H, 0);
        L->mlp_res_proj = vec(&b, i, "mlp_res_proj.weight", K3_DT_BF16, H, 1);
        if (L->kind == K3_LAYER_KDA)
            bind_kda(&b, c, i, &L->kda);
        else
            bind_mla(&b, c, i, &L->mla);
        if (L->dense) {
            L->gate = bf16_mat(&b, i, "mlp.gate_proj.weight", c->intermediate_size, H);
            L->up = bf16_mat(&b, i, "mlp.up_proj.weight", c->intermediate_size, H);
            L->down = bf16_mat(&b, i, "mlp.down_proj.weight", H, c->intermediate_size);
        } else {
            bind_moe(&b, c, i, &L->moe);
        }
    }
    if (e->code) {
        k3_weights_free(w);
        return e->code;
    }
    return K3_OK;
}

void k3_weights_free(k3_weights *w)
{
    for (size_t i = 0; i < w->nblocks; i++)
        free(w->blocks[i]);
    free(w->blocks);
    memset(w, 0, sizeof *w);
}
