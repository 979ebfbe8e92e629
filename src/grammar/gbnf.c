/* gbnf.c - llama.cpp's GBNF grammar text to rules (grammar.h has the
 * dialect; docs/GRAMMAR.md the details). A rule ends where the next
 * `name ::=` starts, so newlines are ordinary space. Groups become rules of
 * their own; repetitions go through k3g_repeat; character classes through
 * k3g_class. Every error names line:column. Nesting of groups is bounded
 * by K3_GRAM_MAX_NEST (the parser recurses on groups). */
#include <stdlib.h>
#include <string.h>

#include "grammar/ir.h"
#include "util/error.h"

typedef struct name_ent {
    const char *s;
    size_t n;
    uint32_t rule;
    unsigned line, col; /* first use, for "undefined rule" */
} name_ent;

typedef struct gp {
    const char *s, *end, *line_start;
    unsigned line;
    k3g_builder *b;
    name_ent *names;
    size_t nnames, capnames;
    k3_err *e;
} gp;

static int fail_at(gp *p, const char *at, const char *what)
{
    const char *ls = p->line_start;
    unsigned line = p->line;
    /* at may be before line_start only when reporting a name's first use */
    if (at < ls) {
        line = 1, ls = p->s;
        for (const char *q = p->s; q < at; q++)
            if (*q == '\n')
                line++, ls = q + 1;
    }
    return k3_fail(p->e, K3_EINPUT, "grammar:%u:%u: %s", line, (unsigned)(at - ls) + 1, what);
}

static void skip_space(gp *p)
{
    while (p->s < p->end) {
        char c = *p->s;
        if (c == '#') {
            while (p->s < p->end && *p->s != '\n')
                p->s++;
        } else if (c == '\n') {
            p->s++;
            p->line++;
            p->line_start = p->s;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            p->s++;
        } else {
            break;
        }
    }
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

static int64_t rule_of(gp *p, const char *s, size_t n)
{
    for (size_t i = 0; i < p->nnames; i++)
        if (p->names[i].n == n && !memcmp(p->names[i].s, s, n))
            return p->names[i].rule;
    if (k3g_grow((void **)&p->names, &p->capnames, p->nnames + 1, sizeof *p->names, p->e))
        return -1;
    int64_t r = k3g_rule(p->b);
    if (r < 0)
        return -1;
    name_ent *ne = &p->names[p->nnames++];
    ne->s = s, ne->n = n, ne->rule = (uint32_t)r;
    ne->line = p->line, ne->col = (unsigned)(s - p->line_start) + 1;
    return r;
}

/* Decodes one UTF-8 character or escape at p->s (inside "..." or [...]). */
static int char_at(gp *p, uint32_t *out)
{
    const unsigned char *q = (const unsigned char *)p->s;
    if (p->s >= p->end)
        return fail_at(p, p->s, "unexpected end of grammar");
    if (*q == '\\') {
        if (p->s + 1 >= p->end)
            return fail_at(p, p->s, "unexpected end of grammar after '\\'");
        char c = p->s[1];
        int hex = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (hex) {
            uint32_t v = 0;
            for (int i = 0; i < hex; i++) {
                char h = p->s + 2 + i < p->end ? p->s[2 + i] : 0;
                int d = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (d < 0)
                    return fail_at(p, p->s, "bad hex escape");
                v = v * 16 + (uint32_t)d;
            }
            if (v > 0x10FFFF)
                return fail_at(p, p->s, "escape above U+10FFFF");
            *out = v;
            p->s += 2 + hex;
            return K3_OK;
        }
        static const char from[] = "nrt\\\"[]-^", to[] = "\n\r\t\\\"[]-^";
        const char *f = c ? strchr(from, c) : NULL;
        if (!f)
            return fail_at(p, p->s, "unknown escape");
        *out = (unsigned char)to[f - from];
        p->s += 2;
        return K3_OK;
    }
    /* a UTF-8 character */
    unsigned n = *q < 0x80             ? 1
                 : (*q & 0xE0) == 0xC0 ? 2
                 : (*q & 0xF0) == 0xE0 ? 3
                 : (*q & 0xF8) == 0xF0 ? 4
                                       : 0;
    if (!n || p->s + n > p->end)
        return fail_at(p, p->s, "invalid UTF-8");
    uint32_t v = n == 1 ? *q : n == 2 ? (*q & 0x1Fu) : n == 3 ? (*q & 0x0Fu) : (*q & 0x07u);
    for (unsigned i = 1; i < n; i++) {
        if ((q[i] & 0xC0) != 0x80)
            return fail_at(p, p->s, "invalid UTF-8");
        v = (v << 6) | (q[i] & 0x3Fu);
    }
    if (*q == '\n')
        p->line++, p->line_start = p->s + 1;
    *out = v;
    p->s += n;
    return K3_OK;
}

static int put_cp(k3g_builder *b, uint32_t r, uint32_t c)
{
    uint8_t o[4];
    unsigned n;
    if (c < 0x80)
        o[0] = (uint8_t)c, n = 1;
    else if (c < 0x800)
        o[0] = (uint8_t)(0xC0 | (c >> 6)), o[1] = (uint8_t)(0x80 | (c & 63)), n = 2;
    else if (c < 0x10000)
        o[0] = (uint8_t)(0xE0 | (c >> 12)), o[1] = (uint8_t)(0x80 | ((c >> 6) & 63)),
        o[2] = (uint8_t)(0x80 | (c & 63)), n = 3;
    else
        o[0] = (uint8_t)(0xF0 | (c >> 18)), o[1] = (uint8_t)(0x80 | ((c >> 12) & 63)),
        o[2] = (uint8_t)(0x80 | ((c >> 6) & 63)), o[3] = (uint8_t)(0x80 | (c & 63)), n = 4;
    return k3g_bytes(b, r, o, n);
}

static int alternates(gp *p, uint32_t r, int depth);

/* One item (literal, class, group, rule name, token, '.') as one element
 * *el, then its postfix operators. */
static int item(gp *p, k3g_el *el, int depth)
{
    const char *at = p->s;
    char c = *p->s;
    if (c == '"') {
        int64_t r = k3g_rule(p->b);
        if (r < 0)
            return p->e->code;
        p->s++;
        while (p->s < p->end && *p->s != '"') {
            uint32_t cp;
            if (char_at(p, &cp) || put_cp(p->b, (uint32_t)r, cp))
                return p->e->code;
        }
        if (p->s >= p->end)
            return fail_at(p, at, "unterminated literal");
        p->s++;
        if (k3g_alt(p->b, (uint32_t)r))
            return p->e->code;
        el->type = K3G_RULE, el->arg = (uint32_t)r;
    } else if (c == '[') {
        p->s++;
        int neg = p->s < p->end && *p->s == '^';
        if (neg)
            p->s++;
        uint32_t *rg = NULL;
        size_t n = 0, cap = 0;
        while (p->s < p->end && *p->s != ']') {
            uint32_t lo, hi;
            if (char_at(p, &lo))
                break;
            hi = lo;
            if (p->s + 1 < p->end && *p->s == '-' && p->s[1] != ']') {
                p->s++;
                if (char_at(p, &hi))
                    break;
                if (hi < lo) {
                    fail_at(p, at, "character range with its end before its start");
                    break;
                }
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                uint32_t *q = realloc(rg, cap * 2 * sizeof *q);
                if (!q) {
                    k3_fail(p->e, K3_ERUNTIME, "grammar: out of memory");
                    break;
                }
                rg = q;
            }
            rg[2 * n] = lo, rg[2 * n + 1] = hi, n++;
        }
        if (!p->e->code && p->s >= p->end)
            fail_at(p, at, "unterminated character class");
        if (!p->e->code && neg) {
            n = k3g_complement(&rg, n, p->e);
            if (n == SIZE_MAX)
                n = 0;
        }
        int64_t r = p->e->code ? -1 : k3g_class(p->b, rg, n);
        free(rg);
        if (r < 0)
            return p->e->code;
        p->s++;
        el->type = K3G_RULE, el->arg = (uint32_t)r;
    } else if (c == '.') {
        uint32_t all[2] = { 0, 0x10FFFF };
        int64_t r = k3g_class(p->b, all, 1);
        if (r < 0)
            return p->e->code;
        p->s++;
        el->type = K3G_RULE, el->arg = (uint32_t)r;
    } else if (c == '(') {
        if (depth >= K3_GRAM_MAX_NEST)
            return fail_at(p, at, "groups nested deeper than K3_GRAM_MAX_NEST");
        p->s++;
        int64_t r = k3g_rule(p->b);
        if (r < 0 || alternates(p, (uint32_t)r, depth + 1))
            return p->e->code;
        skip_space(p);
        if (p->s >= p->end || *p->s != ')')
            return fail_at(p, at, "group without its ')'");
        p->s++;
        el->type = K3G_RULE, el->arg = (uint32_t)r;
    } else if (c == '<' || c == '!') {
        int neg = c == '!';
        if (neg)
            p->s++;
        if (p->s >= p->end || *p->s != '<')
            return fail_at(p, at, "expected a token <...> after '!'");
        const char *t = p->s + 1;
        const char *gt = t;
        while (gt < p->end && *gt != '>' && *gt != '\n')
            gt++;
        /* <|name|> contains '|' before the final '>': find "|>" when it starts with '|' */
        if (t < p->end && *t == '|') {
            const char *q = t + 1;
            while (q + 1 < p->end && !(q[0] == '|' && q[1] == '>') && *q != '\n')
                q++;
            gt = q + 1 < p->end && q[0] == '|' ? q + 1 : p->end;
        }
        if (gt >= p->end || *gt != '>')
            return fail_at(p, at, "unterminated token <...>");
        int64_t ti;
        if (*t == '[') {
            int64_t id = 0;
            const char *q = t + 1;
            if (q >= gt || *q == ']')
                return fail_at(p, at, "token <[ID]> without an id");
            for (; q < gt && *q != ']'; q++) {
                if (*q < '0' || *q > '9' || id > 100000000)
                    return fail_at(p, at, "token <[ID]>: ID must be a decimal id");
                id = id * 10 + (*q - '0');
            }
            if (q + 1 != gt)
                return fail_at(p, at, "token <[ID]>: expected ']>'");
            ti = k3g_token_add(p->b, id, NULL, 0, neg);
        } else {
            /* the text includes the angle brackets: <|open|> names "<|open|>" */
            ti = k3g_token_add(p->b, -1, t - 1, (size_t)(gt - t) + 2, neg);
        }
        if (ti < 0)
            return p->e->code;
        p->s = gt + 1;
        el->type = K3G_TOKEN, el->arg = (uint32_t)ti;
    } else if (is_name_char(c)) {
        const char *s = p->s;
        while (p->s < p->end && is_name_char(*p->s))
            p->s++;
        int64_t r = rule_of(p, s, (size_t)(p->s - s));
        if (r < 0)
            return p->e->code;
        el->type = K3G_RULE, el->arg = (uint32_t)r;
    } else {
        return fail_at(p, at, "expected a literal, class, group, rule name or token");
    }
    /* postfix operators */
    for (;;) {
        const char *op = p->s;
        uint32_t mn, mx;
        if (p->s < p->end && (*p->s == '*' || *p->s == '+' || *p->s == '?')) {
            mn = *p->s == '+' ? 1 : 0;
            mx = *p->s == '?' ? 1 : K3G_INF;
            p->s++;
        } else if (p->s < p->end && *p->s == '{') {
            p->s++;
            skip_space(p);
            uint64_t a = 0, bnum = 0;
            int digits = 0;
            while (p->s < p->end && *p->s >= '0' && *p->s <= '9') {
                if (a <= K3_GRAM_MAX_REPEAT)
                    a = a * 10 + (uint64_t)(*p->s - '0');
                p->s++, digits++;
            }
            skip_space(p);
            if (!digits)
                return fail_at(p, op, "repetition {m,n} without m");
            mn = (uint32_t)(a > K3_GRAM_MAX_REPEAT ? K3_GRAM_MAX_REPEAT + 1u : a);
            mx = mn;
            if (p->s < p->end && *p->s == ',') {
                p->s++;
                skip_space(p);
                digits = 0;
                while (p->s < p->end && *p->s >= '0' && *p->s <= '9') {
                    if (bnum <= K3_GRAM_MAX_REPEAT)
                        bnum = bnum * 10 + (uint64_t)(*p->s - '0');
                    p->s++, digits++;
                }
                skip_space(p);
                mx = digits ? (uint32_t)(bnum > K3_GRAM_MAX_REPEAT ? K3_GRAM_MAX_REPEAT + 1u : bnum)
                            : K3G_INF;
            }
            if (p->s >= p->end || *p->s != '}')
                return fail_at(p, op, "repetition without its '}'");
            p->s++;
            if (mn > K3_GRAM_MAX_REPEAT || (mx != K3G_INF && mx > K3_GRAM_MAX_REPEAT))
                return fail_at(p, op, "repetition count above K3_GRAM_MAX_REPEAT");
            if (mx != K3G_INF && mx < mn)
                return fail_at(p, op, "repetition {m,n} with n < m");
        } else {
            break;
        }
        int64_t r = k3g_repeat(p->b, *el, mn, mx);
        if (r < 0)
            return p->e->code;
        el->type = K3G_RULE, el->arg = (uint32_t)r;
    }
    return K3_OK;
}

/* Whether `name ::=` starts at p->s (the next rule). */
static int at_definition(const gp *p)
{
    const char *q = p->s;
    if (q >= p->end || !is_name_char(*q))
        return 0;
    while (q < p->end && is_name_char(*q))
        q++;
    while (q < p->end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
        q++;
    return p->end - q >= 3 && !memcmp(q, "::=", 3);
}

/* Alternatives into rule r, up to ')' (nested) or the next definition. */
static int alternates(gp *p, uint32_t r, int depth)
{
    for (;;) {
        skip_space(p);
        while (p->s < p->end && *p->s != '|' && *p->s != ')' && !at_definition(p)) {
            k3g_el el;
            if (item(p, &el, depth) || k3g_add(p->b, r, el.type, el.arg))
                return p->e->code;
            skip_space(p);
        }
        if (k3g_alt(p->b, r))
            return p->e->code;
        if (p->s < p->end && *p->s == '|') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == ')' && depth == 0)
            return fail_at(p, p->s, "')' without its '('");
        return K3_OK;
    }
}

int k3g_gbnf_into(k3g_builder *b, const char *text, size_t len, uint32_t *root_out,
                  char ***names_out)
{
    k3_err *e = b->e;
    if (len > K3_GRAM_MAX_TEXT)
        return k3_fail(e, K3_EINPUT, "grammar: %zu bytes of text (more than K3_GRAM_MAX_TEXT)",
                       len);
    gp p;
    memset(&p, 0, sizeof p);
    p.s = p.line_start = text;
    p.end = text + len;
    p.line = 1;
    p.e = e;
    p.b = b;
    uint8_t *defined = NULL;
    size_t ndefined = 0;
    for (;;) {
        skip_space(&p);
        if (p.s >= p.end)
            break;
        const char *at = p.s;
        if (!is_name_char(*p.s)) {
            fail_at(&p, at, "expected a rule name");
            break;
        }
        while (p.s < p.end && is_name_char(*p.s))
            p.s++;
        const char *nend = p.s;
        skip_space(&p);
        if (p.end - p.s < 3 || memcmp(p.s, "::=", 3)) {
            fail_at(&p, p.s, "expected '::='");
            break;
        }
        p.s += 3;
        int64_t r = rule_of(&p, at, (size_t)(nend - at));
        if (r < 0)
            break;
        if ((size_t)r >= ndefined) {
            size_t c = (size_t)r + 64;
            uint8_t *q = realloc(defined, c);
            if (!q) {
                k3_fail(e, K3_ERUNTIME, "grammar: out of memory");
                break;
            }
            memset(q + ndefined, 0, c - ndefined);
            defined = q, ndefined = c;
        }
        if (defined[r]) {
            fail_at(&p, at, "rule defined twice");
            break;
        }
        defined[r] = 1;
        if (alternates(&p, (uint32_t)r, 0))
            break;
    }
    int64_t root = -1;
    if (!e->code) {
        for (size_t i = 0; i < p.nnames; i++) {
            name_ent *ne = &p.names[i];
            if (ne->rule >= ndefined || !defined[ne->rule]) {
                k3_fail(e, K3_EINPUT, "grammar:%u:%u: undefined rule '%.*s'", ne->line, ne->col,
                        (int)ne->n, ne->s);
                break;
            }
            if (ne->n == 4 && !memcmp(ne->s, "root", 4))
                root = ne->rule;
        }
        if (!e->code && root < 0)
            k3_fail(e, K3_EINPUT, "grammar: no 'root' rule");
    }
    if (!e->code && names_out) {
        /* names for messages: one block, names[rule] -> its name */
        size_t tot = 0;
        for (size_t i = 0; i < p.nnames; i++)
            tot += p.names[i].n + 1;
        char **names = calloc(b->nrules + 1, sizeof *names);
        char *buf = malloc(tot + 1);
        if (!names || !buf) {
            free(names), free(buf);
            k3_fail(e, K3_ERUNTIME, "grammar: out of memory");
        } else {
            char *w = buf;
            for (size_t i = 0; i < p.nnames; i++) {
                memcpy(w, p.names[i].s, p.names[i].n);
                w[p.names[i].n] = 0;
                names[p.names[i].rule] = w;
                w += p.names[i].n + 1;
            }
            names[b->nrules] = buf; /* the block, freed through it */
            *names_out = names;
        }
    }
    if (!e->code)
        *root_out = (uint32_t)root;
    free(defined);
    free(p.names);
    return e->code;
}

int k3_gram_from_gbnf(k3_grammar **out, const char *text, size_t len, k3_err *e)
{
    *out = NULL;
    k3g_builder b;
    k3g_init(&b, e);
    uint32_t root = 0;
    char **names = NULL;
    size_t nr = 0;
    if (!k3g_gbnf_into(&b, text, len, &root, &names)) {
        nr = b.nrules;
        k3g_finish(&b, root, (const char *const *)names, out);
    }
    if (names) {
        free(names[nr]);
        free(names);
    }
    k3g_dispose(&b);
    return e->code;
}
