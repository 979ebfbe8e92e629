/* config.c - see config.h. */
#include "model/config.h"

#include <float.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/ckd.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"

/* Collects every problem before failing, so one run names them all. */
typedef struct {
    char missing[768];
    char bad[768];
    const char *path;
} problems;

/* Appends "prefixkey (why)" to a comma-separated list. */
static void note(char *buf, size_t cap, const char *prefix, const char *key, const char *why)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s%s%s%s%s", n ? ", " : "", prefix, key, why ? " (" : "",
             why ? why : "");
    n = strlen(buf);
    if (why && n + 1 < cap)
        snprintf(buf + n, cap - n, ")");
}

static const k3_json *need(problems *p, const k3_json *obj, const char *prefix, const char *key,
                           k3_json_type type)
{
    const k3_json *v = k3_json_get(obj, key);
    if (!v)
        note(p->missing, sizeof p->missing, prefix, key, NULL);
    else if (v->type != type && !(type == K3J_NUMBER && v->type == K3J_NUMBER))
        note(p->bad, sizeof p->bad, prefix, key, "wrong type");
    else
        return v;
    return NULL;
}

static int64_t need_int(problems *p, const k3_json *obj, const char *prefix, const char *key,
                        int64_t min)
{
    const k3_json *v = need(p, obj, prefix, key, K3J_NUMBER);
    if (!v)
        return 0;
    if (!v->is_int) {
        note(p->bad, sizeof p->bad, prefix, key, "not an integer");
        return 0;
    }
    if (v->integer < min) {
        note(p->bad, sizeof p->bad, prefix, key, min > 0 ? "must be positive" : "negative");
        return 0;
    }
    return v->integer;
}

static double need_num(problems *p, const k3_json *obj, const char *prefix, const char *key)
{
    const k3_json *v = need(p, obj, prefix, key, K3J_NUMBER);
    return v ? v->number : 0.0;
}

static int need_bool(problems *p, const k3_json *obj, const char *prefix, const char *key)
{
    const k3_json *v = need(p, obj, prefix, key, K3J_BOOL);
    return v ? v->boolean : 0;
}

static void need_str(problems *p, const k3_json *obj, const char *prefix, const char *key,
                     const char *expect)
{
    const k3_json *v = need(p, obj, prefix, key, K3J_STRING);
    if (v && strcmp(v->str, expect)) {
        char why[96];
        snprintf(why, sizeof why, "\"%.40s\" is not implemented; \"%s\" is", v->str, expect);
        note(p->bad, sizeof p->bad, prefix, key, why);
    }
}

/* Reads a one-based layer list into kinds[] (0-based), marking with kind. */
static void layer_list(problems *p, const k3_json *lac, const char *key, int64_t L,
                       uint8_t *seen, uint8_t kind, uint8_t *kinds)
{
    const k3_json *v = need(p, lac, "linear_attn_config.", key, K3J_ARRAY);
    if (!v || !kinds)
        return;
    for (size_t i = 0; i < v->count; i++) {
        const k3_json *x = &v->items[i];
        if (x->type != K3J_NUMBER || !x->is_int || x->integer < 1 || x->integer > L) {
            note(p->bad, sizeof p->bad, "linear_attn_config.", key,
                 "a layer index outside 1..num_hidden_layers");
            return;
        }
        if (seen[x->integer - 1]) {
            note(p->bad, sizeof p->bad, "linear_attn_config.", key,
                 "a layer listed twice or in both lists");
            return;
        }
        seen[x->integer - 1] = 1;
        kinds[x->integer - 1] = kind;
    }
}

static int read_fields(k3_config *c, const k3_json *top, problems *p, k3_err *e)
{
    /* Nested (the release) or flat: text fields at the top level. */
    const k3_json *t = k3_json_get(top, "text_config");
    if (!t)
        t = top;
    else if (t->type != K3J_OBJECT)
        return k3_fail(e, K3_EINPUT, "%s: text_config is not an object", p->path);
    c->vocab_size = need_int(p, t, "", "vocab_size", 1);
    c->hidden_size = need_int(p, t, "", "hidden_size", 1);
    c->intermediate_size = need_int(p, t, "", "intermediate_size", 1);
    c->num_hidden_layers = need_int(p, t, "", "num_hidden_layers", 1);
    c->num_attention_heads = need_int(p, t, "", "num_attention_heads", 1);
    c->q_lora_rank = need_int(p, t, "", "q_lora_rank", 1);
    c->kv_lora_rank = need_int(p, t, "", "kv_lora_rank", 1);
    c->qk_nope_head_dim = need_int(p, t, "", "qk_nope_head_dim", 1);
    c->qk_rope_head_dim = need_int(p, t, "", "qk_rope_head_dim", 0);
    c->v_head_dim = need_int(p, t, "", "v_head_dim", 1);
    c->first_k_dense_replace = need_int(p, t, "", "first_k_dense_replace", 0);
    c->num_experts = need_int(p, t, "", "num_experts", 1);
    c->num_experts_per_token = need_int(p, t, "", "num_experts_per_token", 1);
    c->num_shared_experts = need_int(p, t, "", "num_shared_experts", 0);
    c->moe_intermediate_size = need_int(p, t, "", "moe_intermediate_size", 1);
    c->routed_expert_hidden_size = need_int(p, t, "", "routed_expert_hidden_size", 1);
    c->attn_res_block_size = need_int(p, t, "", "attn_res_block_size", 1);
    c->bos_token_id = need_int(p, t, "", "bos_token_id", 0);
    c->pad_token_id = need_int(p, t, "", "pad_token_id", 0);
    c->latent_moe_use_norm = need_bool(p, t, "", "latent_moe_use_norm");
    c->moe_renormalize = need_bool(p, t, "", "moe_renormalize");
    c->tie_word_embeddings = need_bool(p, t, "", "tie_word_embeddings");
    c->situ_beta = need_num(p, t, "", "activation_situ_beta");
    c->situ_linear_beta = need_num(p, t, "", "activation_situ_linear_beta");
    c->rms_norm_eps = need_num(p, t, "", "rms_norm_eps");
    c->routed_scaling_factor = need_num(p, t, "", "routed_scaling_factor");
    need_str(p, t, "", "hidden_act", "situ");
    need_str(p, t, "", "moe_router_activation_func", "sigmoid");
    if (k3_json_get(t, "mla_use_nope") && !need_bool(p, t, "", "mla_use_nope"))
        note(p->bad, sizeof p->bad, "", "mla_use_nope",
             "only true is implemented: K3's MLA keys are unrotated");
    else if (!k3_json_get(t, "mla_use_nope"))
        note(p->missing, sizeof p->missing, "", "mla_use_nope", NULL);
    if (k3_json_get(t, "mla_use_output_gate") && !need_bool(p, t, "", "mla_use_output_gate"))
        note(p->bad, sizeof p->bad, "", "mla_use_output_gate", "only true is implemented");
    else if (!k3_json_get(t, "mla_use_output_gate"))
        note(p->missing, sizeof p->missing, "", "mla_use_output_gate", NULL);
    if (need_int(p, t, "", "moe_layer_freq", 1) > 1)
        note(p->bad, sizeof p->bad, "", "moe_layer_freq", "only 1 is implemented");
    if (need_int(p, t, "", "num_expert_group", 1) > 1)
        note(p->bad, sizeof p->bad, "", "num_expert_group",
             "grouped top-k is not implemented; 1 expected");
    if (need_int(p, t, "", "topk_group", 1) > 1)
        note(p->bad, sizeof p->bad, "", "topk_group", "1 expected");

    /* eos_token_id: an integer or a list of integers. */
    const k3_json *eos = k3_json_get(t, "eos_token_id");
    if (!eos) {
        note(p->missing, sizeof p->missing, "", "eos_token_id", NULL);
    } else if (eos->type == K3J_NUMBER && eos->is_int && eos->integer >= 0) {
        c->eos_ids[c->n_eos++] = eos->integer;
    } else if (eos->type == K3J_ARRAY && eos->count >= 1 && eos->count <= 4) {
        for (size_t i = 0; i < eos->count; i++) {
            if (eos->items[i].type != K3J_NUMBER || !eos->items[i].is_int ||
                eos->items[i].integer < 0) {
                note(p->bad, sizeof p->bad, "", "eos_token_id", "wrong type");
                break;
            }
            c->eos_ids[c->n_eos++] = eos->items[i].integer;
        }
    } else {
        note(p->bad, sizeof p->bad, "", "eos_token_id", "an id or a list of up to 4 ids expected");
    }

    const k3_json *lac = need(p, t, "", "linear_attn_config", K3J_OBJECT);
    if (lac) {
        c->kda_head_dim = need_int(p, lac, "linear_attn_config.", "head_dim", 1);
        c->kda_num_heads = need_int(p, lac, "linear_attn_config.", "num_heads", 1);
        c->short_conv_kernel_size =
            need_int(p, lac, "linear_attn_config.", "short_conv_kernel_size", 1);
        c->gate_lower_bound = need_num(p, lac, "linear_attn_config.", "gate_lower_bound");
        if (k3_json_get(lac, "use_full_rank_gate") &&
            !need_bool(p, lac, "linear_attn_config.", "use_full_rank_gate"))
            note(p->bad, sizeof p->bad, "linear_attn_config.", "use_full_rank_gate",
                 "only true is implemented");
        else if (!k3_json_get(lac, "use_full_rank_gate"))
            note(p->missing, sizeof p->missing, "linear_attn_config.", "use_full_rank_gate", NULL);
        int64_t L = c->num_hidden_layers;
        /* The layer count sizes the allocations below: refused over its
         * limit here, before them (check_ranges does not run then). */
        int sane = L > 0 && L <= K3_CFG_MAX_LAYERS;
        if (L > K3_CFG_MAX_LAYERS) {
            char why[96];
            snprintf(why, sizeof why, "%lld is over the limit %d", (long long)L,
                     K3_CFG_MAX_LAYERS);
            note(p->bad, sizeof p->bad, "", "num_hidden_layers", why);
        }
        uint8_t *seen = sane ? calloc((size_t)L, 1) : NULL;
        c->layer_kind = sane ? calloc((size_t)L, 1) : NULL;
        if (sane && (!seen || !c->layer_kind)) {
            free(seen);
            return k3_fail(e, K3_ERUNTIME, "out of memory reading %s", p->path);
        }
        layer_list(p, lac, "kda_layers", L, seen, K3_LAYER_KDA, c->layer_kind);
        layer_list(p, lac, "full_attn_layers", L, seen, K3_LAYER_MLA, c->layer_kind);
        if (seen && !p->bad[0] && !p->missing[0])
            for (int64_t i = 0; i < L; i++)
                if (!seen[i]) {
                    note(p->bad, sizeof p->bad, "linear_attn_config", "",
                         "a layer is in neither kda_layers nor full_attn_layers");
                    break;
                }
        free(seen);
    }

    /* The routed experts' format. */
    const k3_json *q = need(p, t, "", "quantization_config", K3J_OBJECT);
    if (q) {
        const k3_json *fmt = k3_json_get(q, "format");
        if (!fmt || fmt->type != K3J_STRING || strcmp(fmt->str, "mxfp4-pack-quantized"))
            note(p->bad, sizeof p->bad, "quantization_config.", "format",
                 "only mxfp4-pack-quantized is implemented");
        const k3_json *g = k3_json_get(k3_json_get(q, "config_groups"), "group_0");
        const k3_json *w = k3_json_get(g, "weights");
        const k3_json *gs = k3_json_get(w, "group_size"), *nb = k3_json_get(w, "num_bits");
        if (!gs || !gs->is_int || gs->integer != 32 || !nb || !nb->is_int || nb->integer != 4)
            note(p->bad, sizeof p->bad, "quantization_config.config_groups.group_0.", "weights",
                 "MXFP4 needs group_size 32 and num_bits 4");
    }
    return K3_OK;
}

/* The engine computes with these reals as floats: a double such as 1e-300
 * or 1e300 is positive and finite but becomes 0 or infinity there. */
static int float_finite(double x)
{
    return x >= -FLT_MAX && x <= FLT_MAX;
}

static int float_positive(double x)
{
    return float_finite(x) && (float)x > 0;
}

#define FIELD(f) offsetof(k3_config, f)

/* The largest value of every integer field (the smallest is need_int's).
 * Each is at least 8 times the release's (in brackets) and small enough
 * that the sizes k3_config_sizes_of derives stay far from 2^64 (config.h).
 * bos and pad (unused by the computation) and the eos ids must also be
 * inside the vocabulary; the relations between fields are checked after. */
static const struct {
    const char *prefix, *key;
    size_t field;
    int64_t max;
} LIMITS[] = {
    /* [163,840] ids are 32-bit; a logits row is vocab_size floats */
    { "", "vocab_size", FIELD(vocab_size), K3_CFG_MAX_VOCAB },
    /* [7,168] activations are T x hidden floats per bank entry */
    { "", "hidden_size", FIELD(hidden_size), (int64_t)1 << 16 },
    /* [33,792] dense MLP width */
    { "", "intermediate_size", FIELD(intermediate_size), (int64_t)1 << 19 },
    /* [93] a layer map and a run per layer are allocated up front */
    { "", "num_hidden_layers", FIELD(num_hidden_layers), K3_CFG_MAX_LAYERS },
    /* [96] MLA heads: queries are heads x (nope + rope) floats per token */
    { "", "num_attention_heads", FIELD(num_attention_heads), (int64_t)1 << 12 },
    /* [1,536] */
    { "", "q_lora_rank", FIELD(q_lora_rank), (int64_t)1 << 16 },
    /* [512] the KV cache holds kv_lora_rank + rope floats per position and layer */
    { "", "kv_lora_rank", FIELD(kv_lora_rank), (int64_t)1 << 14 },
    /* [128], [64], [128] per-head widths */
    { "", "qk_nope_head_dim", FIELD(qk_nope_head_dim), (int64_t)1 << 12 },
    { "", "qk_rope_head_dim", FIELD(qk_rope_head_dim), (int64_t)1 << 12 },
    { "", "v_head_dim", FIELD(v_head_dim), (int64_t)1 << 12 },
    /* [128] the recurrent state is num_heads x head_dim^2 floats per layer */
    { "linear_attn_config.", "head_dim", FIELD(kda_head_dim), (int64_t)1 << 12 },
    /* [96] also at most head_dim (A_log has head_dim slots) */
    { "linear_attn_config.", "num_heads", FIELD(kda_num_heads), (int64_t)1 << 12 },
    /* [4] taps per channel; the conv state keeps kernel - 1 inputs */
    { "linear_attn_config.", "short_conv_kernel_size", FIELD(short_conv_kernel_size), 64 },
    /* [1] also at most num_hidden_layers */
    { "", "first_k_dense_replace", FIELD(first_k_dense_replace), K3_CFG_MAX_LAYERS },
    /* [896] the router scores every expert of every token */
    { "", "num_experts", FIELD(num_experts), (int64_t)1 << 16 },
    /* [16] routing costs top-k^2 x experts per token; also at most num_experts */
    { "", "num_experts_per_token", FIELD(num_experts_per_token), 256 },
    /* [2] their width is moe_intermediate_size x this */
    { "", "num_shared_experts", FIELD(num_shared_experts), 64 },
    /* [3,072], [3,584] an expert is 3 x moe_intermediate x latent MXFP4 values */
    { "", "moe_intermediate_size", FIELD(moe_intermediate_size), (int64_t)1 << 16 },
    { "", "routed_expert_hidden_size", FIELD(routed_expert_hidden_size), (int64_t)1 << 16 },
    /* [12] a block longer than the model is one block */
    { "", "attn_res_block_size", FIELD(attn_res_block_size), K3_CFG_MAX_LAYERS },
    /* [163,584], [163,839] token ids */
    { "", "bos_token_id", FIELD(bos_token_id), K3_CFG_MAX_VOCAB - 1 },
    { "", "pad_token_id", FIELD(pad_token_id), K3_CFG_MAX_VOCAB - 1 },
};

static int64_t field_of(const k3_config *c, size_t field)
{
    int64_t v;
    memcpy(&v, (const char *)c + field, sizeof v);
    return v;
}

/* Ranges the engine relies on, checked once the fields are known. */
static void check_ranges(k3_config *c, problems *p)
{
    for (size_t i = 0; i < sizeof LIMITS / sizeof *LIMITS; i++) {
        int64_t v = field_of(c, LIMITS[i].field);
        if (v > LIMITS[i].max) {
            char why[96];
            snprintf(why, sizeof why, "%lld is over the limit %lld", (long long)v,
                     (long long)LIMITS[i].max);
            note(p->bad, sizeof p->bad, LIMITS[i].prefix, LIMITS[i].key, why);
        }
    }
    if (p->bad[0])
        return; /* the relations below and the sizes assume the limits */
    if (c->num_experts_per_token > c->num_experts)
        note(p->bad, sizeof p->bad, "", "num_experts_per_token", "exceeds num_experts");
    if (c->routed_expert_hidden_size % 32)
        note(p->bad, sizeof p->bad, "", "routed_expert_hidden_size",
             "MXFP4 needs a multiple of 32");
    if (c->moe_intermediate_size % 32)
        note(p->bad, sizeof p->bad, "", "moe_intermediate_size", "MXFP4 needs a multiple of 32");
    if (c->kda_num_heads > c->kda_head_dim)
        note(p->bad, sizeof p->bad, "linear_attn_config.", "num_heads",
             "exceeds head_dim: A_log holds one entry per head in head_dim slots");
    if (c->first_k_dense_replace > c->num_hidden_layers)
        note(p->bad, sizeof p->bad, "", "first_k_dense_replace", "exceeds num_hidden_layers");
    if (!float_positive(c->rms_norm_eps))
        note(p->bad, sizeof p->bad, "", "rms_norm_eps", "must be a positive float");
    if (!float_positive(c->situ_beta) || !float_positive(c->situ_linear_beta))
        note(p->bad, sizeof p->bad, "", "activation_situ_beta / activation_situ_linear_beta",
             "must be positive floats");
    if (!float_finite(c->routed_scaling_factor))
        note(p->bad, sizeof p->bad, "", "routed_scaling_factor", "outside the float range");
    if (!float_finite(c->gate_lower_bound))
        note(p->bad, sizeof p->bad, "linear_attn_config.", "gate_lower_bound",
             "outside the float range");
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] >= c->vocab_size)
            note(p->bad, sizeof p->bad, "", "eos_token_id", "outside the vocabulary");
    if (c->bos_token_id >= c->vocab_size)
        note(p->bad, sizeof p->bad, "", "bos_token_id", "outside the vocabulary");
    if (c->pad_token_id >= c->vocab_size)
        note(p->bad, sizeof p->bad, "", "pad_token_id", "outside the vocabulary");
    if (p->bad[0])
        return;
    k3_config_sizes z;
    k3_config_sizes_of(c, &z);
    char why[128];
    if (z.token_floats > K3_CFG_MAX_TOKEN_FLOATS) {
        snprintf(why, sizeof why, "a token's working memory of %llu floats is over the limit %llu",
                 (unsigned long long)z.token_floats, (unsigned long long)K3_CFG_MAX_TOKEN_FLOATS);
        note(p->bad, sizeof p->bad, "", "the dimensions", why);
    }
    if (z.model_bytes > K3_CFG_MAX_BYTES || z.state_bytes > K3_CFG_MAX_BYTES) {
        snprintf(why, sizeof why, "the %s would take over %llu bytes",
                 z.model_bytes > K3_CFG_MAX_BYTES ? "weights" : "per-sequence state",
                 (unsigned long long)K3_CFG_MAX_BYTES);
        note(p->bad, sizeof p->bad, "", "the dimensions", why);
    }
}

int k3_config_parse(k3_config *cfg, const char *text, size_t len, const char *path, k3_err *e)
{
    memset(cfg, 0, sizeof *cfg);
    char jerr[256];
    k3_json_doc *doc = k3_json_parse(text, len, jerr, sizeof jerr);
    if (!doc)
        return k3_fail(e, K3_EINPUT, "%s: not valid JSON: %s", path, jerr);
    problems p = { "", "", path };
    int rc = K3_OK;
    if (k3_json_root(doc)->type != K3J_OBJECT)
        rc = k3_fail(e, K3_EINPUT, "%s: not a JSON object", path);
    else
        rc = read_fields(cfg, k3_json_root(doc), &p, e);
    k3_json_free(doc);
    if (rc == K3_OK && !p.missing[0] && !p.bad[0])
        check_ranges(cfg, &p);
    if (rc == K3_OK && (p.missing[0] || p.bad[0]))
        rc = k3_fail(e, K3_EINPUT, "%s: %s%s%s%s", path,
                     p.missing[0] ? "missing required fields: " : "", p.missing,
                     p.missing[0] && p.bad[0] ? "; " : "",
                     p.bad);
    if (rc != K3_OK)
        k3_config_free(cfg);
    return rc;
}

int k3_config_load(k3_config *cfg, const char *dir, k3_err *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t len;
    char *text = k3_read_small_file(e, path, 16u << 20, &len);
    if (!text) {
        memset(cfg, 0, sizeof *cfg);
        return e->code;
    }
    int rc = k3_config_parse(cfg, text, len, path, e);
    free(text);
    return rc;
}

void k3_config_free(k3_config *cfg)
{
    free(cfg->layer_kind);
    cfg->layer_kind = NULL;
}
