/* finish.c - checking and flattening built rules into a k3_grammar
 * (ir.h): the fewest bytes each rule needs (Knuth's generalisation of
 * Dijkstra's algorithm, so a hostile chain of rules costs O(E log R)),
 * dead alternatives dropped, left recursion refused, minrest per
 * position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/ir.h"
#include "util/ckd.h"
#include "util/error.h"

void k3_gram_free(k3_grammar *g)
{
    if (!g)
        return;
    free(g->el);
    free(g->alt_off);
    free(g->alts);
    free(g->sets);
    for (uint32_t i = 0; i < g->ntok; i++)
        free(g->tok[i].text);
    free(g->tok);
    free(g->minrest);
    free(g);
}

typedef struct hnode {
    uint32_t v, r;
} hnode;

static void heap_push(hnode *h, size_t *n, hnode x)
{
    size_t i = (*n)++;
    while (i && h[(i - 1) / 2].v > x.v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static hnode heap_pop(hnode *h, size_t *n)
{
    hnode top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1].v < h[c].v)
            c++;
        if (h[c].v >= x.v)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = x;
    return top;
}

static uint32_t sat32(uint64_t v)
{
    return v >= K3G_INF ? K3G_INF : (uint32_t)v;
}

static const char *rname(const char *const *names, uint32_t r, char *tmp, size_t n)
{
    if (names && names[r])
        return names[r];
    snprintf(tmp, n, "#%u", r);
    return tmp;
}

/* Left recursion: an edge r -> s when s can start r's input (everything
 * before it in the alternative is nullable). Iterative DFS for a cycle;
 * each frame holds (rule, alternative, element offset). */
static int left_recursion(const k3_grammar *g, const uint32_t *len, const char *const *names,
                          k3_err *e)
{
    uint8_t *color = calloc(g->nrules, 1);
    uint32_t *fr = malloc((size_t)g->nrules * 3 * sizeof *fr);
    if (!color || !fr) {
        free(color), free(fr);
        return k3_fail(e, K3_ERUNTIME, "grammar: out of memory");
    }
    for (uint32_t s0 = 0; s0 < g->nrules && !e->code; s0++) {
        if (color[s0])
            continue;
        size_t sp = 1;
        fr[0] = s0, fr[1] = 0, fr[2] = 0;
        color[s0] = 1;
        while (sp && !e->code) {
            uint32_t *f = &fr[3 * (sp - 1)], r = f[0];
            uint32_t na = g->alt_off[r + 1] - g->alt_off[r];
            int pushed = 0;
            while (f[1] < na && !pushed) {
                k3g_el el = g->el[g->alts[g->alt_off[r] + f[1]] + f[2]];
                if (el.type != K3G_RULE) {
                    f[1]++, f[2] = 0;
                    continue;
                }
                if (len[el.arg] != 0)
                    f[1]++, f[2] = 0; /* nothing after it starts r's input */
                else
                    f[2]++;
                uint32_t s = el.arg;
                if (color[s] == 1) {
                    char t1[24], t2[24];
                    k3_fail(e, K3_EINPUT,
                            "grammar: left recursion: rule %s reaches %s "
                            "without consuming input",
                            rname(names, r, t1, sizeof t1), rname(names, s, t2, sizeof t2));
                    break;
                }
                if (!color[s]) {
                    color[s] = 1;
                    fr[3 * sp] = s, fr[3 * sp + 1] = 0, fr[3 * sp + 2] = 0, sp++;
                    pushed = 1;
                }
            }
            if (!pushed && !e->code) {
                color[r] = 2;
                sp--;
            }
        }
    }
    free(color);
    free(fr);
    return e->code;
}

int k3g_finish(k3g_builder *b, uint32_t root, const char *const *names, k3_grammar **out)
{
    k3_err *e = b->e;
    *out = NULL;
    if (e->code)
        return e->code;
    k3_grammar *g = calloc(1, sizeof *g);
    if (!g)
        return k3_fail(e, K3_ERUNTIME, "grammar: out of memory");
    g->nrules = (uint32_t)b->nrules;
    g->root = root;
    size_t nel = 0, nalt = 0;
    /* a front end that gave up half way (a refused pattern, not strict)
     * may leave an alternative open in a rule nothing refers to: drop it */
    for (size_t r = 0; r < b->nrules; r++) {
        k3g_rdef *ru = &b->rules[r];
        while (ru->n && ru->v[ru->n - 1].type != K3G_END)
            ru->n--;
    }
    for (size_t r = 0; r < b->nrules; r++) {
        nel += b->rules[r].n;
        for (size_t i = 0; i < b->rules[r].n; i++)
            nalt += b->rules[r].v[i].type == K3G_END;
    }
    g->nel = (uint32_t)nel;
    g->el = malloc((nel + 1) * sizeof *g->el);
    g->alt_off = calloc(b->nrules + 1, sizeof *g->alt_off);
    g->alts = malloc((nalt + 1) * sizeof *g->alts);
    g->minrest = malloc((nel + 1) * sizeof *g->minrest);
    uint32_t *altrule = malloc((nalt + 1) * sizeof *altrule);
    uint32_t *base = calloc(nalt + 1, sizeof *base), *cnt = calloc(nalt + 1, sizeof *cnt);
    uint32_t *len = malloc((b->nrules + 1) * sizeof *len);
    uint32_t *occ_off = calloc(b->nrules + 2, sizeof *occ_off),
             *occ = malloc((nel + 1) * sizeof *occ);
    hnode *heap = malloc((nalt + 1) * sizeof *heap);
    if (!g->el || !g->alt_off || !g->alts || !g->minrest || !altrule || !base || !cnt || !len ||
        !occ_off || !occ || !heap) {
        k3_fail(e, K3_ERUNTIME, "grammar: out of memory");
        goto done;
    }
    /* flatten */
    size_t p = 0, a = 0;
    for (size_t r = 0; r < b->nrules; r++) {
        g->alt_off[r] = (uint32_t)a;
        const k3g_rdef *ru = &b->rules[r];
        int start = 1;
        for (size_t i = 0; i < ru->n; i++) {
            if (start) {
                g->alts[a] = (uint32_t)p;
                altrule[a] = (uint32_t)r;
                a++;
                start = 0;
            }
            g->el[p] = ru->v[i];
            if (ru->v[i].type == K3G_END)
                start = 1;
            else if (ru->v[i].type == K3G_RULE) {
                if (ru->v[i].arg >= b->nrules) {
                    k3_fail(e, K3_EINPUT, "grammar: reference to a rule that does not exist");
                    goto done;
                }
                cnt[a - 1]++;
                occ_off[ru->v[i].arg + 1]++;
            } else
                base[a - 1] = sat32((uint64_t)base[a - 1] + 1);
            p++;
        }
    }
    g->alt_off[b->nrules] = (uint32_t)a;
    for (size_t r = 0; r < b->nrules; r++)
        occ_off[r + 1] += occ_off[r];
    {
        uint32_t *fill = calloc(b->nrules + 1, sizeof *fill);
        if (!fill) {
            k3_fail(e, K3_ERUNTIME, "grammar: out of memory");
            goto done;
        }
        for (size_t ai = 0; ai < nalt; ai++)
            for (uint32_t q = g->alts[ai]; g->el[q].type != K3G_END; q++)
                if (g->el[q].type == K3G_RULE) {
                    uint32_t s = g->el[q].arg;
                    occ[occ_off[s] + fill[s]++] = (uint32_t)ai;
                }
        free(fill);
    }
    /* fewest bytes per rule */
    size_t nh = 0;
    for (size_t r = 0; r < b->nrules; r++)
        len[r] = K3G_INF;
    for (size_t ai = 0; ai < nalt; ai++)
        if (!cnt[ai])
            heap_push(heap, &nh, (hnode){ base[ai], altrule[ai] });
    {
        uint8_t *done = calloc(b->nrules + 1, 1);
        if (!done) {
            k3_fail(e, K3_ERUNTIME, "grammar: out of memory");
            goto done;
        }
        while (nh) {
            hnode x = heap_pop(heap, &nh);
            if (done[x.r])
                continue;
            done[x.r] = 1;
            len[x.r] = x.v;
            for (uint32_t k = occ_off[x.r]; k < occ_off[x.r + 1]; k++) {
                uint32_t ai = occ[k];
                base[ai] = sat32((uint64_t)base[ai] + x.v);
                if (--cnt[ai] == 0 && base[ai] != K3G_INF)
                    heap_push(heap, &nh, (hnode){ base[ai], altrule[ai] });
            }
        }
        free(done);
    }
    if (root >= b->nrules || len[root] == K3G_INF) {
        k3_fail(e, K3_EINPUT,
                "grammar: the root rule matches nothing (every alternative "
                "needs a rule that never finishes)");
        goto done;
    }
    /* drop dead alternatives (a rule they need never finishes) */
    {
        size_t w = 0;
        for (size_t r = 0; r < b->nrules; r++) {
            uint32_t from = g->alt_off[r], to = g->alt_off[r + 1];
            g->alt_off[r] = (uint32_t)w;
            for (uint32_t ai = from; ai < to; ai++)
                if (!cnt[ai] && base[ai] != K3G_INF)
                    g->alts[w++] = g->alts[ai];
        }
        g->alt_off[b->nrules] = (uint32_t)w;
    }
    if (left_recursion(g, len, names, e))
        goto done;
    /* minrest: suffix sums inside each alternative */
    for (size_t q = nel; q-- > 0;) {
        k3g_el el = g->el[q];
        if (el.type == K3G_END) {
            g->minrest[q] = 0;
            continue;
        }
        uint32_t l = el.type == K3G_RULE ? len[el.arg] : 1;
        g->minrest[q] = sat32((uint64_t)l + g->minrest[q + 1]);
    }
    /* move the tables */
    g->nsets = (uint32_t)b->nsets;
    g->sets = b->sets;
    b->sets = NULL;
    b->nsets = b->capsets = 0;
    g->ntok = (uint32_t)b->ntok;
    g->tok = b->tok;
    b->tok = NULL;
    b->ntok = b->captok = 0;
done:
    free(altrule), free(base), free(cnt), free(len), free(occ_off), free(occ), free(heap);
    if (e->code) {
        k3_gram_free(g);
        return e->code;
    }
    *out = g;
    return K3_OK;
}
