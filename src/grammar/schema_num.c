/* schema_num.c - integers and numbers with minimum / maximum /
 * exclusiveMinimum / exclusiveMaximum.
 *
 * Integers: exact. The range [lo, hi] becomes digit-string rules without
 * leading zeros: split by digit count, then by the first digit where the
 * bounds differ (the classic range-to-pattern construction).
 * Numbers with bounds: the integers of the range, plus, for non-negative
 * integer parts I with I + 1 <= hi, I followed by a fraction. Every such
 * text is in the range; numbers with exponents, negative fractions and
 * the fractions between floor(hi) and hi are not generated (a valid
 * subset, docs/GRAMMAR.md). multipleOf is refused by the keyword policy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grammar/schema.h"
#include "util/error.h"

#define BIG 9000000000000000000.0

static int64_t digit_class(k3g_builder *b, char lo, char hi)
{
    uint32_t r[2] = { (uint32_t)lo, (uint32_t)hi };
    return k3g_class(b, r, 1);
}

/* Digit strings of length n between lo and hi (both n digits). */
static int64_t same_len(k3g_builder *b, const char *lo, const char *hi, size_t n)
{
    int64_t r = k3g_rule(b);
    if (r < 0)
        return -1;
    if (n == 0)
        return k3g_alt(b, (uint32_t)r) ? -1 : r;
    if (lo[0] == hi[0]) {
        int64_t sub = same_len(b, lo + 1, hi + 1, n - 1);
        if (sub < 0 || k3g_byte(b, (uint32_t)r, (unsigned char)lo[0]) ||
            k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)sub) || k3g_alt(b, (uint32_t)r))
            return -1;
        return r;
    }
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    char start = lo[0], end = hi[0];
    if (memcmp(lo + 1, zeros, n - 1)) {
        int64_t sub = same_len(b, lo + 1, nines, n - 1);
        if (sub < 0 || k3g_byte(b, (uint32_t)r, (unsigned char)lo[0]) ||
            k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)sub) || k3g_alt(b, (uint32_t)r))
            return -1;
        start++;
    }
    if (memcmp(hi + 1, nines, n - 1)) {
        int64_t sub = same_len(b, zeros, hi + 1, n - 1);
        if (sub < 0 || k3g_byte(b, (uint32_t)r, (unsigned char)hi[0]) ||
            k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)sub) || k3g_alt(b, (uint32_t)r))
            return -1;
        end--;
    }
    if (start <= end) {
        int64_t d = digit_class(b, start, end);
        int64_t rest = d < 0 ? -1
                             : k3g_repeat(b, k3g_r(digit_class(b, '0', '9')), (uint32_t)n - 1,
                                          (uint32_t)n - 1);
        if (rest < 0 || k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)d) ||
            k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)rest) || k3g_alt(b, (uint32_t)r))
            return -1;
    }
    b->rules[r].defined = 1;
    return r;
}

/* Non-negative integers in [a, b] (b < 0: unbounded), no leading zeros. */
static int64_t nonneg(k3g_builder *bu, int64_t a, int64_t b)
{
    char sa[24], sb[24];
    int la = snprintf(sa, sizeof sa, "%lld", (long long)a);
    int lb = b < 0 ? 0 : snprintf(sb, sizeof sb, "%lld", (long long)b);
    int64_t r = k3g_rule(bu);
    if (r < 0)
        return -1;
    int top = b < 0 ? la : lb;
    for (int L = la; L <= top; L++) {
        char lo[24], hi[24];
        if (L == la)
            memcpy(lo, sa, (size_t)L);
        else {
            lo[0] = '1';
            memset(lo + 1, '0', (size_t)L - 1);
        }
        if (b >= 0 && L == lb)
            memcpy(hi, sb, (size_t)L);
        else
            memset(hi, '9', (size_t)L);
        if (memcmp(lo, hi, (size_t)L) > 0)
            continue;
        int64_t x = same_len(bu, lo, hi, (size_t)L);
        if (x < 0 || k3g_add(bu, (uint32_t)r, K3G_RULE, (uint32_t)x) || k3g_alt(bu, (uint32_t)r))
            return -1;
    }
    if (b < 0) { /* more digits than a: any */
        int64_t d = digit_class(bu, '1', '9');
        int64_t rest =
            d < 0 ? -1 : k3g_repeat(bu, k3g_r(digit_class(bu, '0', '9')), (uint32_t)la, K3G_INF);
        if (rest < 0 || k3g_add(bu, (uint32_t)r, K3G_RULE, (uint32_t)d) ||
            k3g_add(bu, (uint32_t)r, K3G_RULE, (uint32_t)rest) || k3g_alt(bu, (uint32_t)r))
            return -1;
    }
    bu->rules[r].defined = 1;
    return r;
}

/* The bounds of node as integers: [*lo, *hi], has_lo/has_hi. Returns
 * nonzero when the schema has any bound. */
static int bounds(const k3_json *node, int64_t *lo, int *has_lo, int64_t *hi, int *has_hi)
{
    *has_lo = *has_hi = 0;
    *lo = *hi = 0;
    if (!node)
        return 0;
    const k3_json *mn = k3_json_get(node, "minimum"), *mx = k3_json_get(node, "maximum");
    const k3_json *emn = k3_json_get(node, "exclusiveMinimum");
    const k3_json *emx = k3_json_get(node, "exclusiveMaximum");
    double l = -INFINITY, h = INFINITY;
    if (mn && mn->type == K3J_NUMBER) {
        double v = mn->number;
        int ex = emn && emn->type == K3J_BOOL && emn->boolean; /* draft 4 */
        l = ex ? floor(v) + 1 : ceil(v);
    }
    if (emn && emn->type == K3J_NUMBER && floor(emn->number) + 1 > l)
        l = floor(emn->number) + 1;
    if (mx && mx->type == K3J_NUMBER) {
        double v = mx->number;
        int ex = emx && emx->type == K3J_BOOL && emx->boolean;
        h = ex ? ceil(v) - 1 : floor(v);
    }
    if (emx && emx->type == K3J_NUMBER && ceil(emx->number) - 1 < h)
        h = ceil(emx->number) - 1;
    if (l > -BIG && l != -INFINITY)
        *lo = (int64_t)l, *has_lo = 1;
    if (h < BIG && h != INFINITY)
        *hi = (int64_t)h, *has_hi = 1;
    return *has_lo || *has_hi;
}

/* Integers in [lo, hi] (either side may be open). */
static int64_t int_range(k3g_schema *s, int64_t lo, int has_lo, int64_t hi, int has_hi)
{
    k3g_builder *b = s->b;
    if (has_lo && has_hi && lo > hi)
        return K3G_EMPTY;
    int64_t r = k3g_rule(b);
    if (r < 0)
        return -1;
    /* non-negative part */
    if (!has_hi || hi >= 0) {
        int64_t x = nonneg(b, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
        if (x < 0 || k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)x) || k3g_alt(b, (uint32_t)r))
            return -1;
    }
    /* negative part: "-" magnitudes in [max(1, -hi), -lo] */
    if (!has_lo || lo < 0) {
        int64_t a = has_hi && hi < 0 ? -hi : 1;
        int64_t x = nonneg(b, a, has_lo ? -lo : -1);
        if (x < 0 || k3g_byte(b, (uint32_t)r, '-') ||
            k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)x) || k3g_alt(b, (uint32_t)r))
            return -1;
    }
    return r;
}

int64_t k3g_schema_integer(k3g_schema *s, const k3_json *node)
{
    int64_t lo, hi;
    int hl, hh;
    if (!bounds(node, &lo, &hl, &hi, &hh))
        return k3g_json_integer(&s->j);
    return int_range(s, lo, hl, hi, hh);
}

int64_t k3g_schema_number(k3g_schema *s, const k3_json *node)
{
    int64_t lo, hi;
    int hl, hh;
    if (!bounds(node, &lo, &hl, &hi, &hh))
        return k3g_json_number(&s->j);
    int64_t ints = int_range(s, lo, hl, hi, hh);
    if (ints < 0)
        return ints;
    /* I "." digits for I in [max(lo, 0), hi - 1] */
    int64_t flo = hl && lo > 0 ? lo : 0;
    if (hh && hi - 1 < flo)
        return ints;
    k3g_builder *b = s->b;
    int64_t ip = nonneg(b, flo, hh ? hi - 1 : -1);
    int64_t d1 = k3g_repeat(b, k3g_r(digit_class(b, '0', '9')), 1, K3G_INF);
    int64_t r = k3g_rule(b);
    if (ip < 0 || d1 < 0 || r < 0 || k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)ints) ||
        k3g_alt(b, (uint32_t)r) || k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)ip) ||
        k3g_byte(b, (uint32_t)r, '.') || k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)d1) ||
        k3g_alt(b, (uint32_t)r))
        return -1;
    return r;
}
