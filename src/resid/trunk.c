/* trunk.c - see trunk.h. */
#include "resid/trunk.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/pread_all.h"
#include "io/read_coded.h"
#include "io/read_hashed.h"
#include "util/clock.h"
#include "util/error.h"

enum { SLOT_EMPTY, SLOT_INFLIGHT, SLOT_LOADED };

typedef struct {
    uint8_t *buf;
    int state;
    size_t run;          /* valid when INFLIGHT or LOADED */
    int refs;            /* acquisitions not yet released */
    uint64_t last_use;   /* LRU clock */
    int failed;          /* the read of `run` failed: acquire reports it */
    char msg[512];
} slot;

struct k3_trunk {
    const k3_run *runs;
    size_t nruns, nring;
    const uint8_t *is_pinned; /* [nruns] */
    uint8_t **pinned;    /* [nruns]: image of each pinned run, else NULL */
    slot *ring;          /* [nring] */
    uint64_t clock;
    pthread_t reader;
    int have_reader, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *stage;      /* compressed runs' staging (io/read_coded.h), or NULL */
    size_t stage_bytes;
    size_t *queue;       /* ring indices to fill, FIFO */
    size_t qhead, qlen;
    k3_trunk_stats st;
};

/* Time a run's read spent on its checks and decoding (CPU seconds). */
typedef struct {
    double hash, decode;
} run_cpu;

/* A packed run: its one piece read through its k3_file - plain: hashed as
 * it arrives (io/read_hashed.h); compressed: decoded into buf and hashed
 * block by block (io/read_coded.h) - then checked against the run's
 * checksum. stage: the trunk's staging (compressed runs only). */
static int read_verified(const k3_run *r, uint8_t *buf, uint8_t *stage, size_t stage_bytes,
                         run_cpu *cpu, char *msg, size_t msglen)
{
    const k3_run_piece *p = &r->pieces[0];
    const char *base = strrchr(p->path, '/');
    base = base ? base + 1 : p->path;
    k3_err e = { 0, "" };
    uint64_t got = 0;
    double exposed;
    int rc;
    if (r->codec != K3_RUN_PLAIN) {
        k3_coded_times t = { 0, 0 };
        rc = k3_read_coded(p->file, p->src_off, r->stored, buf, r->bytes, stage, stage_bytes, &got,
                           &t, &e);
        cpu->hash = t.hash_seconds;
        cpu->decode = t.decode_seconds;
    } else {
        rc = k3_read_hashed(p->file, p->src_off, buf, p->len, r->hash == K3_RUN_XXH3_BLOCKS, &got,
                            &exposed, &cpu->hash, &e);
    }
    if (rc != K3_OK) {
        if (e.code == K3_EINVALID && strncmp(e.msg, "RUN INVALID", 11))
            /* the stored bytes lie (read_coded.h); a failed read says so itself */
            snprintf(msg, msglen, "RUN INVALID: %s of %s: %s (%s at offset %llu)", r->name,
                     base, e.msg, p->path, (unsigned long long)p->src_off);
        else
            snprintf(msg, msglen, "%s, for %s", e.msg, r->name);
        return -1;
    }
    if (got == r->checksum)
        return 0;
    snprintf(msg, msglen, "RUN INVALID: %s of %s fails its checksum (%s at offset %llu: %s "
                          "%016llx, trunk.json says %016llx)",
             r->name, base, p->path, (unsigned long long)p->src_off,
             r->hash == K3_RUN_XXH3_BLOCKS ? "xxh3 blocks" : "xxh64", (unsigned long long)got,
             (unsigned long long)r->checksum);
    return -1;
}

/* Bytes run r reads from its file (stored bytes for a packed run). */
static uint64_t disk_bytes(const k3_run *r)
{
    return r->stored ? r->stored : r->bytes;
}

/* Reads run r into buf; on failure writes a message. *cpu gets the hashing
 * (on a helper thread, overlapping the read) and decoding time. */
static int read_run(const k3_trunk *t, const k3_run *r, uint8_t *buf, run_cpu *cpu, char *msg,
                    size_t msglen)
{
    cpu->hash = cpu->decode = 0;
    if (r->verify)
        return read_verified(r, buf, t->stage, t->stage_bytes, cpu, msg, msglen);
    for (size_t i = 0; i < r->npieces; i++) {
        const k3_run_piece *p = &r->pieces[i];
        char why[96];
        if (k3_pread_weight(p->fd, buf + p->dst_off, (size_t)p->len, (off_t)p->src_off, why,
                            sizeof why) != 0) {
            snprintf(msg, msglen, "RUN INVALID: reading %s from %s failed after %d attempts (%s)",
                     r->name, p->path, K3_READ_ATTEMPTS, why);
            return -1;
        }
    }
    return 0;
}

/* Adds a run's read to the statistics. mu held (or no reader yet). */
static void count_read(k3_trunk *t, const k3_run *r, int ok, double seconds, const run_cpu *cpu)
{
    t->st.read_seconds += seconds;
    t->st.verify_seconds += cpu->hash;
    t->st.decode_seconds += cpu->decode;
    if (ok) {
        t->st.bytes_read += disk_bytes(r);
        t->st.image_bytes += r->bytes;
        t->st.runs_read++;
    }
}

static void *reader_main(void *arg)
{
    k3_trunk *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->stop && t->qlen == 0)
            pthread_cond_wait(&t->cv, &t->mu);
        if (t->stop)
            break;
        slot *s = &t->ring[t->queue[t->qhead]];
        t->qhead = (t->qhead + 1) % t->nring;
        t->qlen--;
        const k3_run *r = &t->runs[s->run];
        pthread_mutex_unlock(&t->mu);
        double t0 = k3_seconds();
        run_cpu cpu;
        char msg[512] = "";
        int rc = read_run(t, r, s->buf, &cpu, msg, sizeof msg);
        double dt = k3_seconds() - t0;
        pthread_mutex_lock(&t->mu);
        count_read(t, r, rc == 0, dt, &cpu);
        if (rc != 0) {
            s->failed = 1;
            memcpy(s->msg, msg, sizeof msg);
        }
        s->state = SLOT_LOADED;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* Bytes of the largest run that is not pinned (the ring's slot size). */
static uint64_t largest_streamed(const k3_run *runs, size_t nruns, const uint8_t *pinned)
{
    uint64_t largest = 0;
    for (size_t i = 0; i < nruns; i++)
        if (!pinned[i] && runs[i].bytes > largest)
            largest = runs[i].bytes;
    return largest;
}

/* The staging the compressed runs need (io/read_coded.h), 0 when none is. */
static size_t stage_bytes(const k3_run *runs, size_t nruns)
{
    uint64_t max = 0;
    int any = 0;
    for (size_t i = 0; i < nruns; i++)
        if (runs[i].codec != K3_RUN_PLAIN) {
            any = 1;
            max = runs[i].stored > max ? runs[i].stored : max;
        }
    return any ? k3_coded_stage_bytes(max) : 0;
}

uint64_t k3_trunk_plan_bytes(const k3_run *runs, size_t nruns, const uint8_t *pinned,
                             size_t nring)
{
    uint64_t total = stage_bytes(runs, nruns);
    for (size_t i = 0; i < nruns; i++)
        if (pinned[i])
            total += runs[i].bytes;
    return total + (uint64_t)nring * largest_streamed(runs, nruns, pinned);
}

int k3_trunk_new(k3_trunk **out, const k3_run *runs, size_t nruns, const uint8_t *pinned,
                 size_t nring, k3_err *e)
{
    *out = NULL;
    uint64_t largest = largest_streamed(runs, nruns, pinned);
    size_t nstreamed = 0;
    for (size_t i = 0; i < nruns; i++)
        nstreamed += !pinned[i];
    if (nstreamed == 0)
        nring = 0;
    else if (nring == 0)
        return k3_fail(e, K3_EINPUT, "streaming the trunk needs at least one ring slot");
    k3_trunk *t = k3_calloc(e, 1, sizeof *t, "trunk");
    if (!t)
        return e->code;
    t->runs = runs;
    t->nruns = nruns;
    t->is_pinned = pinned;
    t->nring = nring;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->pinned = k3_calloc(e, nruns + 1, sizeof *t->pinned, "trunk");
    t->ring = k3_calloc(e, nring + 1, sizeof *t->ring, "trunk ring");
    t->queue = k3_calloc(e, nring + 1, sizeof *t->queue, "trunk ring");
    t->stage_bytes = stage_bytes(runs, nruns);
    if (!e->code && t->stage_bytes)
        t->stage = k3_io_alloc(t->stage_bytes, "trunk decode staging", e);
    for (size_t i = 0; i < nring && !e->code; i++)
        if ((t->ring[i].buf = k3_io_alloc((size_t)largest, "trunk ring slot", e)))
            t->st.ring_bytes += largest;
    /* Pinned runs are held decoded (a compressed run pinned compressed
     * would be decoded again on every use: memory is what pinning buys). */
    for (size_t i = 0; i < nruns && !e->code; i++) {
        char msg[512];
        run_cpu cpu;
        if (!pinned[i])
            continue;
        if (!(t->pinned[i] = k3_io_alloc((size_t)runs[i].bytes, "pinned trunk", e)))
            break;
        double t0 = k3_seconds();
        if (read_run(t, &runs[i], t->pinned[i], &cpu, msg, sizeof msg) != 0) {
            k3_fail(e, K3_EINVALID, "%s", msg);
            break;
        }
        count_read(t, &runs[i], 1, k3_seconds() - t0, &cpu);
        t->st.pinned_bytes += runs[i].bytes;
    }
    if (!e->code && nring >= 2) {
        if (pthread_create(&t->reader, NULL, reader_main, t) != 0)
            k3_fail(e, K3_ERUNTIME, "cannot start the trunk reader thread");
        else
            t->have_reader = 1;
    }
    if (e->code) {
        k3_trunk_free(t);
        return e->code;
    }
    *out = t;
    return K3_OK;
}

void k3_trunk_free(k3_trunk *t)
{
    if (!t)
        return;
    if (t->have_reader) {
        pthread_mutex_lock(&t->mu);
        t->stop = 1;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->reader, NULL);
    }
    for (size_t i = 0; t->pinned && i < t->nruns; i++)
        k3_io_free(t->pinned[i]);
    for (size_t i = 0; t->ring && i < t->nring; i++)
        k3_io_free(t->ring[i].buf);
    k3_io_free(t->stage);
    free(t->pinned);
    free(t->ring);
    free(t->queue);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

/* The slot holding (or loading) run r, or -1. Called with mu held. */
static long find_slot(const k3_trunk *t, size_t r)
{
    for (size_t i = 0; i < t->nring; i++)
        if (t->ring[i].state != SLOT_EMPTY && t->ring[i].run == r)
            return (long)i;
    return -1;
}

/* A slot that may be (re)filled: EMPTY first, else the least recently used
 * LOADED slot nobody holds. -1 when every slot is held or in flight. */
static long free_slot(const k3_trunk *t)
{
    long best = -1;
    for (size_t i = 0; i < t->nring; i++) {
        const slot *s = &t->ring[i];
        if (s->state == SLOT_EMPTY)
            return (long)i;
        if (s->state == SLOT_LOADED && s->refs == 0 &&
            (best < 0 || s->last_use < t->ring[best].last_use))
            best = (long)i;
    }
    return best;
}

/* Claims slot i for run r and queues it for the reader. mu held. */
static void start_load(k3_trunk *t, long i, size_t r)
{
    slot *s = &t->ring[i];
    s->state = SLOT_INFLIGHT;
    s->run = r;
    s->failed = 0;
    s->last_use = ++t->clock;
    t->queue[(t->qhead + t->qlen) % t->nring] = (size_t)i;
    t->qlen++;
    pthread_cond_broadcast(&t->cv);
}

void k3_trunk_prefetch(k3_trunk *t, size_t r)
{
    if (r >= t->nruns || t->is_pinned[r] || !t->have_reader)
        return;
    pthread_mutex_lock(&t->mu);
    if (find_slot(t, r) < 0) {
        long i = free_slot(t);
        if (i >= 0)
            start_load(t, i, r);
    }
    pthread_mutex_unlock(&t->mu);
}

const uint8_t *k3_trunk_acquire(k3_trunk *t, size_t r, k3_err *e)
{
    if (t->is_pinned[r])
        return t->pinned[r];
    double t0 = k3_seconds();
    pthread_mutex_lock(&t->mu);
    long i;
    for (;;) {
        i = find_slot(t, r);
        if (i >= 0)
            break;
        i = free_slot(t);
        if (i >= 0) {
            if (t->have_reader) {
                start_load(t, i, r);
            } else {
                /* One slot, no reader: load in this thread. */
                slot *s = &t->ring[i];
                s->state = SLOT_INFLIGHT;
                s->run = r;
                pthread_mutex_unlock(&t->mu);
                double r0 = k3_seconds();
                run_cpu cpu;
                s->failed =
                    read_run(t, &t->runs[r], s->buf, &cpu, s->msg, sizeof s->msg) != 0;
                pthread_mutex_lock(&t->mu);
                count_read(t, &t->runs[r], !s->failed, k3_seconds() - r0, &cpu);
                s->state = SLOT_LOADED;
            }
            break;
        }
        pthread_cond_wait(&t->cv, &t->mu); /* every slot busy: wait for one */
    }
    slot *s = &t->ring[i];
    while (s->state == SLOT_INFLIGHT)
        pthread_cond_wait(&t->cv, &t->mu);
    const uint8_t *buf = NULL;
    if (s->failed) {
        k3_fail(e, K3_EINVALID, "%s", s->msg);
        s->state = SLOT_EMPTY;
    } else {
        s->refs++;
        s->last_use = ++t->clock;
        buf = s->buf;
    }
    t->st.wait_seconds += k3_seconds() - t0;
    pthread_mutex_unlock(&t->mu);
    return buf;
}

void k3_trunk_release(k3_trunk *t, size_t r)
{
    if (t->is_pinned[r])
        return;
    pthread_mutex_lock(&t->mu);
    long i = find_slot(t, r);
    if (i >= 0 && t->ring[i].refs > 0)
        t->ring[i].refs--;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void k3_trunk_stats_get(k3_trunk *t, k3_trunk_stats *s)
{
    pthread_mutex_lock(&t->mu);
    *s = t->st;
    pthread_mutex_unlock(&t->mu);
}
