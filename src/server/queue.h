/* queue.h - the generation queue between connection threads and the one
 * worker thread that owns the model.
 *
 * A connection thread submits a job and then only waits on it: it takes
 * the bytes the worker publishes and writes them to its client, so the
 * worker never blocks on a slow client. At most max_waiting jobs wait
 * behind the running one; a submit beyond that is refused (503). A client
 * that goes away cancels its job: a waiting job leaves the queue at once, a
 * running one is flagged and the worker stops it at its next token. One
 * mutex guards all of it; each job has its own condition variable. */
#ifndef K3_SERVER_QUEUE_H
#define K3_SERVER_QUEUE_H

#include <pthread.h>
#include <stddef.h>

#include "k3/error.h"
#include "server/answer.h"
#include "util/json_write.h"

typedef struct k3_job {
    /* Set before k3_queue_submit, then read-only. */
    k3_answer_job answer;
    char id[48];          /* the response id answer.id points to */
    /* Guarded by the queue's mutex. */
    k3_buf out;           /* published bytes the connection has not taken yet */
    int status;           /* when done: the HTTP status of what was published */
    int done;             /* the worker is finished with the job */
    int cancelled;        /* the client is gone, or the server is stopping */
    k3_answer_stats stats;
    pthread_cond_t cond;  /* out grew, or done */
    struct k3_job *next;
} k3_job;

typedef struct k3_queue {
    pthread_mutex_t mu;
    pthread_cond_t work; /* the worker waits here for jobs */
    k3_job *head, *tail;
    size_t waiting, max_waiting;
    k3_job **running;    /* [nslots] the jobs the worker is on (NULL: a free slot) */
    size_t nslots, nrunning;
    int stopping;
} k3_queue;

int k3_queue_init(k3_queue *q, size_t max_waiting, size_t nslots, k3_err *e);
void k3_queue_destroy(k3_queue *q);

/* A zeroed job ready for answer to be filled in; k3_job_free releases. */
int k3_job_init(k3_job *job, k3_err *e);
void k3_job_free(k3_job *job);

/* Connection side. submit: 0, or -1 when the queue is full or stopping.
 * wait: waits up to ms milliseconds for output or the end, then moves the
 * published bytes into *take (replacing its contents); returns 1 once the
 * job is done and everything was taken. cancel: returns 1 if the job left
 * the queue before running (the connection may free it at once), 0 if the
 * worker has it (wait for done). */
int k3_queue_submit(k3_queue *q, k3_job *job);
int k3_queue_wait(k3_queue *q, k3_job *job, int ms, k3_buf *take);
int k3_queue_cancel(k3_queue *q, k3_job *job);

/* Worker side. take: the next job (waiting for one when block, else NULL
 * when none waits), or NULL once stopping; it counts as running until
 * done. It needs a free slot (nrunning < nslots). publish appends
 * bytes for the connection; cancelled reads the flag; done hands the job
 * back. */
k3_job *k3_queue_take(k3_queue *q, int block);
int k3_queue_stopping(k3_queue *q);
int k3_queue_publish(k3_queue *q, k3_job *job, const char *s, size_t n, k3_err *e);
int k3_queue_cancelled(k3_queue *q, k3_job *job);
void k3_queue_done(k3_queue *q, k3_job *job, int status);

/* Stops: waiting jobs end at once with status 503, the running one is
 * cancelled, and take returns NULL from now on. */
void k3_queue_stop(k3_queue *q);

/* Jobs waiting and how many run (for /health). */
void k3_queue_load(k3_queue *q, size_t *waiting, int *running);

#endif
