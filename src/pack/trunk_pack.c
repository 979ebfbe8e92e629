/* trunk_pack.c - see trunk_pack.h. */
#include "pack/trunk_pack.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/codec.h"
#include "io/direct.h"
#include "io/read_coded.h"
#include "io/trunk_source.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/os.h"
#include "util/progress.h"
#include "util/xxh3.h"

/* Bytes assembled, hashed and written at a time: large enough that the
 * per-call costs vanish and direct reads and writes run at the disk's
 * speed; two windows and a bounce buffer keep the footprint at 48 MB. */
#define WINDOW (16u << 20)

typedef struct {
    char bin[4096], bin_tmp[4096], json[4096], json_tmp[4096];
} paths;

static void make_paths(paths *p, const char *dir)
{
    snprintf(p->bin, sizeof p->bin, "%s/%s", dir, K3_TRUNK_BIN);
    snprintf(p->bin_tmp, sizeof p->bin_tmp, "%s/%s.tmp", dir, K3_TRUNK_BIN);
    snprintf(p->json, sizeof p->json, "%s/%s", dir, K3_TRUNK_JSON);
    snprintf(p->json_tmp, sizeof p->json_tmp, "%s/%s.tmp", dir, K3_TRUNK_JSON);
}

/* Bytes of all run images (what is copied and verified; padding excluded). */
static uint64_t run_bytes(const k3_trunk_manifest *m)
{
    uint64_t n = 0;
    for (size_t r = 0; r < m->nruns; r++)
        n += m->runs[r].length;
    return n;
}

/* Whether dir holds a complete trunk of this layout (see trunk_pack.h). */
static int up_to_date(const k3_trunk_manifest *want, const char *dir, const paths *p,
                      k3_trunk_manifest *have, FILE *log)
{
    k3_err e = { 0, "" };
    struct stat st;
    if (stat(p->json, &st) != 0)
        return 0;
    if (k3_trunk_manifest_read(have, dir, &e) != K3_OK) {
        if (log)
            fprintf(log, "pack-trunk: the existing trunk.json is unusable (%s): repacking\n",
                    e.msg);
        return 0;
    }
    /* Equal tables: the same runs, in the same order. */
    int same_table = have->table_hash == want->table_hash && have->nruns == want->nruns;
    size_t other = 0; /* runs packed from other weights */
    for (size_t r = 0; same_table && r < want->nruns; r++)
        other += have->runs[r].source != want->runs[r].source;
    char why_other[160];
    snprintf(why_other, sizeof why_other, "it was packed from other weights: the source "
                                          "fingerprints of %zu of %zu runs differ",
             other, want->nruns);
    char why_format[64];
    snprintf(why_format, sizeof why_format, "it is of an older format (version %d)",
             have->version);
    const char *why = have->version != want->version ? why_format
                      : have->codec != want->codec
                          ? (!want->codec  ? "it is compressed and --compress was not given"
                             : !have->codec ? "it is not compressed and --compress was given"
                                            : "it is compressed with the other codec")
                      : have->config_hash != want->config_hash ? "config.json differs"
                      : !same_table ? "the tensor table differs"
                      : other ? why_other
                      : stat(p->bin, &st) != 0 ? "trunk.bin is missing"
                      : want->codec == K3_RUN_PLAIN && (uint64_t)st.st_size != want->file_size
                          ? "trunk.bin has the wrong size"
                      : (uint64_t)st.st_size != have->file_size ? "trunk.bin has the wrong size"
                                                                : NULL;
    if (why && log)
        fprintf(log, "pack-trunk: the existing trunk in %s is stale or another model's (%s): "
                     "repacking\n", dir, why);
    if (why)
        k3_trunk_manifest_free(have);
    return !why;
}

/* A run's format-3 checksum computed window by window (io/codec.h: a hash
 * per 64 KiB block, folded at the end; WINDOW is a multiple of the block). */
typedef struct {
    uint64_t *h;
    uint64_t len;
} run_hasher;

static int rh_init(run_hasher *rh, uint64_t len, k3_err *e)
{
    rh->len = len;
    rh->h = k3_calloc(e, (size_t)k3_codec_nblocks(len) + 1, sizeof *rh->h, "block hashes");
    return e->code;
}

/* Hashes the image bytes [a, a + n) held in win (a a multiple of the block). */
static void rh_window(run_hasher *rh, uint64_t a, const uint8_t *win, size_t n)
{
    long long b0 = (long long)(a / K3_CODEC_BLOCK);
    long long b1 = (long long)k3_codec_nblocks(a + n);
#pragma omp parallel for schedule(static)
    for (long long b = b0; b < b1; b++)
        rh->h[b] = k3_xxh3_64(win + ((uint64_t)b * K3_CODEC_BLOCK - a),
                              k3_codec_block_len(rh->len, (uint64_t)b));
}

/* The checksum; frees the hashes. */
static uint64_t rh_done(run_hasher *rh)
{
    uint64_t d = k3_codec_fold(rh->h, (size_t)k3_codec_nblocks(rh->len));
    free(rh->h);
    rh->h = NULL;
    return d;
}

static int all_zero(const uint8_t *p, size_t n)
{
    const uint64_t *w = (const uint64_t *)(const void *)p; /* p is 4096-aligned */
    for (size_t i = 0; i < n / 8; i++)
        if (w[i])
            return 0;
    return 1;
}

/* Opens the output for direct writes where the file system allows them:
 * buffered writes of ~109 GB would fill memory with dirty pages, and the
 * kernel's throttling of them halved the copy rate in measurements (see
 * benchmarks/pack_bench.sh). Every write is whole aligned blocks from an
 * aligned buffer, as direct I/O needs. */
static int open_output(const char *path)
{
    return k3_os_open_output(path, 1);
}

static int pwrite_all(int fd, const uint8_t *buf, size_t n, uint64_t off)
{
    while (n) {
        int64_t w = k3_os_pwrite(fd, buf, n, off); /* refused direct: buffered */
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

/* Writes buf[0..n) (n a multiple of K3_TRUNK_ALIGN) at off, skipping the
 * blocks that are all zero: the file was sized with ftruncate, so they
 * read back as zero and stay holes. Consecutive data blocks go out as one
 * write. */
static int write_sparse(int fd, const char *path, const uint8_t *buf, size_t n, uint64_t off,
                        k3_err *e)
{
    size_t start = 0, at = 0;
    for (; at <= n; at += K3_TRUNK_ALIGN) {
        if (at < n && !all_zero(buf + at, K3_TRUNK_ALIGN))
            continue;
        if (at > start && pwrite_all(fd, buf + start, at - start, off + start) != 0)
            return k3_fail(e, K3_ERUNTIME, "%s: write failed: %s", path, strerror(errno));
        start = at + K3_TRUNK_ALIGN;
    }
    return K3_OK;
}

/* The model's shards, opened for direct reads: tensor data is unaligned,
 * so each range is read through its aligned superset into a bounce buffer
 * and copied into place. Direct reads keep ~109 GB of shards from flushing
 * the page cache, and read file holes without allocating cache pages. */
typedef struct {
    k3_file *files;
    const char **paths;
    size_t n;
    uint8_t *bounce;     /* k3_span_cap(any offset, WINDOW) bytes */
} sources;

static int open_sources(sources *src, const k3_trunk_manifest *m, k3_err *e)
{
    memset(src, 0, sizeof *src);
    size_t nt = 0;
    for (size_t r = 0; r < m->nruns; r++)
        nt += m->runs[r].ntensors;
    src->files = k3_calloc(e, nt + 1, sizeof *src->files, "shard files");
    src->paths = k3_calloc(e, nt + 1, sizeof *src->paths, "shard files");
    src->bounce = k3_io_alloc(WINDOW + 2 * K3_IO_ALIGN, "trunk pack bounce buffer", e);
    for (size_t r = 0; r < m->nruns && !e->code; r++)
        for (size_t i = 0; i < m->runs[r].ntensors && !e->code; i++) {
            const char *path = m->runs[r].tensors[i].src_path;
            size_t k = 0;
            while (k < src->n && strcmp(src->paths[k], path))
                k++;
            if (k == src->n && k3_file_open(&src->files[k], path, 1, e) == K3_OK)
                src->paths[src->n++] = path;
        }
    return e->code;
}

static void close_sources(sources *src)
{
    for (size_t k = 0; k < src->n; k++)
        k3_file_close(&src->files[k]);
    free(src->files);
    free(src->paths);
    k3_io_free(src->bounce);
}

/* Bytes [off, off + n) of tensor t into dst (n <= WINDOW). */
static int read_source(sources *src, const k3_trunk_tensor *t, uint64_t off, uint8_t *dst,
                       size_t n, k3_err *e)
{
    size_t k = 0;
    while (strcmp(src->paths[k], t->src_path))
        k++; /* present: open_sources opened every tensor's file */
    const uint8_t *data;
    k3_err re = { 0, "" };
    if (k3_read_span(&src->files[k], src->bounce, WINDOW + 2 * K3_IO_ALIGN, t->src_off + off, n,
                     &data, &re) != K3_OK)
        return k3_fail(e, K3_ERUNTIME, "reading tensor %s: %s", t->name, re.msg);
    memcpy(dst, data, n);
    return K3_OK;
}

/* The test hook of trunk_pack.h. */
static void maybe_die(size_t runs_done)
{
    const char *s = getenv("K3_PACK_TEST_KILL_AFTER");
    if (s && *s && strtoul(s, NULL, 10) == runs_done)
        k3_os_die();
}

/* The bytes [a, a + n) of run's image into win (n <= WINDOW; the window is
 * zeroed up to the next block first, so gaps and padding are zero). */
static int fill_window(const k3_trunk_run *run, uint64_t a, size_t n, sources *src,
                       uint8_t *win, k3_err *e)
{
    memset(win, 0, (size_t)k3_trunk_align_up(n));
    for (size_t i = 0; i < run->ntensors; i++) {
        const k3_trunk_tensor *t = &run->tensors[i];
        uint64_t lo = t->offset > a ? t->offset : a;
        uint64_t hi = t->offset + t->nbytes < a + n ? t->offset + t->nbytes : a + n;
        if (hi > lo && read_source(src, t, lo - t->offset, win + (lo - a), (size_t)(hi - lo), e))
            return e->code;
    }
    return K3_OK;
}

static size_t window_len(const k3_trunk_run *run, uint64_t a)
{
    return run->length - a < WINDOW ? (size_t)(run->length - a) : WINDOW;
}

/* The copy is a two-stage pipeline over the windows of every run, in
 * order: a reader thread assembles window k + 1 from the shards while the
 * caller hashes and writes window k, so reading and writing overlap (both
 * are direct, hence synchronous, I/O). */
typedef struct {
    const k3_trunk_manifest *m;
    sources *src;
    uint8_t *win[2];
    int full[2];         /* window holds the next bytes to write */
    int stop;            /* the writer gave up: the reader must end */
    k3_err err;          /* the reader's failure, set under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pipeline;

static void *reader_main(void *arg)
{
    pipeline *p = arg;
    size_t k = 0;
    for (size_t r = 0; r < p->m->nruns; r++)
        for (uint64_t a = 0; a < p->m->runs[r].length; a += WINDOW, k++) {
            uint8_t *win = p->win[k % 2];
            pthread_mutex_lock(&p->mu);
            while (p->full[k % 2] && !p->stop)
                pthread_cond_wait(&p->cv, &p->mu);
            int stop = p->stop;
            pthread_mutex_unlock(&p->mu);
            if (stop)
                return NULL;
            k3_err e = { 0, "" };
            fill_window(&p->m->runs[r], a, window_len(&p->m->runs[r], a), p->src, win, &e);
            pthread_mutex_lock(&p->mu);
            if (e.code)
                p->err = e;
            else
                p->full[k % 2] = 1;
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
            if (e.code)
                return NULL;
        }
    return NULL;
}

/* --compress: the stored form of the runs (io/trunk_format.h) goes out
 * through an aligned buffer of WINDOW bytes, flushed whenever full, each
 * run padded to K3_TRUNK_ALIGN at its end; pos is the file offset of
 * buf[0]. enc holds a window's blocks encoded, each at k * MAX_STORED. */
typedef struct {
    uint8_t *buf, *enc;
    size_t fill;
    uint64_t pos;
    uint32_t *table;     /* the current run's block lengths */
    int nibble;          /* blocks in the nibble mode (--compress-fast), else huffman */
} coded_out;

static int co_flush(coded_out *co, int out, const char *path, k3_err *e)
{
    size_t n = (size_t)k3_trunk_align_up(co->fill);
    memset(co->buf + co->fill, 0, n - co->fill);
    if (n && write_sparse(out, path, co->buf, n, co->pos, e) != K3_OK)
        return e->code;
    co->pos += n;
    co->fill = 0;
    return K3_OK;
}

static int co_put(coded_out *co, const uint8_t *p, size_t n, int out, const char *path,
                  k3_err *e)
{
    while (n) {
        size_t take = WINDOW - co->fill < n ? WINDOW - co->fill : n;
        memcpy(co->buf + co->fill, p, take);
        co->fill += take;
        p += take;
        n -= take;
        if (co->fill == WINDOW && co_flush(co, out, path, e) != K3_OK)
            return e->code;
    }
    return K3_OK;
}

/* Encodes the window [a, a + n) of run (blocks in parallel) and appends
 * its blocks, recording their lengths in co->table. */
static int co_window(coded_out *co, const uint8_t *win, uint64_t a, size_t n, uint64_t *stored,
                     int out, const char *path, k3_err *e)
{
    long long nbw = (long long)k3_codec_nblocks(n);
    uint64_t b0 = a / K3_CODEC_BLOCK;
#pragma omp parallel for schedule(dynamic, 4)
    for (long long k = 0; k < nbw; k++)
        co->table[b0 + (uint64_t)k] = (uint32_t)(co->nibble ? k3_codec_encode_nibble
                                                            : k3_codec_encode)(
            win + (uint64_t)k * K3_CODEC_BLOCK, k3_codec_block_len(n, (uint64_t)k),
            co->enc + (size_t)k * K3_CODEC_MAX_STORED);
    for (long long k = 0; k < nbw && !e->code; k++) {
        co_put(co, co->enc + (size_t)k * K3_CODEC_MAX_STORED, co->table[b0 + (uint64_t)k], out,
               path, e);
        *stored += co->table[b0 + (uint64_t)k];
    }
    return e->code;
}

/* Ends a compressed run: its block table (little-endian u32), then the pad. */
static int co_end_run(coded_out *co, uint64_t nb, uint64_t *stored, int out, const char *path,
                      k3_err *e)
{
    for (uint64_t k = 0; k < nb && !e->code; k++) {
        uint8_t le[4] = { (uint8_t)co->table[k], (uint8_t)(co->table[k] >> 8),
                          (uint8_t)(co->table[k] >> 16), (uint8_t)(co->table[k] >> 24) };
        co_put(co, le, 4, out, path, e);
    }
    *stored += 4 * nb;
    return e->code ? e->code : co_flush(co, out, path, e);
}

/* The writer's side: hashes and writes (plain) or encodes and appends
 * (co set) every window; sets the checksums, and with co the runs'
 * offsets, stored sizes and the file size. */
static int write_windows(pipeline *p, k3_trunk_manifest *m, int out, const char *out_path,
                         coded_out *co, k3_progress *pg, k3_err *e)
{
    size_t k = 0;
    for (size_t r = 0; r < m->nruns; r++) {
        k3_trunk_run *run = &m->runs[r];
        run_hasher h;
        if (rh_init(&h, run->length, e) != K3_OK)
            return e->code;
        if (co) {
            run->offset = co->pos;
            run->stored = 0;
            free(co->table);
            if (!(co->table = k3_calloc(e, (size_t)k3_codec_nblocks(run->length) + 1, 4,
                                        "block table")))
                break;
        }
        for (uint64_t a = 0; a < run->length; a += WINDOW, k++) {
            pthread_mutex_lock(&p->mu);
            while (!p->full[k % 2] && !p->err.code)
                pthread_cond_wait(&p->cv, &p->mu);
            int failed = !p->full[k % 2];
            if (failed)
                k3_fail(e, p->err.code, "%s", p->err.msg);
            pthread_mutex_unlock(&p->mu);
            if (failed)
                break;
            size_t n = window_len(run, a);
            rh_window(&h, a, p->win[k % 2], n);
            if (co ? co_window(co, p->win[k % 2], a, n, &run->stored, out, out_path, e)
                   : write_sparse(out, out_path, p->win[k % 2], (size_t)k3_trunk_align_up(n),
                                  run->offset + a, e))
                break;
            k3_progress_add(pg, n);
            pthread_mutex_lock(&p->mu);
            p->full[k % 2] = 0;
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
        }
        run->checksum = rh_done(&h);
        if (!e->code && co)
            co_end_run(co, k3_codec_nblocks(run->length), &run->stored, out, out_path, e);
        if (e->code)
            return e->code;
        maybe_die(r + 1);
    }
    if (co)
        m->file_size = co->pos;
    return e->code;
}

/* Copies every run into out through the pipeline; win holds 2 windows. */
static int copy_runs(k3_trunk_manifest *m, sources *src, int out, const char *out_path,
                     uint8_t *win, coded_out *co, k3_progress *pg, k3_err *e)
{
    pipeline p;
    memset(&p, 0, sizeof p);
    p.m = m;
    p.src = src;
    p.win[0] = win;
    p.win[1] = win + WINDOW;
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    pthread_t reader;
    if (pthread_create(&reader, NULL, reader_main, &p) != 0) {
        k3_fail(e, K3_ERUNTIME, "cannot start the pack reader thread");
    } else {
        write_windows(&p, m, out, out_path, co, pg, e);
        pthread_mutex_lock(&p.mu);
        p.stop = 1;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
        pthread_join(reader, NULL);
    }
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    return e->code;
}

/* What read_back calls with each window [a, a + n) of a run's image. */
typedef int (*window_fn)(void *ctx, uint64_t a, const uint8_t *data, size_t n, k3_err *e);

/* Reads run (its offset and stored size in trunk.bin) back from f and sets
 * *got to its checksum as the engine computes it: plain runs window by
 * window into disk (one window), compressed runs decoded whole into a
 * buffer of their length (io/read_coded.h: what streaming them needs
 * anyway). fn (optional) sees every window of the image. A compressed run
 * that does not decode is a failure like a wrong checksum. */
static int read_back(k3_file *f, const k3_trunk_run *run, int codec, uint8_t *disk,
                     window_fn fn, void *ctx, k3_progress *pg, uint64_t *got, k3_err *e)
{
    if (codec != K3_RUN_PLAIN) {
        uint8_t *img = k3_io_alloc((size_t)run->length + 1, "pack-trunk verify image", e);
        size_t sb = k3_coded_stage_bytes(run->stored);
        uint8_t *stage = e->code ? NULL : k3_io_alloc(sb, "pack-trunk verify staging", e);
        k3_coded_times t = { 0, 0 };
        k3_err ce = { 0, "" };
        if (!e->code &&
            k3_read_coded(f, run->offset, run->stored, img, run->length, stage, sb, got, &t, &ce))
            k3_fail(e, K3_ERUNTIME, "%s: run \"%s\" reads back damaged: %s (repack with --force)",
                    f->path, run->name, ce.msg);
        for (uint64_t a = 0; fn && !e->code && a < run->length; a += WINDOW)
            fn(ctx, a, img + a, window_len(run, a), e);
        if (!e->code)
            k3_progress_add(pg, run->length);
        k3_io_free(img);
        k3_io_free(stage);
        return e->code;
    }
    run_hasher h;
    if (rh_init(&h, run->length, e) != K3_OK)
        return e->code;
    for (uint64_t a = 0; a < run->length && !e->code; a += WINDOW) {
        size_t n = window_len(run, a);
        k3_iov v = { disk, (size_t)k3_trunk_align_up(n) };
        if (k3_file_readv(f, run->offset + a, &v, 1, n, e) != K3_OK)
            break;
        rh_window(&h, a, disk, n);
        if (fn && fn(ctx, a, disk, n, e) != K3_OK)
            break;
        k3_progress_add(pg, n);
    }
    *got = rh_done(&h);
    return e->code;
}

/* Re-reads every run of path and compares its checksum with m's. */
static int verify_file(const k3_trunk_manifest *m, const char *path, uint8_t *win, FILE *log,
                       k3_err *e)
{
    k3_file f;
    if (k3_file_open(&f, path, 1, e) != K3_OK)
        return e->code;
    k3_progress pg;
    k3_progress_start(&pg, log, "pack-trunk: verify", run_bytes(m));
    for (size_t r = 0; r < m->nruns && !e->code; r++) {
        const k3_trunk_run *run = &m->runs[r];
        uint64_t got = 0;
        if (read_back(&f, run, m->codec, win, NULL, NULL, &pg, &got, e) == K3_OK &&
            got != run->checksum) {
            char a[17], b[17];
            k3_trunk_hex(got, a);
            k3_trunk_hex(run->checksum, b);
            k3_fail(e, K3_ERUNTIME, "%s: run \"%s\" reads back with checksum %s, not %s: the "
                                    "file on disk is damaged (repack with --force)",
                    path, run->name, a, b);
        }
    }
    if (!e->code)
        k3_progress_end(&pg);
    k3_file_close(&f);
    return e->code;
}

/* Where byte `at` of run's image is, for a message: "byte N of tensor T
 * (SHARD offset M)" or "an alignment gap". */
static void locate(const k3_trunk_run *run, uint64_t at, char *out, size_t n)
{
    for (size_t i = 0; i < run->ntensors; i++) {
        const k3_trunk_tensor *t = &run->tensors[i];
        if (at >= t->offset && at - t->offset < t->nbytes) {
            snprintf(out, n, "byte %llu of tensor %s (%s offset %llu)",
                     (unsigned long long)(at - t->offset), t->name, t->src_path,
                     (unsigned long long)(t->src_off + at - t->offset));
            return;
        }
    }
    snprintf(out, n, "byte %llu, an alignment gap", (unsigned long long)at);
}

/* verify_source's window check: the image window from the source
 * tensors (into img) must equal the one read back. */
typedef struct {
    const k3_trunk_run *run;
    sources *src;
    uint8_t *img;
    const char *path;
} source_cmp;

static int cmp_window(void *ctx, uint64_t a, const uint8_t *disk, size_t n, k3_err *e)
{
    source_cmp *c = ctx;
    if (fill_window(c->run, a, n, c->src, c->img, e) != K3_OK)
        return e->code;
    if (memcmp(c->img, disk, n)) {
        size_t i = 0;
        char where[1024];
        while (c->img[i] == disk[i])
            i++;
        locate(c->run, a + i, where, sizeof where);
        k3_fail(e, K3_ERUNTIME, "%s: run \"%s\" differs from the model's tensors at %s: "
                                "trunk.bin is damaged or was packed from other weights "
                                "(repack with --force)", c->path, c->run->name, where);
    }
    return e->code;
}

/* --verify of an up-to-date trunk: every run of path (at have's offsets)
 * compared byte for byte (decoded, when compressed) with its image
 * assembled afresh from the source tensors (m: the layout, whose table
 * equals have's), and its read-back checksum with have's. win holds 2
 * windows: the image, then trunk.bin. */
static int verify_source(const k3_trunk_manifest *m, const k3_trunk_manifest *have,
                         const char *path, uint8_t *win, FILE *log, k3_err *e)
{
    k3_file f;
    sources src;
    if (k3_file_open(&f, path, 1, e) != K3_OK)
        return e->code;
    k3_progress pg;
    k3_progress_start(&pg, log, "pack-trunk: verify against the model", run_bytes(m));
    open_sources(&src, m, e);
    for (size_t r = 0; r < m->nruns && !e->code; r++) {
        source_cmp c = { &m->runs[r], &src, win, path };
        uint64_t got = 0;
        if (read_back(&f, &have->runs[r], have->codec, win + WINDOW, cmp_window, &c, &pg, &got,
                      e) == K3_OK &&
            got != have->runs[r].checksum) {
            char a[17], b[17];
            k3_trunk_hex(got, a);
            k3_trunk_hex(have->runs[r].checksum, b);
            k3_fail(e, K3_ERUNTIME, "%s: run \"%s\" holds the model's bytes but hashes to %s, "
                                    "not %s as trunk.json says: the manifest is damaged (repack "
                                    "with --force)", path, m->runs[r].name, a, b);
        }
    }
    close_sources(&src);
    if (!e->code)
        k3_progress_end(&pg);
    k3_file_close(&f);
    return e->code;
}

static int sync_dir(const char *dir, k3_err *e)
{
    if (k3_os_sync_dir(dir) != 0) {
        return k3_fail(e, K3_ERUNTIME, "%s: cannot sync the directory: %s", dir, strerror(errno));
    }
    return K3_OK;
}

static void warn_space(const char *dir, uint64_t need, FILE *log)
{
    uint64_t free_bytes = log ? k3_os_free_bytes(dir) : UINT64_MAX;
    if (free_bytes != UINT64_MAX && free_bytes < need)
        fprintf(log, "pack-trunk: warning: trunk.bin takes up to %.2f GB and %s has %.2f GB "
                     "free (all-zero blocks are not written, so a sparse model may still fit)\n",
                need / 1e9, dir, (double)free_bytes / 1e9);
}

/* Copies every run into paths->bin_tmp (sized, fsynced). */
static int copy_all(k3_trunk_manifest *m, const paths *p, uint8_t *win, FILE *log, k3_err *e)
{
    int out = open_output(p->bin_tmp);
    if (out < 0)
        return k3_fail(e, K3_ERUNTIME, "%s: cannot create: %s", p->bin_tmp, strerror(errno));
    /* Plain: sized first, so skipped zero blocks are holes. Compressed: the
     * size is known at the end (sized then: the same holes). */
    if (ftruncate(out, m->codec ? 0 : (off_t)m->file_size) != 0)
        k3_fail(e, K3_ERUNTIME, "%s: cannot size it to %llu bytes: %s", p->bin_tmp,
                (unsigned long long)m->file_size, strerror(errno));
    k3_progress pg;
    sources src;
    coded_out co;
    memset(&co, 0, sizeof co);
    if (m->codec && !e->code) {
        co.nibble = m->codec == K3_RUN_BF16_NIBBLE;
        co.buf = k3_io_alloc(WINDOW, "trunk pack output", e);
        co.enc = e->code ? NULL : k3_io_alloc((WINDOW / K3_CODEC_BLOCK) * K3_CODEC_MAX_STORED,
                                              "trunk pack encoder", e);
    }
    k3_progress_start(&pg, log, "pack-trunk: copy", run_bytes(m));
    open_sources(&src, m, e);
    if (!e->code)
        copy_runs(m, &src, out, p->bin_tmp, win, m->codec ? &co : NULL, &pg, e);
    close_sources(&src);
    k3_io_free(co.buf);
    k3_io_free(co.enc);
    free(co.table);
    if (m->codec && !e->code && ftruncate(out, (off_t)m->file_size) != 0)
        k3_fail(e, K3_ERUNTIME, "%s: cannot size it to %llu bytes: %s", p->bin_tmp,
                (unsigned long long)m->file_size, strerror(errno));
    if (!e->code && k3_os_fsync(out) != 0)
        k3_fail(e, K3_ERUNTIME, "%s: fsync failed: %s", p->bin_tmp, strerror(errno));
    /* Drop the cached pages so the verification reads the disk, not memory
     * (direct I/O does too; this covers file systems without it). macOS has
     * no posix_fadvise; its direct reads (F_NOCACHE) still bypass the cache. */
#ifdef POSIX_FADV_DONTNEED
    if (!e->code)
        posix_fadvise(out, 0, 0, POSIX_FADV_DONTNEED);
#endif
    if (close(out) != 0 && !e->code)
        k3_fail(e, K3_ERUNTIME, "%s: close failed: %s", p->bin_tmp, strerror(errno));
    if (!e->code)
        k3_progress_end(&pg);
    return e->code;
}

/* Makes the finished files the trunk (order: see trunk_pack.h). */
static int publish(const k3_trunk_manifest *m, const char *dir, const paths *p, k3_err *e)
{
    if (k3_trunk_manifest_write(m, p->json_tmp, e) != K3_OK)
        return e->code;
    if (k3_os_unlink(p->json) != 0 && errno != ENOENT)
        return k3_fail(e, K3_ERUNTIME, "%s: cannot remove the old manifest: %s", p->json,
                       strerror(errno));
    if (sync_dir(dir, e) != K3_OK)
        return e->code;
    if (k3_os_replace(p->bin_tmp, p->bin) != 0)
        return k3_fail(e, K3_ERUNTIME, "%s: cannot rename to %s: %s", p->bin_tmp, p->bin,
                       strerror(errno));
    if (k3_os_replace(p->json_tmp, p->json) != 0)
        return k3_fail(e, K3_ERUNTIME, "%s: cannot rename to %s: %s", p->json_tmp, p->json,
                       strerror(errno));
    return sync_dir(dir, e);
}

/* Removes the temporary files of our naming from dir; 1 if there was one. */
static int remove_temps(const paths *p)
{
    int bin = k3_os_unlink(p->bin_tmp) == 0;
    int json = k3_os_unlink(p->json_tmp) == 0;
    return bin || json;
}

/* An exclusive lock on dir, held while the returned descriptor is open, so
 * that the temporary files of a pack still running are never taken for
 * leftovers. -1 with e set when another pack holds it; a file system
 * without locks (flock fails otherwise) packs unlocked. */
static int lock_dir(const char *dir, k3_err *e)
{
    int fd = k3_os_lock_dir(dir);
    if (fd < 0 && errno == EWOULDBLOCK) {
        k3_fail(e, K3_ERUNTIME, "%s: another k3 pack-trunk is packing into it", dir);
        return -1;
    }
    if (fd < 0)
        k3_fail(e, K3_ERUNTIME, "%s: cannot open: %s", dir, strerror(errno));
    return fd;
}

static void log_up_to_date(const k3_trunk_manifest *have, const char *dir, int verify, FILE *log)
{
    char c[17], t[17];
    k3_trunk_hex(have->config_hash, c);
    k3_trunk_hex(have->table_hash, t);
    fprintf(log, "pack-trunk: %s is up to date (trunk.json format %d, config.json xxh64 %s, "
                 "tensor table xxh64 %s, source fingerprints of %zu runs, trunk.bin %llu bytes "
                 "as recorded)%s\n",
            dir, have->version, c, t, have->nruns, (unsigned long long)have->file_size,
            verify ? "; comparing every byte with the model's tensors"
                   : "; not re-read (--verify compares every byte)");
}

int k3_trunk_pack(k3_trunk_manifest *m, const char *dir, const k3_pack_opts *o,
                  k3_pack_result *res, k3_err *e)
{
    memset(res, 0, sizeof *res);
    double t0 = k3_seconds();
    paths p;
    make_paths(&p, dir);
    k3_trunk_manifest have;
    memset(&have, 0, sizeof have);
    int lock = lock_dir(dir, e);
    if (lock < 0)
        return e->code;
    if (remove_temps(&p) && o->log)
        fprintf(o->log, "pack-trunk: removed the leftovers of an interrupted pack (%s.tmp, "
                        "%s.tmp)\n", K3_TRUNK_BIN, K3_TRUNK_JSON);
    uint8_t *win = k3_io_alloc(2 * (size_t)WINDOW, "trunk pack windows", e);
    k3_err se = { 0, "" };
    m->codec = o->compress == 2 ? K3_RUN_BF16_NIBBLE : o->compress ? K3_RUN_BF16 : K3_RUN_PLAIN;
    if (win && k3_trunk_source_fingerprint(m, &se) != K3_OK)
        k3_fail(e, K3_ERUNTIME, "%s", se.msg); /* a pack's read failure: exit 1 */
    if (!e->code && !o->force && up_to_date(m, dir, &p, &have, o->log)) {
        res->up_to_date = 1;
        if (o->log)
            log_up_to_date(&have, dir, o->verify, o->log);
        if (o->verify && verify_source(m, &have, p.bin, win, o->log, e) == K3_OK)
            res->bytes = run_bytes(&have);
        k3_trunk_manifest_free(&have);
    } else if (!e->code) {
        warn_space(dir, m->file_size, o->log);
        double c0 = k3_seconds();
        if (copy_all(m, &p, win, o->log, e) == K3_OK) {
            res->copy_seconds = k3_seconds() - c0;
            double v0 = k3_seconds();
            if (verify_file(m, p.bin_tmp, win, o->log, e) == K3_OK) {
                res->verify_seconds = k3_seconds() - v0;
                res->bytes = run_bytes(m);
                for (size_t r = 0; r < m->nruns; r++)
                    res->stored += m->runs[r].stored;
                publish(m, dir, &p, e);
            }
        }
        if (e->code)
            remove_temps(&p); /* never a partial file left, under any name */
    }
    k3_io_free(win);
    k3_os_close_lock(lock);
    res->total_seconds = k3_seconds() - t0;
    return e->code;
}
