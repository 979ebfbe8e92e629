/* ir.c - building rules (the builder of ir.h) and the repetition and
 * literal helpers every front end uses. */
#include "grammar/ir.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int k3g_grow(void **p, size_t *cap, size_t need, size_t sz, k3_err *e)
{
    if (need <= *cap)
        return K3_OK;
    size_t c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q)
        return k3_fail(e, K3_ERUNTIME, "grammar: out of memory");
    *p = q;
    *cap = c;
    return K3_OK;
}

void k3g_init(k3g_builder *b, k3_err *e)
{
    memset(b, 0, sizeof *b);
    b->e = e;
}

void k3g_dispose(k3g_builder *b)
{
    for (size_t i = 0; i < b->nrules; i++)
        free(b->rules[i].v);
    free(b->rules);
    free(b->sets);
    for (size_t i = 0; i < b->ntok; i++)
        free(b->tok[i].text);
    free(b->tok);
    k3g_classes_free(b);
    memset(b, 0, sizeof *b);
}

int64_t k3g_rule(k3g_builder *b)
{
    if (b->e->code)
        return -1;
    if (b->nrules >= K3_GRAM_MAX_RULES) {
        k3_fail(b->e, K3_EINPUT, "grammar: more than %d rules (K3_GRAM_MAX_RULES)",
                K3_GRAM_MAX_RULES);
        return -1;
    }
    if (k3g_grow((void **)&b->rules, &b->caprules, b->nrules + 1, sizeof *b->rules, b->e))
        return -1;
    memset(&b->rules[b->nrules], 0, sizeof *b->rules);
    return (int64_t)b->nrules++;
}

static int put(k3g_builder *b, uint32_t r, unsigned type, uint32_t arg)
{
    if (b->e->code)
        return b->e->code;
    if (b->nel >= K3_GRAM_MAX_ELEMS)
        return k3_fail(b->e, K3_EINPUT, "grammar: more than %u elements (K3_GRAM_MAX_ELEMS)",
                       K3_GRAM_MAX_ELEMS);
    k3g_rdef *ru = &b->rules[r];
    if (k3g_grow((void **)&ru->v, &ru->cap, ru->n + 1, sizeof *ru->v, b->e))
        return b->e->code;
    ru->v[ru->n].type = type & 3;
    ru->v[ru->n].arg = arg;
    ru->n++;
    b->nel++;
    return K3_OK;
}

int k3g_add(k3g_builder *b, uint32_t r, unsigned type, uint32_t arg)
{
    return put(b, r, type, arg);
}

int k3g_alt(k3g_builder *b, uint32_t r)
{
    if (put(b, r, K3G_END, 0))
        return b->e->code;
    b->rules[r].defined = 1;
    return K3_OK;
}

int64_t k3g_set(k3g_builder *b, const uint8_t set[32])
{
    if (b->e->code)
        return -1;
    /* Sets are few (classes, JSON's pieces): a linear search is enough,
     * bounded by checking the most recent ones only. */
    size_t from = b->nsets > 256 ? b->nsets - 256 : 0;
    for (size_t i = from; i < b->nsets; i++)
        if (!memcmp(b->sets[i], set, 32))
            return (int64_t)i;
    if (b->nsets >= (1u << 29))
        return k3_fail(b->e, K3_EINPUT, "grammar: too many byte sets"), -1;
    if (k3g_grow((void **)&b->sets, &b->capsets, b->nsets + 1, sizeof *b->sets, b->e))
        return -1;
    memcpy(b->sets[b->nsets], set, 32);
    return (int64_t)b->nsets++;
}

int k3g_byte(k3g_builder *b, uint32_t r, unsigned c)
{
    uint8_t s[32] = { 0 };
    s[(c & 255) >> 3] = (uint8_t)(1u << (c & 7));
    int64_t i = k3g_set(b, s);
    return i < 0 ? b->e->code : put(b, r, K3G_SET, (uint32_t)i);
}

int k3g_bytes(k3g_builder *b, uint32_t r, const void *s, size_t n)
{
    const unsigned char *p = s;
    for (size_t i = 0; i < n; i++)
        if (k3g_byte(b, r, p[i]))
            return b->e->code;
    return b->e->code;
}

int64_t k3g_token_add(k3g_builder *b, int64_t id, const char *text, size_t len, int neg)
{
    if (b->e->code)
        return -1;
    for (size_t i = 0; i < b->ntok; i++) {
        const k3g_token *t = &b->tok[i];
        if (t->id == id && t->neg == neg && t->len == len && (!len || !memcmp(t->text, text, len)))
            return (int64_t)i;
    }
    if (k3g_grow((void **)&b->tok, &b->captok, b->ntok + 1, sizeof *b->tok, b->e))
        return -1;
    k3g_token *t = &b->tok[b->ntok];
    t->id = id;
    t->neg = neg;
    t->len = len;
    t->text = malloc(len + 1);
    if (!t->text)
        return k3_fail(b->e, K3_ERUNTIME, "grammar: out of memory"), -1;
    if (len)
        memcpy(t->text, text, len);
    t->text[len] = 0;
    return (int64_t)b->ntok++;
}

int64_t k3g_literal(k3g_builder *b, const void *s, size_t n)
{
    int64_t r = k3g_rule(b);
    if (r < 0 || k3g_bytes(b, (uint32_t)r, s, n) || k3g_alt(b, (uint32_t)r))
        return -1;
    return r;
}

/* item{min,max}: min copies, then (max - min) nested optional copies
 * (item (item (...)?)?)? written right-recursively, or item* as
 * star ::= item star | "" (a tail call the matcher runs in constant stack). */
int64_t k3g_repeat(k3g_builder *b, k3g_el item, uint32_t min, uint32_t max)
{
    if (b->e->code)
        return -1;
    if (min > K3_GRAM_MAX_REPEAT || (max != K3G_INF && max > K3_GRAM_MAX_REPEAT))
        return k3_fail(b->e, K3_EINPUT, "grammar: repetition count above %d (K3_GRAM_MAX_REPEAT)",
                       K3_GRAM_MAX_REPEAT),
               -1;
    if (max != K3G_INF && max < min)
        return k3_fail(b->e, K3_EINPUT, "grammar: repetition {%u,%u} has max < min", min, max), -1;
    int64_t tail = -1; /* the rule for the optional part, -1 if none */
    if (max == K3G_INF) {
        tail = k3g_rule(b);
        if (tail < 0 || put(b, (uint32_t)tail, item.type, item.arg) ||
            put(b, (uint32_t)tail, K3G_RULE, (uint32_t)tail) || k3g_alt(b, (uint32_t)tail) ||
            k3g_alt(b, (uint32_t)tail))
            return -1;
    } else {
        for (uint32_t i = min; i < max; i++) {
            int64_t r = k3g_rule(b);
            if (r < 0 || put(b, (uint32_t)r, item.type, item.arg) ||
                (tail >= 0 && put(b, (uint32_t)r, K3G_RULE, (uint32_t)tail)) ||
                k3g_alt(b, (uint32_t)r) || k3g_alt(b, (uint32_t)r))
                return -1;
            tail = r;
        }
    }
    int64_t r = k3g_rule(b);
    if (r < 0)
        return -1;
    for (uint32_t i = 0; i < min; i++)
        if (put(b, (uint32_t)r, item.type, item.arg))
            return -1;
    if (tail >= 0 && put(b, (uint32_t)r, K3G_RULE, (uint32_t)tail))
        return -1;
    return k3g_alt(b, (uint32_t)r) ? -1 : r;
}
