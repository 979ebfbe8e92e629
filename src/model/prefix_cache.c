/* prefix_cache.c - see prefix_cache.h. */
#include "model/prefix_cache.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/model.h"
#include "model/prefix_radix.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/os.h"
#include "util/xxh64.h"

/* One snapshot: in RAM (snap), on disk (file), or both. */
typedef struct entry {
    uint32_t *ids;          /* [n] its key's ids (its own copy) */
    size_t n;
    k3_image_span *img;     /* [nimg] its key's spans (start < n) */
    size_t nimg;
    uint64_t key;           /* XXH64 of ids and spans: the file's name */
    k3_state *snap;         /* the RAM copy, or NULL */
    uint64_t ram_bytes;     /* k3_state_bytes(snap) */
    int on_disk;
    uint64_t disk_bytes;    /* the file's size */
    uint64_t used;          /* the cache's tick at its last put or restore */
    uint64_t hits;
    int writing;            /* the writer thread is writing snap to its file */
    int unwritable;         /* the writer gave up on it (no room, a failed write) */
} entry;

/* A lookup through the index: the prompt, and the best entry so far. */
typedef struct lookup {
    const struct k3_prefix_cache *c;
    const uint32_t *ids;
    size_t n;
    const k3_image_span *img;
    size_t nimg;
    size_t have;
    entry *best;
} lookup;

struct k3_prefix_cache {
    const k3_model *m;
    k3_prefix_opts o;
    char *dir;              /* o.dir's copy */
    entry **e;              /* [ne] of [cap], each its own allocation (the index points at it) */
    size_t ne, cap;
    k3_radix *idx;          /* every entry by its ids (prefix_radix.h) */
    uint64_t tick;
    k3_prefix_stats st;
    double read_rate;       /* seconds per byte of the disk reads so far (0: none yet) */
    double prefill_rate;    /* seconds per position the caller computes (0: not known) */
    /* The write-behind (k3_prefix_cache_flush): a thread started by the
     * first flush writes the RAM snapshots that have no file. mu guards
     * everything above; the writer holds it except while it writes an
     * entry's file (entry.writing: the snapshot is only read then, and
     * the caller's thread waits for the write before it frees or writes
     * that snapshot itself). */
    pthread_mutex_t mu;
    pthread_cond_t wake, wrote;
    pthread_t writer;
    int has_writer, stop;
};

static void note(const k3_prefix_cache *c, const char *fmt, ...) K3_PRINTF(2, 3);

static void note(const k3_prefix_cache *c, const char *fmt, ...)
{
    va_list ap;
    if (!c->o.log)
        return;
    va_start(ap, fmt);
    fprintf(c->o.log, "k3 prefix cache: ");
    vfprintf(c->o.log, fmt, ap);
    fputc('\n', c->o.log);
    fflush(c->o.log);
    va_end(ap);
}

static uint64_t key_of(const uint32_t *ids, size_t n, const k3_image_span *img, size_t nimg)
{
    k3_xxh64_state h;
    k3_xxh64_init(&h, 0x6b33707265666978ull);
    k3_xxh64_update(&h, ids, n * sizeof *ids);
    for (size_t i = 0; i < nimg; i++) {
        int64_t v[3] = { img[i].start, img[i].n, (int64_t)img[i].hash };
        k3_xxh64_update(&h, v, sizeof v);
    }
    return k3_xxh64_digest(&h);
}

/* The file of key `key` in the disk tier. */
static void file_name(const k3_prefix_cache *c, uint64_t key, char *out, size_t cap)
{
    snprintf(out, cap, "%s/k3p-%016llx-%016llx.state", c->dir, (unsigned long long)c->o.ns,
             (unsigned long long)key);
}

/* Whether entry x matches the prompt (ids[0..n), img[0..nimg)): its ids a
 * prefix, and the same spans below its end (a span of the prompt that
 * starts below the end must be one of x's, and the reverse). */
static int matches(const entry *x, const uint32_t *ids, size_t n, const k3_image_span *img,
                   size_t nimg)
{
    if (x->n > n || memcmp(x->ids, ids, x->n * sizeof *ids) != 0)
        return 0;
    size_t j = 0;
    while (j < nimg && (size_t)img[j].start < x->n)
        j++;
    if (j != x->nimg)
        return 0;
    for (size_t i = 0; i < j; i++)
        if (img[i].start != x->img[i].start || img[i].hash != x->img[i].hash)
            return 0;
    return 1;
}

/* An index visitor (a lookup's best: the entry of exactly its key). */
static void same_key(void *ctx, void *val, size_t len)
{
    lookup *q = ctx;
    entry *x = val;
    if ((x->snap || x->on_disk) && len == q->n && x->nimg == q->nimg &&
        matches(x, q->ids, q->n, q->img, q->nimg))
        q->best = x;
}

/* Value of keeping x: positions saved per byte, times one plus its hits,
 * over its age. */
static double value(const k3_prefix_cache *c, const entry *x, uint64_t bytes)
{
    double age = (double)(c->tick - x->used) + 1.0;
    return (double)x->n * (double)(1 + x->hits) / ((double)bytes + 1.0) / age;
}

static void free_entry(entry *x)
{
    free(x->ids);
    free(x->img);
    k3_state_free(x->snap);
    free(x);
}

/* Drops the entries that are neither in RAM nor on disk. Only at the end
 * of a public call: until then an entry's index and address stay put. */
static void gc(k3_prefix_cache *c)
{
    size_t k = 0;
    for (size_t i = 0; i < c->ne; i++) {
        if (c->e[i]->snap || c->e[i]->on_disk) {
            c->e[k++] = c->e[i];
        } else {
            k3_radix_remove(c->idx, c->e[i]->ids, c->e[i]->n, c->e[i]);
            free_entry(c->e[i]);
        }
    }
    c->ne = k;
}

static void remove_file(k3_prefix_cache *c, entry *x)
{
    char path[4096];
    file_name(c, x->key, path, sizeof path);
    remove(path);
    c->st.disk_bytes -= x->disk_bytes;
    c->st.disk_entries--;
    x->on_disk = 0;
    x->disk_bytes = 0;
}

/* Frees entry i's RAM copy (gc drops it when it is on no disk). */
static void leave_ram(k3_prefix_cache *c, size_t i)
{
    entry *x = c->e[i];
    while (x->writing)
        pthread_cond_wait(&c->wrote, &c->mu);
    c->st.ram_bytes -= x->ram_bytes;
    c->st.ram_entries--;
    k3_state_free(x->snap);
    x->snap = NULL;
    x->ram_bytes = 0;
}

/* Removes the least valuable files until `need` more bytes fit the disk
 * bound (never the entry `keep`; with ram_too 0 only files of snapshots
 * that are not in RAM: a write-behind never pushes out another one's
 * durable copy, so two flushes cannot take turns evicting each other).
 * 0 when they fit. */
static int disk_room(k3_prefix_cache *c, uint64_t need, const entry *keep, int ram_too)
{
    while (c->st.disk_bytes + need > c->o.disk_bytes) {
        size_t worst = c->ne;
        for (size_t i = 0; i < c->ne; i++)
            if (c->e[i]->on_disk && c->e[i] != keep && (ram_too || !c->e[i]->snap) &&
                (worst == c->ne || value(c, c->e[i], c->e[i]->disk_bytes) <
                                       value(c, c->e[worst], c->e[worst]->disk_bytes)))
                worst = i;
        if (worst == c->ne)
            return -1;
        remove_file(c, c->e[worst]);
        c->st.disk_evictions++;
    }
    return 0;
}

/* Writes x's snapshot (src: its RAM copy, or the state it was taken from)
 * to the disk tier, within its bound (ram_too: disk_room's). */
static void spill(k3_prefix_cache *c, entry *x, const k3_state *src, int ram_too)
{
    char path[4096];
    k3_err e = { 0, "" };
    while (x->writing)
        pthread_cond_wait(&c->wrote, &c->mu);
    if (!c->dir || x->on_disk)
        return;
    uint64_t bytes = k3_prefix_snapshot_bytes(c->m, (int64_t)x->n); /* about the file's */
    if (bytes > c->o.disk_bytes || disk_room(c, bytes, x, ram_too))
        return;
    file_name(c, x->key, path, sizeof path);
    if (k3_state_save(src, path, &e) != K3_OK) {
        note(c, "%s: not written", e.msg);
        return;
    }
    struct stat sb;
    x->disk_bytes = stat(path, &sb) == 0 ? (uint64_t)sb.st_size : bytes;
    x->on_disk = 1;
    c->st.disk_bytes += x->disk_bytes;
    c->st.disk_entries++;
    c->st.spills++;
}

/* Makes room for `need` more RAM bytes: the least valuable snapshots leave
 * RAM (spilled first when there is a disk tier). 0 when they fit. */
static int ram_room(k3_prefix_cache *c, uint64_t need)
{
    while (c->st.ram_bytes + need > c->o.ram_bytes) {
        size_t worst = c->ne;
        for (size_t i = 0; i < c->ne; i++)
            if (c->e[i]->snap && (worst == c->ne || value(c, c->e[i], c->e[i]->ram_bytes) <
                                                        value(c, c->e[worst],
                                                              c->e[worst]->ram_bytes)))
                worst = i;
        if (worst == c->ne)
            return -1;
        spill(c, c->e[worst], c->e[worst]->snap, 1);
        c->st.evictions++;
        leave_ram(c, worst);
    }
    return 0;
}

static entry *add_entry(k3_prefix_cache *c, uint32_t *ids, size_t n, k3_image_span *img,
                        size_t nimg, k3_err *e)
{
    if (c->ne == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        entry **g = cap <= SIZE_MAX / sizeof *g ? realloc(c->e, cap * sizeof *g) : NULL;
        if (!g) {
            k3_fail(e, K3_ERUNTIME, "out of memory for the prefix cache's index");
            return NULL;
        }
        c->e = g;
        c->cap = cap;
    }
    entry *x = k3_calloc(e, 1, sizeof *x, "the prefix cache's index");
    if (!x)
        return NULL;
    if (k3_radix_insert(c->idx, ids, n, x, e)) {
        free(x);
        return NULL;
    }
    c->e[c->ne++] = x;
    x->ids = ids;
    x->n = n;
    x->img = img;
    x->nimg = nimg;
    x->key = key_of(ids, n, img, nimg);
    x->used = c->tick;
    return x;
}

/* One file of the disk tier found when opening. */
static void scan_file(k3_prefix_cache *c, const char *name)
{
    char path[4096], want[64];
    unsigned long long ns = 0, key = 0;
    int used = 0;
    if (strncmp(name, "k3p-", 4) != 0)
        return;
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    c->st.skipped++;
    if (sscanf(name, "k3p-%16llx-%16llx.state%n", &ns, &key, &used) != 2 ||
        name[used] != '\0') {
        note(c, "%s: skipped (not a snapshot's name)", path);
        return;
    }
    if (ns != c->o.ns) {
        note(c, "%s: skipped (foreign: another tokenizer or chat format made it)", path);
        return;
    }
    uint32_t *ids;
    k3_image_span *img;
    size_t n, nimg;
    k3_err e = { 0, "" };
    if (k3_state_file_key(c->m, path, &ids, &n, &img, &nimg, &e) != K3_OK) {
        note(c, "skipped: %s", e.msg);
        return;
    }
    snprintf(want, sizeof want, "k3p-%016llx-%016llx.state", ns,
             (unsigned long long)key_of(ids, n, img, nimg));
    struct stat sb;
    entry *x = NULL;
    if (strcmp(want, name) != 0 || n == 0)
        note(c, "%s: skipped (its name does not match its ids)", path);
    else if (stat(path, &sb) != 0 || !(x = add_entry(c, ids, n, img, nimg, &e)))
        note(c, "%s: skipped (%s)", path, e.code ? e.msg : "cannot stat it");
    if (!x) {
        free(ids);
        free(img);
        return;
    }
    c->st.skipped--;
    x->on_disk = 1;
    x->disk_bytes = (uint64_t)sb.st_size;
    c->st.disk_bytes += x->disk_bytes;
    c->st.disk_entries++;
}

static int scan(k3_prefix_cache *c, k3_err *e)
{
    if (k3_os_mkdir(c->dir) != 0 && errno != EEXIST)
        return k3_fail(e, K3_EINPUT, "--prefix-cache-dir %s: %s", c->dir, strerror(errno));
    DIR *d = opendir(c->dir);
    if (!d)
        return k3_fail(e, K3_EINPUT, "--prefix-cache-dir %s: %s", c->dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        scan_file(c, de->d_name);
    closedir(d);
    disk_room(c, 0, NULL, 1); /* a smaller bound than the last run's */
    gc(c);
    return K3_OK;
}

int k3_prefix_cache_open(k3_prefix_cache **out, const k3_model *m, const k3_prefix_opts *o,
                         k3_err *e)
{
    *out = NULL;
    k3_prefix_cache *c = k3_calloc(e, 1, sizeof *c, "the prefix cache");
    if (!c)
        return e->code;
    c->m = m;
    c->o = *o;
    if (k3_radix_new(&c->idx, e)) {
        free(c);
        return e->code;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->wake, NULL);
    pthread_cond_init(&c->wrote, NULL);
    if (o->dir && !(c->dir = k3_malloc(e, strlen(o->dir) + 1, "the prefix cache"))) {
        k3_prefix_cache_close(c);
        return e->code;
    }
    if (o->dir) {
        strcpy(c->dir, o->dir);
        if (scan(c, e)) {
            k3_prefix_cache_close(c);
            return e->code;
        }
    }
    *out = c;
    return K3_OK;
}

void k3_prefix_cache_close(k3_prefix_cache *c)
{
    if (!c)
        return;
    if (c->has_writer) { /* it ends its write, if any; the rest is written here */
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->writer, NULL);
    }
    for (size_t i = 0; i < c->ne; i++)
        if (c->e[i]->snap)
            spill(c, c->e[i], c->e[i]->snap, 1);
    for (size_t i = 0; i < c->ne; i++)
        free_entry(c->e[i]);
    free(c->e);
    k3_radix_free(c->idx);
    pthread_cond_destroy(&c->wrote);
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->mu);
    free(c->dir);
    free(c);
}

/* Reads x's file into s; on failure logs, removes the file and the entry. */
static int read_back(k3_prefix_cache *c, entry *x, k3_state *s)
{
    char path[4096];
    k3_err e = { 0, "" };
    file_name(c, x->key, path, sizeof path);
    double t0 = k3_seconds();
    if (k3_state_load(s, path, &e) == K3_OK &&
        ((size_t)k3_state_pos(s) != x->n || memcmp(k3_state_ids(s), x->ids, x->n * 4) != 0))
        k3_fail(&e, K3_EINPUT, "%s: its ids are not its key's", path);
    if (e.code) {
        k3_state_reset(s);
        note(c, "skipped and removed: %s", e.msg);
        remove_file(c, x);
        c->st.skipped++;
        return -1;
    }
    double dt = k3_seconds() - t0, rate = dt / ((double)x->disk_bytes + 1.0);
    c->read_rate = c->read_rate > 0 ? 0.5 * (c->read_rate + rate) : rate;
    return 0;
}

/* The index calls this for each entry whose ids are a prefix of the
 * prompt's, shortest first: the last one that qualifies is the best. */
static void consider(void *ctx, void *val, size_t len)
{
    lookup *q = ctx;
    entry *x = val;
    const k3_prefix_cache *c = q->c;
    (void)len;
    /* (an entry the writer's disk_room left in neither tier waits for gc) */
    if ((!x->snap && !x->on_disk) || x->n <= q->have ||
        !matches(x, q->ids, q->n, q->img, q->nimg))
        return;
    /* A file is worth reading when that is quicker than computing the
     * positions it saves (both rates measured; unknown: read). */
    if (!x->snap && c->read_rate > 0 && c->prefill_rate > 0 &&
        c->read_rate * (double)x->disk_bytes > c->prefill_rate * (double)(x->n - q->have))
        return;
    q->best = x;
}

static size_t restore_from(k3_prefix_cache *c, entry *x, k3_state *s);

size_t k3_prefix_cache_restore(k3_prefix_cache *c, k3_state *s, const uint32_t *ids, size_t n,
                               const k3_image_span *img, size_t nimg, size_t have)
{
    lookup q = { c, ids, n, img, nimg, have, NULL };
    size_t pos = 0;
    pthread_mutex_lock(&c->mu);
    c->tick++;
    k3_radix_prefixes(c->idx, ids, n, consider, &q);
    if (q.best)
        pos = restore_from(c, q.best, s);
    else
        c->st.misses++;
    gc(c);
    pthread_mutex_unlock(&c->mu);
    return pos;
}

/* Restores entry x into s: its position, or 0 (s reset) after a failure. */
static size_t restore_from(k3_prefix_cache *c, entry *x, k3_state *s)
{
    size_t pos = x->n;
    if (x->snap) {
        k3_err e = { 0, "" };
        if (k3_state_copy(s, x->snap, &e) != K3_OK) {
            note(c, "restore failed: %s", e.msg);
            k3_state_reset(s);
            return 0;
        }
    } else {
        if (read_back(c, x, s))
            return 0;
        c->st.disk_hits++;
    }
    x->used = c->tick;
    x->hits++;
    c->st.hits++;
    c->st.tokens_saved += pos;
    return pos;
}

static void put(k3_prefix_cache *c, const k3_state *s);

void k3_prefix_cache_put(k3_prefix_cache *c, const k3_state *s)
{
    pthread_mutex_lock(&c->mu);
    put(c, s);
    pthread_mutex_unlock(&c->mu);
}

static void put(k3_prefix_cache *c, const k3_state *s)
{
    size_t n = (size_t)k3_state_pos(s);
    const uint32_t *sids = k3_state_ids(s);
    const k3_image_span *simg;
    size_t nimg = k3_state_images(s, &simg);
    k3_err e = { 0, "" };
    c->tick++;
    if (n == 0)
        return;
    lookup q = { c, sids, n, simg, nimg, n - 1, NULL };
    k3_radix_prefixes(c->idx, sids, n, same_key, &q);
    if (q.best) {
        q.best->used = c->tick;
        return;
    }
    uint64_t bytes = k3_prefix_snapshot_bytes(c->m, (int64_t)n);
    int in_ram = bytes <= c->o.ram_bytes && ram_room(c, bytes) == 0;
    if (!in_ram && !c->dir)
        return;
    uint32_t *ids = k3_malloc(&e, n * sizeof *ids, "a snapshot's key");
    k3_image_span *img = nimg ? k3_malloc(&e, nimg * sizeof *img, "a snapshot's key") : NULL;
    entry *x = NULL;
    if (ids && (img || !nimg)) {
        memcpy(ids, sids, n * sizeof *ids);
        if (nimg)
            memcpy(img, simg, nimg * sizeof *img);
        x = add_entry(c, ids, n, img, nimg, &e);
    }
    if (!x) {
        free(ids);
        free(img);
        note(c, "no snapshot taken: %s", e.msg);
        return;
    }
    if (in_ram && (k3_state_new(&x->snap, c->m, &e) || k3_state_copy(x->snap, s, &e))) {
        note(c, "no snapshot in RAM: %s", e.msg);
        k3_state_free(x->snap);
        x->snap = NULL;
        in_ram = 0;
    }
    c->st.puts++;
    if (in_ram) {
        x->ram_bytes = k3_state_bytes(x->snap);
        c->st.ram_bytes += x->ram_bytes;
        c->st.ram_entries++;
        return;
    }
    spill(c, x, s, 1); /* too big for RAM: straight to disk */
    gc(c);
}

/* The next snapshot the writer should write: in RAM, without a file. */
static entry *unwritten(const k3_prefix_cache *c)
{
    for (size_t i = 0; i < c->ne; i++)
        if (c->e[i]->snap && !c->e[i]->on_disk && !c->e[i]->writing && !c->e[i]->unwritable)
            return c->e[i];
    return NULL;
}

/* The writer thread: writes each unwritten snapshot (within the disk bound,
 * removing only files of snapshots not in RAM), then sleeps until the
 * next flush; ends at close. */
static void *writer_main(void *arg)
{
    k3_prefix_cache *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        entry *x = NULL;
        while (!c->stop && !(x = unwritten(c)))
            pthread_cond_wait(&c->wake, &c->mu);
        if (c->stop)
            break;
        char path[4096];
        k3_err e = { 0, "" };
        uint64_t bytes = k3_prefix_snapshot_bytes(c->m, (int64_t)x->n);
        if (bytes > c->o.disk_bytes || disk_room(c, bytes, x, 0)) {
            x->unwritable = 1; /* spilled when it leaves RAM, if there is room then */
            continue;
        }
        x->writing = 1;
        file_name(c, x->key, path, sizeof path);
        pthread_mutex_unlock(&c->mu);
        int rc = k3_state_save(x->snap, path, &e); /* only reads x->snap */
        struct stat sb;
        uint64_t size = rc == K3_OK && stat(path, &sb) == 0 ? (uint64_t)sb.st_size : bytes;
        pthread_mutex_lock(&c->mu);
        x->writing = 0;
        if (rc == K3_OK) {
            x->on_disk = 1;
            x->disk_bytes = size;
            c->st.disk_bytes += size;
            c->st.disk_entries++;
            c->st.spills++;
        } else {
            x->unwritable = 1;
            note(c, "%s: not written", e.msg);
        }
        pthread_cond_broadcast(&c->wrote);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void k3_prefix_cache_flush(k3_prefix_cache *c)
{
    if (!c->dir)
        return;
    pthread_mutex_lock(&c->mu);
    if (!c->has_writer) {
        if (pthread_create(&c->writer, NULL, writer_main, c) == 0)
            c->has_writer = 1;
        else
            note(c, "no write-behind thread: snapshots reach the disk tier when evicted");
    }
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->mu);
}

void k3_prefix_cache_prefill_rate(k3_prefix_cache *c, size_t positions, double seconds)
{
    if (positions == 0 || !(seconds > 0))
        return;
    double rate = seconds / (double)positions;
    pthread_mutex_lock(&c->mu);
    c->prefill_rate = c->prefill_rate > 0 ? 0.5 * (c->prefill_rate + rate) : rate;
    pthread_mutex_unlock(&c->mu);
}

void k3_prefix_cache_stats(k3_prefix_cache *c, k3_prefix_stats *st)
{
    pthread_mutex_lock(&c->mu);
    *st = c->st;
    pthread_mutex_unlock(&c->mu);
}

uint64_t k3_prefix_snapshot_bytes(const k3_model *m, int64_t positions)
{
    const k3_config *c = &m->cfg;
    uint64_t per_pos = 4, fixed = (uint64_t)c->vocab_size * 4 + sizeof(k3_state);
    for (int i = 0; i < m->w.n_layers; i++) {
        if (m->w.layers[i].kind == K3_LAYER_KDA)
            fixed += (k3_state_conv_floats(c) + k3_state_s_floats(c)) * 4;
        else
            per_pos += k3_state_kv_width(c) * 4;
    }
    int64_t cap = positions > 64 ? positions : 64; /* a new state's first reserve */
    return fixed + per_pos * (uint64_t)cap;
}
