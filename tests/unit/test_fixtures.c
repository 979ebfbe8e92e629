/* test_fixtures.c - every kernel and the sampler against the float64
 * reference's vectors in tests/fixtures/kernels.json (made by
 * tools/make_kernel_fixtures.py, which CI re-runs to prove the committed
 * file is what the reference computes).
 *
 * Exact paths (BF16, MXFP4 decode, top-k picks, the sampler's uniforms and
 * tokens) must match exactly; float paths within 2e-6 of the output's
 * largest magnitude (fp32 vs float64). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/kernels.h"
#include "k3/sample.h"
#include "model/model.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"
#include "util/os.h"

static const k3_json *fixtures;

static const k3_json *fx(const char *name) { return k3_json_get(fixtures, name); }

static double param(const k3_json *f, const char *key)
{
    const k3_json *v = k3_json_get(k3_json_get(f, "params"), key);
    return v ? v->number : NAN;
}

/* An {shape, data} array from "inputs" or "outputs" as floats (malloc'd). */
static float *arr(const k3_json *f, const char *group, const char *key, size_t *n)
{
    const k3_json *a = k3_json_get(k3_json_get(k3_json_get(f, group), key), "data");
    if (!a || a->type != K3J_ARRAY) {
        fprintf(stderr, "fixture array %s.%s missing\n", group, key);
        exit(1);
    }
    float *v = malloc((a->count + 1) * sizeof *v);
    for (size_t i = 0; i < a->count; i++)
        v[i] = (float)a->items[i].number;
    if (n)
        *n = a->count;
    return v;
}

static uint8_t *bytes(const k3_json *f, const char *key)
{
    size_t n;
    float *v = arr(f, "inputs", key, &n);
    uint8_t *b = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)v[i];
    free(v);
    return b;
}

/* max |got - want| <= tol * max |want|. */
static int close_to(const float *got, const float *want, size_t n, double tol, const char *what)
{
    double md = 0, mw = 0;
    for (size_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)got[i] - want[i]));
        mw = fmax(mw, fabs((double)want[i]));
    }
    if (md > tol * mw) {
        fprintf(stderr, "%s: max diff %.3g vs max %.3g\n", what, md, mw);
        return 0;
    }
    return 1;
}

static void test_decode(void)
{
    const k3_json *f = fx("bf16_decode");
    size_t n;
    float *bits = arr(f, "inputs", "bits", &n), *want = arr(f, "outputs", "value", NULL);
    for (size_t i = 0; i < n; i++) {
        float got = k3_bf16_to_f32((uint16_t)bits[i]);
        CHECK(got == want[i] && signbit(got) == signbit(want[i]), "bf16 %04x", (unsigned)bits[i]);
    }
    free(bits);
    free(want);
    const char *names[2] = { "mxfp4_decode", "mxfp4_nibble_order" };
    for (int k = 0; k < 2; k++) {
        f = fx(names[k]);
        const k3_json *shape =
            k3_json_get(k3_json_get(k3_json_get(f, "outputs"), "value"), "shape");
        int64_t rows = shape->items[0].integer, cols = shape->items[1].integer;
        uint8_t *packed = bytes(f, "packed"), *scale = bytes(f, "scale");
        float *val = arr(f, "outputs", "value", NULL);
        int bad = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < cols; i++)
                bad += k3_mxfp4_value(packed + r * cols / 2, scale + r * cols / 32, i) !=
                       val[r * cols + i];
        CHECK(bad == 0, "%s: %d elements differ", names[k], bad);
        free(packed);
        free(scale);
        free(val);
    }
}

static void test_rms_situ_attnres(void)
{
    const k3_json *f = fx("rms");
    float *x = arr(f, "inputs", "x", NULL), *w = arr(f, "inputs", "w", NULL);
    float *want = arr(f, "outputs", "out", NULL), got[3 * 24];
    for (int r = 0; r < 3; r++)
        k3_rmsnorm(got + r * 24, x + r * 24, w, 24, (float)param(f, "eps"));
    for (int r = 0; r < 3; r++)
        CHECK(close_to(got + r * 24, want + r * 24, 24, 2e-6, "rms"), "rms row %d", r);
    free(x), free(w), free(want);

    const char *names[2] = { "situ", "situ_other_betas" };
    for (int k = 0; k < 2; k++) {
        f = fx(names[k]);
        size_t n;
        float *g = arr(f, "inputs", "gate", &n), *u = arr(f, "inputs", "up", NULL);
        want = arr(f, "outputs", "out", NULL);
        k3_situ(g, u, n, (float)param(f, "b1"), (float)param(f, "b2"));
        CHECK(close_to(g, want, n, 2e-6, names[k]), "%s", names[k]);
        free(g), free(u), free(want);
    }

    f = fx("attnres");
    float *src = arr(f, "inputs", "sources", NULL), *nw = arr(f, "inputs", "norm_w", NULL);
    float *proj = arr(f, "inputs", "proj", NULL), *probs = arr(f, "outputs", "probs", NULL);
    want = arr(f, "outputs", "out", NULL);
    const float *s3[3] = { src, src + 16, src + 32 };
    float out[16], tmp[16], score[3];
    k3_attn_res(out, s3, 3, nw, proj, 16, (float)param(f, "eps"), tmp, score);
    CHECK(close_to(score, probs, 3, 2e-6, "attnres probs"), "attnres probs");
    CHECK(close_to(out, want, 16, 2e-6, "attnres out"), "attnres out");
    free(src), free(nw), free(proj), free(probs), free(want);
}

static void test_router(void)
{
    const char *names[2] = { "router_topk", "router_topk_tie" };
    for (int k = 0; k < 2; k++) {
        const k3_json *f = fx(names[k]);
        size_t E, K;
        float *logit = arr(f, "inputs", "logits", &E), *bias = arr(f, "inputs", "bias", NULL);
        float *idx = arr(f, "outputs", "indices", &K), *wts = arr(f, "outputs", "weights", NULL);
        k3_config c;
        memset(&c, 0, sizeof c);
        c.num_experts = (int64_t)E;
        c.num_experts_per_token = (int64_t)K;
        c.routed_scaling_factor = param(f, "scaling");
        c.moe_renormalize = 1;
        int32_t ids[16];
        float w[16], sig[64];
        k3_route(&c, logit, bias, ids, w, sig);
        /* The reference lists picks in selection order, k3 in index order. */
        for (size_t j = 0; j < K; j++) {
            size_t q = 0;
            while (q < K && ids[q] != (int32_t)idx[j])
                q++;
            CHECK(q < K, "%s: expert %d not picked", names[k], (int)idx[j]);
            if (q < K)
                CHECK(fabsf(w[q] - wts[j]) <= 2e-6f * fabsf(wts[j]), "%s: weight of %d", names[k],
                      (int)idx[j]);
        }
        free(logit), free(bias), free(idx), free(wts);
    }
}

static void test_kda(void)
{
    const k3_json *f = fx("kda");
    int NH = (int)param(f, "num_heads"), D = (int)param(f, "head_dim"), C = NH * D, T = 4, K = 4;
    k3_config c;
    memset(&c, 0, sizeof c);
    c.kda_num_heads = NH;
    c.kda_head_dim = D;
    c.short_conv_kernel_size = K;
    c.gate_lower_bound = param(f, "lower_bound");
    k3_kda_weights w;
    memset(&w, 0, sizeof w);
    w.conv[0] = arr(f, "inputs", "conv_q", NULL);
    w.conv[1] = arr(f, "inputs", "conv_k", NULL);
    w.conv[2] = arr(f, "inputs", "conv_v", NULL);
    w.A_log = arr(f, "inputs", "A_log", NULL);
    w.dt_bias = arr(f, "inputs", "dt_bias", NULL);
    float *q = arr(f, "inputs", "q_pre", NULL), *k = arr(f, "inputs", "k_pre", NULL);
    float *v = arr(f, "inputs", "v_pre", NULL), *g = arr(f, "inputs", "graw", NULL);
    float *b = arr(f, "inputs", "beta_logits", NULL), *want = arr(f, "outputs", "o", NULL);
    float *Swant = arr(f, "outputs", "S_final", NULL);
    float *hist = calloc((size_t)(3 * (K - 1) * C), sizeof *hist);
    float *S = calloc((size_t)(NH * D * D), sizeof *S), o[4 * 16],
          *scratch = malloc(64 * sizeof(float));
    for (int t = 0; t < T; t++)
        k3_kda_step(&c, &w, hist, S, q + t * C, k + t * C, v + t * C, g + t * C, b + t * NH,
                    o + t * C, scratch);
    CHECK(close_to(o, want, (size_t)(T * C), 5e-6, "kda o"), "kda outputs");
    CHECK(close_to(S, Swant, (size_t)(NH * D * D), 5e-6, "kda S"), "kda final state");
    for (int j = 0; j < 3; j++)
        free(w.conv[j]);
    free(w.A_log), free(w.dt_bias), free(q), free(k), free(v), free(g), free(b), free(want);
    free(Swant), free(hist), free(S), free(scratch);
}

static void test_mla(void)
{
    const k3_json *f = fx("mla");
    k3_config c;
    memset(&c, 0, sizeof c);
    c.num_attention_heads = (int64_t)param(f, "num_heads");
    c.qk_nope_head_dim = (int64_t)param(f, "qk_nope_head_dim");
    c.qk_rope_head_dim = (int64_t)param(f, "qk_rope_head_dim");
    c.v_head_dim = (int64_t)param(f, "v_head_dim");
    c.kv_lora_rank = (int64_t)param(f, "kv_lora_rank");
    size_t NH = (size_t)c.num_attention_heads, R = (size_t)c.kv_lora_rank;
    size_t DR = (size_t)c.qk_rope_head_dim, DQ = (size_t)c.qk_nope_head_dim + DR, KW = R + DR;
    size_t DV = (size_t)c.v_head_dim, T = 5;
    float *q = arr(f, "inputs", "q", NULL), *craw = arr(f, "inputs", "c_raw", NULL);
    float *nw = arr(f, "inputs", "kv_a_layernorm", NULL), *kvb = arr(f, "inputs", "kv_b", NULL);
    float *cwant = arr(f, "outputs", "cache", NULL), *owant = arr(f, "outputs", "o", NULL);
    float cache[5 * 20], o[5 * 2 * 8], scratch[64];
    for (size_t t = 0; t < T; t++) {
        k3_rmsnorm(cache + t * KW, craw + t * KW, nw, R, (float)param(f, "eps"));
        memcpy(cache + t * KW + R, craw + t * KW + R, DR * sizeof(float));
    }
    k3_mat kv = { K3_MAT_F32, (int64_t)(NH * (c.qk_nope_head_dim + DV)), (int64_t)R, kvb, NULL,
                  0, 0, 0 };
    for (size_t t = 0; t < T; t++)
        k3_mla_attend(&c, &kv, cache, t + 1, q + t * NH * DQ, o + t * NH * DV, scratch);
    CHECK(close_to(cache, cwant, T * KW, 2e-6, "mla cache"), "mla cache");
    CHECK(close_to(o, owant, T * NH * DV, 5e-6, "mla o"), "mla outputs");
    free(q), free(craw), free(nw), free(kvb), free(cwant), free(owant);
}

static k3_mat fmat(const k3_json *f, const char *key, int64_t rows, int64_t cols, float **keep)
{
    *keep = arr(f, "inputs", key, NULL);
    k3_mat m = { K3_MAT_F32, rows, cols, *keep, NULL, 0, 0, 0 };
    return m;
}

static void test_moe(void)
{
    const k3_json *f = fx("moe");
    const int64_t H = 8, E = 4, Z = 32, F = 32, S = 32;
    k3_config c;
    memset(&c, 0, sizeof c);
    c.hidden_size = H;
    c.num_experts = E;
    c.num_experts_per_token = (int64_t)param(f, "k");
    c.routed_expert_hidden_size = Z;
    c.moe_intermediate_size = F;
    c.num_shared_experts = S / F;
    c.situ_beta = param(f, "b1");
    c.situ_linear_beta = param(f, "b2");
    c.rms_norm_eps = param(f, "eps");
    c.routed_scaling_factor = param(f, "scaling");
    c.moe_renormalize = 1;
    c.latent_moe_use_norm = 1;
    k3_moe_weights w;
    memset(&w, 0, sizeof w);
    float *keep[8];
    w.router = fmat(f, "gate", E, H, &keep[0]);
    w.latent_down = fmat(f, "down_latent", Z, H, &keep[1]);
    w.latent_up = fmat(f, "up_latent", H, Z, &keep[2]);
    w.shared_gate = fmat(f, "shared_gate", S, H, &keep[3]);
    w.shared_up = fmat(f, "shared_up", S, H, &keep[4]);
    w.shared_down = fmat(f, "shared_down", H, S, &keep[5]);
    w.router_bias = keep[6] = arr(f, "inputs", "bias", NULL);
    w.latent_norm = keep[7] = arr(f, "inputs", "norm", NULL);
    uint8_t *p1 = bytes(f, "w1_packed"), *s1 = bytes(f, "w1_scale"), *p3 = bytes(f, "w3_packed");
    uint8_t *s3 = bytes(f, "w3_scale"), *p2 = bytes(f, "w2_packed"), *s2 = bytes(f, "w2_scale");
    k3_expert ex[4];
    for (int x = 0; x < E; x++) {
        k3_mat m1 = { K3_MAT_MXFP4, F, Z, p1 + x * F * Z / 2, s1 + x * F * Z / 32, 0, 0, 0 };
        k3_mat m3 = { K3_MAT_MXFP4, F, Z, p3 + x * F * Z / 2, s3 + x * F * Z / 32, 0, 0, 0 };
        k3_mat m2 = { K3_MAT_MXFP4, Z, F, p2 + x * F * Z / 2, s2 + x * F * Z / 32, 0, 0, 0 };
        ex[x].w1 = m1;
        ex[x].w3 = m3;
        ex[x].w2 = m2;
    }
    k3_expert_source src = { ex, NULL, 0 };
    float *x = arr(f, "inputs", "x", NULL), *want = arr(f, "outputs", "out", NULL), out[16];
    k3_err e = { 0, "" };
    size_t nbytes = (size_t)k3_moe_scratch(&c, 2);
    void *buf = NULL, *mmbuf = NULL;
    CHECK((buf = k3_os_aligned_alloc(64, nbytes)) != NULL &&
              (mmbuf = k3_os_aligned_alloc(64, k3_mm_ws_bytes(1, 64, 2))) != NULL,
          "moe scratch");
    k3_mm_ws mm = { mmbuf, 1, 64, 2 };
    k3_work wk = { buf, nbytes, &mm };
    CHECK(k3_moe_block(&c, &w, &src, x, 2, out, &wk, &e) == K3_OK, "%s", e.msg);
    wk.bytes = nbytes - 1; /* one byte short of its layout: refused, not overrun */
    CHECK(k3_moe_block(&c, &w, &src, x, 2, out, &wk, &e) == K3_ERUNTIME, "short MoE scratch");
    k3_os_aligned_free(buf), k3_os_aligned_free(mmbuf);
    CHECK(close_to(out, want, 16, 5e-6, "moe out"), "moe block output");
    for (int i = 0; i < 8; i++)
        free(keep[i]);
    free(p1), free(s1), free(p3), free(s3), free(p2), free(s2), free(x), free(want);
}

/* An {shape, data} array of JSON integers as int64 (malloc'd); rows and
 * cols from its 2-D shape. */
static int64_t *ints(const k3_json *f, const char *group, const char *key, size_t *rows,
                     size_t *cols)
{
    const k3_json *a = k3_json_get(k3_json_get(f, group), key);
    const k3_json *d = k3_json_get(a, "data"), *shape = k3_json_get(a, "shape");
    if (!d || d->type != K3J_ARRAY || !shape || shape->count != 2) {
        fprintf(stderr, "fixture array %s.%s missing\n", group, key);
        exit(1);
    }
    int64_t *v = malloc((d->count + 1) * sizeof *v);
    for (size_t i = 0; i < d->count; i++) {
        if (!d->items[i].is_int) {
            fprintf(stderr, "fixture array %s.%s: element %zu is not an integer\n", group, key, i);
            exit(1);
        }
        v[i] = d->items[i].integer;
    }
    *rows = (size_t)shape->items[0].integer;
    *cols = (size_t)shape->items[1].integer;
    return v;
}

/* The tokens of the sampler fixture's cases[order[0..n)] (rows of 5:
 * config, logits row, seed, position, token), each checked. */
static void sample_cases(k3_sampler *s, const int64_t *cases, const size_t *order, size_t n,
                         const float *configs, const float *logits, size_t V,
                         const uint32_t *recent, size_t nrecent, const char *what)
{
    int bad = 0;
    for (size_t j = 0; j < n; j++) {
        const int64_t *c = cases + 5 * order[j];
        const float *cf = configs + 7 * c[0];
        s->temperature = cf[0];
        s->top_k = (int)cf[1];
        s->top_p = cf[2];
        s->min_p = cf[3];
        s->repeat_penalty = cf[4];
        s->frequency_penalty = cf[5];
        s->presence_penalty = cf[6];
        k3_sampler_seed(s, (uint64_t)c[2]);
        uint32_t got = k3_sample(s, logits + (size_t)c[1] * V, V, recent, nrecent, (uint64_t)c[3]);
        if (got != (uint32_t)c[4] && bad++ < 5)
            fprintf(stderr,
                    "%s: case %zu (config %d, row %d, seed %lld, position %lld): "
                    "got %u, want %lld\n",
                    what, order[j], (int)c[0], (int)c[1], (long long)c[2], (long long)c[3], got,
                    (long long)c[4]);
    }
    CHECK(bad == 0, "sample %s: %d of %zu cases differ", what, bad, n);
}

/* The sampler against the reference: the uniform for each (seed,
 * position), exactly; the token of every case, first in the fixture's
 * order and then in a shuffled one (each case sampled after a different
 * history), which must give the same tokens. */
static void test_sample(void)
{
    const k3_json *f = fx("sample");
    size_t nu, three;
    int64_t *u = ints(f, "outputs", "uniform", &nu, &three);
    int bad = 0;
    for (size_t i = 0; i < nu; i++) {
        double got = k3_sample_uniform((uint64_t)u[3 * i], (uint64_t)u[3 * i + 1]);
        if (got * 9007199254740992.0 != (double)u[3 * i + 2] && bad++ < 5)
            fprintf(stderr, "uniform(seed %lld, position %lld) = %.17g, want %lld / 2^53\n",
                    (long long)u[3 * i], (long long)u[3 * i + 1], got, (long long)u[3 * i + 2]);
    }
    CHECK(three == 3 && bad == 0, "sample: %d of %zu uniforms differ", bad, nu);

    size_t nlog, nrecent, ncases, five;
    float *logits = arr(f, "inputs", "logits", &nlog), *configs = arr(f, "inputs", "configs", NULL);
    float *rf = arr(f, "inputs", "recent", &nrecent);
    int64_t *cases = ints(f, "outputs", "cases", &ncases, &five);
    const k3_json *shape = k3_json_get(k3_json_get(k3_json_get(f, "inputs"), "logits"), "shape");
    size_t V = (size_t)shape->items[1].integer;
    uint32_t recent[8];
    size_t *order = malloc((ncases + 1) * sizeof *order);
    CHECK(five == 5 && nrecent <= 8 && ncases > 0, "sample fixture layout");
    for (size_t i = 0; i < nrecent && i < 8; i++)
        recent[i] = (uint32_t)rf[i];
    for (size_t i = 0; i < ncases; i++)
        order[i] = i;
    k3_sampler s;
    k3_err e = { 0, "" };
    CHECK(k3_sampler_init(&s, V, &e) == K3_OK, "sampler init: %s", e.msg);
    sample_cases(&s, cases, order, ncases, configs, logits, V, recent, nrecent, "in order");
    /* Fisher-Yates with a fixed LCG: the same shuffle every run. */
    uint64_t x = 12345;
    for (size_t i = ncases - 1; i > 0; i--) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t j = (size_t)((x >> 33) % (i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    sample_cases(&s, cases, order, ncases, configs, logits, V, recent, nrecent, "shuffled");
    k3_sampler_free(&s);
    free(u), free(logits), free(configs), free(rf), free(cases), free(order);
}

int main(void)
{
    const char *path =
        getenv("K3_FIXTURES") ? getenv("K3_FIXTURES") : "tests/fixtures/kernels.json";
    k3_err e = { 0, "" };
    size_t len;
    char *text = k3_read_small_file(&e, path, 64u << 20, &len);
    char jerr[256];
    k3_json_doc *doc = text ? k3_json_parse(text, len, jerr, sizeof jerr) : NULL;
    if (!doc) {
        fprintf(stderr, "cannot load %s: %s\n", path, text ? jerr : e.msg);
        return 1;
    }
    fixtures = k3_json_get(k3_json_root(doc), "fixtures");
    test_decode();
    test_rms_situ_attnres();
    test_router();
    test_kda();
    test_mla();
    test_moe();
    test_sample();
    k3_json_free(doc);
    free(text);
    return check_report("test_fixtures");
}
