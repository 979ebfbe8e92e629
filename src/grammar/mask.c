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

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The index of state s[0..n) (sorted here) among the walk's states,
 * added if new; state 0 is the empty one. -1 on failure. */
static int64_t intern(k3_gram_matcher *m, uint32_t *s, size_t n)
{
    k3_err *e = m->e;
    if (!m->soff.n) { /* state 0: empty */
        if (k3g_vec_push(&m->soff, 0, e) || k3g_vec_push(&m->soff, 0, e) ||
            k3g_vec_push(&m->sfin, K3G_INF, e))
            return -1;
    }
    if (!n)
        return 0;
    if (n > 1)
        qsort(s, n, sizeof *s, cmp_u32);
    uint64_t h = hash_state(s, n);
    size_t nst = m->soff.n - 1;
    if (nst >= (1u << 23))
        return k3_fail(e, K3_EINPUT, "grammar: more than 2^23 states in one mask"), -1;
    if ((nst + 1) * 2 > m->nstab) { /* grow and rehash */
        size_t ns = m->nstab ? m->nstab * 2 : 4096;
        uint32_t *t = calloc(ns, sizeof *t);
        if (!t)
            return k3_fail(e, K3_ERUNTIME, "grammar matcher: out of memory"), -1;
        for (size_t k = 1; k < nst; k++) {
            const uint32_t *x = m->pool.v + m->soff.v[k];
            size_t j = (size_t)hash_state(x, m->soff.v[k + 1] - m->soff.v[k]) & (ns - 1);
            while (t[j])
                j = (j + 1) & (ns - 1);
            t[j] = (uint32_t)k;
        }
        free(m->stab);
        m->stab = t;
        m->nstab = ns;
    }
    size_t j = (size_t)h & (m->nstab - 1);
    while (m->stab[j]) {
        uint32_t k = m->stab[j];
        size_t kn = m->soff.v[k + 1] - m->soff.v[k];
        if (kn == n && !memcmp(m->pool.v + m->soff.v[k], s, n * sizeof *s))
            return k;
        j = (j + 1) & (m->nstab - 1);
    }
    for (size_t k = 0; k < n; k++)
        if (k3g_vec_push(&m->pool, s[k], e))
            return -1;
    if (k3g_vec_push(&m->soff, (uint32_t)m->pool.n, e) ||
        k3g_vec_push(&m->sfin, k3g_fin(m, s, n), e))
        return -1;
    m->stab[j] = (uint32_t)nst;
    return (int64_t)nst;
}

/* The state after byte c from walk state st (0: dead), memoised. */
static int64_t trans(k3_gram_matcher *m, uint32_t st, unsigned c, k3g_vec *tmp)
{
    if (st == 0)
        return 0;
    uint32_t key = st << 8 | c;
    if ((m->nttab_used + 1) * 2 > m->nttab) {
        size_t ns = m->nttab ? m->nttab * 2 : 1u << 14;
        uint32_t *k2 = malloc(ns * sizeof *k2), *v2 = malloc(ns * sizeof *v2);
        if (!k2 || !v2) {
            free(k2), free(v2);
            return k3_fail(m->e, K3_ERUNTIME, "grammar matcher: out of memory"), -1;
        }
        memset(k2, 0xFF, ns * sizeof *k2);
        for (size_t i = 0; i < m->nttab; i++)
            if (m->ttab_key[i] != UINT32_MAX) {
                size_t j = (size_t)(m->ttab_key[i] * 0x9E3779B1u) & (ns - 1);
                while (k2[j] != UINT32_MAX)
                    j = (j + 1) & (ns - 1);
                k2[j] = m->ttab_key[i], v2[j] = m->ttab_val[i];
            }
        free(m->ttab_key), free(m->ttab_val);
        m->ttab_key = k2, m->ttab_val = v2, m->nttab = ns;
    }
    size_t j = (size_t)(key * 0x9E3779B1u) & (m->nttab - 1);
    while (m->ttab_key[j] != UINT32_MAX) {
        if (m->ttab_key[j] == key)
            return m->ttab_val[j];
        j = (j + 1) & (m->nttab - 1);
    }
    tmp->n = 0;
    /* advance reads the pool while it is not growing; intern after */
    if (k3g_advance(m, m->pool.v + m->soff.v[st], m->soff.v[st + 1] - m->soff.v[st], c, 0, 1, tmp))
        return -1;
    int64_t ns = intern(m, tmp->v, tmp->n);
    if (ns < 0)
        return -1;
    m->ttab_key[j] = key;
    m->ttab_val[j] = (uint32_t)ns;
    m->nttab_used++;
    return ns;
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
    /* the trie, each node's state looked up by (parent state, byte) */
    m->pool.n = m->soff.n = m->sfin.n = m->path.n = 0;
    m->nttab_used = 0;
    if (m->ttab_key)
        memset(m->ttab_key, 0xFF, m->nttab * sizeof *m->ttab_key);
    if (m->stab)
        memset(m->stab, 0, m->nstab * sizeof *m->stab);
    k3g_vec tmp = { 0 };
    for (size_t k = 0; k < n; k++)
        if (k3g_vec_push(&tmp, s[k], e))
            goto out;
    int64_t st0 = intern(m, tmp.v, tmp.n);
    if (st0 < 0 || k3g_vec_push(&m->path, (uint32_t)st0, e))
        goto out;
    for (uint32_t i = 0; i < v->nnodes;) {
        uint32_t d = v->depth[i];
        m->path.n = d; /* path.v[d - 1]: the parent's state */
        int64_t ns = trans(m, m->path.v[d - 1], v->byte[i], &tmp);
        if (ns < 0)
            break;
        if (ns == 0) { /* dead: skip the subtree */
            i = v->end[i];
            continue;
        }
        if (k3g_vec_push(&m->path, (uint32_t)ns, e))
            break;
        uint32_t f = m->sfin.v[ns];
        for (uint32_t k = v->id_off[i]; k < v->id_off[i + 1]; k++)
            if (f < fin[v->ids[k]])
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
