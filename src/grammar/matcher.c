/* matcher.c - stacks (matcher.h), advancing them by a byte or a token,
 * accepting ids, rollback. */
#include "grammar/matcher.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int k3g_vec_push(k3g_vec *v, uint32_t x, k3_err *e)
{
    if (v->n == v->cap) {
        size_t c = v->cap ? v->cap * 2 : 64;
        uint32_t *q = realloc(v->v, c * sizeof *q);
        if (!q)
            return k3_fail(e, K3_ERUNTIME, "grammar matcher: out of memory");
        v->v = q;
        v->cap = c;
    }
    v->v[v->n++] = x;
    return K3_OK;
}

static uint64_t hkey(uint32_t pos, uint32_t parent)
{
    uint64_t h = ((uint64_t)pos << 32 | parent) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

const k3g_node *k3g_at(const k3_gram_matcher *m, uint32_t id)
{
    return id & K3G_SCRATCH ? &m->scr.n[id & ~K3G_SCRATCH] : &m->com.n[id];
}

static int slot_live(const k3g_store *s, size_t i)
{
    return s->slot[i] && (!s->stamp || s->stamp[i] == s->epoch);
}

/* Looks (pos, parent) up in s; returns the id+1 found or 0, and the slot
 * where it would go in *where. */
static uint32_t find(const k3g_store *s, uint32_t pos, uint32_t parent, size_t *where)
{
    size_t mask = s->nslot - 1, i = (size_t)hkey(pos, parent) & mask;
    while (slot_live(s, i)) {
        const k3g_node *x = &s->n[s->slot[i] - 1];
        if (x->pos == pos && x->parent == parent)
            return s->slot[i];
        i = (i + 1) & mask;
    }
    *where = i;
    return 0;
}

static int rehash(k3g_store *s, k3_err *e)
{
    size_t ns = s->nslot ? s->nslot * 2 : 1024;
    uint32_t *sl = calloc(ns, sizeof *sl), *st = NULL;
    if (!sl || (s->stamp && !(st = calloc(ns, sizeof *st)))) {
        free(sl);
        return k3_fail(e, K3_ERUNTIME, "grammar matcher: out of memory");
    }
    free(s->slot);
    free(s->stamp);
    s->slot = sl;
    s->stamp = st ? st : NULL;
    s->nslot = ns;
    if (st)
        s->epoch = 1;
    for (size_t k = 0; k < s->len; k++) {
        size_t i = (size_t)hkey(s->n[k].pos, s->n[k].parent) & (ns - 1);
        while (sl[i])
            i = (i + 1) & (ns - 1);
        sl[i] = (uint32_t)k + 1;
        if (st)
            st[i] = s->epoch;
    }
    return K3_OK;
}

uint32_t k3g_mk(k3_gram_matcher *m, uint32_t pos, uint32_t parent, int scratch)
{
    const k3g_node *pn = k3g_at(m, parent);
    if (pn->depth + 1 > K3_GRAM_MAX_DEPTH)
        return K3G_NONE;
    uint32_t found;
    size_t where = 0;
    if ((found = find(&m->com, pos, parent, &where)))
        return found - 1;
    k3g_store *s = scratch ? &m->scr : &m->com;
    if (scratch && (found = find(s, pos, parent, &where)))
        return (found - 1) | K3G_SCRATCH;
    if ((s->len + 1) * 2 > s->nslot) {
        if (rehash(s, m->e))
            return K3G_NONE;
        find(s, pos, parent, &where);
    }
    if (s->len == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 1024;
        k3g_node *q = realloc(s->n, c * sizeof *q);
        if (!q)
            return k3_fail(m->e, K3_ERUNTIME, "grammar matcher: out of memory"), K3G_NONE;
        s->n = q;
        s->cap = c;
        pn = k3g_at(m, parent);
    }
    if (s->len >= K3G_SCRATCH - 1)
        return k3_fail(m->e, K3_EINPUT, "grammar matcher: too many stack nodes"), K3G_NONE;
    k3g_node *x = &s->n[s->len];
    x->pos = pos;
    x->parent = parent;
    uint64_t f = (uint64_t)m->g->minrest[pos] + pn->fin;
    x->fin = f >= K3G_INF ? K3G_INF - 1 : (uint32_t)f;
    x->depth = pn->depth + 1;
    s->slot[where] = (uint32_t)s->len + 1;
    if (s->stamp)
        s->stamp[where] = s->epoch;
    uint32_t id = (uint32_t)s->len++;
    return scratch ? id | K3G_SCRATCH : id;
}

void k3g_scratch_clear(k3_gram_matcher *m)
{
    m->scr.len = 0;
    if (++m->scr.epoch == 0) { /* wrapped: clear the stamps for real */
        if (m->scr.stamp)
            memset(m->scr.stamp, 0, m->scr.nslot * sizeof *m->scr.stamp);
        m->scr.epoch = 1;
    }
}

/* Marks id visited in this closure; returns 1 if it already was. */
static int visit(k3_gram_matcher *m, uint32_t id)
{
    uint32_t **vis = id & K3G_SCRATCH ? &m->vis_s : &m->vis_c;
    size_t *nv = id & K3G_SCRATCH ? &m->nvis_s : &m->nvis_c;
    size_t i = id & ~K3G_SCRATCH;
    if (i >= *nv) {
        size_t c = *nv ? *nv : 1024;
        while (c <= i)
            c *= 2;
        uint32_t *q = realloc(*vis, c * sizeof *q);
        if (!q) {
            k3_fail(m->e, K3_ERUNTIME, "grammar matcher: out of memory");
            return 1;
        }
        memset(q + *nv, 0, (c - *nv) * sizeof *q);
        *vis = q;
        *nv = c;
    }
    if ((*vis)[i] == m->vstamp)
        return 1;
    (*vis)[i] = m->vstamp;
    return 0;
}

static void new_stamp(k3_gram_matcher *m)
{
    if (++m->vstamp == 0) {
        if (m->vis_c)
            memset(m->vis_c, 0, m->nvis_c * sizeof *m->vis_c);
        if (m->vis_s)
            memset(m->vis_s, 0, m->nvis_s * sizeof *m->vis_s);
        m->vstamp = 1;
    }
}

/* The stack after the element at x's pos was matched: its next position,
 * or (the alternative ending there) its parent. */
static uint32_t next_of(k3_gram_matcher *m, uint32_t x, int scratch)
{
    const k3g_node *n = k3g_at(m, x);
    uint32_t pos = n->pos + 1, parent = n->parent;
    if (m->g->el[pos].type == K3G_END)
        return parent;
    return k3g_mk(m, pos, parent, scratch);
}

/* Expands the stack `start` to stacks whose top is a terminal (or node 0)
 * and adds the new ones to out. */
static int expand(k3_gram_matcher *m, uint32_t start, int scratch, k3g_vec *out)
{
    const k3_grammar *g = m->g;
    m->work.n = 0;
    if (start == K3G_NONE)
        return m->e->code;
    if (k3g_vec_push(&m->work, start, m->e))
        return m->e->code;
    while (m->work.n) {
        uint32_t x = m->work.v[--m->work.n];
        if (visit(m, x))
            continue;
        if (x == 0) {
            if (k3g_vec_push(out, 0, m->e))
                return m->e->code;
            continue;
        }
        const k3g_node *n = k3g_at(m, x);
        k3g_el el = g->el[n->pos];
        if (el.type == K3G_END) {
            if (k3g_vec_push(&m->work, n->parent, m->e))
                return m->e->code;
        } else if (el.type != K3G_RULE) {
            if (out->n >= K3_GRAM_MAX_STACKS)
                return k3_fail(m->e, K3_EINPUT,
                               "grammar: more than %d live stacks "
                               "(K3_GRAM_MAX_STACKS): the grammar is too ambiguous",
                               K3_GRAM_MAX_STACKS);
            if (k3g_vec_push(out, x, m->e))
                return m->e->code;
        } else {
            uint32_t c = next_of(m, x, scratch);
            if (c == K3G_NONE) {
                if (m->e->code)
                    return m->e->code;
                continue;
            }
            for (uint32_t a = g->alt_off[el.arg]; a < g->alt_off[el.arg + 1]; a++) {
                uint32_t p = g->alts[a];
                uint32_t y = g->el[p].type == K3G_END ? c : k3g_mk(m, p, c, scratch);
                if (y == K3G_NONE) {
                    if (m->e->code)
                        return m->e->code;
                    continue;
                }
                if (k3g_vec_push(&m->work, y, m->e))
                    return m->e->code;
            }
        }
    }
    return K3_OK;
}

int k3g_advance(k3_gram_matcher *m, const uint32_t *in, size_t n, unsigned c, int is_tok,
                int scratch, k3g_vec *out)
{
    const k3_grammar *g = m->g;
    new_stamp(m);
    for (size_t i = 0; i < n; i++) {
        uint32_t x = in[i];
        if (x == 0)
            continue;
        k3g_el el = g->el[k3g_at(m, x)->pos];
        int hit;
        if (is_tok) {
            if (el.type != K3G_TOKEN)
                continue;
            const k3g_token *t = &g->tok[el.arg];
            hit = t->neg ? m->tokid[el.arg] != c : m->tokid[el.arg] == c;
        } else {
            hit = el.type == K3G_SET && k3g_set_has(g->sets[el.arg], c);
        }
        if (hit && expand(m, next_of(m, x, scratch), scratch, out))
            return m->e->code;
    }
    return m->e->code;
}

uint32_t k3g_fin(const k3_gram_matcher *m, const uint32_t *s, size_t n)
{
    uint32_t f = K3G_INF;
    for (size_t i = 0; i < n; i++) {
        uint32_t x = k3g_at(m, s[i])->fin;
        if (x < f)
            f = x;
    }
    return f;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Appends the state in tmp (committed ids) as the next history entry. */
static int push_state(k3_gram_matcher *m, k3g_vec *tmp)
{
    if (tmp->n > 1)
        qsort(tmp->v, tmp->n, sizeof *tmp->v, cmp_u32);
    for (size_t i = 0; i < tmp->n; i++)
        if (k3g_vec_push(&m->hist, tmp->v[i], m->e))
            return m->e->code;
    return k3g_vec_push(&m->off, (uint32_t)m->hist.n, m->e);
}

/* The start state (root's alternatives under the empty stack) as the
 * first history entry; by k3_gram_matcher_new only. */
static int start_state(k3_gram_matcher *m)
{
    k3g_vec tmp = { 0 };
    const k3_grammar *g = m->g;
    new_stamp(m);
    for (uint32_t a = g->alt_off[g->root]; a < g->alt_off[g->root + 1] && !m->e->code; a++) {
        uint32_t p = g->alts[a];
        expand(m, g->el[p].type == K3G_END ? 0 : k3g_mk(m, p, 0, 0), 0, &tmp);
    }
    if (!m->e->code)
        push_state(m, &tmp);
    free(tmp.v);
    return m->e->code;
}

int k3_gram_matcher_new(k3_gram_matcher **out, const k3_grammar *g, const k3_gram_vocab *v,
                        const uint32_t *end_ids, size_t n_end, k3_err *e)
{
    *out = NULL;
    k3_gram_matcher *m = calloc(1, sizeof *m);
    if (!m)
        return k3_fail(e, K3_ERUNTIME, "grammar matcher: out of memory");
    m->g = g;
    m->v = v;
    m->e = e;
    m->done_at = SIZE_MAX;
    m->tokid = calloc(g->ntok + 1, sizeof *m->tokid);
    m->end_ids = malloc((n_end + 1) * sizeof *m->end_ids);
    m->fin = malloc((size_t)v->n * sizeof *m->fin);
    m->scr.stamp = NULL;
    if (!m->tokid || !m->end_ids || !m->fin) {
        k3_fail(e, K3_ERUNTIME, "grammar matcher: out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n_end; i++) {
        if (end_ids[i] >= v->n) {
            k3_fail(e, K3_EINPUT, "grammar matcher: end id %u outside the vocabulary (%u ids)",
                    end_ids[i], v->n);
            goto fail;
        }
        m->end_ids[i] = end_ids[i];
    }
    m->n_end = n_end;
    for (uint32_t i = 0; i < g->ntok; i++) {
        const k3g_token *t = &g->tok[i];
        int64_t id = t->id;
        if (id < 0) {
            id = k3g_vocab_special(v, t->text, t->len);
            if (id < 0) {
                k3_fail(e, K3_EINPUT,
                        "grammar: token %s is not a special token of the "
                        "vocabulary",
                        t->text);
                goto fail;
            }
        } else if (id >= v->n) {
            k3_fail(e, K3_EINPUT, "grammar: token <[%lld]> is outside the vocabulary (%u ids)",
                    (long long)id, v->n);
            goto fail;
        } else if (!t->neg && !v->special[id]) {
            k3_fail(e, K3_EINPUT,
                    "grammar: token <[%lld]> is an ordinary id; a token terminal "
                    "must name a special id (ordinary text is written as a literal)",
                    (long long)id);
            goto fail;
        }
        m->tokid[i] = (uint32_t)id;
    }
    /* node 0: the empty stack; the scratch store gets its stamps */
    m->com.nslot = 0;
    if (rehash(&m->com, e))
        goto fail;
    m->scr.stamp = calloc(1, sizeof *m->scr.stamp); /* marks the store as stamped */
    if (!m->scr.stamp || rehash(&m->scr, e)) {
        k3_fail(e, K3_ERUNTIME, "grammar matcher: out of memory");
        goto fail;
    }
    m->com.n = malloc(1024 * sizeof *m->com.n);
    if (!m->com.n) {
        k3_fail(e, K3_ERUNTIME, "grammar matcher: out of memory");
        goto fail;
    }
    m->com.cap = 1024;
    m->com.n[0] = (k3g_node){ K3G_INF, 0, 0, 0 };
    m->com.len = 1;
    m->vstamp = 1;
    if (k3g_vec_push(&m->off, 0, e))
        goto fail;
    if (start_state(m))
        goto fail;
    *out = m;
    return K3_OK;
fail:
    k3_gram_matcher_free(m);
    return e->code;
}

/* Back to the first history entry: no allocation, so no error record. */
void k3_gram_reset(k3_gram_matcher *m)
{
    m->off.n = 2;
    m->hist.n = m->off.v[1];
    m->done_at = SIZE_MAX;
}

void k3_gram_matcher_free(k3_gram_matcher *m)
{
    if (!m)
        return;
    free(m->tokid), free(m->end_ids), free(m->fin);
    free(m->com.n), free(m->com.slot), free(m->com.stamp);
    free(m->scr.n), free(m->scr.slot), free(m->scr.stamp);
    free(m->vis_c), free(m->vis_s), free(m->work.v);
    free(m->hist.v), free(m->off.v), free(m->pool.v), free(m->soff.v), free(m->sfin.v);
    free(m->path.v), free(m->stab), free(m->ttab_key), free(m->ttab_val);
    for (int i = 0; i < K3G_CACHE; i++)
        free(m->cache[i].key), free(m->cache[i].mask);
    free(m);
}

size_t k3_gram_count(const k3_gram_matcher *m)
{
    return m->off.n - 2;
}

int k3_gram_is_done(const k3_gram_matcher *m)
{
    return m->done_at <= k3_gram_count(m);
}

int k3_gram_is_accepting(const k3_gram_matcher *m)
{
    size_t n;
    const uint32_t *s = k3g_cur(m, &n);
    if (k3_gram_is_done(m))
        return 0;
    return n && s[0] == 0; /* sorted: node 0 first */
}

size_t k3_gram_min_ids(const k3_gram_matcher *m)
{
    if (k3_gram_is_done(m))
        return 0;
    size_t n;
    const uint32_t *s = k3g_cur(m, &n);
    return (size_t)k3g_fin(m, s, n) + 1;
}

static int is_end(const k3_gram_matcher *m, uint32_t id)
{
    for (size_t i = 0; i < m->n_end; i++)
        if (m->end_ids[i] == id)
            return 1;
    return 0;
}

int k3_gram_accept(k3_gram_matcher *m, uint32_t id, k3_err *e)
{
    m->e = e;
    const k3_gram_vocab *v = m->v;
    if (id >= v->n)
        return k3_fail(e, K3_EINPUT, "grammar: id %u outside the vocabulary", id);
    if (k3_gram_is_done(m))
        return k3_fail(e, K3_EINPUT, "grammar: id %u after the end", id);
    size_t n;
    const uint32_t *s = k3g_cur(m, &n);
    k3g_vec a = { 0 }, b = { 0 };
    /* token terminals (special ids, and !<...> for any id) */
    if (k3g_advance(m, s, n, id, 1, 0, &a))
        goto out;
    if (!v->special[id]) {
        /* the bytes, one at a time; s stays valid: history only grows after */
        if (k3g_vec_push(&b, 0, e))
            goto out;
        b.n = 0;
        for (size_t i = 0; i < n; i++)
            if (k3g_vec_push(&b, s[i], e))
                goto out;
        for (size_t i = 0; i < v->lens[id] && b.n; i++) {
            k3g_vec c = { 0 };
            if (k3g_advance(m, b.v, b.n, v->bytes[id][i], 0, 0, &c)) {
                free(c.v);
                goto out;
            }
            free(b.v);
            b = c;
        }
        /* merge b into a (dedupe) */
        for (size_t i = 0; i < b.n; i++) {
            size_t j = 0;
            while (j < a.n && a.v[j] != b.v[i])
                j++;
            if (j == a.n && k3g_vec_push(&a, b.v[i], e))
                goto out;
        }
    }
    if (!a.n) {
        int accepting = n && s[0] == 0;
        if (accepting && is_end(m, id)) {
            /* done: the state stays (empty set marks nothing more) */
            m->done_at = k3_gram_count(m) + 1;
            a.n = 0;
            push_state(m, &a);
            goto out;
        }
        k3_fail(e, K3_EINPUT, "grammar: id %u is not allowed here", id);
        goto out;
    }
    push_state(m, &a);
out:
    free(a.v);
    free(b.v);
    return e->code;
}

void k3_gram_rollback(k3_gram_matcher *m, size_t n)
{
    size_t c = k3_gram_count(m);
    if (n > c)
        n = c;
    m->off.n -= n;
    m->hist.n = m->off.v[m->off.n - 1];
    if (m->done_at > k3_gram_count(m))
        m->done_at = SIZE_MAX;
}
