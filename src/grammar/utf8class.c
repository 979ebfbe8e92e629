/* utf8class.c - a set of code points as a rule over UTF-8 bytes.
 *
 * A range [lo, hi] of code points is split until each piece is a product
 * of byte ranges (every piece's code points have the same encoded length
 * and the pieces differ only in their trailing continuation bytes); each
 * piece is one alternative, a run of byte sets. One-byte pieces are merged
 * into a single byte-set alternative. Surrogates (U+D800..U+DFFF) never
 * match: they are not characters of valid UTF-8. The rule for a set is
 * built once per builder (cached by the normalised ranges). */
#include <stdlib.h>
#include <string.h>

#include "grammar/ir.h"
#include "util/error.h"

typedef struct cls {
    uint32_t *r; /* normalised ranges, pairs */
    size_t n;
    uint32_t rule;
} cls;

static int cmp_u32pair(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static unsigned enc(uint32_t c, uint8_t *o)
{
    if (c < 0x80) {
        o[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (uint8_t)(0xC0 | (c >> 6));
        o[1] = (uint8_t)(0x80 | (c & 63));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (c >> 12));
        o[1] = (uint8_t)(0x80 | ((c >> 6) & 63));
        o[2] = (uint8_t)(0x80 | (c & 63));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (c >> 18));
    o[1] = (uint8_t)(0x80 | ((c >> 12) & 63));
    o[2] = (uint8_t)(0x80 | ((c >> 6) & 63));
    o[3] = (uint8_t)(0x80 | (c & 63));
    return 4;
}

/* Emits the pieces of [lo, hi] (same encoded length known by caller). */
static int piece(k3g_builder *b, uint32_t r, uint32_t lo, uint32_t hi, uint8_t *ascii)
{
    static const uint32_t lim[] = { 0x7F, 0x7FF, 0xFFFF, 0x10FFFF };
    for (int i = 0; i < 3; i++)
        if (lo <= lim[i] && hi > lim[i])
            return piece(b, r, lo, lim[i], ascii) || piece(b, r, lim[i] + 1, hi, ascii);
    if (hi < 0x80) {
        for (uint32_t c = lo; c <= hi; c++)
            ascii[c >> 3] |= (uint8_t)(1u << (c & 7));
        return K3_OK;
    }
    uint8_t a[4], z[4];
    unsigned n = enc(lo, a);
    enc(hi, z);
    for (unsigned i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m)
                return piece(b, r, lo, lo | m, ascii) || piece(b, r, (lo | m) + 1, hi, ascii);
            if ((hi & m) != m)
                return piece(b, r, lo, (hi & ~m) - 1, ascii) || piece(b, r, hi & ~m, hi, ascii);
        }
    }
    for (unsigned i = 0; i < n; i++) {
        uint8_t s[32] = { 0 };
        for (unsigned c = a[i]; c <= z[i]; c++)
            s[c >> 3] |= (uint8_t)(1u << (c & 7));
        int64_t si = k3g_set(b, s);
        if (si < 0 || k3g_add(b, r, K3G_SET, (uint32_t)si))
            return b->e->code ? b->e->code : K3_ERUNTIME;
    }
    return k3g_alt(b, r);
}

static int grow_classes(k3g_builder *b)
{
    return k3g_grow(&b->classes, &b->capclasses, b->nclasses + 1, sizeof(cls), b->e);
}

size_t k3g_complement(uint32_t **r, size_t n, k3_err *e)
{
    uint32_t *v = *r;
    uint32_t *c = malloc((n + 1) * 2 * sizeof *c);
    if (!c)
        return k3_fail(e, K3_ERUNTIME, "grammar: out of memory"), SIZE_MAX;
    if (n > 1)
        qsort(v, n, 2 * sizeof *v, cmp_u32pair);
    size_t m = 0;
    uint32_t next = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[2 * i] > next)
            c[2 * m] = next, c[2 * m + 1] = v[2 * i] - 1, m++;
        if (v[2 * i + 1] + 1 > next)
            next = v[2 * i + 1] + 1;
    }
    if (next <= 0x10FFFF)
        c[2 * m] = next, c[2 * m + 1] = 0x10FFFF, m++;
    free(v);
    *r = c;
    return m;
}

void k3g_classes_free(k3g_builder *b)
{
    cls *cs = b->classes;
    for (size_t i = 0; i < b->nclasses; i++)
        free(cs[i].r);
    free(cs);
    b->classes = NULL;
    b->nclasses = b->capclasses = 0;
}

int64_t k3g_class(k3g_builder *b, const uint32_t *ranges, size_t n)
{
    if (b->e->code)
        return -1;
    /* normalise: clamp, sort, merge, cut out the surrogates */
    uint32_t *v = malloc((n * 2 + 2) * 2 * sizeof *v);
    if (!v)
        return k3_fail(b->e, K3_ERUNTIME, "grammar: out of memory"), -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t lo = ranges[2 * i], hi = ranges[2 * i + 1];
        if (lo > hi) {
            uint32_t t = lo;
            lo = hi;
            hi = t;
        }
        if (lo > 0x10FFFF)
            continue;
        if (hi > 0x10FFFF)
            hi = 0x10FFFF;
        if (lo < 0xD800 && hi > 0xDFFF) {
            v[2 * m] = lo, v[2 * m + 1] = 0xD7FF, m++;
            v[2 * m] = 0xE000, v[2 * m + 1] = hi, m++;
            continue;
        }
        if (lo >= 0xD800 && hi <= 0xDFFF)
            continue;
        if (lo >= 0xD800 && lo <= 0xDFFF)
            lo = 0xE000;
        if (hi >= 0xD800 && hi <= 0xDFFF)
            hi = 0xD7FF;
        v[2 * m] = lo, v[2 * m + 1] = hi, m++;
    }
    qsort(v, m, 2 * sizeof *v, cmp_u32pair);
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (k && v[2 * i] <= v[2 * (k - 1) + 1] + 1) {
            if (v[2 * i + 1] > v[2 * (k - 1) + 1])
                v[2 * (k - 1) + 1] = v[2 * i + 1];
        } else {
            v[2 * k] = v[2 * i], v[2 * k + 1] = v[2 * i + 1], k++;
        }
    }
    cls *cs = b->classes;
    for (size_t i = 0; i < b->nclasses; i++)
        if (cs[i].n == k && !memcmp(cs[i].r, v, k * 2 * sizeof *v)) {
            free(v);
            return cs[i].rule;
        }
    int64_t r = k3g_rule(b);
    uint8_t ascii[32] = { 0 };
    for (size_t i = 0; r >= 0 && i < k; i++)
        if (piece(b, (uint32_t)r, v[2 * i], v[2 * i + 1], ascii))
            r = -1;
    int any = 0;
    for (int i = 0; i < 32; i++)
        any |= ascii[i];
    if (r >= 0 && any) {
        int64_t si = k3g_set(b, ascii);
        if (si < 0 || k3g_add(b, (uint32_t)r, K3G_SET, (uint32_t)si) || k3g_alt(b, (uint32_t)r))
            r = -1;
    }
    if (r >= 0 && !b->rules[r].defined)
        b->rules[r].defined = 1;        /* an empty set: a rule with no alternative */
    if (r < 0 || b->nclasses >= 4096) { /* the cache is bounded; past it, no sharing */
        free(v);
        return r;
    }
    if (grow_classes(b)) {
        free(v);
        return -1;
    }
    cs = b->classes;
    cs[b->nclasses].r = v;
    cs[b->nclasses].n = k;
    cs[b->nclasses].rule = (uint32_t)r;
    b->nclasses++;
    return r;
}
