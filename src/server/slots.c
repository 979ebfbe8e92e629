/* slots.c - see slots.h. */
#include "server/slots.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/emit.h"
#include "server/engine.h"
#include "server/images.h"
#include "util/error.h"

typedef struct {
    k3_queue *q;
    k3_job *job;
} job_io;

/* One slot: its answerer (owned by the caller) and the answer it runs. */
typedef struct {
    k3_answerer *a;
    k3_job *job;      /* NULL: free */
    job_io ctx;
    k3_answer_io io;
    k3_answer *w;
    int in_call;      /* its rows are in this step's call, or it wants none */
} slot;

static int io_publish(void *ctx, const char *s, size_t n, k3_err *e)
{
    job_io *io = ctx;
    return k3_queue_publish(io->q, io->job, s, n, e);
}

static int io_cancelled(void *ctx)
{
    job_io *io = ctx;
    return k3_queue_cancelled(io->q, io->job);
}

static int server_failed(k3_server *s)
{
    pthread_mutex_lock(&s->mu);
    int failed = s->failed;
    pthread_mutex_unlock(&s->mu);
    return failed;
}

/* The prefix cache's statistics to /metrics (with a cache). */
static void publish_prefix(k3_server *s, const slot *sl)
{
    if (sl->a->cache) {
        k3_prefix_stats ps;
        k3_prefix_cache_stats(sl->a->cache, &ps);
        k3_metrics_prefix(&s->metrics, &ps);
    }
}

/* The job's answer is over: account for it and hand it back. */
static void retire(k3_server *s, slot *sl, int status)
{
    k3_job *job = sl->job;
    if (job->stats.error.code == K3_EINVALID) {
        pthread_mutex_lock(&s->mu);
        s->failed = 1;
        snprintf(s->failure, sizeof s->failure, "%s", job->stats.error.msg);
        pthread_mutex_unlock(&s->mu);
        fprintf(stderr, "k3 serve: %s; /health now answers 503 and every "
                        "request is refused: restart the server\n", job->stats.error.msg);
    }
    k3_io_counters reads;
    k3_model_io(sl->a->model, &reads);
    k3_metrics_answer(&s->metrics, job->answer.n, job->stats.reused, job->stats.generated,
                      job->stats.prompt_seconds, job->stats.gen_seconds, &reads);
    k3_metrics_drafts(&s->metrics, job->stats.drafted, job->stats.accepted);
    publish_prefix(s, sl);
    sl->job = NULL;
    sl->w = NULL;
    k3_server_images_free(&job->answer); /* the rows are in the state now */
    k3_queue_done(&s->queue, job, status);
    /* The answer is out: its new snapshots go to the disk tier behind it,
     * on the cache's writer thread, so a kill -9 soon after loses none
     * (prefix_cache.h); /metrics counts the writes at the next answer. */
    if (sl->a->cache)
        k3_prefix_cache_flush(sl->a->cache);
}

/* The job's images encoded (server/images.h) before it picks a slot, as
 * a slot's reuse compares them. A failure (the tower's read, memory) is
 * the job's 500, published here. Returns 0 when the job may run. */
static int encode_images(k3_server *s, k3_job *job)
{
    k3_err e = { 0, "" }, e2 = { 0, "" };
    if (k3_server_images_encode(&s->vision, job->answer.req->chat, &job->answer, &e) == K3_OK)
        return 0;
    k3_api_error err;
    k3_buf b = { 0 };
    k3_api_fail(&err, 500, NULL, "messages", "encoding the images failed: %s", e.msg);
    if (k3_emit_error_as(job->answer.req->kind, &err, job->answer.req->stream, &b, &e2) == K3_OK)
        k3_queue_publish(&s->queue, job, b.data, b.len, &e2);
    k3_buf_free(&b);
    k3_server_images_free(&job->answer);
    k3_queue_done(&s->queue, job, 500);
    return 1;
}

/* The free slot whose state keeps the most of job's prompt (ties: the
 * first), or NULL. */
static slot *pick(slot *sl, size_t n, const k3_job *job)
{
    slot *best = NULL;
    size_t keep = 0;
    for (size_t i = 0; i < n; i++) {
        if (sl[i].job)
            continue;
        size_t k = k3_answer_reusable(sl[i].a, &job->answer);
        if (!best || k > keep)
            best = &sl[i], keep = k;
    }
    return best;
}

/* Takes queued jobs into free slots (waiting for one when all are free).
 * Returns the slots in use, or 0 once the queue stops with none. */
static size_t admit(k3_server *s, slot *sl, size_t n, size_t used)
{
    k3_job *job;
    while (used < n && (job = k3_queue_take(&s->queue, used == 0))) {
        if (server_failed(s)) { /* after an invalid run, what waits is refused */
            k3_queue_done(&s->queue, job, 503);
            continue;
        }
        if (encode_images(s, job))
            continue;
        slot *x = pick(sl, n, job);
        x->job = job;
        x->ctx.q = &s->queue;
        x->ctx.job = job;
        k3_answer_io io = { &x->ctx, io_publish, io_cancelled };
        x->io = io;
        k3_err e = { 0, "" };
        if (k3_answer_begin(x->a, &job->answer, &x->io, &job->stats, &x->w, &e) != K3_OK) {
            if (x->w) {
                k3_answer_fail(x->w, &e);
                retire(s, x, k3_answer_finish(x->w));
            } else {
                retire(s, x, 500);
            }
            continue;
        }
        used++;
    }
    return used;
}

/* One step over the slots in use (slots.h). */
static void step(slot *sl, size_t n, k3_seq *seqs, slot **who)
{
    size_t ns = 0, rows = 0;
    k3_err e = { 0, "" };
    for (size_t i = 0; i < n; i++) {
        sl[i].in_call = 0;
        if (!sl[i].job || !k3_answer_decoding(sl[i].w))
            continue;
        sl[i].in_call = 1; /* a cancelled one wants no row: advancing ends it */
        if (k3_answer_want(sl[i].w, 1, &seqs[ns])) { /* its id, and drafts to verify */
            rows += seqs[ns].n;
            who[ns++] = &sl[i];
        }
    }
    /* Then the prompts, the fewest ids left first: a short prompt arriving
     * during a long one's prefill goes in at the next step, and the long
     * one takes what is left of the chunk. */
    for (;;) {
        slot *next = NULL;
        for (size_t i = 0; i < n; i++)
            if (sl[i].job && !sl[i].in_call && !k3_answer_decoding(sl[i].w) &&
                (!next || k3_answer_prompt_left(sl[i].w) < k3_answer_prompt_left(next->w)))
                next = &sl[i];
        if (!next || (rows >= K3_PREFILL_CHUNK && ns > 0))
            break;
        size_t room = rows < K3_PREFILL_CHUNK ? K3_PREFILL_CHUNK - rows : 1;
        next->in_call = 1; /* in the call, or needing no rows (advanced all the same) */
        if (k3_answer_want(next->w, room, &seqs[ns])) {
            rows += seqs[ns].n;
            who[ns++] = next;
        }
    }
    if (ns > 0 && k3_engine_forward_multi(sl[0].a->model, seqs, ns, &e) != K3_OK)
        for (size_t k = 0; k < ns; k++)
            k3_answer_fail(who[k]->w, &e); /* every state of the call is suspect */
}

void *k3_slots_worker(void *arg)
{
    k3_slots_arg *w = arg;
    k3_server *s = w->s;
    size_t n = w->n, used = 0;
    slot *sl = calloc(n, sizeof *sl);
    k3_seq *seqs = calloc(n, sizeof *seqs);
    slot **who = calloc(n, sizeof *who);
    if (!sl || !seqs || !who) {
        fprintf(stderr, "k3 serve: out of memory for the slots\n");
        k3_queue_stop(&s->queue);
        n = 0;
    }
    for (size_t i = 0; i < n; i++)
        sl[i].a = &w->a[i];
    if (s->cfg->threads > 0)
        omp_set_num_threads(s->cfg->threads); /* per thread: set here, not in main */
    while (n > 0 && (used = admit(s, sl, n, used)) > 0) {
        step(sl, n, seqs, who);
        for (size_t i = 0; i < n; i++) {
            if (!sl[i].job || !sl[i].in_call)
                continue;
            int done = 0;
            k3_err e = { 0, "" };
            k3_answer_advance(sl[i].w, &done, &e);
            if (done) {
                retire(s, &sl[i], k3_answer_finish(sl[i].w));
                used--;
            }
        }
    }
    free(sl);
    free(seqs);
    free(who);
    return NULL;
}
