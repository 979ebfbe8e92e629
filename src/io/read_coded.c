/* read_coded.c - see read_coded.h. */
#include "io/read_coded.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "io/codec.h"
#include "io/read_queue.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/xxh3.h"

typedef struct {
    k3_file *f;
    uint64_t off, len, nb;
    uint8_t *dst;
    const uint32_t *lens;
    const uint64_t *at;      /* [nb + 1]: stored offset of each block in the run */
    const uint64_t *chunk;   /* [nchunks + 1]: first block of each chunk */
    uint64_t nchunks;
    uint64_t *hashes;        /* [nb] */
    uint8_t *stage[2];
    size_t cap;              /* bytes of each stage */
    uint64_t chunk_max;      /* stored bytes a chunk may hold */
    const uint8_t *data[2];  /* chunk c's first stored byte, in stage[c % 2] */
    uint64_t read, decoded;  /* chunks read / decoded so far (under mu) */
    int failed;              /* either side failed: both stop (under mu) */
    k3_err derr;             /* the decoder's failure */
    k3_coded_times t;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} job;

/* Decodes and hashes the blocks of chunk c (its stored bytes at src). */
static int decode_chunk(job *j, uint64_t c, const uint8_t *src)
{
    long long b0 = (long long)j->chunk[c], b1 = (long long)j->chunk[c + 1];
    long long bad = -1;
    const char *bad_why = "";
    double dec = 0, hsh = 0;
#pragma omp parallel for schedule(dynamic, 4) reduction(+ : dec, hsh)
    for (long long b = b0; b < b1; b++) {
        uint64_t k = (uint64_t)b;
        size_t n = k3_codec_block_len(j->len, k);
        uint8_t *out = j->dst + k * K3_CODEC_BLOCK;
        const char *why = "";
        double t0 = k3_seconds();
        int rc = k3_codec_decode(src + (j->at[k] - j->at[j->chunk[c]]), j->lens[k], out, n, &why);
        double t1 = k3_seconds();
        if (rc == 0)
            j->hashes[k] = k3_xxh3_64(out, n);
        dec += t1 - t0;
        hsh += k3_seconds() - t1;
        if (rc != 0) {
#pragma omp critical(k3_read_coded_bad)
            if (bad < 0 || b < bad) {
                bad = b;
                bad_why = why;
            }
        }
    }
    j->t.decode_seconds += dec;
    j->t.hash_seconds += hsh;
    if (bad >= 0)
        return k3_fail(&j->derr, K3_EINVALID, "block %lld of %llu does not decode: %s", bad,
                       (unsigned long long)j->nb, bad_why);
    return K3_OK;
}

static void *decoder_main(void *arg)
{
    job *j = arg;
    for (uint64_t c = 0; c < j->nchunks; c++) {
        pthread_mutex_lock(&j->mu);
        while (j->read <= c && !j->failed)
            pthread_cond_wait(&j->cv, &j->mu);
        int stop = j->failed;
        const uint8_t *src = j->data[c % 2];
        pthread_mutex_unlock(&j->mu);
        if (stop)
            return NULL;
        int rc = decode_chunk(j, c, src);
        pthread_mutex_lock(&j->mu);
        if (rc != K3_OK)
            j->failed = 1;
        else
            j->decoded = c + 1;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        if (rc != K3_OK)
            return NULL;
    }
    return NULL;
}

/* Reads the block table (the run's last 4 nb bytes) into lens and checks it
 * (read_coded.h); fills at[]. */
static int read_table(job *j, uint64_t stored, uint32_t *lens, uint64_t *at, k3_err *e)
{
    uint64_t tab = 4 * j->nb, base = stored - tab, done = 0;
    while (done < tab) {
        uint64_t n = tab - done < j->chunk_max ? tab - done : j->chunk_max & ~(uint64_t)3;
        const uint8_t *p;
        if (k3_read_queue_span(j->f, j->stage[0], j->cap, j->off + base + done, n, &p, e) != K3_OK)
            return e->code;
        for (uint64_t i = 0; i < n / 4; i++)
            lens[done / 4 + i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                                 (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
        done += n;
    }
    at[0] = 0;
    for (uint64_t k = 0; k < j->nb; k++) {
        if (lens[k] < 1 || lens[k] > K3_CODEC_MAX_STORED)
            return k3_fail(e, K3_EINVALID, "the block table lies: block %llu is %u bytes "
                                           "(1..%u possible)",
                           (unsigned long long)k, lens[k], K3_CODEC_MAX_STORED);
        at[k + 1] = at[k] + lens[k]; /* <= nb * MAX_STORED: no overflow */
    }
    if (at[j->nb] != base)
        return k3_fail(e, K3_EINVALID, "the block table lies: its %llu blocks sum to %llu "
                                       "bytes, but the run stores %llu before the table",
                       (unsigned long long)j->nb, (unsigned long long)at[j->nb],
                       (unsigned long long)base);
    return K3_OK;
}

int k3_read_coded(k3_file *f, uint64_t off, uint64_t stored, uint8_t *dst, uint64_t len,
                  uint8_t *stage, size_t stage_bytes, uint64_t *hash, k3_coded_times *t,
                  k3_err *e)
{
    job j;
    memset(&j, 0, sizeof j);
    j.f = f;
    j.off = off;
    j.len = len;
    j.dst = dst;
    j.nb = k3_codec_nblocks(len);
    j.cap = stage_bytes / 2 / K3_IO_ALIGN * K3_IO_ALIGN;
    j.stage[0] = stage;
    j.stage[1] = stage + j.cap;
    if (j.cap < 2 * K3_IO_ALIGN + K3_CODEC_MAX_STORED &&
        j.cap < 2 * K3_IO_ALIGN + k3_io_align_up(stored))
        return k3_fail(e, K3_ERUNTIME, "internal: %zu bytes of staging for a run of %llu",
                       stage_bytes, (unsigned long long)stored);
    j.chunk_max = j.cap - 2 * K3_IO_ALIGN;
    if (stored < 4 * j.nb)
        return k3_fail(e, K3_EINVALID, "%llu stored bytes cannot hold a table of %llu blocks",
                       (unsigned long long)stored, (unsigned long long)j.nb);
    size_t nb1 = (size_t)j.nb + 1;
    uint32_t *lens = k3_calloc(e, nb1, sizeof *lens, "block table");
    uint64_t *at = k3_calloc(e, nb1, sizeof *at, "block table");
    uint64_t *chunk = k3_calloc(e, nb1 + 1, sizeof *chunk, "block table");
    uint64_t *hashes = k3_calloc(e, nb1, sizeof *hashes, "block hashes");
    if (e->code || read_table(&j, stored, lens, at, e) != K3_OK)
        goto done;
    j.lens = lens;
    j.at = at;
    j.hashes = hashes;
    /* Chunks: the most whole blocks whose stored bytes fit a stage. */
    for (uint64_t k = 0; k < j.nb;) {
        chunk[j.nchunks++] = k;
        uint64_t first = at[k];
        while (k < j.nb && at[k + 1] - first <= j.chunk_max)
            k++;
    }
    chunk[j.nchunks] = j.nb;
    j.chunk = chunk;
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    pthread_t th;
    int threaded = pthread_create(&th, NULL, decoder_main, &j) == 0;
    for (uint64_t c = 0; c < j.nchunks; c++) {
        uint64_t s0 = at[chunk[c]], s1 = at[chunk[c + 1]];
        pthread_mutex_lock(&j.mu);
        while (threaded && c >= 2 && j.decoded < c - 1 && !j.failed)
            pthread_cond_wait(&j.cv, &j.mu); /* stage c % 2 still being decoded */
        int stop = j.failed;
        pthread_mutex_unlock(&j.mu);
        if (stop)
            break;
        const uint8_t *p;
        int rc = k3_read_queue_span(f, j.stage[c % 2], j.cap, off + s0, s1 - s0, &p, e);
        if (rc == K3_OK && !threaded && decode_chunk(&j, c, p) != K3_OK)
            rc = k3_fail(e, j.derr.code, "%s", j.derr.msg);
        pthread_mutex_lock(&j.mu);
        if (rc != K3_OK) {
            j.failed = 1;
        } else {
            j.data[c % 2] = p;
            j.read = c + 1;
        }
        pthread_cond_broadcast(&j.cv);
        pthread_mutex_unlock(&j.mu);
        if (rc != K3_OK)
            break;
    }
    if (threaded)
        pthread_join(th, NULL);
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.cv);
    if (!e->code && j.derr.code)
        k3_fail(e, j.derr.code, "%s", j.derr.msg);
    if (!e->code)
        *hash = k3_codec_fold(hashes, (size_t)j.nb);
    t->decode_seconds += j.t.decode_seconds;
    t->hash_seconds += j.t.hash_seconds;
done:
    free(lens);
    free(at);
    free(chunk);
    free(hashes);
    return e->code;
}
