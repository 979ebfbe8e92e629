/* json.c - see json.h.
 *
 * Two passes would be simpler to reason about for memory, but one recursive
 * descent with an arena is enough here: documents are at most a few hundred
 * MB (safetensors headers cap at 100 MB) and the arena grows in chunks. */
#include "util/json.h"

#include "util/error.h"
#include "util/file.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 512

/* C99 has no max_align_t; this union is at least as aligned as anything
 * the arena hands out (nodes, pointers, sizes, strings). */
typedef union { long double ld; void *p; long long ll; double d; } align_t;

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    align_t data[];
} chunk;

struct k3_json_doc {
    chunk *chunks;
    k3_json root;
};

typedef struct {
    const unsigned char *p, *end, *start;
    k3_json_doc *doc;
    char *err;
    size_t errlen;
    int failed;
} parser;

static void fail(parser *ps, const char *fmt, ...) K3_PRINTF(2, 3);
static void fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    int n = snprintf(ps->err, ps->errlen, "byte %zu: ", (size_t)(ps->p - ps->start));
    if (n < 0 || (size_t)n >= ps->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static void *arena_alloc(parser *ps, size_t n)
{
    n = (n + sizeof(align_t) - 1) / sizeof(align_t) * sizeof(align_t);
    chunk *c = ps->doc->chunks;
    if (!c || c->cap - c->used < n) {
        /* Chunks grow from 16 KiB to 1 MiB: a small document (a request
         * body, a history line) does not pay for a megabyte. */
        size_t want = !c ? (1u << 14) : c->cap >= (1u << 19) ? (1u << 20) : 2 * c->cap;
        size_t cap = n > want ? n : want;
        c = malloc(sizeof(chunk) + cap);
        if (!c) {
            fail(ps, "out of memory");
            return NULL;
        }
        c->cap = cap;
        c->used = 0;
        c->next = ps->doc->chunks;
        ps->doc->chunks = c;
    }
    void *r = (char *)c->data + c->used;
    c->used += n;
    return r;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int hex4(parser *ps, unsigned *out)
{
    unsigned v = 0;
    if (ps->end - ps->p < 4) {
        fail(ps, "truncated \\u escape");
        return 0;
    }
    for (int i = 0; i < 4; i++) {
        unsigned c = ps->p[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else {
            fail(ps, "bad hex digit in \\u escape");
            return 0;
        }
        v = v * 16 + d;
    }
    ps->p += 4;
    *out = v;
    return 1;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static int utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int n;
    unsigned min, cp;
    if ((c & 0xE0) == 0xC0) { n = 2; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { n = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (end - p < n) return 0;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

static size_t put_utf8(unsigned char *o, unsigned cp)
{
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses a string starting at the opening quote. The decoded form is never
 * longer than the source, so the output buffer is sized from the source. */
static int parse_string(parser *ps, const char **out, size_t *outlen)
{
    ps->p++; /* opening quote */
    /* The closing quote: the first '"' not escaped, i.e. not preceded by an
     * odd run of backslashes (memchr is much faster than a byte loop). */
    const unsigned char *s = ps->p;
    for (;;) {
        s = memchr(s, '"', (size_t)(ps->end - s));
        if (!s) {
            fail(ps, "unterminated string");
            return 0;
        }
        size_t bs = 0;
        while (s - bs > ps->p && s[-1 - (ptrdiff_t)bs] == '\\')
            bs++;
        if (bs % 2 == 0)
            break;
        s++;
    }
    unsigned char *buf = arena_alloc(ps, (size_t)(s - ps->p) + 1);
    if (!buf)
        return 0;
    size_t n = 0;
    while (*ps->p != '"') {
        /* Fast path: a run of printable ASCII other than '"' and '\\' is
         * copied as is (the closing quote found above ends every run). */
        const unsigned char *q = ps->p;
        while (*q >= 0x20 && *q < 0x80 && *q != '"' && *q != '\\')
            q++;
        if (q != ps->p) {
            memcpy(buf + n, ps->p, (size_t)(q - ps->p));
            n += (size_t)(q - ps->p);
            ps->p = q;
            continue;
        }
        unsigned c = *ps->p;
        if (c < 0x20) {
            fail(ps, "control character in string");
            return 0;
        }
        if (c == '\\') {
            ps->p++;
            unsigned e = *ps->p++;
            switch (e) {
            case '"': buf[n++] = '"'; break;
            case '\\': buf[n++] = '\\'; break;
            case '/': buf[n++] = '/'; break;
            case 'b': buf[n++] = '\b'; break;
            case 'f': buf[n++] = '\f'; break;
            case 'n': buf[n++] = '\n'; break;
            case 'r': buf[n++] = '\r'; break;
            case 't': buf[n++] = '\t'; break;
            case 'u': {
                unsigned cp;
                if (!hex4(ps, &cp))
                    return 0;
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    fail(ps, "lone low surrogate in \\u escape");
                    return 0;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') {
                        fail(ps, "high surrogate not followed by a low surrogate");
                        return 0;
                    }
                    ps->p += 2;
                    if (!hex4(ps, &lo))
                        return 0;
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        fail(ps, "high surrogate not followed by a low surrogate");
                        return 0;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                n += put_utf8(buf + n, cp);
                break;
            }
            default:
                ps->p--;
                fail(ps, "bad escape in string");
                return 0;
            }
        } else {
            int l = utf8_len(ps->p, ps->end);
            if (!l) {
                fail(ps, "invalid UTF-8 in string");
                return 0;
            }
            memcpy(buf + n, ps->p, (size_t)l);
            n += (size_t)l;
            ps->p += l;
        }
    }
    ps->p++; /* closing quote */
    buf[n] = '\0';
    *out = (const char *)buf;
    *outlen = n;
    return 1;
}

static int parse_number(parser *ps, k3_json *v)
{
    const unsigned char *s = ps->p;
    int integral = 1;
    if (ps->p < ps->end && *ps->p == '-')
        ps->p++;
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') {
        fail(ps, "bad number");
        return 0;
    }
    if (*ps->p == '0') {
        ps->p++;
        if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
            fail(ps, "leading zero in number");
            return 0;
        }
    } else {
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    if (ps->p < ps->end && *ps->p == '.') {
        integral = 0;
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') {
            fail(ps, "digit expected after decimal point");
            return 0;
        }
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        integral = 0;
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') {
            fail(ps, "digit expected in exponent");
            return 0;
        }
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    char tmp[64];
    size_t n = (size_t)(ps->p - s);
    v->type = K3J_NUMBER;
    v->is_int = 0;
    if (integral && n <= 19) {
        /* Exact int64 from the digits, not from the double; the double is
         * the integer rounded once, exactly what strtod would return. */
        int neg = s[0] == '-';
        uint64_t acc = 0;
        for (const unsigned char *q = s + neg; q < ps->p; q++)
            acc = acc * 10 + (uint64_t)(*q - '0');
        v->number = neg ? -(double)acc : (double)acc;
        if (acc <= (uint64_t)INT64_MAX) {
            v->is_int = 1;
            v->integer = neg ? -(int64_t)acc : (int64_t)acc;
        }
        return 1;
    }
    if (n >= sizeof tmp) {
        /* Long literals are legal JSON; strtod needs a terminated copy. */
        char *big = arena_alloc(ps, n + 1);
        if (!big)
            return 0;
        memcpy(big, s, n);
        big[n] = '\0';
        v->number = strtod(big, NULL);
    } else {
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        v->number = strtod(tmp, NULL);
    }
    if (!isfinite(v->number)) {
        fail(ps, "number out of range");
        return 0;
    }
    return 1;
}

typedef struct { const char *k; size_t l; } keyref;

static int keyref_cmp(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    size_t m = x->l < y->l ? x->l : y->l;
    int c = memcmp(x->k, y->k, m);
    if (c)
        return c;
    return (x->l > y->l) - (x->l < y->l);
}

static void sort_keys(const char **k, size_t *l, size_t n)
{
    keyref *r = malloc(n * sizeof *r);
    if (!r)
        return; /* duplicate check skipped only when memory is exhausted */
    for (size_t i = 0; i < n; i++) {
        r[i].k = k[i];
        r[i].l = l[i];
    }
    qsort(r, n, sizeof *r, keyref_cmp);
    for (size_t i = 0; i < n; i++) {
        k[i] = r[i].k;
        l[i] = r[i].l;
    }
    free(r);
}

static int parse_value(parser *ps, k3_json *v, int depth);

/* Children are collected in a growable temporary array, then copied into
 * the arena once their count is known. */
static int parse_container(parser *ps, k3_json *v, int depth, int is_obj)
{
    size_t cap = 8, n = 0;
    k3_json *items = malloc(cap * sizeof *items);
    const char **keys = is_obj ? malloc(cap * sizeof *keys) : NULL;
    size_t *klens = is_obj ? malloc(cap * sizeof *klens) : NULL;
    int ok = 0;
    if (!items || (is_obj && (!keys || !klens))) {
        fail(ps, "out of memory");
        goto done;
    }
    ps->p++;
    skip_ws(ps);
    char close = is_obj ? '}' : ']';
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ok = 1;
        goto done;
    }
    for (;;) {
        if (n == cap) {
            cap *= 2;
            k3_json *ni = realloc(items, cap * sizeof *items);
            if (!ni) { fail(ps, "out of memory"); goto done; }
            items = ni;
            if (is_obj) {
                const char **nk = realloc(keys, cap * sizeof *keys);
                if (!nk) { fail(ps, "out of memory"); goto done; }
                keys = nk;
                size_t *nl = realloc(klens, cap * sizeof *klens);
                if (!nl) { fail(ps, "out of memory"); goto done; }
                klens = nl;
            }
        }
        skip_ws(ps);
        if (is_obj) {
            if (ps->p >= ps->end || *ps->p != '"') {
                fail(ps, "object key (a string) expected");
                goto done;
            }
            if (!parse_string(ps, &keys[n], &klens[n]))
                goto done;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                fail(ps, "':' expected after object key");
                goto done;
            }
            ps->p++;
        }
        if (!parse_value(ps, &items[n], depth + 1))
            goto done;
        n++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ok = 1;
            break;
        }
        fail(ps, is_obj ? "',' or '}' expected" : "',' or ']' expected");
        goto done;
    }
done:
    if (ok) {
        v->type = is_obj ? K3J_OBJECT : K3J_ARRAY;
        v->count = n;
        v->items = arena_alloc(ps, n * sizeof *items + 1);
        if (v->items)
            memcpy(v->items, items, n * sizeof *items);
        if (is_obj) {
            v->keys = arena_alloc(ps, n * sizeof *keys + 1);
            v->key_lens = arena_alloc(ps, n * sizeof *klens + 1);
            if (v->keys && v->key_lens) {
                memcpy(v->keys, keys, n * sizeof *keys);
                memcpy(v->key_lens, klens, n * sizeof *klens);
                /* Duplicate keys: quadratic only for small objects; large ones
                 * (safetensors headers) are checked by sorting a copy. */
                if (n <= 32) {
                    for (size_t i = 0; i < n && ok; i++)
                        for (size_t j = i + 1; j < n; j++)
                            if (klens[i] == klens[j] && !memcmp(keys[i], keys[j], klens[i])) {
                                fail(ps, "duplicate key \"%s\"", keys[i]);
                                ok = 0;
                                break;
                            }
                }
            }
        }
        if (!ps->failed && n > 32 && is_obj) {
            /* keys[] is the scratch copy; v->keys keeps file order. */
            sort_keys(keys, klens, n);
            for (size_t i = 1; i < n; i++)
                if (klens[i] == klens[i - 1] && !memcmp(keys[i], keys[i - 1], klens[i])) {
                    fail(ps, "duplicate key \"%s\"", keys[i]);
                    break;
                }
        }
    }
    free(items);
    free(keys);
    free(klens);
    return ok && !ps->failed;
}

static int literal(parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) {
        fail(ps, "unexpected character");
        return 0;
    }
    ps->p += n;
    return 1;
}

static int parse_value(parser *ps, k3_json *v, int depth)
{
    memset(v, 0, sizeof *v);
    if (depth > MAX_DEPTH) {
        fail(ps, "nesting deeper than %d levels", MAX_DEPTH);
        return 0;
    }
    skip_ws(ps);
    if (ps->p >= ps->end) {
        fail(ps, "value expected, found end of input");
        return 0;
    }
    switch (*ps->p) {
    case '{': return parse_container(ps, v, depth, 1);
    case '[': return parse_container(ps, v, depth, 0);
    case '"':
        v->type = K3J_STRING;
        return parse_string(ps, &v->str, &v->len);
    case 't': v->type = K3J_BOOL; v->boolean = 1; return literal(ps, "true");
    case 'f': v->type = K3J_BOOL; v->boolean = 0; return literal(ps, "false");
    case 'n': v->type = K3J_NULL; return literal(ps, "null");
    default: return parse_number(ps, v);
    }
}

k3_json_doc *k3_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    k3_json_doc *doc = calloc(1, sizeof *doc);
    if (!doc) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    parser ps = { (const unsigned char *)text, (const unsigned char *)text + len,
                  (const unsigned char *)text, doc, err, errlen, 0 };
    /* RFC 8259 §8.1: a JSON text must not begin with a byte order mark;
     * said as such rather than as the "bad number" it would parse as. */
    if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3))
        fail(&ps, "a UTF-8 byte order mark (EF BB BF) before the JSON text (RFC 8259 "
                  "section 8.1: send the text without it)");
    else if (parse_value(&ps, &doc->root, 0)) {
        skip_ws(&ps);
        if (ps.p != ps.end)
            fail(&ps, "trailing data after the JSON value");
    }
    if (ps.failed) {
        k3_json_free(doc);
        return NULL;
    }
    return doc;
}

const k3_json *k3_json_root(const k3_json_doc *doc) { return &doc->root; }

void k3_json_free(k3_json_doc *doc)
{
    if (!doc)
        return;
    chunk *c = doc->chunks;
    while (c) {
        chunk *n = c->next;
        free(c);
        c = n;
    }
    free(doc);
}

const k3_json *k3_json_get(const k3_json *obj, const char *key)
{
    if (!obj || obj->type != K3J_OBJECT)
        return NULL;
    size_t kl = strlen(key);
    for (size_t i = 0; i < obj->count; i++)
        if (obj->key_lens[i] == kl && !memcmp(obj->keys[i], key, kl))
            return &obj->items[i];
    return NULL;
}

k3_json_doc *k3_json_load(const char *path, size_t max_bytes, k3_err *e)
{
    size_t len = 0;
    char *text = k3_read_small_file(e, path, max_bytes, &len);
    if (!text)
        return NULL;
    char jerr[256];
    k3_json_doc *doc = k3_json_parse(text, len, jerr, sizeof jerr);
    free(text);
    if (!doc)
        k3_fail(e, K3_EINPUT, "%s: %s", path, jerr);
    return doc;
}
