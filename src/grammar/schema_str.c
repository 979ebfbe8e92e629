/* schema_str.c - strings: minLength / maxLength (exact: one code point per
 * string character), pattern (a regular-expression subset compiled to
 * rules) and format (date, time, date-time, uuid, email, ipv4, as
 * patterns of their own).
 *
 * The pattern subset: literals and escapes (\n \t \r \f \v \xHH \uHHHH,
 * escaped punctuation), . (any character but newline), classes [...] and
 * [^...] with ranges, \d \w \s (their ASCII members) and \D \W \S (ASCII
 * non-members), groups ( ) (?: ) (?P<n> ) (?<n> ), alternation, * + ?
 * {m} {m,} {m,n} (lazy forms alike), ^ only at the start and $ only at the
 * end. JSON Schema patterns are unanchored searches: without ^ (or $) any
 * text may come before (or after). Refused as unsupported "pattern":
 * lookaround, backreferences, \b, flags, anchors elsewhere. Each matched
 * character is written as a JSON string writes it ('"', '\\' and controls
 * escaped the way json.dumps does) or raw in tool arguments. The generated
 * strings are a subset of what Python's re accepts (\d here is ASCII). */
#include <stdlib.h>
#include <string.h>

#include "grammar/schema.h"
#include "util/error.h"

static int has(const uint32_t *r, size_t n, uint32_t c)
{
    for (size_t i = 0; i < n; i++)
        if (c >= r[2 * i] && c <= r[2 * i + 1])
            return 1;
    return 0;
}

int64_t k3g_char_set(k3g_schema *s, const uint32_t *ranges, size_t n, int raw)
{
    k3g_builder *b = s->b;
    if (raw)
        return k3g_class(b, ranges, n);
    /* the raw part: ranges minus '"', '\\' and U+0000..U+001F */
    uint32_t *v = malloc((n * 3 + 1) * 2 * sizeof *v);
    if (!v)
        return k3_fail(s->e, K3_ERUNTIME, "grammar: out of memory"), -1;
    size_t m = 0;
    static const uint32_t cut[][2] = { { 0, 0x1F }, { '"', '"' }, { '\\', '\\' } };
    for (size_t i = 0; i < n; i++) {
        uint32_t lo = ranges[2 * i], hi = ranges[2 * i + 1];
        /* subtract the cut ranges (sorted, disjoint) */
        for (size_t k = 0; k < 3 && lo <= hi; k++) {
            if (hi < cut[k][0] || lo > cut[k][1])
                continue;
            if (lo < cut[k][0])
                v[2 * m] = lo, v[2 * m + 1] = cut[k][0] - 1, m++;
            lo = cut[k][1] + 1;
        }
        if (lo <= hi)
            v[2 * m] = lo, v[2 * m + 1] = hi, m++;
    }
    int64_t r = k3g_rule(b);
    if (r < 0) {
        free(v);
        return -1;
    }
    if (m) {
        int64_t c = k3g_class(b, v, m);
        if (c < 0 || k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)c) || k3g_alt(b, (uint32_t)r)) {
            free(v);
            return -1;
        }
    }
    free(v);
    static const char *const named[32] = {
        [8] = "\\b", [9] = "\\t", [10] = "\\n", [12] = "\\f", [13] = "\\r"
    };
    for (uint32_t c = 0; c < 0x20; c++)
        if (has(ranges, n, c)) {
            char u[8];
            const char *t = named[c];
            if (!t) {
                static const char hx[] = "0123456789abcdef";
                memcpy(u, "\\u00", 4);
                u[4] = hx[c >> 4], u[5] = hx[c & 15], u[6] = 0;
                t = u;
            }
            if (k3g_bytes(b, (uint32_t)r, t, strlen(t)) || k3g_alt(b, (uint32_t)r))
                return -1;
        }
    if ((has(ranges, n, '"') &&
         (k3g_bytes(b, (uint32_t)r, "\\\"", 2) || k3g_alt(b, (uint32_t)r))) ||
        (has(ranges, n, '\\') && (k3g_bytes(b, (uint32_t)r, "\\\\", 2) || k3g_alt(b, (uint32_t)r))))
        return -1;
    b->rules[r].defined = 1;
    return r;
}

/* ---- the pattern compiler ---- */
typedef struct rx {
    k3g_schema *s;
    const char *p, *end;
    int raw;
    int unsupported; /* set: the pattern uses something outside the subset */
    int depth;
} rx;

static int64_t rx_alt(rx *x);

static int rx_hex(rx *x, int n, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        char h = x->p < x->end ? *x->p : 0;
        int d = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (d < 0)
            return x->unsupported = 1, -1;
        v = v * 16 + (uint32_t)d;
        x->p++;
    }
    *out = v;
    return 0;
}

/* One character (UTF-8) or escape at x->p; a shorthand class (\d ...)
 * yields its ranges instead: *nr > 1 or the ranges differ from [c, c].
 * Returns the number of ranges written to r (at most 8 pairs). */
static size_t rx_char(rx *x, uint32_t *r)
{
    const unsigned char *q = (const unsigned char *)x->p;
    if (*q != '\\') {
        unsigned n = *q < 0x80             ? 1
                     : (*q & 0xE0) == 0xC0 ? 2
                     : (*q & 0xF0) == 0xE0 ? 3
                     : (*q & 0xF8) == 0xF0 ? 4
                                           : 1;
        uint32_t v = n == 1 ? *q : n == 2 ? (*q & 0x1Fu) : n == 3 ? (*q & 0x0Fu) : (*q & 0x07u);
        for (unsigned i = 1; i < n && x->p + i < x->end; i++)
            v = (v << 6) | (q[i] & 0x3Fu);
        x->p += n;
        r[0] = r[1] = v;
        return 1;
    }
    x->p++;
    if (x->p >= x->end) {
        x->unsupported = 1;
        return 0;
    }
    char c = *x->p++;
    static const uint32_t dig[] = { '0', '9' }, word[] = { '0', '9', 'A', 'Z', '_', '_', 'a', 'z' },
                          space[] = { '\t', '\r', ' ', ' ' };
    static const uint32_t ndig[] = { 0, '0' - 1, '9' + 1, 0x7F };
    static const uint32_t nword[] = { 0,       '0' - 1, '9' + 1, 'A' - 1, 'Z' + 1,
                                      '_' - 1, '_' + 1, 'a' - 1, 'z' + 1, 0x7F };
    static const uint32_t nspace[] = { 0, 8, 14, 31, 33, 0x7F };
    switch (c) {
    case 'd': memcpy(r, dig, sizeof dig); return 1;
    case 'w': memcpy(r, word, sizeof word); return 4;
    case 's': memcpy(r, space, sizeof space); return 2;
    case 'D': memcpy(r, ndig, sizeof ndig); return 2;
    case 'W': memcpy(r, nword, sizeof nword); return 5;
    case 'S': memcpy(r, nspace, sizeof nspace); return 3;
    case 'n': r[0] = r[1] = '\n'; return 1;
    case 't': r[0] = r[1] = '\t'; return 1;
    case 'r': r[0] = r[1] = '\r'; return 1;
    case 'f': r[0] = r[1] = '\f'; return 1;
    case 'v': r[0] = r[1] = '\v'; return 1;
    case 'x':
        if (rx_hex(x, 2, &r[0]))
            return 0;
        r[1] = r[0];
        return 1;
    case 'u':
        if (rx_hex(x, 4, &r[0]))
            return 0;
        r[1] = r[0];
        return 1;
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
            x->unsupported = 1; /* \b \B \A \Z backreferences ... */
            return 0;
        }
        r[0] = r[1] = (unsigned char)c;
        return 1;
    }
}

static int64_t rx_class(rx *x)
{
    x->p++; /* '[' */
    int neg = x->p < x->end && *x->p == '^';
    if (neg)
        x->p++;
    uint32_t *v = NULL;
    size_t n = 0, cap = 0;
    int first = 1;
    while (x->p < x->end && (*x->p != ']' || first)) {
        first = 0;
        uint32_t r[16];
        size_t k = rx_char(x, r);
        if (!k)
            break;
        if (k == 1 && r[0] == r[1] && x->p + 1 < x->end && *x->p == '-' && x->p[1] != ']') {
            x->p++;
            uint32_t r2[16];
            size_t k2 = rx_char(x, r2);
            if (k2 != 1 || r2[0] != r2[1] || r2[0] < r[0]) {
                x->unsupported = 1;
                break;
            }
            r[1] = r2[0];
        }
        if (n + k > cap) {
            cap = (n + k) * 2 + 8;
            uint32_t *q = realloc(v, cap * 2 * sizeof *q);
            if (!q) {
                free(v);
                return k3_fail(x->s->e, K3_ERUNTIME, "grammar: out of memory"), -1;
            }
            v = q;
        }
        memcpy(v + 2 * n, r, k * 2 * sizeof *r);
        n += k;
    }
    if (x->p >= x->end || x->unsupported) {
        free(v);
        x->unsupported = 1;
        return -1;
    }
    x->p++; /* ']' */
    if (neg && (n = k3g_complement(&v, n, x->s->e)) == SIZE_MAX) {
        free(v);
        return -1;
    }
    int64_t r = n ? k3g_char_set(x->s, v, n, x->raw) : K3G_EMPTY;
    free(v);
    if (r == K3G_EMPTY)
        x->unsupported = 1;
    return r;
}

static int64_t rx_atom(rx *x)
{
    char c = *x->p;
    if (c == '(') {
        if (++x->depth > K3_GRAM_MAX_NEST)
            return x->unsupported = 1, -1;
        x->p++;
        if (x->p < x->end && *x->p == '?') {
            if (x->end - x->p >= 2 && x->p[1] == ':')
                x->p += 2;
            else if (x->end - x->p >= 3 && (x->p[1] == 'P' || x->p[1] == '<') &&
                     (x->p[1] == 'P' ? x->p[2] == '<' : (x->p[2] != '=' && x->p[2] != '!'))) {
                const char *gt = memchr(x->p, '>', (size_t)(x->end - x->p));
                if (!gt)
                    return x->unsupported = 1, -1;
                x->p = gt + 1;
            } else {
                return x->unsupported = 1, -1; /* lookaround, flags */
            }
        }
        int64_t r = rx_alt(x);
        if (r < 0)
            return -1;
        if (x->p >= x->end || *x->p != ')')
            return x->unsupported = 1, -1;
        x->p++;
        x->depth--;
        return r;
    }
    if (c == '[')
        return rx_class(x);
    if (c == '.') {
        x->p++;
        uint32_t r[4] = { 0, '\n' - 1, '\n' + 1, 0x10FFFF };
        return k3g_char_set(x->s, r, 2, x->raw);
    }
    if (c == '^' || c == '$' || c == '*' || c == '+' || c == '?' || c == '{' || c == ')' ||
        c == '|')
        return x->unsupported = 1, -1;
    uint32_t r[16];
    size_t k = rx_char(x, r);
    if (!k)
        return -1;
    return k3g_char_set(x->s, r, k, x->raw);
}

static int rx_num(rx *x, uint32_t *v)
{
    int d = 0;
    uint64_t n = 0;
    while (x->p < x->end && *x->p >= '0' && *x->p <= '9') {
        if (n <= K3_GRAM_MAX_REPEAT)
            n = n * 10 + (uint64_t)(*x->p - '0');
        x->p++, d++;
    }
    *v = (uint32_t)(n > K3_GRAM_MAX_REPEAT ? K3_GRAM_MAX_REPEAT + 1u : n);
    return d;
}

static int64_t rx_seq(rx *x)
{
    k3g_builder *b = x->s->b;
    int64_t r = k3g_rule(b);
    if (r < 0)
        return -1;
    while (x->p < x->end && *x->p != '|' && *x->p != ')') {
        if (*x->p == '$' && x->p + 1 == x->end)
            break; /* the end anchor: the caller looks at it */
        int64_t a = rx_atom(x);
        if (a < 0)
            return -1;
        /* quantifiers */
        while (x->p < x->end && (*x->p == '*' || *x->p == '+' || *x->p == '?' || *x->p == '{')) {
            uint32_t mn, mx;
            if (*x->p == '{') {
                const char *save = x->p++;
                if (!rx_num(x, &mn)) {
                    x->p = save; /* a literal '{' in Python: refuse, it is rare */
                    return x->unsupported = 1, -1;
                }
                mx = mn;
                if (x->p < x->end && *x->p == ',') {
                    x->p++;
                    if (!rx_num(x, &mx))
                        mx = K3G_INF;
                }
                if (x->p >= x->end || *x->p != '}')
                    return x->unsupported = 1, -1;
                x->p++;
            } else {
                mn = *x->p == '+';
                mx = *x->p == '?' ? 1 : K3G_INF;
                x->p++;
            }
            if (x->p < x->end && *x->p == '?')
                x->p++; /* lazy: the same language */
            else if (x->p < x->end && *x->p == '+')
                return x->unsupported = 1, -1; /* possessive */
            a = k3g_repeat(b, k3g_r(a), mn, mx);
            if (a < 0)
                return -1;
        }
        if (k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)a))
            return -1;
    }
    return k3g_alt(b, (uint32_t)r) ? -1 : r;
}

static int64_t rx_alt(rx *x)
{
    k3g_builder *b = x->s->b;
    int64_t r = k3g_rule(b);
    if (r < 0)
        return -1;
    for (;;) {
        int64_t a = rx_seq(x);
        if (a < 0 || k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)a) || k3g_alt(b, (uint32_t)r))
            return -1;
        if (x->p < x->end && *x->p == '|') {
            x->p++;
            continue;
        }
        return r;
    }
}

/* The string body (between the quotes, or raw) for pattern p; -1 with
 * *unsupported set when p is outside the subset (no error recorded). */
static int64_t pattern_body(k3g_schema *s, const char *p, size_t len, int raw, int *unsupported)
{
    rx x = { s, p, p + len, raw, 0, 0 };
    int start = len && p[0] == '^';
    if (start)
        x.p++;
    int64_t body = rx_alt(&x);
    int end = x.p < x.end && *x.p == '$' && x.p + 1 == x.end;
    if (end)
        x.p++;
    if (body >= 0 && x.p != x.end)
        x.unsupported = 1;
    /* top-level alternation with an anchor: the anchor binds to one branch */
    if (body >= 0 && (start || end) && memchr(p, '|', len)) {
        int level = 0;
        for (size_t i = 0; i < len; i++) {
            if (p[i] == '\\') {
                i++;
                continue;
            }
            level += p[i] == '(' ? 1 : p[i] == ')' ? -1 : 0;
            if (p[i] == '|' && level == 0)
                x.unsupported = 1;
        }
    }
    if (x.unsupported || body < 0) {
        *unsupported = x.unsupported && !s->e->code;
        return -1;
    }
    k3g_builder *b = s->b;
    int64_t anyc = raw ? k3g_any_char(&s->j) : k3g_json_char(&s->j);
    int64_t any = anyc < 0 ? -1 : k3g_repeat(b, k3g_r(anyc), 0, K3G_INF);
    int64_t r = k3g_rule(b);
    if (any < 0 || r < 0 || (!start && k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)any)) ||
        k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)body) ||
        (!end && k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)any)) || k3g_alt(b, (uint32_t)r))
        return -1;
    return r;
}

static const char *format_pattern(const char *f)
{
    static const struct {
        const char *name, *re;
    } fm[] = {
        { "date", "^[1-9][0-9]{3}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-"
                  "(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))$" },
        { "time", "^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?"
                  "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$" },
        { "date-time",
          "^[1-9][0-9]{3}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-"
          "(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))T([01][0-9]|2[0-3]):"
          "[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$" },
        { "uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" },
        { "email", "^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\\.[A-Za-z0-9-]{1,63}){1,4}$" },
        { "ipv4", "^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])(\\.(25[0-5]|2[0-4][0-9]|"
                  "1[0-9][0-9]|[1-9][0-9]|[0-9])){3}$" },
    };
    for (size_t i = 0; i < sizeof fm / sizeof *fm; i++)
        if (!strcmp(fm[i].name, f))
            return fm[i].re;
    return NULL;
}

static int64_t quoted(k3g_schema *s, int64_t body, int raw)
{
    if (raw || body < 0)
        return body;
    int64_t r = k3g_rule(s->b);
    if (r < 0 || k3g_byte(s->b, (uint32_t)r, '"') ||
        k3g_add(s->b, (uint32_t)r, K3G_RULE, (uint32_t)body) || k3g_byte(s->b, (uint32_t)r, '"') ||
        k3g_alt(s->b, (uint32_t)r))
        return -1;
    return r;
}

int64_t k3g_schema_string(k3g_schema *s, const k3_json *node, int raw)
{
    const k3_json *pat = node ? k3_json_get(node, "pattern") : NULL;
    const k3_json *fmt = node ? k3_json_get(node, "format") : NULL;
    const k3_json *mnl = node ? k3_json_get(node, "minLength") : NULL;
    const k3_json *mxl = node ? k3_json_get(node, "maxLength") : NULL;
    const char *re = NULL;
    size_t relen = 0;
    if (fmt && fmt->type == K3J_STRING) {
        re = format_pattern(fmt->str);
        if (!re && k3g_unsupported(s, "format"))
            return -1;
        if (re && pat && k3g_unsupported(s, "pattern"))
            return -1; /* not strict: the format wins */
        relen = re ? strlen(re) : 0;
    }
    if (!re && pat && pat->type == K3J_STRING)
        re = pat->str, relen = pat->len;
    if (re) {
        if ((mnl && k3g_unsupported(s, "minLength")) || (mxl && k3g_unsupported(s, "maxLength")))
            return -1; /* not strict: the lengths are ignored */
        int unsup = 0;
        int64_t body = pattern_body(s, re, relen, raw, &unsup);
        if (body >= 0)
            return quoted(s, body, raw);
        if (!unsup)
            return -1;
        if (k3g_unsupported(s, re == (pat ? pat->str : NULL) ? "pattern" : "format"))
            return -1;
        /* not strict: a plain string */
    }
    int64_t mn = mnl && mnl->type == K3J_NUMBER && mnl->number > 0 ? (int64_t)mnl->number : 0;
    int64_t mx = mxl && mxl->type == K3J_NUMBER ? (mxl->number < 0 ? 0 : (int64_t)mxl->number) : -1;
    if (mx >= 0 && mn > mx) {
        k3_fail(s->e, K3_EINPUT, "json schema: minLength > maxLength at %s%s", s->prefix, s->ptr);
        return -1;
    }
    if (!raw && !mnl && !mxl)
        return k3g_json_string(&s->j);
    if ((mn > K3_GRAM_MAX_REPEAT || mx > K3_GRAM_MAX_REPEAT) && s->strict) {
        k3_fail(s->e, K3_EINPUT, "json schema: string length above %d (K3_GRAM_MAX_REPEAT) at %s%s",
                K3_GRAM_MAX_REPEAT, s->prefix, s->ptr);
        return -1;
    }
    /* Not strict: a bound past what a grammar repeats is not enforced (a
     * warning, as for an unsupported keyword). Agents' tool schemas carry
     * such bounds (a 100,000-byte maxLength on a script, say). */
    if (mx > K3_GRAM_MAX_REPEAT) {
        if (k3g_unsupported(s, "maxLength"))
            return -1;
        mx = -1;
    }
    if (mn > K3_GRAM_MAX_REPEAT) {
        if (k3g_unsupported(s, "minLength"))
            return -1;
        mn = 0;
    }
    int64_t c = raw ? k3g_any_char(&s->j) : k3g_json_char(&s->j);
    int64_t body =
        c < 0 ? -1 : k3g_repeat(s->b, k3g_r(c), (uint32_t)mn, mx < 0 ? K3G_INF : (uint32_t)mx);
    return quoted(s, body, raw);
}
