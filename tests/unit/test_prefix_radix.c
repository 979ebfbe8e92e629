/* test_prefix_radix.c - model/prefix_radix against a brute-force list: a
 * few thousand random inserts, removals and prefix lookups on id
 * sequences that share prefixes (a few stems, a small alphabet, so edges
 * split and merge all the time), and the tree's bounds (nodes at most
 * twice the values, and back to an empty root's bytes when all are gone). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/prefix_radix.h"

#define MAXV 400
#define MAXN 40

typedef struct {
    uint32_t ids[MAXN];
    size_t n;
    int live;
} item;

static item items[MAXV];
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t m)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % m);
}

/* A key: a prefix of one of a few stems, then a random tail over 3 ids. */
static void make_key(uint32_t *ids, size_t *n)
{
    static const uint32_t stems[3][12] = {
        { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 },
        { 1, 2, 3, 9, 9, 9, 1, 2, 3, 4, 5, 6 },
        { 70000, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5 },
    };
    const uint32_t *s = stems[rnd(3)];
    size_t k = rnd(13), t = rnd(MAXN - 12);
    for (size_t i = 0; i < k; i++)
        ids[i] = s[i];
    for (size_t i = 0; i < t; i++)
        ids[k + i] = 1 + rnd(3);
    *n = k + t;
}

typedef struct {
    int got[MAXV];
    size_t len[MAXV];
    size_t count;
    size_t last_len;
    int ordered;
} visits;

static void visit(void *ctx, void *val, size_t len)
{
    visits *v = ctx;
    int i = (int)((item *)val - items);
    if (len < v->last_len)
        v->ordered = 0;
    v->last_len = len;
    v->got[i]++;
    v->len[i] = len;
    v->count++;
}

static int is_prefix(const item *x, const uint32_t *ids, size_t n)
{
    return x->n <= n && memcmp(x->ids, ids, x->n * sizeof *ids) == 0;
}

static void lookup(const k3_radix *r, const uint32_t *q, size_t n)
{
    visits v;
    memset(&v, 0, sizeof v);
    v.ordered = 1;
    k3_radix_prefixes(r, q, n, visit, &v);
    size_t want = 0;
    int bad = 0;
    for (int i = 0; i < MAXV; i++) {
        int p = items[i].live && is_prefix(&items[i], q, n);
        want += (size_t)p;
        if (v.got[i] != p || (p && v.len[i] != items[i].n))
            bad = 1;
    }
    CHECK(!bad && v.count == want, "lookup of %zu ids: %zu found, %zu expected", n, v.count, want);
    CHECK(v.ordered, "lookup: values not by ascending key length");
}

int main(void)
{
    k3_radix *r;
    k3_err e = { 0, "" };
    CHECK(k3_radix_new(&r, &e) == K3_OK, "new: %s", e.msg);
    uint64_t empty = k3_radix_bytes(r);
    size_t live = 0;
    for (int op = 0; op < 20000; op++) {
        uint32_t q[MAXN + 8];
        size_t n;
        int c = (int)rnd(10);
        if (c < 4) { /* insert into a free slot */
            int i = (int)rnd(MAXV);
            if (items[i].live)
                continue;
            make_key(items[i].ids, &items[i].n);
            if (rnd(4) == 0) { /* a key held already, or a prefix of one */
                int j = (int)rnd(MAXV);
                if (items[j].live && j != i) {
                    items[i].n = rnd((uint32_t)items[j].n + 1);
                    memcpy(items[i].ids, items[j].ids, items[i].n * sizeof *q);
                }
            }
            CHECK(k3_radix_insert(r, items[i].ids, items[i].n, &items[i], &e) == K3_OK,
                  "insert: %s", e.msg);
            items[i].live = 1;
            live++;
        } else if (c < 7) { /* remove a live one, or try a dead one */
            int i = (int)rnd(MAXV);
            int got = k3_radix_remove(r, items[i].ids, items[i].n, &items[i]);
            CHECK(got == (items[i].live ? 0 : -1), "remove of item %d: %d", i, got);
            if (items[i].live)
                live--;
            items[i].live = 0;
        } else { /* lookup: a live key extended, cut, or a fresh one */
            int i = (int)rnd(MAXV);
            if (items[i].live && rnd(3)) {
                n = items[i].n;
                memcpy(q, items[i].ids, n * sizeof *q);
                if (rnd(2)) {
                    size_t t = rnd(8);
                    for (size_t k = 0; k < t; k++)
                        q[n++] = 1 + rnd(3);
                } else {
                    n = rnd((uint32_t)n + 1);
                }
            } else {
                make_key(q, &n);
            }
            lookup(r, q, n);
        }
        CHECK(k3_radix_nodes(r) <= 2 * live + 1, "%zu nodes for %zu values", k3_radix_nodes(r),
              live);
    }
    /* a value not at its key, and one at another key, are not removed */
    for (int i = 0; i < MAXV; i++)
        if (items[i].live && items[i].n > 0) {
            CHECK(k3_radix_remove(r, items[i].ids, items[i].n - 1, &items[i]) == -1,
                  "removed at a shorter key");
            break;
        }
    for (int i = 0; i < MAXV; i++)
        if (items[i].live) {
            CHECK(k3_radix_remove(r, items[i].ids, items[i].n, &items[i]) == 0, "final remove");
            items[i].live = 0;
        }
    CHECK(k3_radix_nodes(r) == 1, "%zu nodes left after removing all", k3_radix_nodes(r));
    CHECK(k3_radix_bytes(r) >= empty, "bytes below an empty tree's");
    /* the root's arrays stay allocated; every node's bytes are returned */
    CHECK(k3_radix_bytes(r) <= empty + 2 * (MAXV + 8) * sizeof(void *),
          "%llu bytes left (empty: %llu)", (unsigned long long)k3_radix_bytes(r),
          (unsigned long long)empty);
    k3_radix_free(r);
    return check_report("test_prefix_radix");
}
