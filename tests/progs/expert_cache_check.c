/* expert_cache_check - the expert cache (src/resid) and the direct-I/O
 * layer under it (src/io/direct.h, read_batch.h) against the shards.
 *
 *   expert_cache_check MODEL_DIR MODE [options]
 *
 * Modes (tests/gates/25-expert-cache.sh runs them all):
 *   verify    decode-like random fetch sequences (and some prefill-like
 *             unions larger than top-k); every expert returned, hit or miss,
 *             is compared byte for byte with the six tensors read straight
 *             from the shards (k3_st_read); counters are checked.
 *   lru       a scripted sequence on 3 slots with known hits, misses and
 *             evictions, checked through the counters and the trace.
 *   pin       pinned experts are never evicted; asking for more than the
 *             unpinned room, more than the capacity, a duplicate, a bad id
 *             or layer is a clean error that changes nothing.
 *   fault     fetches one expert that is one read (run with K3_FAULT in a
 *             -DK3_FAULT_INJECTION build): the fetch must fail as --expect
 *             says with every view NULL, and a second fetch must succeed.
 *   truncate  truncates, AFTER opening, the shard holding the last expert
 *             of a shard to half way through it (MODEL_DIR must be a
 *             scratch copy); fetching that expert must fail as --expect says.
 *   nan       fetches every expert (a scale byte was set to 255 by the
 *             gate); the first failure must be as --expect says, and the
 *             failed expert must not be resident afterwards.
 *   io        k3_read_span on random unaligned ranges of every shard vs
 *             plain pread.
 *   bench     cache lookup cost per hit (ns) and the read pattern of misses.
 *
 * Options:
 *   --slots N|k|2k|all   cache capacity (default k = num_experts_per_token)
 *   --direct 0|1         ask for direct I/O (default 1)
 *   --steps N            decode steps for verify and bench (default 24)
 *   --seed N             random sequence seed (default 1)
 *   --trace FILE         write the cache's trace there (verify)
 *   --expect-code C      (fault, truncate, nan) the status the fetch must return
 *   --expect-msg TEXT    ... and a substring its message must contain
 *   --expect-fallbacks 0|+   direct I/O fallbacks: none, or at least one
 *   --expect-direct 0|1  (io) whether the files must end up read directly
 *
 * Exit: 0 all checks held; 9 a check failed ("CHECK FAILED: ..."); an
 * unexpected k3 error exits with its status after "error: MESSAGE". */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/direct.h"
#include "io/pread_all.h"
#include "io/read_queue.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "resid/expert_cache.h"
#include "util/error.h"

static const char *const SUFFIX[6] = {
    "w1.weight_packed", "w1.weight_scale", "w3.weight_packed",
    "w3.weight_scale",  "w2.weight_packed", "w2.weight_scale",
};

typedef struct {
    const char *dir, *mode, *slots_arg, *trace_path, *expect_msg, *expect_fallbacks;
    int direct, steps, expect_code, expect_direct;
    uint64_t seed;
    k3_config cfg;
    k3_ec_dims dims;         /* the cache's view of cfg */
    k3_st_index *ix;
    int first, nlayers, E, k;
    size_t nkeys, slots;
    uint8_t *ref;            /* scratch for reference reads */
    size_t refcap;
} ctx;

static void check_failed(const char *fmt, ...) K3_PRINTF(1, 2);
static void check_failed(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("CHECK FAILED: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(9);
}

#define CHECK(cond, ...)                   \
    do {                                   \
        if (!(cond))                       \
            check_failed(__VA_ARGS__);     \
    } while (0)

static void k3_die(const k3_err *e)
{
    fprintf(stderr, "error: %s\n", e->msg);
    exit(e->code ? e->code : 1);
}

/* ---- random numbers (xorshift64*) ---- */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static int rnd_below(int n) { return (int)(rnd() % (uint64_t)n); }

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* ---- reference comparison ---- */

static const k3_tensor_info *tensor(ctx *c, int layer, int x, int i)
{
    char name[256];
    snprintf(name, sizeof name, "language_model.model.layers.%d.block_sparse_moe.experts.%d.%s",
             layer, x, SUFFIX[i]);
    const k3_tensor_info *t = k3_st_find(c->ix, name);
    CHECK(t, "no tensor %s", name);
    return t;
}

/* The expert's six tensors in the views equal the bytes in the shards. */
static void compare_expert(ctx *c, int layer, int x, const k3_expert *ex)
{
    CHECK(ex, "layer %d expert %d: NULL view from a successful fetch", layer, x);
    const k3_mat *m[3] = { &ex->w1, &ex->w3, &ex->w2 };
    int64_t F = c->cfg.moe_intermediate_size, Z = c->cfg.routed_expert_hidden_size;
    for (int j = 0; j < 3; j++) {
        int64_t rows = j < 2 ? F : Z, cols = j < 2 ? Z : F;
        CHECK(m[j]->kind == K3_MAT_MXFP4 && m[j]->rows == rows && m[j]->cols == cols,
              "layer %d expert %d: view %d is not MXFP4 [%lld,%lld]", layer, x, j,
              (long long)rows, (long long)cols);
    }
    for (int i = 0; i < 6; i++) {
        const k3_tensor_info *t = tensor(c, layer, x, i);
        if (t->nbytes > c->refcap) {
            free(c->ref);
            c->refcap = (size_t)t->nbytes;
            c->ref = malloc(c->refcap);
            CHECK(c->ref, "out of memory");
        }
        k3_err e = { 0 };
        if (k3_st_read(c->ix, t, 0, t->nbytes, c->ref, &e) != K3_OK)
            k3_die(&e);
        const void *got = i % 2 ? (const void *)m[i / 2]->scales : m[i / 2]->w;
        CHECK(!memcmp(got, c->ref, (size_t)t->nbytes),
              "layer %d expert %d: %s differs from the shard", layer, x, t->name);
    }
}

/* ---- setup ---- */

/* Bytes of one expert's six tensors. */
static uint64_t expert_bytes(const ctx *c)
{
    uint64_t F = (uint64_t)c->cfg.moe_intermediate_size;
    uint64_t Z = (uint64_t)c->cfg.routed_expert_hidden_size;
    return 3 * (F * Z / 2 + F * Z / 32);
}

static size_t parse_slots(ctx *c, const char *s)
{
    if (!strcmp(s, "k"))
        return (size_t)c->k;
    if (!strcmp(s, "2k"))
        return 2 * (size_t)c->k;
    if (!strcmp(s, "all"))
        return c->nkeys;
    char *end;
    long v = strtol(s, &end, 10);
    CHECK(*s && !*end && v >= 1, "--slots %s: expected N, k, 2k or all", s);
    return (size_t)v;
}

static void open_model(ctx *c)
{
    k3_err e = { 0 };
    if (k3_config_load(&c->cfg, c->dir, &e) != K3_OK || k3_st_open(&c->ix, c->dir, &e) != K3_OK)
        k3_die(&e);
    c->first = (int)c->cfg.first_k_dense_replace;
    c->nlayers = (int)c->cfg.num_hidden_layers - c->first;
    c->E = (int)c->cfg.num_experts;
    c->k = (int)c->cfg.num_experts_per_token;
    c->nkeys = (size_t)c->nlayers * (size_t)c->E;
    c->dims.first_moe = c->first;
    c->dims.n_layers = (int)c->cfg.num_hidden_layers;
    c->dims.experts = c->cfg.num_experts;
    c->dims.inter = c->cfg.moe_intermediate_size;
    c->dims.latent = c->cfg.routed_expert_hidden_size;
    c->slots = parse_slots(c, c->slots_arg);
}

static k3_expert_cache *new_cache(ctx *c, size_t slots)
{
    k3_expert_cache *ec;
    k3_err e = { 0 };
    if (k3_ec_new(&ec, c->ix, &c->dims, slots, c->direct, &e) != K3_OK)
        k3_die(&e);
    return ec;
}

static void fetch_ok(k3_expert_cache *ec, int layer, const int32_t *ids, size_t n,
                     const k3_expert **out)
{
    k3_err e = { 0 };
    if (k3_ec_fetch(ec, layer, ids, n, out, &e) != K3_OK)
        k3_die(&e);
}

/* Fetches ids (any number) in chunks of the capacity, verifying each. */
static void fetch_verify(ctx *c, k3_expert_cache *ec, int layer, const int32_t *ids, size_t n)
{
    size_t cap = k3_ec_capacity(ec);
    const k3_expert **out = malloc((cap + 1) * sizeof *out);
    CHECK(out, "out of memory");
    for (size_t at = 0; at < n; at += cap) {
        size_t m = n - at < cap ? n - at : cap;
        fetch_ok(ec, layer, ids + at, m, out);
        for (size_t i = 0; i < m; i++)
            compare_expert(c, layer, ids[at + i], out[i]);
        k3_ec_release(ec, layer, ids + at, m);
    }
    free(out);
}

/* Expects fetch to fail with --expect-code / --expect-msg, views NULL. */
static void fetch_fails(ctx *c, k3_expert_cache *ec, int layer, const int32_t *ids, size_t n,
                        int code, const char *msg)
{
    const k3_expert *out[64];
    k3_err e = { 0 };
    for (size_t i = 0; i < n; i++)
        out[i] = (const k3_expert *)&e; /* anything but NULL */
    int rc = k3_ec_fetch(ec, layer, ids, n, out, &e);
    CHECK(rc == code && e.code == code, "fetch returned %d (wanted %d): %s", rc, code, e.msg);
    CHECK(!msg || strstr(e.msg, msg), "message \"%s\" lacks \"%s\"", e.msg, msg);
    for (size_t i = 0; i < n; i++)
        CHECK(!out[i], "a failed fetch returned a view (index %zu)", i);
    printf("  refused as expected (%d): %s\n", rc, e.msg);
    (void)c;
}

static void check_fallbacks(ctx *c)
{
    k3_io_counts io;
    k3_io_counts_get(&io);
    printf("io: %llu reads, %llu bytes, %llu direct-I/O fallbacks\n",
           (unsigned long long)io.reads, (unsigned long long)io.bytes,
           (unsigned long long)io.fallbacks);
    if (!c->expect_fallbacks)
        return;
    if (!strcmp(c->expect_fallbacks, "+"))
        CHECK(io.fallbacks > 0, "expected a direct-I/O fallback, saw none");
    else
        CHECK(io.fallbacks == 0, "expected no direct-I/O fallback, saw %llu",
              (unsigned long long)io.fallbacks);
}

/* ---- verify ---- */

/* k distinct ids, sorted (as the router hands them over): half from a hot
 * set of 2k experts per layer so that a cache has something to hit. */
static void pick(ctx *c, int layer, int32_t *ids, int k)
{
    for (int j = 0; j < k;) {
        int32_t x = rnd() & 1 ? (int32_t)((rnd_below(2 * c->k) * 7 + layer) % c->E)
                              : (int32_t)rnd_below(c->E);
        int dup = 0;
        for (int q = 0; q < j; q++)
            dup |= ids[q] == x;
        if (!dup)
            ids[j++] = x;
    }
    qsort(ids, (size_t)k, sizeof *ids, cmp_i32);
}

static int mode_verify(ctx *c)
{
    k3_expert_cache *ec = new_cache(c, c->slots);
    FILE *trace = NULL;
    if (c->trace_path) {
        trace = fopen(c->trace_path, "w");
        CHECK(trace, "cannot write %s", c->trace_path);
        k3_ec_set_trace(ec, trace);
    }
    size_t cap = k3_ec_capacity(ec);
    int32_t *ids = malloc((size_t)c->E * sizeof *ids);
    uint8_t *asked = calloc(c->nkeys, 1);
    CHECK(ids && asked, "out of memory");
    uint64_t requests = 0;
    size_t distinct = 0;
    for (int step = 0; step < c->steps; step++) {
        /* every fourth step is prefill-like: a union of up to 3k experts */
        int n = step % 4 == 3 ? (c->k * 3 < c->E ? c->k * 3 : c->E) : c->k;
        for (int l = c->first; l < c->first + c->nlayers; l++) {
            for (int again = 0; again < 2; again++) {
                if (!again) {
                    pick(c, l, ids, n);
                } else {
                    /* A second fetch of the layer, sometimes (as a chunked
                     * prefill makes): it starts with an expert of the first,
                     * which also makes the trace's batches unambiguous for
                     * tools/sim_cache.py. */
                    if (rnd() % 3)
                        break;
                    int32_t keep = ids[rnd_below(n)];
                    pick(c, l, ids, n);
                    for (int j = 0; j < n; j++)
                        if (ids[j] == keep)
                            ids[j] = ids[0];
                    ids[0] = keep;
                }
                fetch_verify(c, ec, l, ids, (size_t)n);
                requests += (uint64_t)n;
                for (int j = 0; j < n; j++) {
                    size_t key = (size_t)(l - c->first) * (size_t)c->E + (size_t)ids[j];
                    distinct += !asked[key];
                    asked[key] = 1;
                }
            }
        }
    }
    k3_ec_stats st;
    k3_ec_stats_get(ec, &st);
    printf("verify: %zu slots (top-k %d), %d steps: %llu requests, %llu hits, %llu misses, "
           "%llu evictions, %.3f MB read in %.4f s\n",
           cap, c->k, c->steps, (unsigned long long)st.requests, (unsigned long long)st.hits,
           (unsigned long long)st.misses, (unsigned long long)st.evictions,
           (double)st.bytes_read / 1e6, st.read_seconds);
    int depth;
    const char *why, *reader = k3_read_queue_reader(&depth, &why);
    printf("verify: read by the %s reader%s%s\n", reader, *why ? ": " : "", why);
    CHECK(st.requests == requests, "requests %llu, made %llu", (unsigned long long)st.requests,
          (unsigned long long)requests);
    CHECK(st.hits + st.misses == st.requests, "hits + misses != requests");
    CHECK(st.misses >= distinct, "%llu misses for %zu distinct experts",
          (unsigned long long)st.misses, distinct);
    CHECK(st.evictions <= st.misses && st.misses - st.evictions <= cap,
          "evictions %llu vs misses %llu and %zu slots", (unsigned long long)st.evictions,
          (unsigned long long)st.misses, cap);
    CHECK(st.bytes_read >= st.misses * expert_bytes(c),
          "%llu bytes read for %llu misses", (unsigned long long)st.bytes_read,
          (unsigned long long)st.misses);
    if (cap == c->nkeys) {
        /* all in memory: each expert read once, never evicted; a full pass
         * over every expert then reads nothing more */
        CHECK(st.misses == distinct && st.evictions == 0,
              "all-in-memory cache: %llu misses for %zu experts, %llu evictions",
              (unsigned long long)st.misses, distinct, (unsigned long long)st.evictions);
        for (int l = c->first; l < c->first + c->nlayers; l++) {
            for (int x = 0; x < c->E; x++)
                ids[x] = x;
            fetch_verify(c, ec, l, ids, (size_t)c->E);
        }
        uint64_t before = st.misses;
        k3_ec_stats_get(ec, &st);
        CHECK(st.misses == before + (c->nkeys - distinct) && st.evictions == 0,
              "full pass: %llu misses (had %llu), %llu evictions", (unsigned long long)st.misses,
              (unsigned long long)before, (unsigned long long)st.evictions);
        before = st.misses;
        for (int l = c->first; l < c->first + c->nlayers; l++)
            fetch_verify(c, ec, l, ids, (size_t)c->E);
        k3_ec_stats_get(ec, &st);
        CHECK(st.misses == before, "second full pass missed");
        printf("verify: all %zu experts resident, a second full pass hit every one\n", c->nkeys);
    }
    check_fallbacks(c);
    if (trace)
        CHECK(fclose(trace) == 0, "writing %s failed", c->trace_path);
    free(ids);
    free(asked);
    k3_ec_free(ec);
    return 0;
}

/* ---- lru ---- */

static void expect_trace(const char *path, const char *const *want, size_t n)
{
    FILE *f = fopen(path, "r");
    CHECK(f, "cannot read %s", path);
    char line[128];
    size_t i = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        CHECK(i < n, "trace line %zu \"%s\" beyond the %zu expected", i + 1, line, n);
        CHECK(!strcmp(line, want[i]), "trace line %zu is \"%s\", wanted \"%s\"", i + 1, line,
              want[i]);
        i++;
    }
    fclose(f);
    CHECK(i == n, "trace has %zu lines, wanted %zu", i, n);
}

static int mode_lru(ctx *c)
{
    CHECK(c->E >= 5, "needs 5 experts per layer");
    k3_expert_cache *ec = new_cache(c, 3);
    CHECK(k3_ec_capacity(ec) == 3, "capacity %zu", k3_ec_capacity(ec));
    char path[] = "/tmp/k3-ec-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp failed");
    close(fd);
    FILE *trace = fopen(path, "w");
    CHECK(trace, "cannot write %s", path);
    k3_ec_set_trace(ec, trace);
    /* Fetches (each released right away, in order). LRU order after each,
     * least recent first, in the comments. */
    static const int32_t seq[][3] = {
        { 0, 1, 2 }, /* 3 misses into empty slots       0 1 2 */
        { 0 },       /* hit                              1 2 0 */
        { 3 },       /* miss, evicts 1                   2 0 3 */
        { 1 },       /* miss, evicts 2                   0 3 1 */
        { 2, 0 },    /* 0 hit, pinned first, so 2 evicts 3 (not 0): 1 2 0 */
        { 3 },       /* miss, evicts 1                   2 0 3 */
        { 0, 2, 3 }, /* 3 hits                           0 2 3 */
        { 4 },       /* miss, evicts 0                   2 3 4 */
    };
    static const int len[] = { 3, 1, 1, 1, 2, 1, 3, 1 };
    int L = c->first;
    for (size_t s = 0; s < sizeof len / sizeof *len; s++)
        fetch_verify(c, ec, L, seq[s], (size_t)len[s]);
    fclose(trace);
    char want_buf[13][32];
    const char *want[13];
    static const char *const what[13][2] = {
        { "0", "miss" }, { "1", "miss" }, { "2", "miss" }, { "0", "hit" }, { "3", "miss" },
        { "1", "miss" }, { "2", "miss" }, { "0", "hit" }, { "3", "miss" }, { "0", "hit" },
        { "2", "hit" },  { "3", "hit" },  { "4", "miss" },
    };
    for (int i = 0; i < 13; i++) {
        snprintf(want_buf[i], sizeof want_buf[i], "%d %s %s", L, what[i][0], what[i][1]);
        want[i] = want_buf[i];
    }
    expect_trace(path, want, 13);
    unlink(path);
    k3_ec_stats st;
    k3_ec_stats_get(ec, &st);
    CHECK(st.requests == 13 && st.hits == 5 && st.misses == 8 && st.evictions == 5,
          "counters: %llu requests, %llu hits, %llu misses, %llu evictions (wanted 13, 5, 8, 5)",
          (unsigned long long)st.requests, (unsigned long long)st.hits,
          (unsigned long long)st.misses, (unsigned long long)st.evictions);
    printf("lru: 13 requests on 3 slots: trace and counters (5 hits, 8 misses, 5 evictions) "
           "as scripted\n");
    k3_ec_free(ec);
    return 0;
}

/* ---- pin ---- */

static void expect_counts(k3_expert_cache *ec, uint64_t req, uint64_t hits, uint64_t ev)
{
    k3_ec_stats st;
    k3_ec_stats_get(ec, &st);
    CHECK(st.requests == req && st.hits == hits && st.evictions == ev,
          "counters %llu requests, %llu hits, %llu evictions; wanted %llu, %llu, %llu",
          (unsigned long long)st.requests, (unsigned long long)st.hits,
          (unsigned long long)st.evictions, (unsigned long long)req, (unsigned long long)hits,
          (unsigned long long)ev);
}

static int mode_pin(ctx *c)
{
    CHECK(c->E >= 8 && c->first >= 1, "needs 8 experts per layer and a dense first layer");
    k3_expert_cache *ec = new_cache(c, 4);
    int L = c->first;
    const k3_expert *a[4], *b[4];
    static const int32_t p012[] = { 0, 1, 2 }, p3[] = { 3 }, p4[] = { 4 }, p45[] = { 4, 5 };
    static const int32_t p01234[] = { 0, 1, 2, 3, 4 }, dup[] = { 1, 1 }, p7[] = { 7 };
    fetch_ok(ec, L, p012, 3, a);
    fetch_ok(ec, L, p3, 1, a + 3);
    puts("pin: 4 of 4 slots pinned; one more must be refused:");
    fetch_fails(c, ec, L, p4, 1, K3_EBUDGET, "needs 1 free slots but only 0 of 4");
    for (int i = 0; i < 4; i++)
        compare_expert(c, L, i, a[i]);
    expect_counts(ec, 4, 0, 0);
    k3_ec_release(ec, L, p3, 1);
    puts("pin: 3 pinned, 1 released; two more must be refused:");
    fetch_fails(c, ec, L, p45, 2, K3_EBUDGET, "needs 2 free slots but only 1 of 4");
    fetch_ok(ec, L, p4, 1, b);           /* evicts 3, the only unpinned one */
    expect_counts(ec, 5, 0, 1);
    fetch_ok(ec, L, p012, 3, b + 1);     /* still resident: hits, pinned twice */
    expect_counts(ec, 8, 3, 1);
    for (int i = 0; i < 3; i++) {
        CHECK(a[i] == b[i + 1], "expert %d moved while pinned", i);
        compare_expert(c, L, i, a[i]);
    }
    compare_expert(c, L, 4, b[0]);
    puts("pin: refused: more than the capacity, a duplicate, a bad id, a dense layer:");
    fetch_fails(c, ec, L, p01234, 5, K3_EBUDGET, "exceeds its 4 slots");
    fetch_fails(c, ec, L, dup, 2, K3_ERUNTIME, "asked twice");
    int32_t bad = c->E;
    fetch_fails(c, ec, L, &bad, 1, K3_ERUNTIME, "does not exist");
    fetch_fails(c, ec, 0, p3, 1, K3_ERUNTIME, "has no routed experts");
    expect_counts(ec, 8, 3, 1);
    /* Releases: twice for 0..2 (pinned twice), once for 4; extra releases
     * of unpinned or absent experts change nothing. */
    k3_ec_release(ec, L, p012, 3);
    k3_ec_release(ec, L, p012, 3);
    k3_ec_release(ec, L, p4, 1);
    k3_ec_release(ec, L, p012, 3);
    k3_ec_release(ec, L, p7, 1);
    k3_ec_release(ec, L, &bad, 1);
    k3_ec_release(ec, 0, p3, 1);
    /* The lists survived: cycle 8 experts through the 4 slots twice. */
    int32_t ids[8];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 8; i++) {
            ids[0] = (int32_t)i;
            fetch_verify(c, ec, L, ids, 1);
        }
    k3_ec_stats st;
    k3_ec_stats_get(ec, &st);
    /* 4 evicts 3 before; the first cycle hits 0..2 and evicts 4,0,1,2,3
     * for 3..7; the second misses all eight */
    CHECK(st.evictions == 1 + 5 + 8, "evictions %llu after the cycles, wanted 14",
          (unsigned long long)st.evictions);
    puts("pin: pinned experts stayed put and intact; refusals changed nothing");
    k3_ec_free(ec);
    return 0;
}

/* ---- fault, truncate, nan ---- */

/* The first expert whose six tensors are contiguous in one shard: the
 * cache reads it with exactly one read. */
static int single_read_expert(ctx *c, int *layer, int *x)
{
    for (int l = c->first; l < c->first + c->nlayers; l++)
        for (int e = 0; e < c->E; e++) {
            const k3_tensor_info *t[6];
            uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
            int same = 1;
            for (int i = 0; i < 6; i++) {
                t[i] = tensor(c, l, e, i);
                same &= t[i]->shard == t[0]->shard;
                lo = t[i]->offset < lo ? t[i]->offset : lo;
                hi = t[i]->offset + t[i]->nbytes > hi ? t[i]->offset + t[i]->nbytes : hi;
                sum += t[i]->nbytes;
            }
            if (same && hi - lo == sum) {
                *layer = l;
                *x = e;
                return 1;
            }
        }
    return 0;
}

static int mode_fault(ctx *c)
{
    int L, x;
    CHECK(single_read_expert(c, &L, &x), "no expert is one contiguous read");
    k3_expert_cache *ec = new_cache(c, c->slots);
    int32_t id = x;
    printf("fault: layer %d expert %d (K3_FAULT=%s)\n", L, x,
           getenv("K3_FAULT") ? getenv("K3_FAULT") : "");
    fetch_fails(c, ec, L, &id, 1, c->expect_code, c->expect_msg);
    expect_counts(ec, 0, 0, 0);
    fetch_verify(c, ec, L, &id, 1);  /* the fault has passed: read again, intact */
    k3_ec_stats st;
    k3_ec_stats_get(ec, &st);
    CHECK(st.misses == 1, "the expert of the failed fetch was resident afterwards");
    puts("fault: nothing of the failed fetch was kept; the retry read it whole");
    k3_ec_free(ec);
    return 0;
}

static int mode_truncate(ctx *c)
{
    int L, X;
    CHECK(single_read_expert(c, &L, &X), "no expert is one contiguous read");
    const k3_tensor_info *t = tensor(c, L, X, 0);
    const char *path = k3_st_shard_path(c->ix, t->shard);
    k3_expert_cache *ec = new_cache(c, c->slots);
    /* After opening: the index checked the file size then. */
    CHECK(truncate(path, (off_t)(t->offset + t->nbytes / 2)) == 0, "cannot truncate %s", path);
    printf("truncate: %s cut inside layer %d expert %d\n", path, L, X);
    int32_t id = X;
    fetch_fails(c, ec, L, &id, 1, c->expect_code, c->expect_msg);
    k3_ec_free(ec);
    return 0;
}

static int mode_nan(ctx *c)
{
    k3_expert_cache *ec = new_cache(c, c->slots);
    size_t cap = k3_ec_capacity(ec);
    const k3_expert **out = malloc(cap * sizeof *out);
    int32_t *ids = malloc((size_t)c->E * sizeof *ids);
    CHECK(out && ids, "out of memory");
    for (int l = c->first; l < c->first + c->nlayers; l++)
        for (size_t at = 0; at < (size_t)c->E; at += cap) {
            size_t n = (size_t)c->E - at < cap ? (size_t)c->E - at : cap;
            for (size_t i = 0; i < n; i++)
                ids[i] = (int32_t)(at + i);
            k3_err e = { 0 };
            if (k3_ec_fetch(ec, l, ids, n, out, &e) == K3_OK) {
                k3_ec_release(ec, l, ids, n);
                continue;
            }
            CHECK(e.code == c->expect_code && strstr(e.msg, c->expect_msg),
                  "fetch failed with %d: %s (wanted %d, \"%s\")", e.code, e.msg, c->expect_code,
                  c->expect_msg);
            printf("nan: layer %d refused as expected (%d): %s\n", l, e.code, e.msg);
            for (size_t i = 0; i < n; i++)
                CHECK(!out[i], "a failed fetch returned a view");
            /* Nothing of the failed batch became resident: the same fetch
             * fails again rather than hitting. */
            k3_err e2 = { 0 };
            CHECK(k3_ec_fetch(ec, l, ids, n, out, &e2) == e.code, "second fetch: %s", e2.msg);
            free(out);
            free(ids);
            k3_ec_free(ec);
            return 0;
        }
    check_failed("every expert loaded; expected a failure");
    return 9;
}

/* ---- io ---- */

static int mode_io(ctx *c)
{
    uint32_t nshards = 0;
    for (size_t i = 0; i < k3_st_count(c->ix); i++)
        if (k3_st_at(c->ix, i)->shard + 1 > nshards)
            nshards = k3_st_at(c->ix, i)->shard + 1;
    size_t cap = 1 << 20;
    k3_err e = { 0 };
    uint8_t *buf = k3_io_alloc(cap, "span buffer", &e), *ref = malloc(cap);
    CHECK(buf && ref, "out of memory");
    for (uint32_t s = 0; s < nshards; s++) {
        const char *path = k3_st_shard_path(c->ix, s);
        k3_file f;
        if (k3_file_open(&f, path, c->direct, &e) != K3_OK)
            k3_die(&e);
        int fd = k3_st_shard_fd(c->ix, s);
        off_t size = lseek(fd, 0, SEEK_END);
        CHECK(size > 0, "%s: empty", path);
        for (int r = 0; r < 200; r++) {
            uint64_t off, len;
            switch (r) { /* the edges first, then random spans */
            case 0: off = 0, len = 1; break;
            case 1: off = (uint64_t)size - 1, len = 1; break;
            case 2:
                off = 0, len = (uint64_t)size < cap - K3_IO_ALIGN ? (uint64_t)size : 4096;
                break;
            case 3: off = K3_IO_ALIGN - 1, len = 2; break;
            default:
                off = rnd() % (uint64_t)size;
                len = 1 + rnd() % ((uint64_t)size - off < 200000 ? (uint64_t)size - off : 200000);
            }
            const uint8_t *data;
            if (k3_read_span(&f, buf, cap, off, len, &data, &e) != K3_OK)
                k3_die(&e);
            CHECK(k3_pread_all(fd, ref, (size_t)len, (off_t)off) == (ssize_t)len, "pread failed");
            CHECK(!memcmp(data, ref, (size_t)len), "%s: span %llu+%llu differs", path,
                  (unsigned long long)off, (unsigned long long)len);
        }
        /* A buffer too small for the span is refused, not overrun. */
        k3_err small = { 0 };
        const uint8_t *data;
        CHECK(k3_read_span(&f, buf, K3_IO_ALIGN, 1, K3_IO_ALIGN, &data, &small) == K3_ERUNTIME,
              "a too-small span buffer was accepted");
        int direct = k3_file_is_direct(&f);
        printf("io: %s: 200 spans identical, %s reads\n", path, direct ? "direct" : "buffered");
        if (c->expect_direct >= 0)
            CHECK(direct == c->expect_direct, "%s: direct I/O %d, wanted %d", path, direct,
                  c->expect_direct);
        k3_file_close(&f);
    }
    check_fallbacks(c);
    k3_io_free(buf);
    free(ref);
    return 0;
}

/* ---- bench ---- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int mode_bench(ctx *c)
{
    int32_t *all = malloc((size_t)c->E * sizeof *all);
    const k3_expert **out = malloc(c->nkeys * sizeof *out);
    CHECK(all && out, "out of memory");
    for (int x = 0; x < c->E; x++)
        all[x] = x;

    /* 1. Misses: read pattern of decode steps with uniform random routing
     *    through a cache of --slots slots. */
    k3_expert_cache *ec = new_cache(c, c->slots);
    size_t cap = k3_ec_capacity(ec);
    int k = c->k < (int)cap ? c->k : (int)cap;
    int32_t ids[256];
    CHECK(k <= 256, "top-k too large");
    uint64_t fetches = 0, with_miss = 0, reads = 0, rbytes = 0;
    k3_ec_stats st0, st1;
    for (int step = 0; step < c->steps; step++)
        for (int l = c->first; l < c->first + c->nlayers; l++) {
            for (int j = 0; j < k;) {
                int32_t x = (int32_t)rnd_below(c->E);
                int d = 0;
                for (int q = 0; q < j; q++)
                    d |= ids[q] == x;
                if (!d)
                    ids[j++] = x;
            }
            qsort(ids, (size_t)k, sizeof *ids, cmp_i32);
            k3_io_counts a, b;
            k3_io_counts_get(&a);
            k3_ec_stats_get(ec, &st0);
            fetch_ok(ec, l, ids, (size_t)k, out);
            k3_ec_release(ec, l, ids, (size_t)k);
            k3_ec_stats_get(ec, &st1);
            k3_io_counts_get(&b);
            fetches++;
            with_miss += st1.misses > st0.misses;
            reads += b.reads - a.reads;
            rbytes += b.bytes - a.bytes;
        }
    k3_ec_stats st;
    k3_ec_stats_get(ec, &st);
    printf("bench misses: %zu slots, top-%d uniform routing, %llu fetches (%llu with misses), "
           "%llu misses, %llu reads: %.2f reads per fetch with misses, %.3f reads per missed "
           "expert, %.0f bytes per read (expert %llu bytes, slot %llu)\n",
           cap, k, (unsigned long long)fetches, (unsigned long long)with_miss,
           (unsigned long long)st.misses, (unsigned long long)reads,
           with_miss ? (double)reads / (double)with_miss : 0.0,
           st.misses ? (double)reads / (double)st.misses : 0.0,
           reads ? (double)rbytes / (double)reads : 0.0,
           (unsigned long long)expert_bytes(c),
           (unsigned long long)k3_ec_slot_bytes(&c->dims));
    k3_ec_free(ec);

    /* 2. All in memory: a whole layer per fetch (disk-adjacent experts
     *    coalesce), then the cost of a lookup that hits. */
    ec = new_cache(c, c->nkeys);
    k3_io_counts a, b;
    k3_io_counts_get(&a);
    for (int l = c->first; l < c->first + c->nlayers; l++) {
        fetch_ok(ec, l, all, (size_t)c->E, out);
        k3_ec_release(ec, l, all, (size_t)c->E);
    }
    k3_io_counts_get(&b);
    printf("bench load: %d layers x %d experts in %llu reads (%.2f reads per layer, %.0f bytes "
           "per read)\n",
           c->nlayers, c->E, (unsigned long long)(b.reads - a.reads),
           (double)(b.reads - a.reads) / c->nlayers,
           (double)(b.bytes - a.bytes) / (double)(b.reads - a.reads));
    enum { SEQS = 4096 };
    int32_t *seq = malloc((size_t)SEQS * (size_t)c->k * sizeof *seq);
    int *lay = malloc(SEQS * sizeof *lay);
    CHECK(seq && lay, "out of memory");
    for (int s = 0; s < SEQS; s++) {
        lay[s] = c->first + rnd_below(c->nlayers);
        pick(c, lay[s], seq + (size_t)s * (size_t)c->k, c->k);
    }
    int reps = 50;
    double t0 = now();
    for (int r = 0; r < reps; r++)
        for (int s = 0; s < SEQS; s++) {
            const int32_t *q = seq + (size_t)s * (size_t)c->k;
            fetch_ok(ec, lay[s], q, (size_t)c->k, out);
            k3_ec_release(ec, lay[s], q, (size_t)c->k);
        }
    double dt = now() - t0;
    double per = dt * 1e9 / ((double)reps * SEQS * c->k);
    printf("bench lookup: %d fetch+release of top-%d hits: %.1f ns per expert, %.0f ns per "
           "fetch\n",
           reps * SEQS, c->k, per, per * c->k);
    k3_ec_free(ec);
    free(seq);
    free(lay);
    free(all);
    free(out);
    return 0;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
    ctx c;
    memset(&c, 0, sizeof c);
    c.slots_arg = "k";
    c.direct = 1;
    c.steps = 24;
    c.seed = 1;
    c.expect_direct = -1;
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL_DIR verify|lru|pin|fault|truncate|nan|io|bench "
                        "[options]\n",
                argv[0]);
        return 2;
    }
    c.dir = argv[1];
    c.mode = argv[2];
    for (int i = 3; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        CHECK(v, "%s needs a value", o);
        i++;
        if (!strcmp(o, "--slots"))
            c.slots_arg = v;
        else if (!strcmp(o, "--direct"))
            c.direct = atoi(v);
        else if (!strcmp(o, "--steps"))
            c.steps = atoi(v);
        else if (!strcmp(o, "--seed"))
            c.seed = strtoull(v, NULL, 10);
        else if (!strcmp(o, "--trace"))
            c.trace_path = v;
        else if (!strcmp(o, "--expect-code"))
            c.expect_code = atoi(v);
        else if (!strcmp(o, "--expect-msg"))
            c.expect_msg = v;
        else if (!strcmp(o, "--expect-fallbacks"))
            c.expect_fallbacks = v;
        else if (!strcmp(o, "--expect-direct"))
            c.expect_direct = atoi(v);
        else
            check_failed("unknown option %s", o);
    }
    rng_state = c.seed * 0x9E3779B97F4A7C15ull + 1;
    open_model(&c);
    static const struct { const char *name; int (*fn)(ctx *); } modes[] = {
        { "verify", mode_verify }, { "lru", mode_lru }, { "pin", mode_pin },
        { "fault", mode_fault },   { "truncate", mode_truncate }, { "nan", mode_nan },
        { "io", mode_io },         { "bench", mode_bench },
    };
    int rc = -1;
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++)
        if (!strcmp(c.mode, modes[m].name))
            rc = modes[m].fn(&c);
    CHECK(rc >= 0, "unknown mode %s", c.mode);
    free(c.ref);
    k3_st_close(c.ix);
    k3_config_free(&c.cfg);
    return rc;
}
