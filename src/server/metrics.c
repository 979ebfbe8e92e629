/* metrics.c - see metrics.h. */
#include "server/metrics.h"

#include "util/error.h"

#include <stdio.h>
#include <string.h>

static const char *const endpoint_names[K3_EP_COUNT] = {
    "chat_completions", "completions", "tokenize", "detokenize",
    "models",           "health",      "metrics",  "other",
};

void k3_metrics_init(k3_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void k3_metrics_destroy(k3_metrics *m)
{
    pthread_mutex_destroy(&m->mu);
}

void k3_metrics_request(k3_metrics *m, int ep, int status)
{
    if (ep < 0 || ep >= K3_EP_COUNT)
        ep = K3_EP_OTHER;
    pthread_mutex_lock(&m->mu);
    m->n.requests[ep]++;
    m->n.errors[ep] += status >= 400;
    pthread_mutex_unlock(&m->mu);
}

void k3_metrics_answer(k3_metrics *m, size_t prompt, size_t cached, size_t generated,
                       double prompt_s, double gen_s, const k3_io_counters *io)
{
    pthread_mutex_lock(&m->mu);
    m->n.prompt_tokens += prompt;
    m->n.cached_tokens += cached;
    m->n.generated_tokens += generated;
    m->n.prompt_seconds += prompt_s;
    m->n.generation_seconds += gen_s;
    if (generated > 1 && gen_s > 0)
        m->n.last_tokens_per_second = (double)(generated - 1) / gen_s;
    m->n.io = *io;
    pthread_mutex_unlock(&m->mu);
}

void k3_metrics_drafts(k3_metrics *m, size_t drafted, size_t accepted)
{
    pthread_mutex_lock(&m->mu);
    m->n.drafted_tokens += drafted;
    m->n.accepted_tokens += accepted;
    pthread_mutex_unlock(&m->mu);
}

void k3_metrics_prefix(k3_metrics *m, const k3_prefix_stats *st)
{
    pthread_mutex_lock(&m->mu);
    m->n.prefix = *st;
    pthread_mutex_unlock(&m->mu);
}

/* "# HELP" and "# TYPE" of one metric. */
static int head(k3_buf *b, k3_err *e, const char *name, const char *type, const char *help)
{
    return k3_buf_printf(b, e, "# HELP k3_%s %s\n# TYPE k3_%s %s\n", name, help, name, type);
}

/* The prefix cache's lines (model/prefix_cache.h). */
static int prefix_text(const k3_prefix_stats *p, k3_buf *out, k3_err *e)
{
    const struct {
        const char *name, *type, *help;
        uint64_t v;
    } rows[] = {
        { "prefix_cache_hits_total", "counter", "Prompts started from a cached snapshot.",
          p->hits },
        { "prefix_cache_misses_total", "counter", "Prompts that found no snapshot to use.",
          p->misses },
        { "prefix_cache_disk_hits_total", "counter", "Of the hits, snapshots read from disk.",
          p->disk_hits },
        { "prefix_cache_tokens_saved_total", "counter",
          "Prompt positions restored from snapshots instead of computed.", p->tokens_saved },
        { "prefix_cache_snapshots_total", "counter", "Snapshots taken.", p->puts },
        { "prefix_cache_evictions_total", "counter",
          "Snapshots that left RAM for the budget (spilled or dropped).", p->evictions },
        { "prefix_cache_spills_total", "counter", "Snapshots written to the disk tier.",
          p->spills },
        { "prefix_cache_disk_evictions_total", "counter",
          "Snapshot files removed for the disk bound.", p->disk_evictions },
        { "prefix_cache_skipped_files_total", "counter",
          "Snapshot files skipped (foreign or corrupt).", p->skipped },
        { "prefix_cache_ram_bytes", "gauge", "Bytes of snapshots in RAM.", p->ram_bytes },
        { "prefix_cache_disk_bytes", "gauge", "Bytes of snapshot files.", p->disk_bytes },
        { "prefix_cache_ram_snapshots", "gauge", "Snapshots in RAM.", p->ram_entries },
        { "prefix_cache_disk_snapshots", "gauge", "Snapshot files.", p->disk_entries },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (head(out, e, rows[i].name, rows[i].type, rows[i].help) ||
            k3_buf_printf(out, e, "k3_%s %llu\n", rows[i].name, (unsigned long long)rows[i].v))
            return e->code;
    return K3_OK;
}

int k3_metrics_text(k3_metrics *m, size_t waiting, int running, k3_buf *out, k3_err *e)
{
    pthread_mutex_lock(&m->mu);
    k3_metric_counts c = m->n;
    pthread_mutex_unlock(&m->mu);
    double hit =
        c.io.expert_requests ? (double)c.io.expert_hits / (double)c.io.expert_requests : 0.0;
    if (head(out, e, "requests_total", "counter", "Requests answered, by endpoint."))
        return e->code;
    for (int i = 0; i < K3_EP_COUNT; i++)
        if (k3_buf_printf(out, e, "k3_requests_total{endpoint=\"%s\"} %llu\n", endpoint_names[i],
                          (unsigned long long)c.requests[i]))
            return e->code;
    if (head(out, e, "request_errors_total", "counter",
             "Requests answered with a status of 400 or more, by endpoint."))
        return e->code;
    for (int i = 0; i < K3_EP_COUNT; i++)
        if (k3_buf_printf(out, e, "k3_request_errors_total{endpoint=\"%s\"} %llu\n",
                          endpoint_names[i], (unsigned long long)c.errors[i]))
            return e->code;
    if (head(out, e, "prompt_tokens_total", "counter", "Prompt tokens of the answers.") ||
        k3_buf_printf(out, e, "k3_prompt_tokens_total %llu\n",
                      (unsigned long long)c.prompt_tokens) ||
        head(out, e, "prompt_tokens_cached_total", "counter",
             "Prompt tokens the model's state already held (not computed again).") ||
        k3_buf_printf(out, e, "k3_prompt_tokens_cached_total %llu\n",
                      (unsigned long long)c.cached_tokens) ||
        head(out, e, "generated_tokens_total", "counter", "Tokens generated.") ||
        k3_buf_printf(out, e, "k3_generated_tokens_total %llu\n",
                      (unsigned long long)c.generated_tokens) ||
        head(out, e, "draft_tokens_total", "counter",
             "Drafted tokens verified (speculative decoding).") ||
        k3_buf_printf(out, e, "k3_draft_tokens_total %llu\n",
                      (unsigned long long)c.drafted_tokens) ||
        head(out, e, "draft_tokens_accepted_total", "counter",
             "Of them, accepted (each one a forward pass saved).") ||
        k3_buf_printf(out, e, "k3_draft_tokens_accepted_total %llu\n",
                      (unsigned long long)c.accepted_tokens) ||
        head(out, e, "prompt_seconds_total", "counter", "Seconds spent feeding prompts.") ||
        k3_buf_printf(out, e, "k3_prompt_seconds_total %.6f\n", c.prompt_seconds) ||
        head(out, e, "generation_seconds_total", "counter", "Seconds spent generating.") ||
        k3_buf_printf(out, e, "k3_generation_seconds_total %.6f\n", c.generation_seconds) ||
        head(out, e, "generation_tokens_per_second", "gauge",
             "Generation speed of the latest answer.") ||
        k3_buf_printf(out, e, "k3_generation_tokens_per_second %.6f\n", c.last_tokens_per_second) ||
        head(out, e, "requests_waiting", "gauge", "Requests in the queue.") ||
        k3_buf_printf(out, e, "k3_requests_waiting %zu\n", waiting) ||
        head(out, e, "requests_running", "gauge", "Requests being answered.") ||
        k3_buf_printf(out, e, "k3_requests_running %d\n", running) ||
        head(out, e, "read_bytes_total", "counter", "Weight bytes read from disk, by kind.") ||
        k3_buf_printf(out, e, "k3_read_bytes_total{kind=\"trunk\"} %llu\n",
                      (unsigned long long)c.io.trunk_bytes) ||
        k3_buf_printf(out, e, "k3_read_bytes_total{kind=\"experts\"} %llu\n",
                      (unsigned long long)c.io.expert_bytes) ||
        head(out, e, "expert_requests_total", "counter", "Routed experts asked of the cache.") ||
        k3_buf_printf(out, e, "k3_expert_requests_total %llu\n",
                      (unsigned long long)c.io.expert_requests) ||
        head(out, e, "expert_hits_total", "counter", "Of them, found in memory.") ||
        k3_buf_printf(out, e, "k3_expert_hits_total %llu\n",
                      (unsigned long long)c.io.expert_hits) ||
        head(out, e, "expert_cache_hit_ratio", "gauge",
             "expert_hits_total / expert_requests_total.") ||
        k3_buf_printf(out, e, "k3_expert_cache_hit_ratio %.6f\n", hit))
        return e->code;
    return prefix_text(&c.prefix, out, e);
}
