/* mask.c - the ids allowed next (k3_gram_mask): a walk of the vocabulary
 * trie with the matcher's state, a cache of masks per state, and the end
 * budget (grammar.h states the rule).
 *
 * The walk: the trie's nodes in preorder, each carrying the state after
 * its path (the states of the current path are kept per depth); a node
 * whose state is empty skips its subtree. Every id ending at a live node
 * is viable, and fin after it is its state's fin. Token terminals add the
 * special ids they name (and, for !<X>, every id but X).
 *
 * The cache: the viable set of a state is a function of the state alone,
 * so it is kept (K3G_CACHE entries, least recently used dropped) with the
 * largest fin after any viable id. While the budget leaves room for that
 * largest fin, the cached set is the answer; when it does not, the walk
 * is redone to know each id's fin. A state recurs whenever the grammar
 * loops in place (inside a JSON string, free text, digits), which is most
 * steps of a long output. */
#include <stdlib.h>
#include <string.h>

#include "grammar/matcher.h"
#include "util/error.h"

static uint64_t hash_state(const uint32_t *s, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

/* fin[id] for every id from state s[0..n): K3G_INF where not viable. */
static int walk(k3_gram_matcher *m, const uint32_t *s, size_t n)
{
    const k3_gram_vocab *v = m->v;
    const k3_grammar *g = m->g;
    k3_err *e = m->e;
    uint32_t *fin = m->fin;
    for (uint32_t i = 0; i < v->n; i++)
        fin[i] = K3G_INF;
    uint32_t f0 = k3g_fin(m, s, n);
    for (uint32_t i = 0; i < v->nempty; i++)
        fin[v->empty[i]] = f0;
    /* token terminals */
    k3g_vec t = { 0 };
    for (size_t i = 0; i < n && !e->code; i++) {
        if (s[i] == 0)
            continue;
        k3g_el el = g->el[k3g_at(m, s[i])->pos];
        if (el.type != K3G_TOKEN)
            continue;
        uint32_t id = m->tokid[el.arg];
        t.n = 0;
        if (!g->tok[el.arg].neg) {
            if (k3g_advance(m, &s[i], 1, id, 1, 1, &t))
                break;
            uint32_t f = k3g_fin(m, t.v, t.n);
            if (t.n && f < fin[id])
                fin[id] = f;
        } else {
            if (k3g_advance(m, &s[i], 1, id == 0 ? 1 : 0, 1, 1, &t))
                break;
            uint32_t f = k3g_fin(m, t.v, t.n);
            for (uint32_t k = 0; t.n && k < v->n; k++)
                if (k != id && f < fin[k])
                    fin[k] = f;
        }
    }
    free(t.v);
    if (e->code)
        return e->code;
    /* the trie */
    k3g_vec *w = &m->walk, *off = &m->woff, tmp = { 0 };
    w->n = off->n = 0;
    for (size_t i = 0; i < n; i++)
        if (k3g_vec_push(w, s[i], e))
            return e->code;
    if (k3g_vec_push(off, 0, e) || k3g_vec_push(off, (uint32_t)w->n, e))
        return e->code;
    for (uint32_t i = 0; i < v->nnodes;) {
        uint32_t d = v->depth[i];
        /* the parent's state is at depth d - 1: w[off[d-1]..off[d]) */
        off->n = d + 1;
        w->n = off->v[d];
        tmp.n = 0;
        if (k3g_advance(m, w->v + off->v[d - 1], off->v[d] - off->v[d - 1], v->byte[i], 0, 1,
                        &tmp))
            break;
        if (!tmp.n) {
            i = v->end[i];
            continue;
        }
        for (size_t k = 0; k < tmp.n; k++)
            if (k3g_vec_push(w, tmp.v[k], e))
                goto out;
        if (k3g_vec_push(off, (uint32_t)w->n, e))
            goto out;
        uint32_t f = k3g_fin(m, tmp.v, tmp.n);
        for (uint32_t k = v->id_off[i]; k < v->id_off[i + 1]; k++)
            if (v->lens[v->ids[k]] == d && f < fin[v->ids[k]])
                fin[v->ids[k]] = f;
        i++;
    }
out:
    free(tmp.v);
    return e->code;
}

static k3g_cache_ent *cache_find(k3_gram_matcher *m, const uint32_t *s, size_t n, uint64_t h)
{
    for (int i = 0; i < K3G_CACHE; i++) {
        k3g_cache_ent *c = &m->cache[i];
        if (c->mask && c->hash == h && c->nkey == n && !memcmp(c->key, s, n * sizeof *s)) {
            c->used = ++m->tick;
            return c;
        }
    }
    return NULL;
}

static k3g_cache_ent *cache_put(k3_gram_matcher *m, const uint32_t *s, size_t n, uint64_t h)
{
    k3g_cache_ent *c = &m->cache[0];
    for (int i = 1; i < K3G_CACHE; i++)
        if (!m->cache[i].mask || (c->mask && m->cache[i].used < c->used))
            c = &m->cache[i];
    size_t words = k3_gram_mask_words(m->v);
    uint32_t *key = realloc(c->key, (n + 1) * sizeof *key);
    if (!key)
        return k3_fail(m->e, K3_ERUNTIME, "grammar matcher: out of memory"), NULL;
    c->key = key;
    if (!c->mask && !(c->mask = malloc(words * sizeof *c->mask)))
        return k3_fail(m->e, K3_ERUNTIME, "grammar matcher: out of memory"), NULL;
    memcpy(c->key, s, n * sizeof *s);
    c->nkey = n;
    c->hash = h;
    c->used = ++m->tick;
    memset(c->mask, 0, words * sizeof *c->mask);
    uint32_t mx = 0;
    for (uint32_t i = 0; i < m->v->n; i++)
        if (m->fin[i] != K3G_INF) {
            c->mask[i >> 5] |= 1u << (i & 31);
            if (m->fin[i] > mx)
                mx = m->fin[i];
        }
    c->maxfin = mx;
    return c;
}

static void add_ends(const k3_gram_matcher *m, uint32_t *mask)
{
    for (size_t i = 0; i < m->n_end; i++)
        mask[m->end_ids[i] >> 5] |= 1u << (m->end_ids[i] & 31);
}

int k3_gram_mask(k3_gram_matcher *m, int64_t budget, uint32_t *mask, k3_err *e)
{
    m->e = e;
    size_t words = k3_gram_mask_words(m->v);
    memset(mask, 0, words * sizeof *mask);
    if (k3_gram_is_done(m))
        return K3_OK;
    size_t n;
    const uint32_t *s = k3g_cur(m, &n);
    int accepting = n && s[0] == 0;
    uint64_t h = hash_state(s, n);
    k3g_cache_ent *c = cache_find(m, s, n, h);
    if (!c) {
        if (walk(m, s, n)) {
            k3g_scratch_clear(m);
            return e->code;
        }
        k3g_scratch_clear(m);
        if (!(c = cache_put(m, s, n, h)))
            return e->code;
        if (budget >= 0 && (uint64_t)c->maxfin + 2 > (uint64_t)budget)
            goto tight; /* m->fin is this state's */
    }
    if (budget < 0 || (uint64_t)c->maxfin + 2 <= (uint64_t)budget) {
        memcpy(mask, c->mask, words * sizeof *mask);
        if (accepting && budget != 0)
            add_ends(m, mask);
        return K3_OK;
    }
    if (walk(m, s, n)) {
        k3g_scratch_clear(m);
        return e->code;
    }
    k3g_scratch_clear(m);
tight:;
    /* the end budget: after the id, budget - 1 ids must spell fin bytes
     * and the end id */
    const uint32_t *fin = m->fin;
    uint32_t f0 = k3g_fin(m, s, n);
    int any = 0;
    for (uint32_t i = 0; i < m->v->n; i++)
        if (fin[i] != K3G_INF && (uint64_t)fin[i] + 2 <= (uint64_t)budget)
            mask[i >> 5] |= 1u << (i & 31), any = 1;
    if (accepting && budget >= 1)
        add_ends(m, mask), any = 1;
    if (!any) /* the budget was already too small: make progress */
        for (uint32_t i = 0; i < m->v->n; i++)
            if (fin[i] < f0)
                mask[i >> 5] |= 1u << (i & 31), any = 1;
    if (!any) {
        memcpy(mask, c->mask, words * sizeof *mask);
        if (accepting)
            add_ends(m, mask);
    }
    return K3_OK;
}
