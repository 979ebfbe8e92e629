/* read_hashed.c - see read_hashed.h. */
#include "io/read_hashed.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "io/codec.h"
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
    *exposed = *hashing = 0;
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    pthread_t th;
    int threaded = pthread_create(&th, NULL, hash_main, &h) == 0;
    for (uint64_t at = 0; threaded && at < len && !e->code; at += K3_HASHED_CHUNK) {
        uint64_t n = len - at < K3_HASHED_CHUNK ? len - at : K3_HASHED_CHUNK;
        k3_iov v = { buf + at, (size_t)k3_io_align_up(n) };
        k3_file_readv(f, off + at, &v, 1, n, e);
        pthread_mutex_lock(&h.mu);
        if (e->code)
            h.failed = 1;
        else
            h.ready = at + n;
        pthread_cond_broadcast(&h.cv);
        pthread_mutex_unlock(&h.mu);
    }
    if (threaded) {
        double t0 = k3_seconds();
        pthread_join(th, NULL);
        *exposed = k3_seconds() - t0;
    } else {
        /* No thread to be had: read, then hash. */
        k3_iov v = { buf, (size_t)k3_io_align_up(len) };
        if (k3_file_readv(f, off, &v, 1, len, e) == K3_OK) {
            double t0 = k3_seconds();
            if (h.blocks && k3_codec_image_hash(buf, len, &h.hash) != 0)
                k3_fail(e, K3_ERUNTIME, "out of memory for the block hashes");
            else if (!h.blocks)
                h.hash = k3_xxh64(buf, (size_t)len, 0);
            h.seconds = *exposed = k3_seconds() - t0;
        }
    }
    *hashing = h.seconds;
    *hash = h.hash;
    free(h.blocks);
    pthread_mutex_destroy(&h.mu);
    pthread_cond_destroy(&h.cv);
    return e->code;
}
