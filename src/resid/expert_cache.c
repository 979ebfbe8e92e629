/* expert_cache.c - see expert_cache.h.
 *
 * Slots: one aligned buffer per slot, allocated at creation, holding one
 * expert's tensors as read from disk (each run of adjacent tensors as its
 * aligned superset; the k3_mat views point inside). A direct index maps
 * (layer, expert) to a slot (82k entries for the release: cheaper than any
 * hash). READY slots that are not pinned sit on a doubly linked LRU list;
 * EMPTY slots on a free stack; INFLIGHT slots on neither.
 *
 * A fetch first checks everything (ranges, duplicates, room) without
 * changing anything, then pins its hits (so they cannot be chosen as
 * victims for its own misses), then gives every miss a slot (empty first,
 * else the least recently released) and reads all misses as one batch
 * (io/read_batch.h). Each miss is handed to the caller as soon as all its
 * runs have arrived and its scales pass (k3_ec_read), so the caller can
 * compute on it while the rest of the batch is read. If the batch fails,
 * its slots go back to EMPTY and its hits are unpinned (k3_ec_end): nothing
 * half-read is ever reachable, and a miss with any run unread is never
 * handed over.
 *
 * Counters: requests, hits and misses count completed fetches; evictions,
 * bytes and seconds count what happened, failed fetches included.
 *
 * Threading: all bookkeeping runs on the caller's thread (k3_ec_begin,
 * k3_ec_end); only the batch read (k3_ec_read, itself on any one thread)
 * uses helper threads (plain pthreads, started per batch), which touch
 * nothing but the ticket (its counters under its mutex) and INFLIGHT slot
 * buffers and views, and are joined before k3_ec_read returns. Not OpenMP
 * tasks: the helpers sit blocked in read(), so their number should follow
 * what the device can queue, not OMP_NUM_THREADS, and a team started
 * inside a fetch would be sized by and nest with the engine's compute
 * teams. Starting a thread costs tens of microseconds, a missed release
 * expert (17.5 MB) milliseconds of reading. The cache is not itself safe
 * to call from two threads at once: the engine begins and ends fetches on
 * its forward thread, outside its OpenMP compute loops, and runs
 * k3_ec_read on one I/O thread in between (model/moe.c). */
#include "resid/expert_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/direct.h"
#include "io/read_batch.h"
#include "util/clock.h"
#include "util/error.h"

/* Reads in flight per batch. Reads block in the kernel, not on a core, so
 * this is about keeping the device's queue busy, not about cores: a few
 * large reads in flight is what SSDs need to reach their sequential rate. */
#define EC_READ_THREADS 4
#define EC_TENSORS 6

enum { EC_EMPTY, EC_INFLIGHT, EC_READY };

typedef struct ec_slot {
    uint8_t *buf;
    int state;
    uint32_t pins;           /* fetches not yet released */
    uint32_t loaded;         /* stamp of the fetch that read it (trace: miss) */
    size_t key;              /* (layer - first) * E + expert, unless EMPTY */
    int32_t prev, next;      /* LRU links (READY, unpinned); next: free stack (EMPTY) */
    k3_expert x;             /* views into buf (READY) */
} ec_slot;

struct k3_expert_cache {
    int first, nlayers;      /* MoE layers [first, first + nlayers) */
    int64_t E, F, Z;         /* experts per layer, moe_intermediate, latent width */
    size_t nkeys;
    const k3_tensor_info **tens; /* [nkeys][EC_TENSORS]: w1, w1 scale, w3, w3 scale, w2, w2 scale */
    int32_t *where;          /* [nkeys]: READY slot, or -1 */
    uint32_t *seen;          /* [nkeys]: stamp of the last fetch that asked for it */
    uint32_t stamp;
    ec_slot *slots;
    size_t nslots;
    uint64_t slot_bytes;
    int32_t lru_head, lru_tail; /* head: least recently released */
    size_t nlru;
    int32_t free_top;
    size_t nfree;
    k3_file *files;          /* [nfiles]: per shard (opened only if it holds experts) */
    uint32_t nfiles;
    FILE *trace;
    k3_ec_stats st;
};

static const char *const TENSOR_SUFFIX[EC_TENSORS] = {
    "w1.weight_packed", "w1.weight_scale", "w3.weight_packed",
    "w3.weight_scale",  "w2.weight_packed", "w2.weight_scale",
};

/* Bytes of tensor i of an expert: rows x cols of U8. */
static void tensor_shape(int64_t F, int64_t Z, int i, int64_t *rows, int64_t *cols)
{
    int down = i >= 4, scale = i % 2;
    *rows = down ? Z : F;
    *cols = (down ? F : Z) / (scale ? 32 : 2);
}

uint64_t k3_ec_slot_bytes(const k3_ec_dims *d)
{
    uint64_t bytes = 0;
    for (int i = 0; i < EC_TENSORS; i++) {
        int64_t r, k;
        tensor_shape(d->inter, d->latent, i, &r, &k);
        bytes += (uint64_t)(r * k);
    }
    /* Each run of tensors is read as its aligned superset: see plan_expert. */
    return k3_io_align_up(bytes) + EC_TENSORS * 2 * (uint64_t)K3_IO_ALIGN;
}

/* ---- where an expert's bytes go in its slot ---- */

typedef struct {
    int nruns;
    int run_of[EC_TENSORS];
    uint32_t shard[EC_TENSORS];
    uint64_t off[EC_TENSORS], len[EC_TENSORS]; /* each run's file range */
    uint64_t place[EC_TENSORS];                /* its aligned span's offset in the slot */
    uint64_t bytes;                            /* slot bytes used */
} ec_layout;

/* Tensors sorted by file position form runs: same shard, each starting less
 * than one block after the previous one ends (a small gap, such as another
 * tiny tensor, is read along: cheaper than another read). Runs are placed
 * one after another, each as its aligned span. A run of k tensors spans its
 * bytes, k-1 gaps of under a block and under 2 blocks of alignment, so the
 * six tensors never need more than their bytes + 12 blocks, the slack in
 * k3_ec_slot_bytes (k3_ec_new checks every expert anyway). In the release
 * an expert's six tensors are adjacent (one run, one read), unless a shard
 * boundary splits them. */
static void plan_expert(const k3_tensor_info *const *t, ec_layout *L)
{
    int ord[EC_TENSORS];
    for (int i = 0; i < EC_TENSORS; i++) {
        int j = i;
        for (; j > 0 && (t[ord[j - 1]]->shard > t[i]->shard ||
                         (t[ord[j - 1]]->shard == t[i]->shard &&
                          t[ord[j - 1]]->offset > t[i]->offset));
             j--)
            ord[j] = ord[j - 1];
        ord[j] = i;
    }
    memset(L, 0, sizeof *L);
    for (int k = 0; k < EC_TENSORS; k++) {
        const k3_tensor_info *x = t[ord[k]];
        int r = L->nruns - 1;
        if (r >= 0 && x->shard == L->shard[r] &&
            x->offset - (L->off[r] + L->len[r]) < K3_IO_ALIGN) {
            L->len[r] = x->offset + x->nbytes - L->off[r];
        } else {
            r = L->nruns++;
            L->shard[r] = x->shard;
            L->off[r] = x->offset;
            L->len[r] = x->nbytes;
        }
        L->run_of[ord[k]] = r;
    }
    for (int r = 0; r < L->nruns; r++) {
        L->place[r] = L->bytes;
        L->bytes += k3_span_cap(L->off[r], L->len[r]);
    }
}

/* ---- lists ---- */

static void lru_unlink(k3_expert_cache *ec, int32_t s)
{
    ec_slot *sl = &ec->slots[s];
    if (sl->prev >= 0)
        ec->slots[sl->prev].next = sl->next;
    else
        ec->lru_head = sl->next;
    if (sl->next >= 0)
        ec->slots[sl->next].prev = sl->prev;
    else
        ec->lru_tail = sl->prev;
    ec->nlru--;
}

static void lru_push(k3_expert_cache *ec, int32_t s)
{
    ec_slot *sl = &ec->slots[s];
    sl->prev = ec->lru_tail;
    sl->next = -1;
    if (ec->lru_tail >= 0)
        ec->slots[ec->lru_tail].next = s;
    else
        ec->lru_head = s;
    ec->lru_tail = s;
    ec->nlru++;
}

static void free_push(k3_expert_cache *ec, int32_t s)
{
    ec_slot *sl = &ec->slots[s];
    sl->state = EC_EMPTY;
    sl->pins = 0;
    sl->next = ec->free_top;
    ec->free_top = s;
    ec->nfree++;
}

static void pin(k3_expert_cache *ec, int32_t s)
{
    if (ec->slots[s].pins++ == 0)
        lru_unlink(ec, s);
}

static void unpin(k3_expert_cache *ec, int32_t s)
{
    if (--ec->slots[s].pins == 0)
        lru_push(ec, s);
}

/* ---- setup ---- */

static const k3_tensor_info *find_tensor(const k3_st_index *ix, int layer, int64_t x, int i,
                                         int64_t F, int64_t Z, k3_err *e)
{
    char name[256];
    snprintf(name, sizeof name, "language_model.model.layers.%d.block_sparse_moe.experts.%lld.%s",
             layer, (long long)x, TENSOR_SUFFIX[i]);
    const k3_tensor_info *t = k3_st_find(ix, name);
    int64_t rows, cols;
    tensor_shape(F, Z, i, &rows, &cols);
    if (!t) {
        k3_fail(e, K3_EINPUT, "missing tensor %s", name);
        return NULL;
    }
    if (t->dtype != K3_DT_U8 || t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols) {
        char got[128] = "";
        for (uint32_t d = 0; d < t->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "," : "",
                     (long long)t->shape[d]);
        k3_fail(e, K3_EINPUT, "tensor %s is %s [%s] but the config implies U8 [%lld,%lld]", name,
                k3_dtype_name(t->dtype), got, (long long)rows, (long long)cols);
        return NULL;
    }
    return t;
}

/* Resolves every expert tensor and opens the shards that hold them. */
static int resolve(k3_expert_cache *ec, const k3_st_index *ix, int direct_io, k3_err *e)
{
    for (size_t key = 0; key < ec->nkeys; key++) {
        int layer = ec->first + (int)(key / (size_t)ec->E);
        const k3_tensor_info **t = ec->tens + key * EC_TENSORS;
        for (int i = 0; i < EC_TENSORS; i++) {
            t[i] = find_tensor(ix, layer, (int64_t)(key % (size_t)ec->E), i, ec->F, ec->Z, e);
            if (!t[i])
                return e->code;
            if (t[i]->shard >= ec->nfiles)
                ec->nfiles = t[i]->shard + 1;
        }
        ec_layout L;
        plan_expert(t, &L);
        if (L.bytes > ec->slot_bytes)
            return k3_fail(e, K3_ERUNTIME, "internal: %s needs %llu slot bytes of %llu",
                           t[0]->name, (unsigned long long)L.bytes,
                           (unsigned long long)ec->slot_bytes);
    }
    ec->files = k3_calloc(e, ec->nfiles ? ec->nfiles : 1, sizeof *ec->files, "shard files");
    if (!ec->files)
        return e->code;
    for (size_t k = 0; k < ec->nkeys * EC_TENSORS; k++) {
        uint32_t s = ec->tens[k]->shard;
        if (!ec->files[s].path &&
            k3_file_open(&ec->files[s], k3_st_shard_path(ix, s), direct_io, e) != K3_OK)
            return e->code;
    }
    return K3_OK;
}

int k3_ec_new(k3_expert_cache **out, const k3_st_index *ix, const k3_ec_dims *d, size_t nslots,
              int direct_io, k3_err *e)
{
    *out = NULL;
    if (nslots < 1)
        return k3_fail(e, K3_EBUDGET, "the expert cache needs at least one slot");
    if (nslots > INT32_MAX)
        nslots = INT32_MAX; /* slot indices are int32; no machine holds that many */
    if (d->n_layers < 0 || d->first_moe < 0 || d->experts < 0)
        return k3_fail(e, K3_ERUNTIME, "internal: expert cache of layers [%d, %d), %lld experts",
                       d->first_moe, d->n_layers, (long long)d->experts);
    k3_expert_cache *ec = k3_calloc(e, 1, sizeof *ec, "expert cache");
    if (!ec)
        return e->code;
    ec->first = d->first_moe;
    ec->nlayers = d->n_layers > ec->first ? d->n_layers - ec->first : 0;
    ec->E = d->experts;
    ec->F = d->inter;
    ec->Z = d->latent;
    ec->nkeys = (size_t)ec->nlayers * (size_t)ec->E;
    ec->slot_bytes = k3_ec_slot_bytes(d);
    /* Slots beyond one per expert could never be used. */
    ec->nslots = nslots < ec->nkeys ? nslots : ec->nkeys;
    ec->lru_head = ec->lru_tail = ec->free_top = -1;
    ec->tens = k3_malloc(e, (ec->nkeys * EC_TENSORS + 1) * sizeof *ec->tens, "expert tensors");
    ec->where = k3_malloc(e, (ec->nkeys + 1) * sizeof *ec->where, "expert index");
    ec->seen = k3_calloc(e, ec->nkeys + 1, sizeof *ec->seen, "expert index");
    ec->slots = k3_calloc(e, ec->nslots + 1, sizeof *ec->slots, "expert slots");
    if (!ec->tens || !ec->where || !ec->seen || !ec->slots ||
        resolve(ec, ix, direct_io, e) != K3_OK)
        goto fail;
    for (size_t k = 0; k < ec->nkeys; k++)
        ec->where[k] = -1;
    for (size_t s = ec->nslots; s-- > 0;) {
        ec_slot *sl = &ec->slots[s];
        if (!(sl->buf = k3_io_alloc((size_t)ec->slot_bytes, "an expert slot", e)))
            goto fail;
        free_push(ec, (int32_t)s);
    }
    *out = ec;
    return K3_OK;
fail:
    k3_ec_free(ec);
    return e->code;
}

void k3_ec_free(k3_expert_cache *ec)
{
    if (!ec)
        return;
    for (size_t s = 0; ec->slots && s < ec->nslots; s++)
        k3_io_free(ec->slots[s].buf);
    for (uint32_t f = 0; ec->files && f < ec->nfiles; f++)
        k3_file_close(&ec->files[f]);
    free(ec->files);
    free(ec->slots);
    free(ec->seen);
    free(ec->where);
    free(ec->tens);
    free(ec);
}

size_t k3_ec_capacity(const k3_expert_cache *ec) { return ec->nslots; }

void k3_ec_stats_get(const k3_expert_cache *ec, k3_ec_stats *s) { *s = ec->st; }

void k3_ec_set_trace(k3_expert_cache *ec, FILE *trace) { ec->trace = trace; }

void k3_ec_note(k3_expert_cache *ec, uint64_t early, double wall, double wait)
{
    ec->st.noted++;
    ec->st.early += early;
    ec->st.wall_seconds += wall;
    ec->st.wait_seconds += wait;
}

/* An empty slot, else the least recently released one (evicted). */
static int32_t take_slot(k3_expert_cache *ec)
{
    int32_t s = ec->free_top;
    if (s >= 0) {
        ec->free_top = ec->slots[s].next;
        ec->nfree--;
        return s;
    }
    s = ec->lru_head;
    lru_unlink(ec, s);
    ec->where[ec->slots[s].key] = -1;
    ec->st.evictions++;
    return s;
}

/* ---- fetch ---- */

/* Checks a fetch without changing anything; counts its misses. */
static int check_fetch(k3_expert_cache *ec, int layer, const int32_t *ids, size_t n,
                       size_t *misses, k3_err *e)
{
    if (layer < ec->first || layer >= ec->first + ec->nlayers)
        return k3_fail(e, K3_ERUNTIME, "internal: layer %d has no routed experts", layer);
    if (n > ec->nslots)
        return k3_fail(e, K3_EBUDGET,
                       "expert cache: a fetch of %zu experts exceeds its %zu slots"
                       " (fetch in chunks)",
                       n, ec->nslots);
    if (++ec->stamp == 0) { /* wrapped: old stamps could collide */
        memset(ec->seen, 0, ec->nkeys * sizeof *ec->seen);
        ec->stamp = 1;
    }
    size_t base = (size_t)(layer - ec->first) * (size_t)ec->E, unpinned_hits = 0;
    *misses = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= ec->E)
            return k3_fail(e, K3_ERUNTIME, "internal: expert %d of layer %d does not exist",
                           (int)ids[i], layer);
        size_t key = base + (size_t)ids[i];
        if (ec->seen[key] == ec->stamp)
            return k3_fail(e, K3_ERUNTIME,
                           "internal: expert %d of layer %d asked twice in one fetch",
                           (int)ids[i], layer);
        ec->seen[key] = ec->stamp;
        int32_t s = ec->where[key];
        if (s < 0)
            ++*misses;
        else if (ec->slots[s].pins == 0)
            unpinned_hits++;
    }
    size_t room = ec->nfree + ec->nlru - unpinned_hits;
    if (*misses > room)
        return k3_fail(e, K3_EBUDGET,
                       "expert cache: layer %d needs %zu free slots but only %zu of %zu are "
                       "neither pinned nor wanted (release experts before fetching more)",
                       layer, *misses, room, ec->nslots);
    return K3_OK;
}

/* Points the slot's views at its tensors; checks the scales. */
static int bind_views(k3_expert_cache *ec, ec_slot *sl, const ec_layout *L, k3_err *e)
{
    const k3_tensor_info *const *t = ec->tens + sl->key * EC_TENSORS;
    const uint8_t *p[EC_TENSORS];
    for (int i = 0; i < EC_TENSORS; i++) {
        int r = L->run_of[i];
        p[i] = sl->buf + L->place[r] + (t[i]->offset - k3_io_align_down(L->off[r]));
        if (i % 2) {
            int64_t bad = k3_mxfp4_find_nan_scale(p[i], (size_t)t[i]->nbytes);
            if (bad >= 0)
                return k3_fail(e, K3_EINVALID,
                               "RUN INVALID: tensor %s: scale byte %lld is 255 (E8M0 NaN)",
                               t[i]->name, (long long)bad);
        }
    }
    k3_mat w1 = { K3_MAT_MXFP4, ec->F, ec->Z, p[0], p[1], 0, 0, 0 };
    k3_mat w3 = { K3_MAT_MXFP4, ec->F, ec->Z, p[2], p[3], 0, 0, 0 };
    k3_mat w2 = { K3_MAT_MXFP4, ec->Z, ec->F, p[4], p[5], 0, 0, 0 };
    sl->x.w1 = w1;
    sl->x.w3 = w3;
    sl->x.w2 = w2;
    return K3_OK;
}

/* ---- the two halves of a fetch ---- */

/* A fetch's misses between k3_ec_begin and k3_ec_end. Built and freed on
 * the caller's thread; during k3_ec_read the reader threads write only
 * left, first_bad and bad_err (under mu), the misses' slot buffers and
 * views, and what k3_read_batch_each returns; the rest is read-only until
 * k3_ec_end. */
struct k3_ec_ticket {
    k3_expert_cache *ec;
    int layer;
    const int32_t *ids;      /* the caller's, valid until k3_ec_end */
    size_t n, nm;            /* experts asked, misses among them */
    int32_t *miss;           /* [nm] the misses' slots (INFLIGHT) */
    size_t *idx;             /* [nm] each miss's index in ids */
    ec_layout *lay;          /* [nm] where each miss's runs go */
    int *left;               /* [nm] runs not yet arrived */
    k3_span_req *reqs;       /* [nr] every run of every miss */
    size_t *owner;           /* [nr] the miss each run belongs to */
    size_t nr;
    k3_ec_arrived_fn arrived;
    void *ctx;
    pthread_mutex_t mu;      /* guards left, first_bad, bad_err */
    size_t first_bad;        /* lowest miss whose scales failed, nm if none */
    k3_err bad_err;          /* its message */
    int rc;                  /* the batch read's result, and its message */
    k3_err err;
    k3_batch_info info;
    double seconds;          /* the read's wall time */
};

static void ticket_free(k3_ec_ticket *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    free(t->miss);
    free(t->idx);
    free(t->lay);
    free(t->left);
    free(t->reqs);
    free(t->owner);
    free(t);
}

/* Run r arrived (on a reader thread). When it was its miss's last, the
 * miss's scales are checked and, if they pass, its view goes to the
 * caller: the slot's bytes are complete and no reader writes them again. */
static void run_arrived(void *ctx, size_t r)
{
    k3_ec_ticket *t = ctx;
    size_t m = t->owner[r];
    pthread_mutex_lock(&t->mu);
    int last = --t->left[m] == 0;
    pthread_mutex_unlock(&t->mu);
    if (!last)
        return;
    ec_slot *sl = &t->ec->slots[t->miss[m]];
    k3_err e = { 0, "" };
    if (bind_views(t->ec, sl, &t->lay[m], &e) != K3_OK) {
        pthread_mutex_lock(&t->mu);
        if (m < t->first_bad) {
            t->first_bad = m;
            t->bad_err = e;
        }
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (t->arrived)
        t->arrived(t->ctx, t->idx[m], &sl->x);
}

/* The ticket of misses miss[0..nm) (slots already INFLIGHT): every run
 * planned, nothing read. */
static k3_ec_ticket *ticket_new(k3_expert_cache *ec, int layer, const int32_t *ids, size_t n,
                                int32_t *miss, size_t *idx, size_t nm, k3_err *e)
{
    k3_ec_ticket *t = k3_calloc(e, 1, sizeof *t, "expert reads");
    if (!t) {
        free(miss);
        free(idx);
        return NULL;
    }
    t->miss = miss;
    t->idx = idx;
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        k3_fail(e, K3_ERUNTIME, "cannot create a mutex for the expert reads");
        free(miss);
        free(idx);
        free(t);
        return NULL;
    }
    t->ec = ec;
    t->layer = layer;
    t->ids = ids;
    t->n = n;
    t->nm = t->first_bad = nm;
    t->lay = k3_malloc(e, nm * sizeof *t->lay, "expert reads");
    t->left = k3_malloc(e, nm * sizeof *t->left, "expert reads");
    t->reqs = k3_malloc(e, nm * EC_TENSORS * sizeof *t->reqs, "expert reads");
    t->owner = k3_malloc(e, nm * EC_TENSORS * sizeof *t->owner, "expert reads");
    if (!t->lay || !t->left || !t->reqs || !t->owner) {
        ticket_free(t);
        return NULL;
    }
    for (size_t m = 0; m < nm; m++) {
        ec_slot *sl = &ec->slots[miss[m]];
        plan_expert(ec->tens + sl->key * EC_TENSORS, &t->lay[m]);
        t->left[m] = t->lay[m].nruns;
        for (int r = 0; r < t->lay[m].nruns; r++) {
            k3_span_req q = { &ec->files[t->lay[m].shard[r]], t->lay[m].off[r],
                              t->lay[m].len[r], sl->buf + t->lay[m].place[r] };
            t->owner[t->nr] = m;
            t->reqs[t->nr++] = q;
        }
    }
    return t;
}

/* A successful fetch's counters and trace lines. */
static void fetch_done(k3_expert_cache *ec, int layer, const int32_t *ids, size_t n, size_t nm)
{
    size_t base = (size_t)(layer - ec->first) * (size_t)ec->E;
    for (size_t i = 0; ec->trace && i < n; i++)
        fprintf(ec->trace, "%d %d %s\n", layer, (int)ids[i],
                ec->slots[ec->where[base + (size_t)ids[i]]].loaded == ec->stamp ? "miss" : "hit");
    ec->st.requests += n;
    ec->st.misses += nm;
    ec->st.hits += n - nm;
}

int k3_ec_begin(k3_expert_cache *ec, int layer, const int32_t *ids, size_t n,
                const k3_expert **out, k3_ec_ticket **ticket, k3_err *e)
{
    size_t nm = 0;
    int32_t *miss = NULL;
    size_t *idx = NULL;
    *ticket = NULL;
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    int rc = check_fetch(ec, layer, ids, n, &nm, e);
    if (rc == K3_OK && nm &&
        (!(miss = k3_malloc(e, nm * sizeof *miss, "expert misses")) ||
         !(idx = k3_malloc(e, nm * sizeof *idx, "expert misses")))) {
        free(miss);
        return e->code;
    }
    if (rc != K3_OK)
        return rc;
    size_t base = (size_t)(layer - ec->first) * (size_t)ec->E;
    for (size_t i = 0; i < n; i++) { /* hits first: they must not become victims */
        int32_t s = ec->where[base + (size_t)ids[i]];
        if (s >= 0) {
            pin(ec, s);
            out[i] = &ec->slots[s].x;
        }
    }
    if (!nm) {
        fetch_done(ec, layer, ids, n, 0);
        return K3_OK;
    }
    for (size_t i = 0, m = 0; i < n; i++) {
        if (ec->where[base + (size_t)ids[i]] >= 0)
            continue;
        int32_t s = take_slot(ec);
        ec->slots[s].state = EC_INFLIGHT;
        ec->slots[s].key = base + (size_t)ids[i];
        ec->slots[s].pins = 1;
        ec->slots[s].loaded = ec->stamp;
        idx[m] = i;
        miss[m++] = s;
    }
    *ticket = ticket_new(ec, layer, ids, n, miss, idx, nm, e);
    if (*ticket)
        return K3_OK;
    /* No ticket: the misses' slots (their indices freed with it) are found
     * again by state and emptied; the hits unpinned. */
    for (size_t s = 0; s < ec->nslots; s++)
        if (ec->slots[s].state == EC_INFLIGHT)
            free_push(ec, (int32_t)s);
    for (size_t i = 0; i < n; i++) {
        int32_t s = ec->where[base + (size_t)ids[i]];
        if (s >= 0)
            unpin(ec, s);
        out[i] = NULL;
    }
    return e->code;
}

void k3_ec_read(k3_ec_ticket *t, k3_ec_arrived_fn arrived, void *ctx)
{
    if (!t)
        return;
    t->arrived = arrived;
    t->ctx = ctx;
    double t0 = k3_seconds();
    t->rc = k3_read_batch_each(t->reqs, t->nr, EC_READ_THREADS, run_arrived, t, &t->info,
                               &t->err);
    t->seconds = k3_seconds() - t0;
}

int k3_ec_end(k3_expert_cache *ec, k3_ec_ticket *t, k3_err *e)
{
    if (!t)
        return K3_OK;
    ec->st.read_seconds += t->seconds;
    ec->st.bytes_read += t->info.bytes;
    int rc = K3_OK;
    if (t->rc != K3_OK) { /* the first failed read in disk order */
        size_t key = ec->slots[t->miss[t->owner[t->info.failed]]].key;
        rc = k3_fail(e, t->rc, "%s [layer %d expert %d]", t->err.msg,
                     ec->first + (int)(key / (size_t)ec->E), (int)(key % (size_t)ec->E));
    } else if (t->first_bad < t->nm) { /* else the first broken expert in fetch order */
        rc = k3_fail(e, t->bad_err.code, "%s", t->bad_err.msg);
    }
    for (size_t m = 0; m < t->nm; m++) {
        ec_slot *sl = &ec->slots[t->miss[m]];
        if (rc == K3_OK) {
            sl->state = EC_READY;
            ec->where[sl->key] = t->miss[m];
        } else {
            free_push(ec, t->miss[m]);
        }
    }
    if (rc == K3_OK) {
        fetch_done(ec, t->layer, t->ids, t->n, t->nm);
    } else {
        size_t base = (size_t)(t->layer - ec->first) * (size_t)ec->E;
        for (size_t i = 0; i < t->n; i++) {
            int32_t s = ec->where[base + (size_t)t->ids[i]];
            if (s >= 0)
                unpin(ec, s);
        }
    }
    ticket_free(t);
    return rc;
}

/* The whole fetch on one thread: out[i] is filled as its miss arrives. */
static void arrived_here(void *ctx, size_t i, const k3_expert *x)
{
    const k3_expert **out = ctx;
    out[i] = x;
}

int k3_ec_fetch(k3_expert_cache *ec, int layer, const int32_t *ids, size_t n,
                const k3_expert **out, k3_err *e)
{
    k3_ec_ticket *t;
    int rc = k3_ec_begin(ec, layer, ids, n, out, &t, e);
    if (rc != K3_OK)
        return rc;
    k3_ec_read(t, arrived_here, out);
    rc = k3_ec_end(ec, t, e);
    for (size_t i = 0; rc != K3_OK && i < n; i++)
        out[i] = NULL;
    return rc;
}

void k3_ec_release(k3_expert_cache *ec, int layer, const int32_t *ids, size_t n)
{
    if (layer < ec->first || layer >= ec->first + ec->nlayers)
        return;
    size_t base = (size_t)(layer - ec->first) * (size_t)ec->E;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= ec->E)
            continue;
        int32_t s = ec->where[base + (size_t)ids[i]];
        if (s >= 0 && ec->slots[s].state == EC_READY && ec->slots[s].pins > 0)
            unpin(ec, s);
    }
}
