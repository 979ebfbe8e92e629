/* forward.c - opening a model and the decoder stack with attention
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
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernels.h"
#include "model/model.h"
#include "util/error.h"

void k3_model_opts_default(k3_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->budget_gb = -1;
    o->trunk_gb = -1;
    o->trunk_layers = -1;
    o->cache_gb = -1;
}

int k3_model_open(k3_model **out, const char *dir, const k3_model_opts *opts, k3_err *e)
{
    *out = NULL;
    k3_model_opts def;
    if (!opts) {
        k3_model_opts_default(&def);
        opts = &def;
    }
    k3_model *m = k3_calloc(e, 1, sizeof *m, "model");
    if (!m)
        return e->code;
    if (k3_config_load(&m->cfg, dir, e) != K3_OK)
        goto fail;
    int n = (int)m->cfg.num_hidden_layers;
    if (opts->n_layers) {
        if (opts->n_layers < 0 || opts->n_layers > n) {
            k3_fail(e, K3_EINPUT, "--layers %d: the model has %d layers", opts->n_layers, n);
            goto fail;
        }
        n = opts->n_layers;
    }
    if (k3_st_open(&m->ix, dir, e) != K3_OK ||
        k3_weights_bind(&m->w, &m->cfg, m->ix, n, e) != K3_OK ||
        (opts->trunk_dir && k3_trunk_file_open(&m->trunk_file, opts->trunk_dir, dir, m->w.runs,
                                               m->w.nruns, m->ix, m->w.embed_info, e) != K3_OK) ||
        k3_plan_make(&m->plan, &m->cfg, &m->w, opts, e) != K3_OK)
        goto fail;
    /* The cache also binds (checks) every expert tensor, so a plan-only
     * open makes one with a single slot. */
    if (m->plan.experts_total &&
        k3_ec_new(&m->experts, m->ix, &m->plan.expert_dims,
                  opts->plan_only ? 1 : (size_t)m->plan.expert_slots, 1, e) != K3_OK)
        goto fail;
    if (opts->plan_only) {
        *out = m;
        return K3_OK;
    }
    if (!m->plan.embed_streamed && k3_weights_load_embed(&m->w, m->ix, e) != K3_OK)
        goto fail;
    if (k3_trunk_new(&m->trunk, m->w.runs, m->w.nruns, m->plan.pinned,
                     (size_t)m->plan.ring_slots, e) != K3_OK)
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
    k3_ec_free(m->experts);
    k3_trunk_free(m->trunk);
    k3_trunk_file_close(m->trunk_file);
    k3_plan_free(&m->plan);
    k3_weights_free(&m->w);
    k3_st_close(m->ix);
    k3_config_free(&m->cfg);
    free(m);
}

void k3_model_print_plan(const k3_model *m, FILE *f) { k3_plan_print(&m->plan, f); }

void k3_model_set_trace(k3_model *m, FILE *trace)
{
    if (m->experts)
        k3_ec_set_trace(m->experts, trace);
}

void k3_model_io(const k3_model *m, k3_io_counters *c)
{
    memset(c, 0, sizeof *c);
    if (!m->trunk)
        return;
    k3_trunk_stats ts;
    k3_trunk_stats_get(m->trunk, &ts);
    c->trunk_bytes = ts.bytes_read;
    c->io_wait_seconds = ts.wait_seconds;
    if (m->experts) {
        k3_ec_stats es;
        k3_ec_stats_get(m->experts, &es);
        c->expert_bytes = es.bytes_read;
        c->expert_requests = es.requests;
        c->expert_hits = es.hits;
        c->io_wait_seconds += es.read_seconds; /* expert reads block the fetch */
    }
}

void k3_model_print_io(const k3_model *m, FILE *f)
{
    if (!m->trunk)
        return;
    k3_trunk_stats ts;
    k3_trunk_stats_get(m->trunk, &ts);
    fprintf(f, "trunk: %d pinned layers, %d streamed through %d slots; read %.3f GB in %.3f s"
               " (%.0f MB/s), checksums %.3f s; compute waited %.3f s for it\n",
            m->plan.pinned_layers, m->plan.streamed_layers, m->plan.ring_slots,
            ts.bytes_read / 1e9, ts.read_seconds,
            ts.read_seconds > 0 ? ts.bytes_read / 1e6 / ts.read_seconds : 0.0,
            ts.verify_seconds, ts.wait_seconds);
    if (m->experts) {
        k3_ec_stats es;
        k3_ec_stats_get(m->experts, &es);
        fprintf(f, "experts: %llu slots; %llu requests, %.1f%% hits, %llu evictions; read %.3f GB"
                   " in %.3f s (%.0f MB/s)\n",
                (unsigned long long)k3_ec_capacity(m->experts), (unsigned long long)es.requests,
                es.requests ? 100.0 * (double)es.hits / (double)es.requests : 0.0,
                (unsigned long long)es.evictions, es.bytes_read / 1e9, es.read_seconds,
                es.read_seconds > 0 ? es.bytes_read / 1e6 / es.read_seconds : 0.0);
    }
}

void k3_model_print_json(const k3_model *m, FILE *f, const char *in)
{
    k3_trunk_stats ts;
    memset(&ts, 0, sizeof ts);
    if (m->trunk)
        k3_trunk_stats_get(m->trunk, &ts);
    /* The kernel table and thread count: what a speed number was made with. */
    const char *wait = getenv("OMP_WAIT_POLICY");
    fprintf(f, "%s\"kernels\": \"%s\",\n%s\"threads\": %d,\n%s\"omp_wait_policy\": \"%s\",\n",
            in, k3_kernels_name(), in, omp_get_max_threads(), in,
            wait && strspn(wait, "abcdefghijklmnopqrstuvwxyz"
                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == strlen(wait)
                ? wait : "default");
    fprintf(f, "%s\"plan\": {\n", in);
    char deeper[32];
    snprintf(deeper, sizeof deeper, "%s  ", in);
    k3_plan_print_json(&m->plan, f, deeper);
    fprintf(f, "\n%s},\n%s\"trunk\": {\"bytes_read\": %llu, \"runs_read\": %llu, "
               "\"read_seconds\": %.6f, \"verify_seconds\": %.6f, \"wait_seconds\": %.6f}",
            in, in, (unsigned long long)ts.bytes_read, (unsigned long long)ts.runs_read,
            ts.read_seconds, ts.verify_seconds, ts.wait_seconds);
    if (m->experts) {
        k3_ec_stats es;
        k3_ec_stats_get(m->experts, &es);
        fprintf(f, ",\n%s\"experts\": {\"slots\": %llu, \"requests\": %llu, \"hits\": %llu, "
                   "\"misses\": %llu, \"evictions\": %llu, \"bytes_read\": %llu, "
                   "\"read_seconds\": %.6f}",
                in, (unsigned long long)k3_ec_capacity(m->experts),
                (unsigned long long)es.requests, (unsigned long long)es.hits,
                (unsigned long long)es.misses, (unsigned long long)es.evictions,
                (unsigned long long)es.bytes_read, es.read_seconds);
    }
}

uint32_t k3_model_vocab(const k3_model *m) { return (uint32_t)m->cfg.vocab_size; }
size_t k3_model_tensor_count(const k3_model *m) { return k3_st_count(m->ix); }
int k3_model_n_layers(const k3_model *m) { return m->w.n_layers; }

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
    if (T > K3_MAX_CALL_TOKENS || s->pos > K3_MAX_POSITIONS - (int64_t)T) /* config.h */
        return k3_fail(e, K3_EINPUT, "%zu tokens at position %lld: over the limit of %zu tokens "
                       "a call, %lld positions", T, (long long)s->pos, K3_MAX_CALL_TOKENS,
                       (long long)K3_MAX_POSITIONS);
    for (size_t t = 0; t < T; t++)
        if (ids[t] >= V)
            return k3_fail(e, K3_EINPUT, "token id %u is outside the vocabulary (%zu ids)",
                           ids[t], V);
    if (k3_state_reserve(s, s->pos + (int64_t)T, e) != K3_OK)
        return e->code;
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

    int rc = K3_OK;
    for (size_t t = 0; t < T && rc == K3_OK; t++)
        rc = k3_weights_embed_row(W, m->ix, ids[t], w.hin + t * H, e);

    size_t nbank = 0;
    for (size_t li = 0; li < L && rc == K3_OK; li++) {
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
        /* §4.3 steps 3-4: attention; prefix = a (after a boundary) or h_in + a. */
        for (size_t t = 0; t < T; t++)
            k3_rmsnorm(w.x + t * H, w.h + t * H, lw->input_norm, H, eps);
        rc = lw->kind == K3_LAYER_KDA ? k3_kda_forward(c, lw, s, (int)li, w.x, T, w.a, e)
                                      : k3_mla_forward(c, lw, s, (int)li, w.x, T, w.a, e);
        if (rc != K3_OK) {
            k3_trunk_release(m->trunk, li);
            break;
        }
        for (size_t i = 0; i < T * H; i++)
            w.prefix[i] = boundary ? w.a[i] : w.hin[i] + w.a[i];
        /* §4.3 steps 5-6: mix for the MLP (the bank is never empty here), then the MLP. */
        for (size_t t = 0; t < T; t++) {
            float *bank = w.bank + t * w.nbank_max * H;
            for (size_t b = 0; b < nbank; b++)
                w.src[b] = bank + b * H;
            w.src[nbank] = w.prefix + t * H;
            k3_attn_res(w.h + t * H, w.src, nbank + 1, lw->mlp_res_norm, lw->mlp_res_proj, H, eps,
                     w.tmp, w.score);
            k3_rmsnorm(w.x + t * H, w.h + t * H, lw->post_norm, H, eps);
        }
        k3_expert_source src = { NULL, m->experts, (int)li };
        rc = lw->dense ? k3_dense_mlp_forward(c, lw, w.x, T, w.a, e)
                       : k3_moe_block(c, &lw->moe, &src, w.x, T, w.a, e);
        k3_trunk_release(m->trunk, li);
        /* §4.3 step 7: the next layer's input. */
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
        const uint8_t *image = k3_trunk_acquire(m->trunk, L, e);
        if (image) {
            k3_mat head = k3_weights_lm_head(W, image);
            k3_matmul(&head, w.x + t0 * H, T - t0, logits);
            k3_trunk_release(m->trunk, L);
            /* Fault-sweep fix (tests/gates/72-fault-sweep.sh, docs/SECURITY.md):
             * a NaN or Inf logit means a weight (most have no checksum in the
             * release format) or a loaded state holds one; any token chosen
             * from such logits is arbitrary (all-NaN logits gave id 0), so the
             * run is invalid rather than continued. */
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
    free(buf);
    free(w.src);
    return rc;
}
