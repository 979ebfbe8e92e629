/* read_queue.c - see read_queue.h. */
#include "io/read_queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/os.h"

/* Threads beyond this only queue behind each other in the device. */
#define MAX_THREADS 16
#define MAX_DEPTH 256

enum { WANT_AUTO, WANT_URING, WANT_THREADS };

/* Process-wide: the environment's choice and what ran (under lock). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int parsed;
    int want, depth;
    int bad_want, bad_depth;  /* the environment's values were refused */
    int probed;               /* a ring was tried once */
    int unavailable;          /* a ring was refused: threads from now on */
    char why[128];
    uint64_t uring_runs, thread_runs;
} q = { 0, WANT_AUTO, K3_IO_DEPTH_DEFAULT, 0, 0, 0, 0, "", 0, 0 };

/* Called with lock held. */
static void parse_env(void)
{
    if (q.parsed)
        return;
    q.parsed = 1;
    const char *w = getenv("K3_IO"), *d = getenv("K3_IO_DEPTH");
    if (w && *w) {
        if (!strcmp(w, "uring"))
            q.want = WANT_URING;
        else if (!strcmp(w, "threads"))
            q.want = WANT_THREADS;
        else
            q.bad_want = 1;
    }
    if (d && *d) {
        char *end;
        long v = strtol(d, &end, 10);
        if (*end || v < 1 || v > MAX_DEPTH)
            q.bad_depth = 1;
        else
            q.depth = (int)v;
    }
}

/* Whether runs will use a ring: the environment allows one and the kernel
 * gave one (tried once, with lock held). */
static int ring_wanted(void)
{
    parse_env();
    if (q.want == WANT_THREADS || q.unavailable)
        return 0;
    if (!q.probed) {
        q.probed = 1;
        k3_os_ring *r = k3_os_ring_open(1, q.why, sizeof q.why);
        q.unavailable = !r;
        k3_os_ring_close(r);
    }
    return !q.unavailable;
}

uint64_t k3_read_queue_piece(uint64_t len, uint64_t whole)
{
    pthread_mutex_lock(&lock);
    int ring = ring_wanted();
    uint64_t depth = (uint64_t)q.depth;
    pthread_mutex_unlock(&lock);
    if (!ring)
        return whole < len ? whole : len;
    uint64_t p = (len + depth - 1) / depth;
    p = (p + K3_IO_PIECE_MIN - 1) / K3_IO_PIECE_MIN * K3_IO_PIECE_MIN;
    p = p < K3_IO_PIECE_MIN ? K3_IO_PIECE_MIN : p > K3_IO_PIECE ? K3_IO_PIECE : p;
    return p < len ? p : len;
}

int k3_read_queue_check(k3_err *e)
{
    pthread_mutex_lock(&lock);
    parse_env();
    int bw = q.bad_want, bd = q.bad_depth;
    pthread_mutex_unlock(&lock);
    if (bw)
        return k3_fail(e, K3_EINPUT, "K3_IO=%s: expected uring or threads", getenv("K3_IO"));
    if (bd)
        return k3_fail(e, K3_EINPUT, "K3_IO_DEPTH=%s: expected a whole number 1..%d",
                       getenv("K3_IO_DEPTH"), MAX_DEPTH);
    return K3_OK;
}

int k3_read_queue_select(const char *reader, int depth)
{
    int want = !reader ? WANT_AUTO : !strcmp(reader, "uring") ? WANT_URING
               : !strcmp(reader, "threads") ? WANT_THREADS : -1;
    if (want < 0 || depth < 1 || depth > MAX_DEPTH)
        return -1;
    pthread_mutex_lock(&lock);
    parse_env();
    q.want = want;
    q.depth = depth;
    q.uring_runs = q.thread_runs = 0;
    pthread_mutex_unlock(&lock);
    return 0;
}

const char *k3_read_queue_reader(int *depth, const char **why)
{
    pthread_mutex_lock(&lock);
    const char *name = q.uring_runs && q.thread_runs ? "uring+threads"
                       : q.uring_runs               ? "uring"
                       : q.thread_runs              ? "threads"
                                                    : "none";
    *depth = q.uring_runs ? q.depth : 0;
    *why = q.thread_runs && q.want != WANT_THREADS ? q.why : "";
    pthread_mutex_unlock(&lock);
    return name;
}

/* ---- the threads reader ---- */

typedef struct {
    const k3_read_req *reqs;
    size_t n;
    k3_read_done_fn done;
    void *ctx;
    pthread_mutex_t mu;       /* guards next and stop */
    size_t next;
    int stop;
} pool;

static void *pool_worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->stop ? p->n : p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n)
            return NULL;
        const k3_read_req *r = &p->reqs[i];
        k3_err e = { 0, "" };
        int rc = k3_file_readv(r->file, r->off, r->iov, r->niov, r->need, &e);
        if (p->done(p->ctx, i, rc, &e)) {
            pthread_mutex_lock(&p->mu);
            p->stop = 1;
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static void run_threads(const k3_read_req *reqs, size_t n, int threads, k3_read_done_fn done,
                        void *ctx)
{
    pool p = { reqs, n, done, ctx, PTHREAD_MUTEX_INITIALIZER, 0, 0 };
    pthread_t tid[MAX_THREADS];
    size_t want = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : (size_t)threads;
    size_t started = 0;
    if (want > n)
        want = n;
    /* A thread that cannot be started only means fewer reads in flight. */
    while (started + 1 < want && pthread_create(&tid[started], NULL, pool_worker, &p) == 0)
        started++;
    pool_worker(&p);
    for (size_t t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&p.mu);
}

/* ---- the uring reader ---- */

/* A read in flight: its attempts (k3_read_op) and the bytes of the current
 * attempt transferred so far. */
typedef struct {
    k3_read_op op;
    size_t i;
    uint64_t got;
} cell;

typedef struct {
    k3_os_ring *ring;
    const k3_read_req *reqs;
    k3_read_done_fn done;
    void *ctx;
    int stop;                 /* done asked for no more starts */
    size_t live;              /* reads in the ring */
} uring_run;

static void finish(uring_run *u, cell *c, int rc, const k3_err *e)
{
    if (u->done(u->ctx, c->i, rc, e))
        u->stop = 1;
}

/* Queues the rest of c's current attempt (from byte c->got); -1 with errno
 * when the ring will not take it. */
static int queue_rest(uring_run *u, cell *c, uint64_t tag)
{
    k3_os_iov rest[K3_IO_MAX_SEGS];
    int n = 0;
    uint64_t skip = c->got;
    for (int s = 0; s < c->op.niov; s++) {
        const k3_iov *v = &c->op.iov[s];
        if (skip >= v->len) {
            skip -= v->len;
            continue;
        }
        rest[n].buf = (char *)v->buf + skip;
        rest[n].len = v->len - (size_t)skip;
        skip = 0;
        n++;
    }
    return k3_os_ring_read(u->ring, c->op.f->fd, rest, n, c->op.off + c->got, tag);
}

/* Runs c's attempts until one is in the ring (1) or the read has ended (0),
 * starting with the verdict `next` on the attempt before. */
static int advance(uring_run *u, cell *c, uint64_t tag, int next, k3_err *e)
{
    while (next == K3_READ_AGAIN) {
        int err = 0;
        c->got = 0;
        if (k3_read_op_begin(&c->op, &err)) {
            if (queue_rest(u, c, tag) == 0) {
                u->live++;
                return 1;
            }
            err = errno;
        }
        next = k3_read_op_end(&c->op, -1, err, e);
    }
    if (next == K3_READ_DONE)
        finish(u, c, K3_OK, e);
    else
        finish(u, c, e->code, e);
    return 0;
}

/* Starts read i in cell c: 1 when it is in the ring. */
static int start(uring_run *u, cell *c, size_t i, uint64_t tag)
{
    const k3_read_req *r = &u->reqs[i];
    k3_err e = { 0, "" };
    c->i = i;
    if (k3_read_op_init(&c->op, r->file, r->off, r->iov, r->niov, r->need, &e) != K3_OK) {
        finish(u, c, e.code, &e);
        return 0;
    }
    return advance(u, c, tag, K3_READ_AGAIN, &e);
}

/* Handles the completion res of cell c: 1 while the read stays in flight. */
static int complete(uring_run *u, cell *c, uint64_t tag, int64_t res)
{
    k3_err e = { 0, "" };
    int next;
    u->live--;
    if (res == -EINTR || res == -EAGAIN) {
        next = -1; /* not an attempt: the same transfer again */
    } else if (res < 0) {
        next = k3_read_op_end(&c->op, -1, (int)-res, &e);
    } else {
        c->got += (uint64_t)res;
        if (res > 0 && c->got < c->op.total)
            next = -1; /* a partial transfer: the rest of it */
        else
            next = k3_read_op_end(&c->op, (int64_t)c->got, 0, &e);
    }
    if (next == -1) {
        if (queue_rest(u, c, tag) == 0) {
            u->live++;
            return 1;
        }
        next = k3_read_op_end(&c->op, -1, errno, &e);
    }
    return advance(u, c, tag, next, &e);
}

/* Runs the reads on the ring, at most depth (<= MAX_DEPTH) in it at once. */
static void run_uring(k3_os_ring *ring, int depth, const k3_read_req *reqs, size_t n,
                      k3_read_done_fn done, void *ctx)
{
    cell cells[MAX_DEPTH];
    int free_cells[MAX_DEPTH], nfree = 0;
    uring_run u = { ring, reqs, done, ctx, 0, 0 };
    for (int c = depth - 1; c >= 0; c--)
        free_cells[nfree++] = c;
    size_t next = 0;
    for (;;) {
        while (!u.stop && next < n && nfree > 0) {
            int c = free_cells[--nfree];
            if (!start(&u, &cells[c], next++, (uint64_t)c))
                free_cells[nfree++] = c;
        }
        if (u.live == 0)
            return;
        uint64_t tag;
        int64_t res;
        if (k3_os_ring_wait(ring, &tag, &res) != 0) {
            /* The ring itself failed (it does not, short of a kernel bug):
             * the reads in it cannot be trusted. */
            k3_err e = { 0, "" };
            k3_fail(&e, K3_ERUNTIME, "the io_uring reader failed: %s", strerror(errno));
            for (int c = 0; c < depth; c++) {
                int is_free = 0;
                for (int k = 0; k < nfree; k++)
                    is_free |= free_cells[k] == c;
                if (!is_free)
                    finish(&u, &cells[c], e.code, &e);
            }
            return;
        }
        if (!complete(&u, &cells[tag], tag, res))
            free_cells[nfree++] = (int)tag;
    }
}

/* ---- choosing ---- */

void k3_read_queue_run(const k3_read_req *reqs, size_t n, int threads, k3_read_done_fn done,
                       void *ctx)
{
    if (!n)
        return;
    pthread_mutex_lock(&lock);
    int try_ring = ring_wanted();
    int depth = q.depth;
    pthread_mutex_unlock(&lock);
    if ((size_t)depth > n)
        depth = (int)n;
    k3_os_ring *ring = NULL;
    char why[128] = "";
    if (try_ring && !(ring = k3_os_ring_open(depth, why, sizeof why))) {
        pthread_mutex_lock(&lock);
        q.unavailable = 1;
        snprintf(q.why, sizeof q.why, "%s", why);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    if (ring)
        q.uring_runs++;
    else
        q.thread_runs++;
    pthread_mutex_unlock(&lock);
    if (ring) {
        run_uring(ring, depth, reqs, n, done, ctx);
        k3_os_ring_close(ring);
    } else {
        run_threads(reqs, n, threads, done, ctx);
    }
}

/* The pieces of one span: the lowest failed piece's error wins, as one
 * read's would (done runs on the caller's thread: threads = 1, or uring). */
typedef struct {
    size_t failed; /* lowest failed piece, n if none */
    k3_err err;
} span_reads;

static int span_done(void *ctx, size_t i, int rc, const k3_err *e)
{
    span_reads *s = ctx;
    if (rc != K3_OK && i < s->failed) {
        s->failed = i;
        s->err = *e;
    }
    return rc != K3_OK;
}

int k3_read_queue_span(k3_file *f, void *buf, size_t cap, uint64_t off, uint64_t len,
                       const uint8_t **data, k3_err *e)
{
    uint64_t start;
    if (k3_span_prepare(f, buf, cap, off, len, data, &start, e) != K3_OK || len == 0)
        return e->code;
    /* need: the bytes that must come back (the file may end inside the
     * last aligned block); each piece but the last is a multiple of
     * K3_IO_PIECE_MIN, so every piece starts aligned, and its buffer length
     * rounded up stays within the span's aligned cap. */
    uint64_t need = off + len - start;
    uint64_t piece = k3_read_queue_piece(need, need);
    size_t n = (size_t)((need + piece - 1) / piece);
    k3_read_req *reqs = k3_malloc(e, n * sizeof *reqs, "span reads");
    k3_iov *iov = k3_malloc(e, n * sizeof *iov, "span reads");
    if (reqs && iov) {
        for (size_t i = 0; i < n; i++) {
            uint64_t at = (uint64_t)i * piece;
            uint64_t m = need - at < piece ? need - at : piece;
            iov[i].buf = (uint8_t *)buf + at;
            iov[i].len = (size_t)k3_io_align_up(m);
            reqs[i] = (k3_read_req){ f, start + at, &iov[i], 1, m };
        }
        span_reads s;
        memset(&s, 0, sizeof s);
        s.failed = n;
        k3_read_queue_run(reqs, n, 1, span_done, &s);
        if (s.failed < n)
            k3_fail(e, s.err.code, "%s", s.err.msg);
    }
    free(reqs);
    free(iov);
    return e->code;
}
