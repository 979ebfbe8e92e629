/* queue.c - see queue.h. */
#include "server/queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/images.h"
#include "structured/constrain.h"
#include "util/error.h"

int k3_queue_init(k3_queue *q, size_t max_waiting, size_t nslots, k3_err *e)
{
    memset(q, 0, sizeof *q);
    q->max_waiting = max_waiting;
    q->nslots = nslots;
    q->running = calloc(nslots, sizeof *q->running);
    if (!q->running)
        return k3_fail(e, K3_ERUNTIME, "out of memory for the queue");
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        return free(q->running), k3_fail(e, K3_ERUNTIME, "cannot create a mutex");
    if (pthread_cond_init(&q->work, NULL) != 0) {
        pthread_mutex_destroy(&q->mu);
        free(q->running);
        return k3_fail(e, K3_ERUNTIME, "cannot create a condition variable");
    }
    return K3_OK;
}

void k3_queue_destroy(k3_queue *q)
{
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->mu);
    free(q->running);
}

int k3_job_init(k3_job *job, k3_err *e)
{
    pthread_condattr_t attr;
    memset(job, 0, sizeof *job);
    /* Timed waits on the monotonic clock: immune to the wall clock moving. */
    int rc = pthread_condattr_init(&attr);
    if (rc == 0) {
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        rc = pthread_cond_init(&job->cond, &attr);
        pthread_condattr_destroy(&attr);
    }
    return rc ? k3_fail(e, K3_ERUNTIME, "cannot create a condition variable") : K3_OK;
}

void k3_job_free(k3_job *job)
{
    pthread_cond_destroy(&job->cond);
    k3_buf_free(&job->out);
    free(job->answer.ids);
    job->answer.ids = NULL;
    k3_constrain_free(job->answer.cons);
    job->answer.cons = NULL;
    free(job->answer.warnings);
    job->answer.warnings = NULL;
    k3_server_images_free(&job->answer);
}

int k3_queue_submit(k3_queue *q, k3_job *job)
{
    pthread_mutex_lock(&q->mu);
    /* With one slot: max_waiting behind the running job (as before slots). */
    int ok = !q->stopping && q->waiting < q->max_waiting + (q->nslots - q->nrunning);
    if (ok) {
        job->next = NULL;
        if (q->tail)
            q->tail->next = job;
        else
            q->head = job;
        q->tail = job;
        q->waiting++;
        pthread_cond_signal(&q->work);
    }
    pthread_mutex_unlock(&q->mu);
    return ok ? 0 : -1;
}

/* Removes job from the waiting list; 1 if it was there. Lock held. */
static int unlink_job(k3_queue *q, k3_job *job)
{
    k3_job **p = &q->head, *prev = NULL;
    while (*p && *p != job) {
        prev = *p;
        p = &(*p)->next;
    }
    if (!*p)
        return 0;
    *p = job->next;
    if (q->tail == job)
        q->tail = prev;
    q->waiting--;
    return 1;
}

int k3_queue_wait(k3_queue *q, k3_job *job, int ms, k3_buf *take)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&q->mu);
    while (!job->done && job->out.len == 0)
        if (pthread_cond_timedwait(&job->cond, &q->mu, &until) == ETIMEDOUT)
            break;
    /* Hand the published bytes over without copying them. */
    k3_buf mine = *take;
    *take = job->out;
    job->out = mine;
    job->out.len = 0;
    int done = job->done;
    pthread_mutex_unlock(&q->mu);
    return done;
}

int k3_queue_cancel(k3_queue *q, k3_job *job)
{
    pthread_mutex_lock(&q->mu);
    job->cancelled = 1;
    int gone = job->done || unlink_job(q, job);
    pthread_mutex_unlock(&q->mu);
    return gone;
}

k3_job *k3_queue_take(k3_queue *q, int block)
{
    pthread_mutex_lock(&q->mu);
    while (block && !q->stopping && !q->head)
        pthread_cond_wait(&q->work, &q->mu);
    k3_job *job = q->stopping || q->nrunning == q->nslots ? NULL : q->head;
    if (job) {
        unlink_job(q, job);
        for (size_t i = 0; i < q->nslots; i++)
            if (!q->running[i]) {
                q->running[i] = job;
                break;
            }
        q->nrunning++;
    }
    pthread_mutex_unlock(&q->mu);
    return job;
}

int k3_queue_stopping(k3_queue *q)
{
    pthread_mutex_lock(&q->mu);
    int s = q->stopping;
    pthread_mutex_unlock(&q->mu);
    return s;
}

int k3_queue_publish(k3_queue *q, k3_job *job, const char *s, size_t n, k3_err *e)
{
    pthread_mutex_lock(&q->mu);
    int rc = job->cancelled ? K3_OK : k3_buf_put(&job->out, s, n, e);
    pthread_cond_signal(&job->cond);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int k3_queue_cancelled(k3_queue *q, k3_job *job)
{
    pthread_mutex_lock(&q->mu);
    int c = job->cancelled;
    pthread_mutex_unlock(&q->mu);
    return c;
}

void k3_queue_done(k3_queue *q, k3_job *job, int status)
{
    pthread_mutex_lock(&q->mu);
    job->status = status;
    job->done = 1;
    for (size_t i = 0; i < q->nslots; i++)
        if (q->running[i] == job) {
            q->running[i] = NULL;
            q->nrunning--;
        }
    pthread_cond_signal(&job->cond);
    pthread_mutex_unlock(&q->mu);
}

void k3_queue_stop(k3_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    for (size_t i = 0; i < q->nslots; i++)
        if (q->running[i])
            q->running[i]->cancelled = 1;
    while (q->head) {
        k3_job *job = q->head;
        unlink_job(q, job);
        job->cancelled = 1;
        job->status = 503;
        job->done = 1;
        pthread_cond_signal(&job->cond);
    }
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->mu);
}

void k3_queue_load(k3_queue *q, size_t *waiting, int *running)
{
    pthread_mutex_lock(&q->mu);
    *waiting = q->waiting;
    *running = (int)q->nrunning;
    pthread_mutex_unlock(&q->mu);
}
