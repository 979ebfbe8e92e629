/* vmodel.c - vision_config and the vision tensors (vmodel.h; VISION.md §1.1,
 * §2). The encoder itself is encode.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"
#include "util/os.h"
#include "vision/vmodel.h"

/* Bounds on the config's integers: far above the release's (VISION.md §1.1)
 * and low enough that every size below fits 64 bits with room. */
#define VCAP_WIDTH 65536   /* D, Q, I, T */
#define VCAP_LAYERS 256
#define VCAP_TABLE 512     /* H0, W0: RoPE's table side too */
#define VCAP_FRAMES 64

static int vint(const k3_json *vc, const char *key, int lo, int hi, int *out, char *bad,
                size_t cap)
{
    const k3_json *v = k3_json_get(vc, key);
    if (!v || v->type != K3J_NUMBER || !v->is_int || v->integer < lo || v->integer > hi) {
        size_t n = strlen(bad);
        snprintf(bad + n, cap - n, "%s%s (an integer in %d..%d)", n ? ", " : "", key, lo, hi);
        return 0;
    }
    *out = (int)v->integer;
    return 1;
}

static void vfixed(const k3_json *vc, const char *key, const char *str, int boolean, char *bad,
                   size_t cap)
{
    const k3_json *v = k3_json_get(vc, key);
    int ok = str ? (v && v->type == K3J_STRING && strcmp(v->str, str) == 0)
                 : (v && v->type == K3J_BOOL && v->boolean == boolean);
    if (!ok) {
        size_t n = strlen(bad);
        snprintf(bad + n, cap - n, "%s%s (must be %s%s%s)", n ? ", " : "", key, str ? "\"" : "",
                 str ? str : boolean ? "true" : "false", str ? "\"" : "");
    }
}

int k3_vision_config(const char *model_dir, k3_vcfg *c, k3_err *e)
{
    memset(c, 0, sizeof *c);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", model_dir) >= (int)sizeof path)
        return k3_fail(e, K3_EINPUT, "%s: path too long", model_dir);
    size_t len = 0;
    char *text = k3_read_small_file(e, path, 16u << 20, &len);
    if (!text)
        return e->code;
    char jerr[256];
    k3_json_doc *doc = k3_json_parse(text, len, jerr, sizeof jerr);
    free(text);
    if (!doc)
        return k3_fail(e, K3_EINPUT, "%s: %s", path, jerr);
    const k3_json *root = k3_json_root(doc), *vc = k3_json_get(root, "vision_config");
    const k3_json *tc = k3_json_get(root, "text_config");
    int rc = K3_OK;
    if (!vc || vc->type != K3J_OBJECT) {
        rc = k3_fail(e, K3_EINPUT, "%s: the checkpoint has no vision_config (not a vision model)",
                     path);
        goto done;
    }
    char bad[1024] = "";
    int mm = 0, th = 0;
    vint(vc, "patch_size", 1, 64, &c->p, bad, sizeof bad);
    vint(vc, "vt_hidden_size", 2, VCAP_WIDTH, &c->D, bad, sizeof bad);
    vint(vc, "vt_num_hidden_layers", 1, VCAP_LAYERS, &c->layers, bad, sizeof bad);
    vint(vc, "vt_num_attention_heads", 1, VCAP_WIDTH, &c->heads, bad, sizeof bad);
    vint(vc, "qkv_hidden_size", 1, VCAP_WIDTH, &c->Q, bad, sizeof bad);
    vint(vc, "vt_intermediate_size", 1, VCAP_WIDTH, &c->I, bad, sizeof bad);
    vint(vc, "init_pos_emb_height", 1, VCAP_TABLE, &c->H0, bad, sizeof bad);
    vint(vc, "init_pos_emb_width", 1, VCAP_TABLE, &c->W0, bad, sizeof bad);
    vint(vc, "init_pos_emb_time", 1, VCAP_FRAMES, &c->T_max, bad, sizeof bad);
    vint(vc, "mm_hidden_size", 1, VCAP_WIDTH, &mm, bad, sizeof bad);
    vint(vc, "text_hidden_size", 1, VCAP_WIDTH, &c->T, bad, sizeof bad);
    vfixed(vc, "merge_type", "sd2_tpool", 0, bad, sizeof bad);
    vfixed(vc, "mm_projector_type", "patchmergerv2", 0, bad, sizeof bad);
    vfixed(vc, "norm_type", "rmsnorm", 0, bad, sizeof bad);
    vfixed(vc, "mlp_type", "mlp2", 0, bad, sizeof bad);
    vfixed(vc, "pos_emb_type", "divided_fixed", 0, bad, sizeof bad);
    vfixed(vc, "pos_emb_interpolation_mode", "bilinear", 0, bad, sizeof bad);
    vfixed(vc, "activation_func", "gelu_pytorch_tanh", 0, bad, sizeof bad);
    vfixed(vc, "projector_hidden_act", "gelu", 0, bad, sizeof bad);
    vfixed(vc, "attn_bias", NULL, 0, bad, sizeof bad);
    vfixed(vc, "linear_bias", NULL, 0, bad, sizeof bad);
    vfixed(vc, "patch_embed_proj_bias", NULL, 0, bad, sizeof bad);
    const k3_json *mk = k3_json_get(vc, "merge_kernel_size");
    if (!mk || mk->type != K3J_ARRAY || mk->count != 2 || !mk->items[0].is_int ||
        mk->items[0].integer != 2 || !mk->items[1].is_int || mk->items[1].integer != 2)
        snprintf(bad + strlen(bad), sizeof bad - strlen(bad), "%smerge_kernel_size (must be "
                 "[2, 2])", bad[0] ? ", " : "");
    const k3_json *eps = k3_json_get(vc, "projector_ln_eps");
    if (!eps || eps->type != K3J_NUMBER || !(eps->number > 0) || !(eps->number < 1))
        snprintf(bad + strlen(bad), sizeof bad - strlen(bad), "%sprojector_ln_eps (a number "
                 "in (0, 1))", bad[0] ? ", " : "");
    else
        c->eps_p = (float)eps->number;
    if (!bad[0]) {
        const char *why = NULL;
        if (c->Q % c->heads)
            why = "qkv_hidden_size is not a multiple of vt_num_attention_heads";
        else if ((c->Q / c->heads) % 4)
            why = "the head width qkv_hidden_size / vt_num_attention_heads must be a multiple "
                  "of 4 (2D RoPE, VISION.md §5.4)";
        else if (c->D % 2)
            why = "vt_hidden_size must be even (time embedding, VISION.md §5.3)";
        else if (mm != c->D)
            why = "mm_hidden_size must equal vt_hidden_size (VISION.md §5.7)";
        if (why)
            snprintf(bad, sizeof bad, "%s", why);
    }
    if (!bad[0]) {
        const k3_json *hs = k3_json_get(tc ? tc : root, "hidden_size");
        if (hs && hs->is_int)
            th = (int)hs->integer;
        if (th != c->T)
            snprintf(bad, sizeof bad, "text_hidden_size %d differs from text_config.hidden_size "
                     "%d", c->T, th);
    }
    if (bad[0]) {
        rc = k3_fail(e, K3_EINPUT, "%s: vision_config: %s", path, bad);
        goto done;
    }
    c->d = c->Q / c->heads;
    c->M = 4 * c->D;
    const k3_json *mid = k3_json_get(root, "media_placeholder_token_id");
    c->media_id = mid && mid->is_int ? mid->integer : -1;
done:
    k3_json_free(doc);
    return rc;
}

/* One tensor of §2.2: name, its expected shape, and where it goes. */
typedef struct vtensor {
    char name[96];
    int ndim;
    int64_t shape[4];
    k3_mat *mat;     /* a BF16 matrix [shape[0], product of the rest] */
    float **vec;     /* or a vector/table decoded to float */
} vtensor;

static void vt_set(vtensor *t, const char *name, int ndim, int64_t a, int64_t b, int64_t c,
                   int64_t d, k3_mat *m, float **f)
{
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = a;
    t->shape[1] = b;
    t->shape[2] = c;
    t->shape[3] = d;
    t->mat = m;
    t->vec = f;
}

static int64_t vt_count(const vtensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

uint64_t k3_vision_tensor_bytes(const k3_vcfg *c)
{
    uint64_t D = (uint64_t)c->D, Q = (uint64_t)c->Q, I = (uint64_t)c->I, M = (uint64_t)c->M;
    uint64_t T = (uint64_t)c->T, p = (uint64_t)c->p;
    uint64_t block = 2 * D + 3 * Q * D + D * Q + 2 * I * D;
    uint64_t n = D * 3 * p * p + (uint64_t)c->H0 * c->W0 * D + (uint64_t)c->layers * block + D +
                 M * M + T * M + T;
    return 2 * n; /* the config's caps keep this far inside 64 bits */
}

void k3_vision_close(k3_vision *v)
{
    if (!v)
        return;
    free(v->pos);
    free(v->final_norm);
    free(v->post_norm);
    if (v->layer)
        for (int i = 0; i < v->cfg.layers; i++) {
            free(v->layer[i].norm0);
            free(v->layer[i].norm1);
        }
    free(v->layer);
    k3_os_aligned_free(v->arena);
    free(v);
}

/* The tensors of §2.2 for v's config into ts[] (5 + 6·L_v + 4 of them),
 * each pointing at where it goes in v; returns the count. */
static size_t tensor_table(k3_vision *v, vtensor *ts)
{
    const k3_vcfg *c = &v->cfg;
    size_t k = 0;
    vt_set(&ts[k++], "vision_tower.patch_embed.proj.weight", 4, c->D, 3, c->p, c->p, &v->patch,
           NULL);
    vt_set(&ts[k++], "vision_tower.patch_embed.pos_emb.weight", 3, c->H0, c->W0, c->D, 0, NULL,
           &v->pos);
    for (int i = 0; i < c->layers; i++) {
        char b[96];
        k3_vlayer *L = &v->layer[i];
#define VNAME(s) (snprintf(b, sizeof b, "vision_tower.encoder.blocks.%d." s, i), b)
        vt_set(&ts[k++], VNAME("norm0.weight"), 1, c->D, 0, 0, 0, NULL, &L->norm0);
        vt_set(&ts[k++], VNAME("wqkv.weight"), 2, 3 * (int64_t)c->Q, c->D, 0, 0, &L->wqkv, NULL);
        vt_set(&ts[k++], VNAME("wo.weight"), 2, c->D, c->Q, 0, 0, &L->wo, NULL);
        vt_set(&ts[k++], VNAME("norm1.weight"), 1, c->D, 0, 0, 0, NULL, &L->norm1);
        vt_set(&ts[k++], VNAME("mlp.fc0.weight"), 2, c->I, c->D, 0, 0, &L->fc0, NULL);
        vt_set(&ts[k++], VNAME("mlp.fc1.weight"), 2, c->D, c->I, 0, 0, &L->fc1, NULL);
#undef VNAME
    }
    vt_set(&ts[k++], "vision_tower.encoder.final_layernorm.weight", 1, c->D, 0, 0, 0, NULL,
           &v->final_norm);
    vt_set(&ts[k++], "mm_projector.proj.0.weight", 2, c->M, c->M, 0, 0, &v->p0, NULL);
    vt_set(&ts[k++], "mm_projector.proj.2.weight", 2, c->T, c->M, 0, 0, &v->p2, NULL);
    vt_set(&ts[k++], "mm_projector.post_norm.weight", 1, c->T, 0, 0, 0, NULL, &v->post_norm);
    return k;
}

/* Finds every tensor of ts[0..nt) in ix with its dtype and shape checked
 * (info[i]; K3_EINPUT naming the first missing or mismatched one), adding
 * up the arena the matrices take (*mat_bytes) and v->weight_bytes. */
static int bind(k3_vision *v, k3_st_index *ix, const vtensor *ts, size_t nt,
                const k3_tensor_info **info, const char *model_dir, uint64_t *mat_bytes,
                k3_err *e)
{
    int rc = K3_OK;
    *mat_bytes = 0;
    for (size_t i = 0; i < nt && !rc; i++) {
        const k3_tensor_info *ti = k3_st_find(ix, ts[i].name);
        int same = ti && ti->dtype == K3_DT_BF16 && (int)ti->ndim == ts[i].ndim;
        for (int j = 0; same && j < ts[i].ndim; j++)
            same = ti->shape[j] == ts[i].shape[j];
        if (!ti)
            rc = k3_fail(e, K3_EINPUT, "%s: vision tensor %s missing", model_dir, ts[i].name);
        else if (!same)
            rc = k3_fail(e, K3_EINPUT, "%s: %s is %s with %u dims [%lld, ...], needs BF16 [%lld"
                         "%s] (docs/VISION.md §2.2)", k3_st_shard_path(ix, ti->shard),
                         ts[i].name, k3_dtype_name(ti->dtype), ti->ndim,
                         (long long)ti->shape[0], (long long)ts[i].shape[0],
                         ts[i].ndim > 1 ? ", ..." : "");
        info[i] = ti;
        if (!rc && ts[i].mat)
            *mat_bytes += (ti->nbytes + 63) / 64 * 64;
        if (ti)
            v->weight_bytes += ti->nbytes;
    }
    return rc;
}

/* The config, the tensor table and the checkpoint's index, every tensor
 * bound: what k3_vision_open and k3_vision_probe share. *ts, *info and *ix
 * are the caller's to free (k3_st_close) also after a failure. */
static int prepare(k3_vision *v, const char *model_dir, vtensor **ts,
                   const k3_tensor_info ***info, k3_st_index **ix, size_t *nt,
                   uint64_t *mat_bytes, k3_err *e)
{
    int rc = k3_vision_config(model_dir, &v->cfg, e);
    if (rc)
        return rc;
    size_t n = 5 + 6 * (size_t)v->cfg.layers + 4;
    *ts = calloc(n, sizeof **ts);
    *info = (const k3_tensor_info **)calloc(n, sizeof **info);
    v->layer = calloc((size_t)v->cfg.layers, sizeof *v->layer);
    if (!*ts || !*info || !v->layer)
        return k3_fail(e, K3_ERUNTIME, "out of memory opening the vision tower");
    *nt = tensor_table(v, *ts);
    if ((rc = k3_st_open(ix, model_dir, e)))
        return rc;
    return bind(v, *ix, *ts, *nt, *info, model_dir, mat_bytes, e);
}

int k3_vision_probe(const char *model_dir, k3_err *e)
{
    k3_vision *v = calloc(1, sizeof *v);
    k3_st_index *ix = NULL;
    vtensor *ts = NULL;
    const k3_tensor_info **info = NULL;
    size_t nt = 0;
    uint64_t mat_bytes = 0;
    int rc = v ? prepare(v, model_dir, &ts, &info, &ix, &nt, &mat_bytes, e)
               : k3_fail(e, K3_ERUNTIME, "out of memory opening the vision tower");
    k3_st_close(ix);
    free(ts);
    free((void *)info);
    k3_vision_close(v);
    return rc;
}

int k3_vision_open(k3_vision **out, const char *model_dir, k3_err *e)
{
    *out = NULL;
    k3_vision *v = calloc(1, sizeof *v);
    if (!v)
        return k3_fail(e, K3_ERUNTIME, "out of memory opening the vision tower");
    k3_st_index *ix = NULL;
    vtensor *ts = NULL;
    const k3_tensor_info **info = NULL;
    size_t nt = 0;
    uint64_t mat_bytes = 0;
    int rc = prepare(v, model_dir, &ts, &info, &ix, &nt, &mat_bytes, e);
    if (!rc && !(v->arena = k3_os_aligned_alloc(64, mat_bytes ? mat_bytes : 64)))
        rc = k3_fail(e, K3_ERUNTIME, "out of memory: the vision tower's %llu bytes",
                     (unsigned long long)mat_bytes);
    uint8_t *at = v->arena;
    uint16_t *tmp = NULL;
    for (size_t i = 0; i < nt && !rc; i++) {
        const k3_tensor_info *ti = info[i];
        int64_t n = vt_count(&ts[i]);
        if (ts[i].mat) {
            if ((rc = k3_st_read(ix, ti, 0, ti->nbytes, at, e)))
                break;
            k3_mat *m = ts[i].mat;
            m->kind = K3_MAT_BF16;
            m->rows = ts[i].shape[0];
            m->cols = n / ts[i].shape[0];
            m->w = at;
            m->scales = NULL;
            at += (ti->nbytes + 63) / 64 * 64;
            continue;
        }
        float *f = malloc(sizeof *f * (size_t)n);
        tmp = malloc(ti->nbytes);
        if (!f || !tmp) {
            free(f);
            rc = k3_fail(e, K3_ERUNTIME, "out of memory reading %s", ts[i].name);
            break;
        }
        *ts[i].vec = f;
        if ((rc = k3_st_read(ix, ti, 0, ti->nbytes, tmp, e)))
            break;
        for (int64_t j = 0; j < n; j++) {
            f[j] = k3_bf16_to_f32(tmp[j]);
            if (!isfinite(f[j])) {
                rc = k3_fail(e, K3_EINPUT, "%s: %s element %lld is not finite",
                             k3_st_shard_path(ix, ti->shard), ts[i].name, (long long)j);
                break;
            }
        }
        free(tmp);
        tmp = NULL;
    }
    free(tmp);
    k3_st_close(ix);
    free(ts);
    free((void *)info);
    if (rc) {
        k3_vision_close(v);
        return rc;
    }
    *out = v;
    return K3_OK;
}
