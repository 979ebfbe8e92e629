/* json_rules.c - JSON's pieces as rules (json_rules.h), the literal-set
 * trie, and k3_gram_json_object. */
#include "grammar/json_rules.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

void k3g_json_init(k3g_json *j, k3g_builder *b, int ws)
{
    j->b = b;
    j->ws = ws;
    j->chr = j->str = j->num = j->intg = j->val = j->obj = j->arr = j->anychr = j->anytext = -1;
}

const char *k3g_comma(const k3g_json *j)
{
    return j->ws == K3_GRAM_WS_COMPACT ? "," : ", ";
}

const char *k3g_colon(const k3g_json *j)
{
    return j->ws == K3_GRAM_WS_COMPACT ? ":" : ": ";
}

static int lit(k3g_builder *b, uint32_t r, const char *s)
{
    return k3g_bytes(b, r, s, strlen(s));
}

static int add(k3g_builder *b, uint32_t r, int64_t sub)
{
    if (sub < 0)
        return b->e->code ? b->e->code : K3_ERUNTIME;
    return k3g_add(b, r, K3G_RULE, (uint32_t)sub);
}

static int64_t class1(k3g_builder *b, uint32_t lo, uint32_t hi)
{
    uint32_t r[2] = { lo, hi };
    return k3g_class(b, r, 1);
}

int64_t k3g_json_char(k3g_json *j)
{
    if (j->chr >= 0)
        return j->chr;
    k3g_builder *b = j->b;
    uint32_t raw[] = { 0x20, 0x21, 0x23, 0x5B, 0x5D, 0x10FFFF };
    static const uint32_t hex[] = { '0', '9', 'a', 'f', 'A', 'F' };
    static const uint32_t hex_nd[] = { '0', '9', 'a', 'c', 'A', 'C', 'e', 'f', 'E', 'F' };
    int64_t r = k3g_rule(b), h = k3g_class(b, hex, 3), hn = k3g_class(b, hex_nd, 5);
    int64_t esc = k3g_rule(b);
    if (r < 0 || h < 0 || hn < 0 || esc < 0)
        return -1;
    /* \uXXXX outside D800..DFFF: [0-9a-ce-f] hex hex hex | [dD] [0-7] hex hex */
    static const char named[] = "\"\\/bfnrt";
    for (const char *c = named; *c; c++)
        if (k3g_byte(b, (uint32_t)esc, (unsigned char)*c) || k3g_alt(b, (uint32_t)esc))
            return -1;
    uint32_t d[] = { 'd', 'd', 'D', 'D' };
    if (k3g_byte(b, (uint32_t)esc, 'u') || add(b, (uint32_t)esc, hn) || add(b, (uint32_t)esc, h) ||
        add(b, (uint32_t)esc, h) || add(b, (uint32_t)esc, h) || k3g_alt(b, (uint32_t)esc) ||
        k3g_byte(b, (uint32_t)esc, 'u') || add(b, (uint32_t)esc, k3g_class(b, d, 2)) ||
        add(b, (uint32_t)esc, class1(b, '0', '7')) || add(b, (uint32_t)esc, h) ||
        add(b, (uint32_t)esc, h) || k3g_alt(b, (uint32_t)esc))
        return -1;
    if (add(b, (uint32_t)r, k3g_class(b, raw, 3)) || k3g_alt(b, (uint32_t)r) ||
        k3g_byte(b, (uint32_t)r, '\\') || add(b, (uint32_t)r, esc) || k3g_alt(b, (uint32_t)r))
        return -1;
    return j->chr = r;
}

int64_t k3g_json_string(k3g_json *j)
{
    if (j->str >= 0)
        return j->str;
    k3g_builder *b = j->b;
    int64_t c = k3g_json_char(j);
    int64_t rep = c < 0 ? -1 : k3g_repeat(b, k3g_r(c), 0, K3G_INF);
    int64_t r = k3g_rule(b);
    if (rep < 0 || r < 0 || k3g_byte(b, (uint32_t)r, '"') || add(b, (uint32_t)r, rep) ||
        k3g_byte(b, (uint32_t)r, '"') || k3g_alt(b, (uint32_t)r))
        return -1;
    return j->str = r;
}

int64_t k3g_json_integer(k3g_json *j)
{
    if (j->intg >= 0)
        return j->intg;
    k3g_builder *b = j->b;
    int64_t digits = k3g_repeat(b, k3g_r(class1(b, '0', '9')), 0, K3G_INF);
    int64_t mag = k3g_rule(b), r = k3g_rule(b);
    if (digits < 0 || mag < 0 || r < 0)
        return -1;
    if (k3g_byte(b, (uint32_t)mag, '0') || k3g_alt(b, (uint32_t)mag) ||
        add(b, (uint32_t)mag, class1(b, '1', '9')) || add(b, (uint32_t)mag, digits) ||
        k3g_alt(b, (uint32_t)mag))
        return -1;
    if (add(b, (uint32_t)r, mag) || k3g_alt(b, (uint32_t)r) || k3g_byte(b, (uint32_t)r, '-') ||
        add(b, (uint32_t)r, mag) || k3g_alt(b, (uint32_t)r))
        return -1;
    return j->intg = r;
}

int64_t k3g_json_number(k3g_json *j)
{
    if (j->num >= 0)
        return j->num;
    k3g_builder *b = j->b;
    int64_t in = k3g_json_integer(j);
    int64_t d1 = k3g_repeat(b, k3g_r(class1(b, '0', '9')), 1, K3G_INF);
    int64_t frac = k3g_rule(b), ex = k3g_rule(b), sign = k3g_rule(b), r = k3g_rule(b);
    uint32_t eE[] = { 'e', 'e', 'E', 'E' }, pm[] = { '+', '+', '-', '-' };
    if (in < 0 || d1 < 0 || frac < 0 || ex < 0 || sign < 0 || r < 0)
        return -1;
    if (k3g_byte(b, (uint32_t)frac, '.') || add(b, (uint32_t)frac, d1) ||
        k3g_alt(b, (uint32_t)frac) || k3g_alt(b, (uint32_t)frac) ||
        add(b, (uint32_t)sign, k3g_class(b, pm, 2)) || k3g_alt(b, (uint32_t)sign) ||
        k3g_alt(b, (uint32_t)sign) || add(b, (uint32_t)ex, k3g_class(b, eE, 2)) ||
        add(b, (uint32_t)ex, sign) || add(b, (uint32_t)ex, d1) || k3g_alt(b, (uint32_t)ex) ||
        k3g_alt(b, (uint32_t)ex))
        return -1;
    if (add(b, (uint32_t)r, in) || add(b, (uint32_t)r, frac) || add(b, (uint32_t)r, ex) ||
        k3g_alt(b, (uint32_t)r))
        return -1;
    return j->num = r;
}

int64_t k3g_json_value(k3g_json *j)
{
    if (j->val >= 0)
        return j->val;
    k3g_builder *b = j->b;
    int64_t r = k3g_rule(b);
    if (r < 0)
        return -1;
    j->val = r; /* recursive: object and array refer back to it */
    int64_t o = k3g_json_object(j), a = k3g_json_array(j), s = k3g_json_string(j),
            n = k3g_json_number(j);
    if (add(b, (uint32_t)r, o) || k3g_alt(b, (uint32_t)r) || add(b, (uint32_t)r, a) ||
        k3g_alt(b, (uint32_t)r) || add(b, (uint32_t)r, s) || k3g_alt(b, (uint32_t)r) ||
        add(b, (uint32_t)r, n) || k3g_alt(b, (uint32_t)r) || lit(b, (uint32_t)r, "true") ||
        k3g_alt(b, (uint32_t)r) || lit(b, (uint32_t)r, "false") || k3g_alt(b, (uint32_t)r) ||
        lit(b, (uint32_t)r, "null") || k3g_alt(b, (uint32_t)r))
        return -1;
    return r;
}

int64_t k3g_json_object(k3g_json *j)
{
    if (j->obj >= 0)
        return j->obj;
    k3g_builder *b = j->b;
    int64_t r = k3g_rule(b), mem = k3g_rule(b), more = k3g_rule(b);
    if (r < 0 || mem < 0 || more < 0)
        return -1;
    j->obj = r;
    int64_t s = k3g_json_string(j), v = k3g_json_value(j);
    if (add(b, (uint32_t)mem, s) || lit(b, (uint32_t)mem, k3g_colon(j)) ||
        add(b, (uint32_t)mem, v) || k3g_alt(b, (uint32_t)mem))
        return -1;
    if (lit(b, (uint32_t)more, k3g_comma(j)) || add(b, (uint32_t)more, mem) ||
        k3g_alt(b, (uint32_t)more))
        return -1;
    int64_t rep = k3g_repeat(b, k3g_r(more), 0, K3G_INF);
    if (rep < 0 || lit(b, (uint32_t)r, "{}") || k3g_alt(b, (uint32_t)r) ||
        k3g_byte(b, (uint32_t)r, '{') || add(b, (uint32_t)r, mem) || add(b, (uint32_t)r, rep) ||
        k3g_byte(b, (uint32_t)r, '}') || k3g_alt(b, (uint32_t)r))
        return -1;
    return r;
}

int64_t k3g_json_array(k3g_json *j)
{
    if (j->arr >= 0)
        return j->arr;
    k3g_builder *b = j->b;
    int64_t r = k3g_rule(b), more = k3g_rule(b);
    if (r < 0 || more < 0)
        return -1;
    j->arr = r;
    int64_t v = k3g_json_value(j);
    if (lit(b, (uint32_t)more, k3g_comma(j)) || add(b, (uint32_t)more, v) ||
        k3g_alt(b, (uint32_t)more))
        return -1;
    int64_t rep = k3g_repeat(b, k3g_r(more), 0, K3G_INF);
    if (rep < 0 || lit(b, (uint32_t)r, "[]") || k3g_alt(b, (uint32_t)r) ||
        k3g_byte(b, (uint32_t)r, '[') || add(b, (uint32_t)r, v) || add(b, (uint32_t)r, rep) ||
        k3g_byte(b, (uint32_t)r, ']') || k3g_alt(b, (uint32_t)r))
        return -1;
    return r;
}

int64_t k3g_any_char(k3g_json *j)
{
    if (j->anychr < 0)
        j->anychr = class1(j->b, 0, 0x10FFFF);
    return j->anychr;
}

int64_t k3g_any_text(k3g_json *j)
{
    if (j->anytext >= 0)
        return j->anytext;
    uint8_t all[32];
    memset(all, 0xFF, sizeof all);
    int64_t s = k3g_set(j->b, all);
    if (s < 0)
        return -1;
    k3g_el el;
    el.type = K3G_SET;
    el.arg = (uint32_t)s;
    return j->anytext = k3g_repeat(j->b, el, 0, K3G_INF);
}

int64_t k3g_seq2(k3g_builder *b, k3g_el a, k3g_el c)
{
    int64_t r = k3g_rule(b);
    if (r < 0)
        return -1;
    if (a.type != K3G_END && k3g_add(b, (uint32_t)r, a.type, a.arg))
        return -1;
    if (c.type != K3G_END && k3g_add(b, (uint32_t)r, c.type, c.arg))
        return -1;
    return k3g_alt(b, (uint32_t)r) ? -1 : r;
}

typedef struct lit_ent {
    const unsigned char *s;
    size_t len;
} lit_ent;

static int cmp_lit(const void *a, const void *b)
{
    const lit_ent *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The rule for the sorted entries v[0..n), all sharing their first d
 * bytes (already matched): groups by the next byte. */
static int64_t trie(k3g_builder *b, const lit_ent *v, size_t n, size_t d, int depth)
{
    if (depth > 2 * K3_GRAM_MAX_NEST * 64)
        return k3_fail(b->e, K3_EINPUT, "grammar: literal too long"), -1;
    int64_t r = k3g_rule(b);
    if (r < 0)
        return -1;
    size_t i = 0;
    if (n && v[0].len == d) { /* one ends here: the empty alternative */
        if (k3g_alt(b, (uint32_t)r))
            return -1;
        while (i < n && v[i].len == d)
            i++; /* duplicates */
    }
    while (i < n) {
        size_t k = i + 1;
        while (k < n && v[k].s[d] == v[i].s[d])
            k++;
        /* the common run of the group v[i..k) beyond d */
        size_t run = d + 1;
        for (;;) {
            int same = run < v[i].len;
            for (size_t t = i; same && t < k; t++)
                same = run < v[t].len && v[t].s[run] == v[i].s[run];
            if (!same)
                break;
            run++;
        }
        if (k3g_bytes(b, (uint32_t)r, v[i].s + d, run - d))
            return -1;
        int done = k - i == 1 && v[i].len == run;
        if (!done) {
            int64_t sub = trie(b, v + i, k - i, run, depth + 1);
            if (sub < 0 || k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)sub))
                return -1;
        }
        if (k3g_alt(b, (uint32_t)r))
            return -1;
        i = k;
    }
    b->rules[r].defined = 1;
    return r;
}

int64_t k3g_literal_set(k3g_builder *b, const char *const *s, const size_t *len, size_t n)
{
    if (b->e->code)
        return -1;
    lit_ent *v = malloc((n + 1) * sizeof *v);
    if (!v)
        return k3_fail(b->e, K3_ERUNTIME, "grammar: out of memory"), -1;
    for (size_t i = 0; i < n; i++)
        v[i].s = (const unsigned char *)s[i], v[i].len = len[i];
    qsort(v, n, sizeof *v, cmp_lit);
    int64_t r = trie(b, v, n, 0, 0);
    free(v);
    return r;
}

int k3_gram_json_object(k3_grammar **out, int ws, k3_err *e)
{
    *out = NULL;
    k3g_builder b;
    k3g_init(&b, e);
    k3g_json j;
    k3g_json_init(&j, &b, ws);
    int64_t r = k3g_json_object(&j);
    if (r >= 0)
        k3g_finish(&b, (uint32_t)r, NULL, out);
    k3g_dispose(&b);
    return e->code;
}
