/* metrics.h - what the server counts, and GET /metrics: the counts in
 * Prometheus' text format (version 0.0.4), every name prefixed k3_.
 *
 * Connection threads count requests; the worker counts tokens, seconds
 * and the model's reads after each answer (it alone touches the model).
 * One mutex guards all of it. */
#ifndef K3_SERVER_METRICS_H
#define K3_SERVER_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"
#include "k3/k3.h"
#include "model/prefix_cache.h"
#include "util/json_write.h"

/* The endpoints requests are counted under. */
enum {
    K3_EP_CHAT,
    K3_EP_COMPLETIONS,
    K3_EP_TOKENIZE,
    K3_EP_DETOKENIZE,
    K3_EP_MODELS,
    K3_EP_HEALTH,
    K3_EP_METRICS,
    K3_EP_OTHER,
    K3_EP_COUNT
};

/* The counts (a plain struct, so they can be copied out under the mutex). */
typedef struct k3_metric_counts {
    uint64_t requests[K3_EP_COUNT]; /* answered, any status */
    uint64_t errors[K3_EP_COUNT];   /* answered with a status >= 400 */
    uint64_t prompt_tokens;         /* prompt ids of the answers */
    uint64_t cached_tokens;         /* of them, ids the state already held */
    uint64_t generated_tokens;
    uint64_t drafted_tokens;        /* drafts verified (speculative decoding) */
    uint64_t accepted_tokens;       /* of them, kept */
    double prompt_seconds;          /* feeding the new prompt ids */
    double generation_seconds;      /* from the first generated id to the last */
    double last_tokens_per_second;  /* generation speed of the latest answer */
    k3_io_counters io;              /* the model's reads, as of the latest answer */
    k3_prefix_stats prefix;         /* the prefix cache's, as of the latest answer */
} k3_metric_counts;

typedef struct k3_metrics {
    pthread_mutex_t mu;
    k3_metric_counts n;
} k3_metrics;

void k3_metrics_init(k3_metrics *m);
void k3_metrics_destroy(k3_metrics *m);

/* A connection thread: one request answered with status on endpoint ep. */
void k3_metrics_request(k3_metrics *m, int ep, int status);

/* The worker, after an answer: its tokens and seconds, and the model's
 * reads so far. */
void k3_metrics_answer(k3_metrics *m, size_t prompt, size_t cached, size_t generated,
                       double prompt_s, double gen_s, const k3_io_counters *io);
/* The same answer's drafts: verified, and of them kept. */
void k3_metrics_drafts(k3_metrics *m, size_t drafted, size_t accepted);

/* The prefix cache's counts (the worker, after an answer). */
void k3_metrics_prefix(k3_metrics *m, const k3_prefix_stats *st);

/* The exposition text, with the queue's load as gauges. */
int k3_metrics_text(k3_metrics *m, size_t waiting, int running, k3_buf *out, k3_err *e);

#endif
