/* read_hashed.c - see read_hashed.h. */
#include "io/read_hashed.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "io/codec.h"
#include "io/read_queue.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/xxh3.h"
#include "util/xxh64.h"

typedef struct {
    const uint8_t *buf;
    uint64_t len;
    uint64_t ready;      /* bytes read so far (under mu) */
    int failed;          /* the read failed: stop hashing (under mu) */
    uint64_t *blocks;    /* format 3: a hash per K3_CODEC_BLOCK block, else NULL */
    uint64_t hash;
    double seconds;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} hasher;

static void *hash_main(void *arg)
{
    hasher *h = arg;
    k3_xxh64_state s;
    k3_xxh64_init(&s, 0);
    uint64_t done = 0;
    while (done < h->len) {
        pthread_mutex_lock(&h->mu);
        while (h->ready == done && !h->failed)
            pthread_cond_wait(&h->cv, &h->mu);
        uint64_t ready = h->ready;
        int failed = h->failed;
        pthread_mutex_unlock(&h->mu);
        if (failed)
            return NULL;
        double t0 = k3_seconds();
        if (h->blocks) /* ready is a multiple of the block (the chunk is) or len */
            for (; done < ready; done += K3_CODEC_BLOCK)
                h->blocks[done / K3_CODEC_BLOCK] =
                    k3_xxh3_64(h->buf + done, k3_codec_block_len(h->len, done / K3_CODEC_BLOCK));
        else
            k3_xxh64_update(&s, h->buf + done, (size_t)(ready - done));
        h->seconds += k3_seconds() - t0;
        done = ready;
    }
    if (h->blocks)
        h->hash = k3_codec_fold(h->blocks, (size_t)k3_codec_nblocks(h->len));
    else
        h->hash = k3_xxh64_digest(&s);
    return NULL;
}

/* The reads of one range: chunks arrive in any order; the hasher is given
 * the prefix that has arrived whole. */
typedef struct {
    hasher *h;
    uint64_t piece;
    size_t n, prefix;    /* chunks, and how many from the first have arrived */
    uint8_t *arrived;    /* [n] (under h->mu) */
    size_t failed;       /* lowest failed chunk, n if none */
    k3_err err;          /* its failure */
} reads;

static int chunk_done(void *ctx, size_t i, int rc, const k3_err *e)
{
    reads *r = ctx;
    hasher *h = r->h;
    pthread_mutex_lock(&h->mu);
    if (rc != K3_OK) {
        h->failed = 1;
        if (i < r->failed) {
            r->failed = i;
            r->err = *e;
        }
    } else {
        r->arrived[i] = 1;
        while (r->prefix < r->n && r->arrived[r->prefix])
            r->prefix++;
        uint64_t ready = (uint64_t)r->prefix * r->piece;
        h->ready = ready < h->len ? ready : h->len;
    }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return rc != K3_OK; /* a failed chunk fails the range: start no more */
}

/* Reads [off, off + len) into buf as chunks through io/read_queue.h. */
static void read_chunks(k3_file *f, uint64_t off, uint8_t *buf, hasher *h, k3_err *e)
{
    reads r;
    memset(&r, 0, sizeof r);
    r.h = h;
    r.piece = k3_read_queue_piece(h->len, K3_HASHED_CHUNK);
    r.n = (size_t)((h->len + r.piece - 1) / r.piece);
    k3_read_req *q = k3_malloc(e, r.n * sizeof *q, "read chunks");
    k3_iov *v = k3_malloc(e, r.n * sizeof *v, "read chunks");
    r.arrived = k3_calloc(e, r.n, 1, "read chunks");
    if (q && v && r.arrived) {
        for (size_t i = 0; i < r.n; i++) {
            uint64_t at = (uint64_t)i * r.piece;
            uint64_t n = h->len - at < r.piece ? h->len - at : r.piece;
            k3_iov one = { buf + at, (size_t)k3_io_align_up(n) };
            k3_read_req req = { f, off + at, &v[i], 1, n };
            v[i] = one;
            q[i] = req;
        }
        r.failed = r.n;
        k3_read_queue_run(q, r.n, 1, chunk_done, &r);
        if (r.failed < r.n)
            k3_fail(e, r.err.code, "%s", r.err.msg);
    }
    if (e->code) { /* the hasher stops, whatever failed */
        pthread_mutex_lock(&h->mu);
        h->failed = 1;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    free(q);
    free(v);
    free(r.arrived);
}

int k3_read_hashed(k3_file *f, uint64_t off, uint8_t *buf, uint64_t len, int blocks,
                   uint64_t *hash, double *exposed, double *hashing, k3_err *e)
{
    hasher h;
    memset(&h, 0, sizeof h);
    h.buf = buf;
    h.len = len;
    *exposed = *hashing = 0;
    if (blocks &&
        !(h.blocks = k3_calloc(e, (size_t)k3_codec_nblocks(len) + 1, 8, "block hashes")))
        return e->code;
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    pthread_t th;
    int threaded = len > 0 && pthread_create(&th, NULL, hash_main, &h) == 0;
    if (len > 0)
        read_chunks(f, off, buf, &h, e);
    if (threaded) {
        double t0 = k3_seconds();
        pthread_join(th, NULL);
        *exposed = k3_seconds() - t0;
    } else if (!e->code) {
        /* No thread to be had: read, then hash. */
        double t0 = k3_seconds();
        if (h.blocks && k3_codec_image_hash(buf, len, &h.hash) != 0)
            k3_fail(e, K3_ERUNTIME, "out of memory for the block hashes");
        else if (!h.blocks)
            h.hash = k3_xxh64(buf, (size_t)len, 0);
        h.seconds = *exposed = k3_seconds() - t0;
    }
    *hashing = h.seconds;
    *hash = h.hash;
    free(h.blocks);
    pthread_mutex_destroy(&h.mu);
    pthread_cond_destroy(&h.cv);
    return e->code;
}
