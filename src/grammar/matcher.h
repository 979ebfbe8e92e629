/* matcher.h - the matcher's insides, shared by matcher.c (stacks, accept,
 * rollback) and mask.c (the allowed-id set).
 *
 * A stack is a chain of nodes (pos, parent): pos is the grammar position
 * to match next, parent the stack to return to when pos's alternative
 * ends; node 0 is the empty stack (the grammar may end). Nodes are
 * hash-consed, so equal stacks are equal ids and a state (the set of live
 * stacks after some input) is a set of ids. A rule reference that ends
 * its alternative does not push (a tail call), so right recursion such
 * as `x*` runs in constant depth.
 *
 * Two node stores: committed nodes (those of accepted states, kept for
 * rollback) and scratch nodes (made while computing a mask and dropped
 * after it); a scratch id has K3G_SCRATCH set. */
#ifndef K3_GRAMMAR_MATCHER_H
#define K3_GRAMMAR_MATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/ir.h"
#include "grammar/vocab.h"

#define K3G_SCRATCH 0x80000000u
#define K3G_NONE    0xFFFFFFFFu

typedef struct k3g_node {
    uint32_t pos, parent, fin, depth;
} k3g_node;

typedef struct k3g_store {
    k3g_node *n;
    size_t len, cap;
    uint32_t *slot;  /* hash table of ids+1 (0 empty) */
    uint32_t *stamp; /* scratch store only: slot valid when stamp == epoch */
    size_t nslot;
    uint32_t epoch;
} k3g_store;

typedef struct k3g_vec {
    uint32_t *v;
    size_t n, cap;
} k3g_vec;

typedef struct k3g_cache_ent {
    uint64_t hash;
    uint32_t *key;
    size_t nkey;
    uint32_t *mask;
    uint32_t maxfin; /* largest fin after any allowed id (end ids excluded) */
    uint64_t used;
} k3g_cache_ent;

#define K3G_CACHE 16

struct k3_gram_matcher {
    const k3_grammar *g;
    const k3_gram_vocab *v;
    uint32_t *tokid; /* per token terminal: the resolved id */
    uint32_t *end_ids;
    size_t n_end;
    k3g_store com, scr;
    /* visited marks of one closure, per node, for both stores */
    uint32_t *vis_c, *vis_s;
    size_t nvis_c, nvis_s;
    uint32_t vstamp;
    k3g_vec work; /* the closure's worklist */
    /* history: state k (after k ids) is hist.v[off.v[k]..off.v[k+1]) */
    k3g_vec hist, off;
    size_t done_at; /* count at which an end id was accepted, or SIZE_MAX */
    /* mask scratch */
    uint32_t *fin; /* per id: fin after it, K3G_INF = not viable */
    /* the walk's interned states (mask.c): state k is pool[soff[k]..soff[k+1]),
     * its fin sfin[k]; stab hashes states, ttab (state, byte) -> next state */
    k3g_vec pool, soff, sfin, path;
    uint32_t *stab, *ttab_key, *ttab_val;
    size_t nstab, nttab, nttab_used;
    k3g_cache_ent cache[K3G_CACHE];
    uint64_t tick;
    k3_err *e; /* the current call's error record */
};

/* The node (pos, parent), made in the store of `scratch` (committed when
 * 0; a committed parent is required then). K3G_NONE when the stack would
 * be deeper than K3_GRAM_MAX_DEPTH (that path is cut) or memory ran out
 * (m->e set). */
uint32_t k3g_mk(k3_gram_matcher *m, uint32_t pos, uint32_t parent, int scratch);
const k3g_node *k3g_at(const k3_gram_matcher *m, uint32_t id);

/* out += the stacks reached from in[0..n) by byte c (is_tok 0) or by id
 * c as a token terminal (is_tok 1), each expanded to its terminals.
 * K3_EINPUT past K3_GRAM_MAX_STACKS. */
int k3g_advance(k3_gram_matcher *m, const uint32_t *in, size_t n, unsigned c, int is_tok,
                int scratch, k3g_vec *out);
/* fin of a state: the fewest bytes to finish from its best stack. */
uint32_t k3g_fin(const k3_gram_matcher *m, const uint32_t *s, size_t n);

int k3g_vec_push(k3g_vec *v, uint32_t x, k3_err *e);

/* The current state. */
static inline const uint32_t *k3g_cur(const k3_gram_matcher *m, size_t *n)
{
    size_t k = m->off.n - 1;
    *n = m->off.v[k] - m->off.v[k - 1];
    return m->hist.v + m->off.v[k - 1];
}

void k3g_scratch_clear(k3_gram_matcher *m);

#endif
