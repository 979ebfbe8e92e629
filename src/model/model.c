/* model.c - a model's lifecycle and its accessors: opening (config, index,
 * weights, plan, trunk and expert cache), closing, the I/O counters and the
 * plan/I/O/JSON reports. The forward pass itself is forward.c. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernels.h"
#include "io/read_queue.h"
#include "io/trunk_format.h"
#include "model/model.h"
#include "util/error.h"
#include "util/os.h"

void k3_model_opts_default(k3_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->budget_gb = -1;
    o->trunk_gb = -1;
    o->trunk_layers = -1;
    o->cache_gb = -1;
}

/* The row split the weights are bound with (a partition keeping shares,
 * core/kernels.h): this process and the count, or 0 and 0 when none. */
static int part_ranks(void)
{
    const k3_mm_part *p = k3_mm_get_part();
    return p && p->keep_shares && p->size > 1 ? p->size : 0;
}

static int part_rank(void)
{
    return part_ranks() ? k3_mm_get_part()->rank : 0;
}

/* Whether to bind the large runs cut into sub-runs (model/weights.h): not
 * under a split that keeps shares (a rank's rows of lm_head are not its
 * row blocks), not for a trunk of format 2 or 3 (packed whole: read as
 * such), and not with K3_SUBRUNS=0 (diagnostics, and the gates that make
 * such trunks). */
static int use_subruns(const k3_model_opts *o)
{
    const char *env = getenv("K3_SUBRUNS");
    if (part_ranks() || (env && !strcmp(env, "0")))
        return 0;
    int version = o->trunk_dir ? k3_trunk_file_version(o->trunk_dir) : K3_TRUNK_VERSION;
    return version == 0 || version >= 4;
}

int k3_model_open(k3_model **out, const char *dir, const k3_model_opts *opts, k3_err *e)
{
    *out = NULL;
    k3_model_opts def;
    if (!opts) {
        k3_model_opts_default(&def);
        opts = &def;
    }
    if (k3_read_queue_check(e) != K3_OK || k3_moe_order_check(e) != K3_OK)
        return e->code;
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
    /* The draft trunk's fingerprint is taken while the runs still name the
     * shards (a packed trunk's open points them into trunk.bin). */
    uint64_t draft_fp = 0;
    if (k3_st_open(&m->ix, dir, e) != K3_OK ||
        k3_weights_bind(&m->w, &m->cfg, m->ix, n, use_subruns(opts), e) != K3_OK ||
        (opts->draft_trunk && !opts->plan_only &&
         k3_draft_fingerprint(dir, &m->w, m->ix, &draft_fp, e) != K3_OK) ||
        (opts->trunk_dir &&
         k3_trunk_file_open(&m->trunk_file, opts->trunk_dir, dir, m->w.runs, m->w.nruns, m->ix,
                            m->w.embed_info, part_rank(), part_ranks(), e) != K3_OK) ||
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
                     (size_t)m->plan.ring_slots, e) != K3_OK ||
        !(m->arena = k3_arena_alloc(m->plan.scratch, e)) ||
        (opts->draft_trunk &&
         k3_draft_trunk_open(&m->draft, opts->draft_trunk, &m->w, draft_fp, e) != K3_OK))
        goto fail;
    m->arena_bytes = (size_t)m->plan.scratch;
    *out = m;
    return K3_OK;
fail:
    k3_model_close(m);
    return e->code;
}

unsigned char *k3_arena_alloc(uint64_t bytes, k3_err *e)
{
    void *p = NULL;
    if (bytes > SIZE_MAX || !(p = k3_os_aligned_alloc(64, bytes ? (size_t)bytes : 1))) {
        k3_fail(e, K3_ERUNTIME, "out of memory allocating %llu bytes for the scratch arena",
                (unsigned long long)bytes);
        return NULL;
    }
    return p;
}

void k3_model_close(k3_model *m)
{
    if (!m)
        return;
    k3_os_aligned_free(m->arena);
    k3_draft_trunk_close(m->draft);
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

void k3_model_pass_bytes(const k3_model *m, uint64_t *trunk, uint64_t *expert)
{
    *trunk = m->plan.trunk_total; /* sums of file sizes: no overflow */
    for (size_t r = m->w.layer_run[m->w.n_layers]; r < m->w.nruns; r++)
        *trunk += m->w.runs[r].bytes;
    *expert = m->plan.expert_slot_bytes;
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
        /* The expert reads' whole time: an upper bound on the wait, since a
         * step computes its experts as they arrive (moe.c). */
        c->io_wait_seconds += es.read_seconds;
    }
}

void k3_model_print_io(const k3_model *m, FILE *f)
{
    if (!m->trunk)
        return;
    k3_trunk_stats ts;
    k3_trunk_stats_get(m->trunk, &ts);
    /* Hash share: hashing CPU over the reader's wall time (1 = a core). */
    double share = ts.read_seconds > 0 ? ts.verify_seconds / ts.read_seconds : 0.0;
    fprintf(f, "trunk: %d pinned layers, %d streamed through %d slots; read %.3f GB in %.3f s"
               " (%.0f MB/s), checksums %.3f s (%.1f%% of a core while reading); compute "
               "waited %.3f s for it\n",
            m->plan.pinned_layers, m->plan.streamed_layers, m->plan.ring_slots,
            ts.bytes_read / 1e9, ts.read_seconds,
            ts.read_seconds > 0 ? ts.bytes_read / 1e6 / ts.read_seconds : 0.0,
            ts.verify_seconds, 100 * share, ts.wait_seconds);
    int depth;
    const char *why, *reader = k3_read_queue_reader(&depth, &why);
    if (strcmp(reader, "none")) {
        fprintf(f, "io: the %s reader", reader);
        if (depth)
            fprintf(f, ", %d reads in flight", depth);
        if (*why)
            fprintf(f, " (io_uring unavailable: %s)", why);
        fputc('\n', f);
    }
    if (ts.image_bytes != ts.bytes_read)
        fprintf(f, "trunk: compressed: %.3f GB read decoded to %.3f GB (%.1f%%); decoding %.3f s "
                   "of CPU (%.2f GB/s a core)\n",
                ts.bytes_read / 1e9, ts.image_bytes / 1e9,
                ts.image_bytes ? 100.0 * (double)ts.bytes_read / (double)ts.image_bytes : 0.0,
                ts.decode_seconds,
                ts.decode_seconds > 0 ? ts.image_bytes / 1e9 / ts.decode_seconds : 0.0);
    if (m->experts) {
        k3_ec_stats es;
        k3_ec_stats_get(m->experts, &es);
        fprintf(f, "experts: %llu slots; %llu requests, %.1f%% hits, %llu evictions; read %.3f GB"
                   " in %.3f s (%.0f MB/s); %llu computed while their reads ran, %.3f s of "
                   "fetch and compute of which %.3f s waiting\n",
                (unsigned long long)k3_ec_capacity(m->experts), (unsigned long long)es.requests,
                es.requests ? 100.0 * (double)es.hits / (double)es.requests : 0.0,
                (unsigned long long)es.evictions, es.bytes_read / 1e9, es.read_seconds,
                es.read_seconds > 0 ? es.bytes_read / 1e6 / es.read_seconds : 0.0,
                (unsigned long long)es.early, es.wall_seconds, es.wait_seconds);
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
    fprintf(f, "\n%s},\n%s\"trunk\": {\"bytes_read\": %llu, \"image_bytes\": %llu, "
               "\"runs_read\": %llu, \"read_seconds\": %.6f, \"verify_seconds\": %.6f, "
               "\"hash_share\": %.6f, \"decode_seconds\": %.6f, \"wait_seconds\": %.6f}",
            in, in, (unsigned long long)ts.bytes_read, (unsigned long long)ts.image_bytes,
            (unsigned long long)ts.runs_read, ts.read_seconds, ts.verify_seconds,
            ts.read_seconds > 0 ? ts.verify_seconds / ts.read_seconds : 0.0, ts.decode_seconds,
            ts.wait_seconds);
    int depth;
    const char *why, *reader = k3_read_queue_reader(&depth, &why);
    fprintf(f, ",\n%s\"io\": {\"reader\": \"%s\", \"depth\": %d, \"why\": ", in, reader,
            depth);
    fputc('"', f);
    for (; *why; why++) /* a system's message: kept printable, no JSON escapes needed */
        fputc(*why == '"' || *why == '\\' || (unsigned char)*why < 0x20 ? '?' : *why, f);
    fputs("\"}", f);
    if (m->experts) {
        k3_ec_stats es;
        k3_ec_stats_get(m->experts, &es);
        fprintf(f, ",\n%s\"experts\": {\"slots\": %llu, \"requests\": %llu, \"hits\": %llu, "
                   "\"misses\": %llu, \"evictions\": %llu, \"bytes_read\": %llu, "
                   "\"read_seconds\": %.6f, \"fetches\": %llu, \"early\": %llu, "
                   "\"wall_seconds\": %.6f, \"wait_seconds\": %.6f}",
                in, (unsigned long long)k3_ec_capacity(m->experts),
                (unsigned long long)es.requests, (unsigned long long)es.hits,
                (unsigned long long)es.misses, (unsigned long long)es.evictions,
                (unsigned long long)es.bytes_read, es.read_seconds, (unsigned long long)es.noted,
                (unsigned long long)es.early, es.wall_seconds, es.wait_seconds);
    }
}

uint32_t k3_model_vocab(const k3_model *m) { return (uint32_t)m->cfg.vocab_size; }
size_t k3_model_tensor_count(const k3_model *m) { return k3_st_count(m->ix); }
int k3_model_n_layers(const k3_model *m) { return m->w.n_layers; }

int k3_model_has_draft_trunk(const k3_model *m) { return m->draft != NULL; }

int k3_model_experts_per_token(const k3_model *m) { return (int)m->cfg.num_experts_per_token; }

int k3_model_is_eos(const k3_model *m, uint32_t id)
{
    for (int i = 0; i < m->cfg.n_eos; i++)
        if (m->cfg.eos_ids[i] == (int64_t)id)
            return 1;
    return 0;
}
