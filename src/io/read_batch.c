/* read_batch.c - see read_batch.h. */
#include "io/read_batch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "io/read_queue.h"
#include "util/error.h"

typedef struct {
    uint8_t *dst;
    const uint8_t *src;
    size_t len;
} block_copy;

typedef struct {
    k3_file *file;
    uint64_t off, end, need; /* aligned range [off, end); the first need bytes must arrive */
    size_t iov0, copy0;      /* its destinations and block copies in the batch's arrays */
    size_t ncopy;
    int niov;
    size_t req;              /* a request it covers, for messages */
    size_t ord0, nord;       /* the requests it covers: order[ord0 .. ord0 + nord) */
} plan_read;

typedef struct {
    plan_read *reads;
    size_t nreads;
    k3_iov *iov;
    block_copy *copies;
    k3_read_req *q;          /* [nreads]: the reads as the queue runs them */
    const k3_span_req *reqs; /* the caller's requests */
    const k3_span_req **order; /* [n] by file and offset */
    k3_span_arrived_fn arrived; /* NULL or told of each completed request */
    void *arrived_ctx;
    pthread_mutex_t mu;      /* guards bytes, failed_read, err */
    uint64_t bytes;          /* covered by the reads that succeeded */
    size_t failed_read;      /* earliest failed read in disk order, nreads if none */
    k3_err err;              /* its message */
} batch;

static int by_file_offset(const void *a, const void *b)
{
    const k3_span_req *x = *(const k3_span_req *const *)a, *y = *(const k3_span_req *const *)b;
    uintptr_t fx = (uintptr_t)x->file, fy = (uintptr_t)y->file;
    if (fx != fy)
        return fx < fy ? -1 : 1;
    return (x->off > y->off) - (x->off < y->off);
}

/* Groups the sorted requests into reads (see the header). A request joins
 * the current read when its aligned span starts no later than the read's
 * end and at most one block before it: that block is then the last one of
 * the request that ended the read, already read there, and is copied. */
static void plan(batch *b, const k3_span_req *reqs, const k3_span_req **order, size_t n)
{
    plan_read *rd = NULL;
    const k3_span_req *last = NULL; /* the request whose span ends the current read */
    size_t niov = 0, ncopy = 0;
    for (size_t i = 0; i < n; i++) {
        const k3_span_req *r = order[i];
        if (!r->len)
            continue;
        uint64_t a = k3_io_align_down(r->off), z = k3_io_align_up(r->off + r->len);
        int join = rd && r->file == rd->file && a <= rd->end && a + K3_IO_ALIGN >= rd->end &&
                   (z <= rd->end || rd->niov < K3_IO_MAX_SEGS) &&
                   z - rd->off <= K3_BATCH_MAX_READ;
        if (!join) {
            rd = &b->reads[b->nreads++];
            memset(rd, 0, sizeof *rd);
            rd->file = r->file;
            rd->off = rd->end = a;
            rd->iov0 = niov;
            rd->copy0 = ncopy;
            rd->req = (size_t)(r - reqs);
            rd->ord0 = i;
        }
        rd->nord = i + 1 - rd->ord0;
        if (a < rd->end) {
            uint64_t stop = z < rd->end ? z : rd->end;
            block_copy c = { r->dst, last->dst + (a - k3_io_align_down(last->off)),
                             (size_t)(stop - a) };
            b->copies[ncopy++] = c;
            rd->ncopy++;
        }
        if (z > rd->end) {
            k3_iov v = { r->dst + (rd->end - a), (size_t)(z - rd->end) };
            b->iov[niov++] = v;
            rd->niov++;
            rd->end = z;
            last = r;
        }
        if (r->off + r->len - rd->off > rd->need)
            rd->need = r->off + r->len - rd->off;
    }
}

/* A read has ended (read_queue.h): its shared blocks copied, counted. */
static int read_done(void *ctx, size_t i, int rc, const k3_err *err)
{
    batch *b = ctx;
    plan_read *rd = &b->reads[i];
    for (size_t c = 0; rc == K3_OK && c < rd->ncopy; c++) {
        const block_copy *bc = &b->copies[rd->copy0 + c];
        memcpy(bc->dst, bc->src, bc->len);
    }
    for (size_t j = 0; rc == K3_OK && b->arrived && j < rd->nord; j++)
        if (b->order[rd->ord0 + j]->len) /* empty ones arrived at the start */
            b->arrived(b->arrived_ctx, (size_t)(b->order[rd->ord0 + j] - b->reqs));
    pthread_mutex_lock(&b->mu);
    if (rc == K3_OK) {
        b->bytes += rd->end - rd->off;
    } else if (i < b->failed_read) {
        b->failed_read = i;
        b->err = *err;
    }
    pthread_mutex_unlock(&b->mu);
    return 0; /* every read runs: the first failure in disk order is reported */
}

int k3_read_batch(const k3_span_req *reqs, size_t n, int threads, k3_batch_info *info,
                  k3_err *e)
{
    return k3_read_batch_each(reqs, n, threads, NULL, NULL, info, e);
}

int k3_read_batch_each(const k3_span_req *reqs, size_t n, int threads, k3_span_arrived_fn arrived,
                       void *ctx, k3_batch_info *info, k3_err *e)
{
    memset(info, 0, sizeof *info);
    if (!n)
        return K3_OK;
    batch b;
    memset(&b, 0, sizeof b);
    b.reqs = reqs;
    b.arrived = arrived;
    b.arrived_ctx = ctx;
    const k3_span_req **order = k3_malloc(e, n * sizeof *order, "read order");
    b.reads = k3_malloc(e, n * sizeof *b.reads, "read plan");
    b.iov = k3_malloc(e, n * sizeof *b.iov, "read plan");
    b.copies = k3_malloc(e, n * sizeof *b.copies, "read plan");
    b.q = k3_malloc(e, n * sizeof *b.q, "read plan");
    int rc = K3_OK;
    if (!order || !b.reads || !b.iov || !b.copies || !b.q) {
        rc = K3_ERUNTIME;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &reqs[i];
    qsort(order, n, sizeof *order, by_file_offset);
    b.order = order;
    plan(&b, reqs, order, n);
    b.failed_read = b.nreads;
    if (pthread_mutex_init(&b.mu, NULL) != 0) {
        rc = k3_fail(e, K3_ERUNTIME, "cannot create a mutex for the reader threads");
        goto out;
    }
    for (size_t i = 0; i < b.nreads; i++) {
        const plan_read *rd = &b.reads[i];
        k3_read_req r = { rd->file, rd->off, b.iov + rd->iov0, rd->niov, rd->need };
        b.q[i] = r;
    }
    for (size_t i = 0; arrived && i < n; i++)
        if (!reqs[i].len) /* nothing to read: complete now */
            arrived(ctx, i);
    k3_read_queue_run(b.q, b.nreads, threads, read_done, &b);
    pthread_mutex_destroy(&b.mu);
    info->reads = b.nreads;
    info->bytes = b.bytes;
    if (b.failed_read < b.nreads) {
        info->failed = b.reads[b.failed_read].req;
        rc = k3_fail(e, b.err.code, "%s", b.err.msg);
    }
out:
    free(order);
    free(b.reads);
    free(b.iov);
    free(b.copies);
    free(b.q);
    return rc;
}
