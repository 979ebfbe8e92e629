/* json_write.c - see json_write.h. */
#include "util/json_write.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int k3_buf_put(k3_buf *b, const void *s, size_t n, k3_err *e)
{
    if (b->cap - b->len <= n) { /* <=: room for the terminating NUL */
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len <= n)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return k3_fail(e, K3_ERUNTIME, "out of memory growing a text buffer to %zu bytes", cap);
        b->data = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return K3_OK;
}

int k3_buf_printf(k3_buf *b, k3_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return k3_fail(e, K3_ERUNTIME, "internal: a format that vsnprintf refuses");
    if (k3_buf_put(b, "", 0, e)) /* data is allocated */
        return e->code;
    size_t need = b->len + (size_t)n + 1;
    if (need > b->cap) {
        need = need > 2 * b->cap ? need : 2 * b->cap; /* geometric, as k3_buf_put */
        char *p = realloc(b->data, need);
        if (!p)
            return k3_fail(e, K3_ERUNTIME, "out of memory growing a text buffer to %zu bytes",
                           need);
        b->data = p;
        b->cap = need;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return K3_OK;
}

int k3_buf_puts(k3_buf *b, const char *s, k3_err *e)
{
    return k3_buf_put(b, s, strlen(s), e);
}

void k3_buf_free(k3_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static int write_string(k3_buf *b, const char *s, size_t n, k3_err *e)
{
    if (k3_buf_put(b, "\"", 1, e))
        return e->code;
    size_t run = 0; /* bytes of s[i - run .. i) waiting to be copied as-is */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *rep = NULL;
        switch (c) {
        case '"': rep = "\\\""; break;
        case '\\': rep = "\\\\"; break;
        case '\n': rep = "\\n"; break;
        case '\r': rep = "\\r"; break;
        case '\t': rep = "\\t"; break;
        case '\b': rep = "\\b"; break;
        case '\f': rep = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                rep = esc;
            }
        }
        if (!rep) {
            run++;
            continue;
        }
        if (k3_buf_put(b, s + i - run, run, e) || k3_buf_puts(b, rep, e))
            return e->code;
        run = 0;
    }
    if (k3_buf_put(b, s + n - run, run, e))
        return e->code;
    return k3_buf_put(b, "\"", 1, e);
}

/* Python's repr(x) for a finite double: the shortest digit string that reads
 * back as x (found as the first correctly rounded %.*e that round-trips),
 * written positionally when the decimal point falls within
 * -4 < decpt <= 16 and in exponent form otherwise. */
static int write_float(k3_buf *b, double x, k3_err *e)
{
    char sci[40];
    for (int prec = 0; prec < 17; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec, x);
        if (strtod(sci, NULL) == x)
            break;
    }
    /* sci is [-]d[.ddd]e(+|-)xx: split it into sign, digits and exponent. */
    char digits[24];
    size_t nd = 0;
    const char *p = sci;
    int neg = *p == '-';
    p += neg;
    for (; *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int decpt = atoi(p + 1) + 1; /* digits[0] is followed by decpt - 1 places */

    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = decpt; i < 0; i++)
                out[o++] = '0';
            memcpy(out + o, digits, nd);
            o += nd;
        } else if ((size_t)decpt < nd) {
            memcpy(out + o, digits, (size_t)decpt);
            o += (size_t)decpt;
            out[o++] = '.';
            memcpy(out + o, digits + decpt, nd - (size_t)decpt);
            o += nd - (size_t)decpt;
        } else {
            memcpy(out + o, digits, nd);
            o += nd;
            for (size_t i = nd; i < (size_t)decpt; i++)
                out[o++] = '0';
            out[o++] = '.';
            out[o++] = '0';
        }
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, nd - 1);
            o += nd - 1;
        }
        o += (size_t)snprintf(out + o, sizeof out - o, "e%+03d", decpt - 1);
    }
    return k3_buf_put(b, out, o, e);
}

typedef struct {
    const char *key;
    size_t len, index;
} member;

static int member_cmp(const void *a, const void *b)
{
    const member *x = a, *y = b;
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, m);
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

static int write_object(k3_buf *b, const k3_json *v, unsigned flags, k3_err *e)
{
    member *order = k3_malloc(e, v->count * sizeof *order, "JSON object members");
    if (!order)
        return e->code;
    for (size_t i = 0; i < v->count; i++)
        order[i] = (member){ v->keys[i], v->key_lens[i], i };
    if (flags & K3_JW_SORT_KEYS)
        qsort(order, v->count, sizeof *order, member_cmp);
    const char *comma = flags & K3_JW_SPACED ? ", " : ",";
    const char *colon = flags & K3_JW_SPACED ? ": " : ":";
    k3_buf_put(b, "{", 1, e);
    for (size_t i = 0; i < v->count && !e->code; i++) {
        if (i > 0)
            k3_buf_puts(b, comma, e);
        if (!write_string(b, order[i].key, order[i].len, e) && !k3_buf_puts(b, colon, e))
            k3_json_write(b, &v->items[order[i].index], flags, e);
    }
    free(order);
    return e->code ? e->code : k3_buf_put(b, "}", 1, e);
}

const char *k3_json_type_name(const k3_json *v)
{
    static const char *const names[] = { "null", "boolean", "number", "string", "array", "object" };
    return names[v->type];
}

int k3_json_write(k3_buf *b, const k3_json *v, unsigned flags, k3_err *e)
{
    char num[24];
    switch (v->type) {
    case K3J_NULL: return k3_buf_puts(b, "null", e);
    case K3J_BOOL: return k3_buf_puts(b, v->boolean ? "true" : "false", e);
    case K3J_NUMBER:
        /* Integers beyond int64 reach here as doubles and print as Python
         * would print a float; tool schemas do not carry such numbers. */
        if (!v->is_int)
            return write_float(b, v->number, e);
        snprintf(num, sizeof num, "%lld", (long long)v->integer);
        return k3_buf_puts(b, num, e);
    case K3J_STRING: return write_string(b, v->str, v->len, e);
    case K3J_ARRAY:
        if (k3_buf_put(b, "[", 1, e))
            return e->code;
        for (size_t i = 0; i < v->count; i++)
            if ((i > 0 && k3_buf_puts(b, flags & K3_JW_SPACED ? ", " : ",", e)) ||
                k3_json_write(b, &v->items[i], flags, e))
                return e->code;
        return k3_buf_put(b, "]", 1, e);
    case K3J_OBJECT: return write_object(b, v, flags, e);
    }
    return k3_fail(e, K3_ERUNTIME, "JSON writer: node of unknown type %d", (int)v->type);
}
