/* prefix_radix.c - see prefix_radix.h. */
#include "model/prefix_radix.h"

#include <stdlib.h>
#include <string.h>

#include "util/ckd.h"
#include "util/error.h"

/* A node: the run of ids on the edge from its parent, its children sorted
 * by their run's first id (runs of siblings never share a first id), and
 * the values whose key ends here. */
typedef struct node {
    uint32_t *run; /* [nrun], NULL for the root */
    size_t nrun;
    struct node **kid; /* [nkid] of [capkid] */
    size_t nkid, capkid;
    void **val; /* [nval] of [capval] */
    size_t nval, capval;
} node;

struct k3_radix {
    node root;
    size_t nodes; /* the root included */
    uint64_t bytes;
};

/* n elements of `size` bytes, or 0 when that overflows (never a real size
 * here: every array has at least one element). */
static size_t array_bytes(size_t n, size_t size)
{
    uint64_t b = k3_sat_mul(n, size);
    return b > SIZE_MAX / 2 ? 0 : (size_t)b;
}

static void *grow(void *p, size_t *cap, size_t need, size_t size, k3_radix *r, k3_err *e)
{
    if (need <= *cap)
        return p;
    size_t cap2 = *cap ? *cap : 2;
    while (cap2 < need)
        cap2 = (size_t)k3_sat_mul(cap2, 2);
    size_t b = array_bytes(cap2, size);
    void *g = b ? realloc(p, b) : NULL;
    if (!g) {
        k3_fail(e, K3_ERUNTIME, "out of memory for the prefix cache's index");
        return NULL;
    }
    r->bytes += (uint64_t)(cap2 - *cap) * size;
    *cap = cap2;
    return g;
}

/* A new node whose run is ids[0..n), without links. */
static node *new_node(k3_radix *r, const uint32_t *ids, size_t n, k3_err *e)
{
    size_t b = array_bytes(n, sizeof *ids);
    node *x = calloc(1, sizeof *x);
    uint32_t *run = b ? malloc(b) : NULL;
    if (!x || !run) {
        free(x);
        free(run);
        k3_fail(e, K3_ERUNTIME, "out of memory for the prefix cache's index");
        return NULL;
    }
    memcpy(run, ids, b);
    x->run = run;
    x->nrun = n;
    r->bytes += sizeof *x + b;
    r->nodes++;
    return x;
}

static void drop_node(k3_radix *r, node *x)
{
    r->bytes -= sizeof *x + x->nrun * sizeof *x->run + x->capkid * sizeof *x->kid +
                x->capval * sizeof *x->val;
    r->nodes--;
    free(x->run);
    free(x->kid);
    free(x->val);
    free(x);
}

int k3_radix_new(k3_radix **out, k3_err *e)
{
    *out = k3_calloc(e, 1, sizeof **out, "the prefix cache's index");
    if (!*out)
        return e->code;
    (*out)->nodes = 1;
    (*out)->bytes = sizeof **out;
    return K3_OK;
}

static void free_tree(k3_radix *r, node *x)
{
    for (size_t i = 0; i < x->nkid; i++)
        free_tree(r, x->kid[i]);
    if (x != &r->root)
        drop_node(r, x);
}

void k3_radix_free(k3_radix *r)
{
    if (!r)
        return;
    free_tree(r, &r->root);
    free(r->root.kid);
    free(r->root.val);
    free(r);
}

/* The index in x's children of the one whose run begins with id, or where
 * it would go (*found 0). */
static size_t find_kid(const node *x, uint32_t id, int *found)
{
    size_t lo = 0, hi = x->nkid;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t v = x->kid[mid]->run[0];
        if (v == id) {
            *found = 1;
            return mid;
        }
        if (v < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

static size_t common(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i])
        i++;
    return i;
}

static int add_val(k3_radix *r, node *x, void *val, k3_err *e)
{
    void **g = grow(x->val, &x->capval, x->nval + 1, sizeof *g, r, e);
    if (!g)
        return e->code;
    x->val = g;
    x->val[x->nval++] = val;
    return K3_OK;
}

/* Hangs a new leaf of run ids[0..n) (n > 0) with val under x. */
static int add_leaf(k3_radix *r, node *x, const uint32_t *ids, size_t n, void *val, k3_err *e)
{
    int found;
    size_t at = find_kid(x, ids[0], &found);
    node **g = grow(x->kid, &x->capkid, x->nkid + 1, sizeof *g, r, e);
    if (!g)
        return e->code;
    x->kid = g;
    node *leaf = new_node(r, ids, n, e);
    if (!leaf)
        return e->code;
    if (add_val(r, leaf, val, e)) {
        drop_node(r, leaf);
        return e->code;
    }
    memmove(&x->kid[at + 1], &x->kid[at], (x->nkid - at) * sizeof *x->kid);
    x->kid[at] = leaf;
    x->nkid++;
    return K3_OK;
}

/* Splits x's child k after `l` ids of its run (0 < l < its length): a new
 * node holds run[0..l) and has k (now run[l..)) as its only child. The new
 * node, or NULL (the tree as it was). */
static node *split(k3_radix *r, node *x, size_t at, size_t l, k3_err *e)
{
    node *k = x->kid[at];
    size_t rest = k->nrun - l;
    node *mid = new_node(r, k->run, l, e);
    uint32_t *tail = mid ? malloc(array_bytes(rest, sizeof *tail)) : NULL;
    node **kids = tail ? grow(NULL, &mid->capkid, 1, sizeof *kids, r, e) : NULL;
    if (!kids) {
        if (mid && !tail)
            k3_fail(e, K3_ERUNTIME, "out of memory for the prefix cache's index");
        free(tail);
        if (mid)
            drop_node(r, mid);
        return NULL;
    }
    memcpy(tail, k->run + l, rest * sizeof *tail);
    r->bytes -= (uint64_t)l * sizeof *tail;
    free(k->run);
    k->run = tail;
    k->nrun = rest;
    mid->kid = kids;
    mid->kid[0] = k;
    mid->nkid = 1;
    x->kid[at] = mid;
    return mid;
}

int k3_radix_insert(k3_radix *r, const uint32_t *ids, size_t n, void *val, k3_err *e)
{
    node *x = &r->root;
    size_t i = 0;
    for (;;) {
        if (i == n)
            return add_val(r, x, val, e);
        int found;
        size_t at = find_kid(x, ids[i], &found);
        if (!found)
            return add_leaf(r, x, ids + i, n - i, val, e);
        node *k = x->kid[at];
        size_t l = common(k->run, k->nrun, ids + i, n - i);
        if (l < k->nrun) {
            /* A split made here and then a failed add leaves a node with
             * one child and no value: a valid tree, merged by the next
             * removal below it (never a wrong answer). */
            if (!(k = split(r, x, at, l, e)))
                return e->code;
        }
        x = k;
        i += l;
    }
}

/* Merges x (not the root, no values, one child) with its child: x takes
 * the child's run appended, its children and values. */
static void merge_down(k3_radix *r, node *x)
{
    node *k = x->kid[0];
    uint64_t n = k3_sat_add(x->nrun, k->nrun);
    size_t b = n > SIZE_MAX ? 0 : array_bytes((size_t)n, sizeof *x->run);
    uint32_t *run = b ? malloc(b) : NULL;
    if (!run)
        return; /* out of memory: x stays, a valid tree with one more node */
    memcpy(run, x->run, x->nrun * sizeof *run);
    memcpy(run + x->nrun, k->run, k->nrun * sizeof *run);
    /* x takes k's node whole (children, values) with the joined run; k is
     * freed holding x's old run and arrays (the child list held only k).
     * Bytes: the joined run is x's old run more than k's, freed below. */
    uint32_t *krun = k->run;
    node old = *x;
    r->bytes += old.nrun * sizeof *run;
    *x = *k;
    x->run = run;
    x->nrun = (size_t)n;
    *k = old;
    k->nkid = 0;
    free(krun);
    drop_node(r, k);
}

int k3_radix_remove(k3_radix *r, const uint32_t *ids, size_t n, const void *val)
{
    node *parent = NULL, *x = &r->root;
    size_t i = 0, at = 0;
    while (i < n) {
        int found;
        at = find_kid(x, ids[i], &found);
        if (!found)
            return -1;
        node *k = x->kid[at];
        if (k->nrun > n - i || memcmp(k->run, ids + i, k->nrun * sizeof *ids) != 0)
            return -1;
        parent = x;
        x = k;
        i += k->nrun;
    }
    size_t v = 0;
    while (v < x->nval && x->val[v] != val)
        v++;
    if (v == x->nval)
        return -1;
    memmove(&x->val[v], &x->val[v + 1], (x->nval - v - 1) * sizeof *x->val);
    x->nval--;
    if (!parent || x->nval)
        return 0;
    if (x->nkid == 1) {
        merge_down(r, x);
    } else if (x->nkid == 0) {
        memmove(&parent->kid[at], &parent->kid[at + 1],
                (parent->nkid - at - 1) * sizeof *parent->kid);
        parent->nkid--;
        drop_node(r, x);
        /* the parent may now be a valueless pass-through */
        if (parent != &r->root && parent->nval == 0 && parent->nkid == 1)
            merge_down(r, parent);
    }
    return 0;
}

void k3_radix_prefixes(const k3_radix *r, const uint32_t *ids, size_t n, k3_radix_visit f,
                       void *ctx)
{
    const node *x = &r->root;
    size_t i = 0;
    for (;;) {
        for (size_t v = 0; v < x->nval; v++)
            f(ctx, x->val[v], i);
        int found;
        if (i == n)
            return;
        size_t at = find_kid(x, ids[i], &found);
        if (!found)
            return;
        const node *k = x->kid[at];
        if (k->nrun > n - i || memcmp(k->run, ids + i, k->nrun * sizeof *ids) != 0)
            return;
        x = k;
        i += k->nrun;
    }
}

uint64_t k3_radix_bytes(const k3_radix *r)
{
    return r->bytes;
}

size_t k3_radix_nodes(const k3_radix *r)
{
    return r->nodes;
}
