/* schema.c - JSON Schema to rules: types and their unions, enum and
 * const, objects, arrays, anyOf / oneOf / allOf, local $ref (recursive),
 * and the keyword policy (supported, ignored annotation, or unsupported:
 * refused when strict, else a warning). Strings and numbers are in
 * schema_str.c and schema_num.c. */
#include "grammar/schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* Keywords that never constrain (annotations and containers). */
static const char *const ignored[] = {
    "description", "title", "default", "examples", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", "contentMediaType", "contentEncoding",
    "$anchor",
    /* OpenAPI's nullable: JSON Schema validators ignore it, so null is
     * not generated for it (a value without null is valid either way) */
    "nullable", NULL
};
/* Keywords this compiler enforces. */
static const char *const handled[] = { "type",
                                       "enum",
                                       "const",
                                       "properties",
                                       "required",
                                       "additionalProperties",
                                       "items",
                                       "prefixItems",
                                       "minItems",
                                       "maxItems",
                                       "anyOf",
                                       "oneOf",
                                       "allOf",
                                       "$ref",
                                       "minLength",
                                       "maxLength",
                                       "pattern",
                                       "format",
                                       "minimum",
                                       "maximum",
                                       "exclusiveMinimum",
                                       "exclusiveMaximum",
                                       "uniqueItems",
                                       "additionalItems",
                                       NULL };

static int in_list(const char *const *l, const char *k)
{
    for (; *l; l++)
        if (!strcmp(*l, k))
            return 1;
    return 0;
}

void k3g_schema_init(k3g_schema *s, k3g_builder *b, const k3_json *root, int strict, int ws,
                     k3_buf *warn, k3_err *e)
{
    memset(s, 0, sizeof *s);
    s->b = b;
    k3g_json_init(&s->j, b, ws);
    s->strict = strict;
    s->warn = warn;
    s->e = e;
    s->root = root;
    s->prefix = "";
}

void k3g_schema_dispose(k3g_schema *s)
{
    free(s->refs);
    s->refs = NULL;
}

size_t k3g_ptr_push(k3g_schema *s, const char *seg)
{
    size_t mark = s->plen;
    if (s->plen + 2 < sizeof s->ptr)
        s->ptr[s->plen++] = '/';
    for (const char *c = seg; *c && s->plen + 3 < sizeof s->ptr; c++) {
        if (*c == '~' || *c == '/') {
            s->ptr[s->plen++] = '~';
            s->ptr[s->plen++] = *c == '~' ? '0' : '1';
        } else {
            s->ptr[s->plen++] = *c;
        }
    }
    s->ptr[s->plen] = 0;
    return mark;
}

size_t k3g_ptr_push_index(k3g_schema *s, size_t i)
{
    char num[24];
    snprintf(num, sizeof num, "%zu", i);
    return k3g_ptr_push(s, num);
}

void k3g_ptr_pop(k3g_schema *s, size_t mark)
{
    s->plen = mark;
    s->ptr[mark] = 0;
}

int k3g_unsupported(k3g_schema *s, const char *key)
{
    size_t mark = k3g_ptr_push(s, key);
    char line[2300];
    snprintf(line, sizeof line, "unsupported keyword '%s' at %s%s", key, s->prefix,
             s->plen ? s->ptr : "/");
    k3g_ptr_pop(s, mark);
    if (s->strict)
        return k3_fail(s->e, K3_EINPUT, "json schema: %s", line);
    if (s->warn && (k3_buf_puts(s->warn, line, s->e) || k3_buf_puts(s->warn, "\n", s->e)))
        return s->e->code;
    return K3_OK;
}

static int64_t empty_err(k3g_schema *s, const char *why)
{
    k3_fail(s->e, K3_EINPUT, "json schema: %s at %s%s", why, s->prefix, s->plen ? s->ptr : "/");
    return -1;
}

/* ---- $ref ---- */
static const k3_json *resolve(k3g_schema *s, const k3_json *ref)
{
    if (ref->type != K3J_STRING || ref->str[0] != '#')
        return k3_fail(s->e, K3_EINPUT,
                       "json schema: $ref at %s%s: only local references "
                       "(\"#...\") are supported",
                       s->prefix, s->ptr),
               NULL;
    const k3_json *n = s->root;
    const char *p = ref->str + 1;
    while (*p) {
        if (*p != '/')
            return k3_fail(s->e, K3_EINPUT,
                           "json schema: $ref \"%s\" at %s%s is not a JSON "
                           "pointer",
                           ref->str, s->prefix, s->ptr),
                   NULL;
        p++;
        char seg[512];
        size_t k = 0;
        while (*p && *p != '/' && k + 1 < sizeof seg) {
            if (*p == '~' && (p[1] == '0' || p[1] == '1')) {
                seg[k++] = p[1] == '0' ? '~' : '/';
                p += 2;
            } else {
                seg[k++] = *p++;
            }
        }
        seg[k] = 0;
        const k3_json *next = NULL;
        if (n->type == K3J_OBJECT)
            next = k3_json_get(n, seg);
        else if (n->type == K3J_ARRAY) {
            char *end;
            unsigned long i = strtoul(seg, &end, 10);
            if (*seg && !*end && i < n->count)
                next = &n->items[i];
        }
        if (!next)
            return k3_fail(s->e, K3_EINPUT, "json schema: $ref \"%s\" at %s%s points at nothing",
                           ref->str, s->prefix, s->ptr),
                   NULL;
        n = next;
    }
    return n;
}

/* ---- helpers ---- */
static unsigned type_bit(const char *t)
{
    static const struct {
        const char *n;
        unsigned b;
    } m[] = { { "null", K3G_T_NULL },   { "boolean", K3G_T_BOOL },
              { "integer", K3G_T_INT }, { "number", K3G_T_NUM | K3G_T_INT },
              { "string", K3G_T_STR },  { "array", K3G_T_ARR },
              { "object", K3G_T_OBJ } };
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        if (!strcmp(m[i].n, t))
            return m[i].b;
    return 0;
}

static unsigned value_type(const k3_json *v)
{
    switch (v->type) {
    case K3J_NULL: return K3G_T_NULL;
    case K3J_BOOL: return K3G_T_BOOL;
    case K3J_NUMBER:
        return v->is_int || (v->number == (double)(int64_t)v->number && v->number < 9e15 &&
                             v->number > -9e15)
                   ? K3G_T_INT | K3G_T_NUM
                   : K3G_T_NUM;
    case K3J_STRING: return K3G_T_STR;
    case K3J_ARRAY: return K3G_T_ARR;
    default: return K3G_T_OBJ;
    }
}

/* A rule of alternatives, each one element; n == 0 -> K3G_EMPTY. */
static int64_t alts_rule(k3g_schema *s, const int64_t *r, size_t n)
{
    if (!n)
        return K3G_EMPTY;
    if (n == 1)
        return r[0];
    int64_t out = k3g_rule(s->b);
    if (out < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < i && r[k] != r[i])
            k++;
        if (k < i)
            continue; /* the same rule twice: one alternative (no ambiguity) */
        if (k3g_add(s->b, (uint32_t)out, K3G_RULE, (uint32_t)r[i]) || k3g_alt(s->b, (uint32_t)out))
            return -1;
    }
    return out;
}

/* enum / const: the values' JSON texts (raw strings when raw). */
static int64_t values_rule(k3g_schema *s, const k3_json *vals, size_t n, unsigned mask, int raw)
{
    k3_buf *txt = calloc(n + 1, sizeof *txt);
    const char **p = malloc((n + 1) * sizeof *p);
    size_t *l = malloc((n + 1) * sizeof *l), m = 0;
    int64_t r = -1;
    if (!txt || !p || !l) {
        k3_fail(s->e, K3_ERUNTIME, "json schema: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(value_type(&vals[i]) & mask))
            continue;
        if (raw && vals[i].type == K3J_STRING) {
            if (k3_buf_put(&txt[m], vals[i].str, vals[i].len, s->e))
                goto out;
        } else if (k3_json_write(&txt[m], &vals[i],
                                 s->j.ws == K3_GRAM_WS_COMPACT ? 0 : K3_JW_SPACED, s->e)) {
            goto out;
        }
        if (!txt[m].data && k3_buf_put(&txt[m], "", 0, s->e))
            goto out;
        p[m] = txt[m].data;
        l[m] = txt[m].len;
        m++;
    }
    r = m ? k3g_literal_set(s->b, p, l, m) : K3G_EMPTY;
out:
    for (size_t i = 0; txt && i < n; i++)
        k3_buf_free(&txt[i]);
    free(txt), free(p), free(l);
    return r;
}

static int64_t count_of(const k3_json *v, int64_t dflt)
{
    if (!v || v->type != K3J_NUMBER)
        return dflt;
    if (v->number < 0)
        return 0;
    if (v->number > 1e9)
        return 1000000000;
    return (int64_t)v->number;
}

/* ---- arrays ---- */
static int64_t array_rule(k3g_schema *s, const k3_json *node)
{
    k3g_builder *b = s->b;
    const k3_json *items = k3_json_get(node, "items"), *prefix = k3_json_get(node, "prefixItems");
    const k3_json *addl = k3_json_get(node, "additionalItems");
    if (items && items->type == K3J_ARRAY) { /* draft 4-7 tuple form */
        prefix = items;
        items = addl;
    } else if (addl && k3g_unsupported(s, "additionalItems")) {
        return -1;
    }
    const k3_json *uniq = k3_json_get(node, "uniqueItems");
    if (uniq && !(uniq->type == K3J_BOOL && !uniq->boolean) && k3g_unsupported(s, "uniqueItems"))
        return -1;
    int64_t mn = count_of(k3_json_get(node, "minItems"), 0);
    int64_t mx = count_of(k3_json_get(node, "maxItems"), -1);
    size_t k = prefix && prefix->type == K3J_ARRAY ? prefix->count : 0;
    if ((mn > K3_GRAM_MAX_REPEAT || mx > K3_GRAM_MAX_REPEAT) && s->strict)
        return k3_fail(s->e, K3_EINPUT, "json schema: minItems/maxItems above %d at %s%s",
                       K3_GRAM_MAX_REPEAT, s->prefix, s->ptr),
               -1;
    /* Not strict: such a bound is not enforced (a warning), as for strings. */
    if (mx > K3_GRAM_MAX_REPEAT) {
        if (k3g_unsupported(s, "maxItems"))
            return -1;
        mx = -1;
    }
    if (mn > K3_GRAM_MAX_REPEAT) {
        if (k3g_unsupported(s, "minItems"))
            return -1;
        mn = 0;
    }
    if (k > K3_GRAM_MAX_REPEAT)
        return k3_fail(s->e, K3_EINPUT, "json schema: more than %d prefixItems at %s%s",
                       K3_GRAM_MAX_REPEAT, s->prefix, s->ptr),
               -1;
    /* the item rules: prefix ones, then the rest (-2: no more items) */
    int64_t rest;
    if (items && items->type == K3J_BOOL && !items->boolean)
        rest = K3G_EMPTY;
    else if (items) {
        size_t m = k3g_ptr_push(s, prefix == items ? "additionalItems" : "items");
        rest = k3g_schema_value(s, items, K3G_T_ALL, 0);
        k3g_ptr_pop(s, m);
        if (rest == -1)
            return -1;
    } else {
        rest = k3g_json_value(&s->j);
    }
    int64_t *pr = malloc((k + 1) * sizeof *pr);
    if (!pr)
        return k3_fail(s->e, K3_ERUNTIME, "json schema: out of memory"), -1;
    size_t usable = k; /* items after an empty prefix item cannot exist */
    for (size_t i = 0; i < k; i++) {
        size_t m = k3g_ptr_push(s, prefix == items ? "items" : "prefixItems");
        size_t m2 = k3g_ptr_push_index(s, i);
        pr[i] = k3g_schema_value(s, &prefix->items[i], K3G_T_ALL, 0);
        k3g_ptr_pop(s, m2);
        k3g_ptr_pop(s, m);
        if (pr[i] == -1) {
            free(pr);
            return -1;
        }
        if (pr[i] == K3G_EMPTY && usable == k)
            usable = i;
    }
    /* longest possible array */
    int64_t longest = rest == K3G_EMPTY || usable < k ? (int64_t)usable : -1;
    if (mx >= 0 && (longest < 0 || mx < longest))
        longest = mx;
    if (longest >= 0 && mn > longest) {
        free(pr);
        return empty_err(s, "array: minItems cannot be met");
    }
    /* tail(i): items i.. (the array is "[" item0 tail(1) "]"). Past
     * F = max(minItems, prefix count, 1) every item is `rest`: a
     * repetition of (comma rest); below F, one rule per position,
     * optional from minItems on. */
    const char *comma = k3g_comma(&s->j);
    int64_t next = -1, r = -1;
    size_t F = (size_t)(mn > (int64_t)k ? mn : (int64_t)k);
    if (F < 1)
        F = 1;
    if (longest >= 0 && (int64_t)F > longest)
        F = longest > 0 ? (size_t)longest : 1;
    if (rest == K3G_EMPTY || F < k || (longest >= 0 && (int64_t)F >= longest)) {
        next = k3g_rule(b); /* nothing more */
        if (next < 0 || k3g_alt(b, (uint32_t)next))
            goto out;
    } else {
        int64_t ci = k3g_rule(b);
        if (ci < 0 || k3g_bytes(b, (uint32_t)ci, comma, strlen(comma)) ||
            k3g_add(b, (uint32_t)ci, K3G_RULE, (uint32_t)rest) || k3g_alt(b, (uint32_t)ci))
            goto out;
        uint32_t maxrep = longest < 0 ? K3G_INF : (uint32_t)(longest - (int64_t)F);
        next = k3g_repeat(b, k3g_r(ci), 0, maxrep);
        if (next < 0)
            goto out;
    }
    for (size_t i = F; i-- > 1;) {
        int64_t item = i < k ? pr[i] : rest;
        int64_t t = k3g_rule(b);
        if (t < 0)
            goto out;
        if (item != K3G_EMPTY &&
            (k3g_bytes(b, (uint32_t)t, comma, strlen(comma)) ||
             k3g_add(b, (uint32_t)t, K3G_RULE, (uint32_t)item) ||
             k3g_add(b, (uint32_t)t, K3G_RULE, (uint32_t)next) || k3g_alt(b, (uint32_t)t)))
            goto out;
        if ((int64_t)i >= mn && k3g_alt(b, (uint32_t)t))
            goto out;
        b->rules[t].defined = 1;
        next = t;
    }
    r = k3g_rule(b);
    if (r < 0)
        goto out;
    {
        int64_t first = k ? pr[0] : rest;
        if (first != K3G_EMPTY && longest != 0 &&
            (k3g_byte(b, (uint32_t)r, '[') || k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)first) ||
             k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)next) || k3g_byte(b, (uint32_t)r, ']') ||
             k3g_alt(b, (uint32_t)r)))
            goto out;
        if (mn == 0 && (k3g_bytes(b, (uint32_t)r, "[]", 2) || k3g_alt(b, (uint32_t)r)))
            goto out;
        b->rules[r].defined = 1;
    }
out:
    free(pr);
    return s->e->code ? -1 : r;
}

/* ---- objects ---- */
typedef struct prop {
    const char *key;
    size_t klen;
    const k3_json *schema; /* NULL: any value */
    int required;
    const char *via; /* pointer segment: "properties" */
} prop;

static int add_member(k3g_schema *s, uint32_t r, const prop *p, int64_t val)
{
    k3_buf kb = { 0 };
    k3_json key;
    memset(&key, 0, sizeof key);
    key.type = K3J_STRING;
    key.str = p->key;
    key.len = p->klen;
    if (k3_json_write(&kb, &key, 0, s->e) || k3g_bytes(s->b, r, kb.data, kb.len)) {
        k3_buf_free(&kb);
        return s->e->code;
    }
    k3_buf_free(&kb);
    const char *colon = k3g_colon(&s->j);
    if (k3g_bytes(s->b, r, colon, strlen(colon)))
        return s->e->code;
    return k3g_add(s->b, r, K3G_RULE, (uint32_t)val);
}

/* Members p[i..n) given whether one was written before (memoised in
 * memo[2 * i + before]). */
static int64_t members(k3g_schema *s, const prop *p, const int64_t *val, size_t i, size_t n,
                       int before, int64_t *memo)
{
    if (memo[2 * i + before] != -1)
        return memo[2 * i + before];
    int64_t r = k3g_rule(s->b);
    if (r < 0)
        return -1;
    if (i == n) {
        if (k3g_alt(s->b, (uint32_t)r))
            return -1;
        return memo[2 * i + before] = r;
    }
    int64_t with = members(s, p, val, i + 1, n, 1, memo);
    if (with < 0)
        return -1;
    const char *comma = k3g_comma(&s->j);
    if (val[i] != K3G_EMPTY) {
        if ((before && k3g_bytes(s->b, (uint32_t)r, comma, strlen(comma))) ||
            add_member(s, (uint32_t)r, &p[i], val[i]) ||
            k3g_add(s->b, (uint32_t)r, K3G_RULE, (uint32_t)with) || k3g_alt(s->b, (uint32_t)r))
            return -1;
    }
    if (!p[i].required) {
        int64_t without = members(s, p, val, i + 1, n, before, memo);
        if (without < 0 || k3g_add(s->b, (uint32_t)r, K3G_RULE, (uint32_t)without) ||
            k3g_alt(s->b, (uint32_t)r))
            return -1;
    }
    s->b->rules[r].defined = 1;
    return memo[2 * i + before] = r;
}

/* An object from one or more schema objects (allOf merges them):
 * properties in order, required from all, additionalProperties false if
 * any says so. Properties are written in that order; no others are
 * generated (a valid subset when additional ones are allowed), except for
 * a schema without properties, whose members may be any (or match
 * additionalProperties). */
static int64_t object_rule(k3g_schema *s, const k3_json *const *src, size_t nsrc)
{
    size_t np = 0, cap = 0;
    prop *p = NULL;
    int any_props = 0;
    const k3_json *addl = NULL;
    for (size_t k = 0; k < nsrc; k++) {
        const k3_json *props = k3_json_get(src[k], "properties");
        const k3_json *a = k3_json_get(src[k], "additionalProperties");
        if (a)
            addl = addl && addl->type == K3J_BOOL && !addl->boolean ? addl : a;
        if (props && props->type == K3J_OBJECT) {
            any_props = 1;
            for (size_t i = 0; i < props->count; i++) {
                for (size_t t = 0; t < np; t++)
                    if (p[t].klen == props->key_lens[i] &&
                        !memcmp(p[t].key, props->keys[i], p[t].klen)) {
                        free(p);
                        return k3g_unsupported(s, "allOf")
                                   ? -1
                                   : (k3_fail(s->e, K3_EINPUT,
                                              "json schema: allOf: property '%s' "
                                              "defined twice at %s%s",
                                              props->keys[i], s->prefix, s->ptr),
                                      -1);
                    }
                if (k3g_grow((void **)&p, &cap, np + 1, sizeof *p, s->e)) {
                    free(p);
                    return -1;
                }
                p[np].key = props->keys[i];
                p[np].klen = props->key_lens[i];
                p[np].schema = &props->items[i];
                p[np].required = 0;
                np++;
            }
        }
    }
    /* required: from every source; names without a property: any value */
    for (size_t k = 0; k < nsrc; k++) {
        const k3_json *req = k3_json_get(src[k], "required");
        for (size_t i = 0; req && req->type == K3J_ARRAY && i < req->count; i++) {
            if (req->items[i].type != K3J_STRING)
                continue;
            size_t t = 0;
            while (t < np && !(p[t].klen == req->items[i].len &&
                               !memcmp(p[t].key, req->items[i].str, p[t].klen)))
                t++;
            if (t == np) {
                if (k3g_grow((void **)&p, &cap, np + 1, sizeof *p, s->e)) {
                    free(p);
                    return -1;
                }
                p[np].key = req->items[i].str;
                p[np].klen = req->items[i].len;
                p[np].schema = addl && addl->type == K3J_OBJECT ? addl : NULL;
                np++;
            }
            p[t].required = 1;
        }
    }
    int64_t r = -1;
    if (!np && !any_props) {
        free(p);
        /* no properties: any members, their values any or additionalProperties */
        if (addl && addl->type == K3J_BOOL && !addl->boolean) {
            r = k3g_literal(s->b, "{}", 2);
            return r;
        }
        if (!addl || addl->type == K3J_BOOL)
            return k3g_json_object(&s->j);
        size_t m = k3g_ptr_push(s, "additionalProperties");
        int64_t v = k3g_schema_value(s, addl, K3G_T_ALL, 0);
        k3g_ptr_pop(s, m);
        if (v == -1)
            return -1;
        if (v == K3G_EMPTY)
            return k3g_literal(s->b, "{}", 2);
        k3g_builder *b = s->b;
        int64_t str = k3g_json_string(&s->j), mem = k3g_rule(b), more = k3g_rule(b);
        const char *comma = k3g_comma(&s->j), *colon = k3g_colon(&s->j);
        if (str < 0 || mem < 0 || more < 0 || k3g_add(b, (uint32_t)mem, K3G_RULE, (uint32_t)str) ||
            k3g_bytes(b, (uint32_t)mem, colon, strlen(colon)) ||
            k3g_add(b, (uint32_t)mem, K3G_RULE, (uint32_t)v) || k3g_alt(b, (uint32_t)mem) ||
            k3g_bytes(b, (uint32_t)more, comma, strlen(comma)) ||
            k3g_add(b, (uint32_t)more, K3G_RULE, (uint32_t)mem) || k3g_alt(b, (uint32_t)more))
            return -1;
        int64_t rep = k3g_repeat(b, k3g_r(more), 0, K3G_INF);
        r = k3g_rule(b);
        if (rep < 0 || r < 0 || k3g_bytes(b, (uint32_t)r, "{}", 2) || k3g_alt(b, (uint32_t)r) ||
            k3g_byte(b, (uint32_t)r, '{') || k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)mem) ||
            k3g_add(b, (uint32_t)r, K3G_RULE, (uint32_t)rep) || k3g_byte(b, (uint32_t)r, '}') ||
            k3g_alt(b, (uint32_t)r))
            return -1;
        return r;
    }
    int64_t *val = malloc((np + 1) * sizeof *val), *memo = malloc((2 * np + 2) * sizeof *memo);
    if (!val || !memo) {
        k3_fail(s->e, K3_ERUNTIME, "json schema: out of memory");
        goto out;
    }
    for (size_t i = 0; i < 2 * np + 2; i++)
        memo[i] = -1;
    for (size_t i = 0; i < np; i++) {
        size_t m = k3g_ptr_push(s, "properties"), m2 = k3g_ptr_push(s, p[i].key);
        val[i] =
            p[i].schema ? k3g_schema_value(s, p[i].schema, K3G_T_ALL, 0) : k3g_json_value(&s->j);
        k3g_ptr_pop(s, m2);
        k3g_ptr_pop(s, m);
        if (val[i] == -1)
            goto out;
        if (val[i] == K3G_EMPTY && p[i].required) {
            size_t m3 = k3g_ptr_push(s, "properties");
            empty_err(s, "a required property allows no value");
            k3g_ptr_pop(s, m3);
            goto out;
        }
    }
    {
        int64_t body = members(s, p, val, 0, np, 0, memo);
        r = k3g_rule(s->b);
        if (body < 0 || r < 0 || k3g_byte(s->b, (uint32_t)r, '{') ||
            k3g_add(s->b, (uint32_t)r, K3G_RULE, (uint32_t)body) ||
            k3g_byte(s->b, (uint32_t)r, '}') || k3g_alt(s->b, (uint32_t)r))
            r = -1;
    }
out:
    free(p), free(val), free(memo);
    return s->e->code ? -1 : r;
}

/* Whether node has keywords of a type (for a schema without "type"). */
static unsigned implied_types(const k3_json *node)
{
    static const struct {
        const char *k;
        unsigned t;
    } m[] = { { "properties", K3G_T_OBJ },
              { "additionalProperties", K3G_T_OBJ },
              { "required", K3G_T_OBJ },
              { "items", K3G_T_ARR },
              { "prefixItems", K3G_T_ARR },
              { "minItems", K3G_T_ARR },
              { "maxItems", K3G_T_ARR },
              { "minLength", K3G_T_STR },
              { "maxLength", K3G_T_STR },
              { "pattern", K3G_T_STR },
              { "format", K3G_T_STR },
              { "minimum", K3G_T_NUM | K3G_T_INT },
              { "maximum", K3G_T_NUM | K3G_T_INT },
              { "exclusiveMinimum", K3G_T_NUM | K3G_T_INT },
              { "exclusiveMaximum", K3G_T_NUM | K3G_T_INT } };
    unsigned t = 0;
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        if (k3_json_get(node, m[i].k))
            t |= m[i].t;
    return t ? t : K3G_T_ALL;
}

/* The keyword policy: each keyword ignored (annotation), handled, or
 * unsupported (k3g_unsupported). *constraint: a handled one besides $ref. */
static int policy(k3g_schema *s, const k3_json *node, int *constraint)
{
    *constraint = 0;
    for (size_t i = 0; i < node->count; i++) {
        const char *k = node->keys[i];
        if (in_list(ignored, k))
            continue;
        if (!in_list(handled, k)) {
            if (k3g_unsupported(s, k))
                return s->e->code;
            continue;
        }
        if (strcmp(k, "$ref"))
            *constraint = 1;
    }
    return K3_OK;
}

static int64_t cached_ref(k3g_schema *s, const k3_json *target, unsigned mask, int raw)
{
    if (mask != K3G_T_ALL || raw)
        return k3g_schema_value(s, target, mask, raw);
    for (size_t i = 0; i < s->nrefs; i++)
        if (s->refs[i].node == target)
            return s->refs[i].rule;
    /* allocate first, so a recursive reference finds it */
    int64_t r = k3g_rule(s->b);
    if (r < 0)
        return -1;
    if (k3g_grow((void **)&s->refs, &s->caprefs, s->nrefs + 1, sizeof *s->refs, s->e))
        return -1;
    s->refs[s->nrefs].node = target;
    s->refs[s->nrefs].rule = r;
    s->nrefs++;
    int64_t body = k3g_schema_value(s, target, mask, raw);
    if (body == -1)
        return -1;
    if (body == K3G_EMPTY)
        return empty_err(s, "$ref target allows no value");
    if (k3g_add(s->b, (uint32_t)r, K3G_RULE, (uint32_t)body) || k3g_alt(s->b, (uint32_t)r))
        return -1;
    return r;
}

static int64_t union_rule(k3g_schema *s, const k3_json *list, const char *key, unsigned mask,
                          int raw)
{
    if (list->type != K3J_ARRAY || !list->count)
        return k3_fail(s->e, K3_EINPUT, "json schema: %s at %s%s must be a non-empty array", key,
                       s->prefix, s->ptr),
               -1;
    int64_t *r = malloc(list->count * sizeof *r);
    size_t n = 0;
    if (!r)
        return k3_fail(s->e, K3_ERUNTIME, "json schema: out of memory"), -1;
    size_t m = k3g_ptr_push(s, key);
    for (size_t i = 0; i < list->count; i++) {
        size_t m2 = k3g_ptr_push_index(s, i);
        int64_t x = k3g_schema_value(s, &list->items[i], mask, raw);
        k3g_ptr_pop(s, m2);
        if (x == -1) {
            free(r);
            k3g_ptr_pop(s, m);
            return -1;
        }
        if (x != K3G_EMPTY)
            r[n++] = x;
    }
    k3g_ptr_pop(s, m);
    int64_t out = alts_rule(s, r, n);
    free(r);
    return out;
}

int64_t k3g_schema_value(k3g_schema *s, const k3_json *node, unsigned mask, int raw)
{
    if (s->e->code)
        return -1;
    if (node->type == K3J_BOOL) {
        if (!node->boolean)
            return K3G_EMPTY;
        if (mask == K3G_T_ALL && !raw)
            return k3g_json_value(&s->j);
        node = NULL;
    } else if (node->type != K3J_OBJECT) {
        return k3_fail(s->e, K3_EINPUT, "json schema: expected an object or a boolean at %s%s",
                       s->prefix, s->plen ? s->ptr : "/"),
               -1;
    }
    if (++s->depth > K3_GRAM_MAX_NEST) {
        s->depth--;
        return k3_fail(s->e, K3_EINPUT,
                       "json schema: nested deeper than %d (K3_GRAM_MAX_NEST) "
                       "at %s%s",
                       K3_GRAM_MAX_NEST, s->prefix, s->ptr),
               -1;
    }
    int64_t r = -1;
    int has_constraint = 0;
    if (node && policy(s, node, &has_constraint))
        goto out;
    const k3_json *ref = node ? k3_json_get(node, "$ref") : NULL;
    if (ref) {
        if (has_constraint) { /* siblings of $ref: refused (or ignored) as a whole */
            for (size_t i = 0; i < node->count; i++)
                if (!in_list(ignored, node->keys[i]) && strcmp(node->keys[i], "$ref") &&
                    in_list(handled, node->keys[i]) && k3g_unsupported(s, node->keys[i]))
                    goto out;
        }
        size_t m = k3g_ptr_push(s, "$ref");
        const k3_json *target = resolve(s, ref);
        k3g_ptr_pop(s, m);
        if (!target)
            goto out;
        r = cached_ref(s, target, mask, raw);
        goto out;
    }
    /* the types this node allows */
    unsigned types = K3G_T_ALL;
    const k3_json *type = node ? k3_json_get(node, "type") : NULL;
    if (type) {
        types = 0;
        if (type->type == K3J_STRING)
            types = type_bit(type->str);
        for (size_t i = 0; type->type == K3J_ARRAY && i < type->count; i++)
            if (type->items[i].type == K3J_STRING)
                types |= type_bit(type->items[i].str);
        if (!types) {
            k3_fail(s->e, K3_EINPUT, "json schema: bad \"type\" at %s%s", s->prefix, s->ptr);
            goto out;
        }
    } else if (node && !k3_json_get(node, "enum") && !k3_json_get(node, "const") &&
               !k3_json_get(node, "anyOf") && !k3_json_get(node, "oneOf") &&
               !k3_json_get(node, "allOf")) {
        types = implied_types(node);
    }
    mask &= types;
    if (!mask) {
        r = K3G_EMPTY;
        goto out;
    }
    const k3_json *en = node ? k3_json_get(node, "enum") : NULL;
    const k3_json *cn = node ? k3_json_get(node, "const") : NULL;
    if (en || cn) {
        if (en && en->type != K3J_ARRAY) {
            k3_fail(s->e, K3_EINPUT, "json schema: enum at %s%s must be an array", s->prefix,
                    s->ptr);
            goto out;
        }
        r = en ? values_rule(s, en->items, en->count, mask, raw) : values_rule(s, cn, 1, mask, raw);
        goto out;
    }
    const k3_json *any = node ? k3_json_get(node, "anyOf") : NULL;
    const k3_json *one = node ? k3_json_get(node, "oneOf") : NULL;
    const k3_json *all = node ? k3_json_get(node, "allOf") : NULL;
    if (any || one) {
        if (any && one && k3g_unsupported(s, "oneOf"))
            goto out;
        r = union_rule(s, any ? any : one, any ? "anyOf" : "oneOf", mask, raw);
        goto out;
    }
    if (all) {
        /* allOf of objects: merged; a single member: that member */
        if (all->type != K3J_ARRAY || !all->count) {
            k3_fail(s->e, K3_EINPUT, "json schema: allOf at %s%s must be a non-empty array",
                    s->prefix, s->ptr);
            goto out;
        }
        if (all->count == 1 && node->count == 1) {
            size_t m = k3g_ptr_push(s, "allOf"), m2 = k3g_ptr_push_index(s, 0);
            r = k3g_schema_value(s, &all->items[0], mask, raw);
            k3g_ptr_pop(s, m2);
            k3g_ptr_pop(s, m);
            goto out;
        }
        const k3_json **src = malloc((all->count + 1) * sizeof *src);
        if (!src) {
            k3_fail(s->e, K3_ERUNTIME, "json schema: out of memory");
            goto out;
        }
        size_t ns = 0;
        src[ns++] = node;
        int ok = 1;
        for (size_t i = 0; i < all->count && ok; i++) {
            const k3_json *x = &all->items[i];
            const k3_json *xr = x->type == K3J_OBJECT ? k3_json_get(x, "$ref") : NULL;
            if (xr) {
                x = resolve(s, xr);
                if (!x) {
                    free(src);
                    goto out;
                }
            }
            int cons;
            size_t m = k3g_ptr_push(s, "allOf"), m2 = k3g_ptr_push_index(s, i);
            int bad = x->type == K3J_OBJECT && policy(s, x, &cons);
            k3g_ptr_pop(s, m2);
            k3g_ptr_pop(s, m);
            if (bad) {
                free(src);
                goto out;
            }
            const k3_json *xt = x->type == K3J_OBJECT ? k3_json_get(x, "type") : NULL;
            ok = x->type == K3J_OBJECT && !k3_json_get(x, "anyOf") && !k3_json_get(x, "oneOf") &&
                 !k3_json_get(x, "allOf") && !k3_json_get(x, "enum") && !k3_json_get(x, "const") &&
                 (!xt || (xt->type == K3J_STRING && !strcmp(xt->str, "object")));
            src[ns++] = x;
        }
        if (!ok || !(mask & K3G_T_OBJ)) {
            free(src);
            if (k3g_unsupported(s, "allOf"))
                goto out;
            /* not strict: the allOf is ignored */
        } else {
            r = object_rule(s, src, ns);
            free(src);
            goto out;
        }
    }
    /* one alternative per allowed type */
    {
        int64_t alt[8];
        size_t n = 0;
        if (mask & K3G_T_NULL)
            alt[n++] = k3g_literal(s->b, "null", 4);
        if (mask & K3G_T_BOOL) {
            const char *tf[2] = { "true", "false" };
            size_t tl[2] = { 4, 5 };
            alt[n++] = k3g_literal_set(s->b, tf, tl, 2);
        }
        if (mask & K3G_T_NUM)
            alt[n++] = k3g_schema_number(s, node);
        else if (mask & K3G_T_INT)
            alt[n++] = k3g_schema_integer(s, node);
        if (mask & K3G_T_STR)
            alt[n++] = k3g_schema_string(s, node, raw);
        if (mask & K3G_T_ARR)
            alt[n++] = node ? array_rule(s, node) : k3g_json_array(&s->j);
        if (mask & K3G_T_OBJ) {
            const k3_json *one_src[1] = { node };
            alt[n++] = node ? object_rule(s, one_src, 1) : k3g_json_object(&s->j);
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (alt[i] == -1)
                goto out;
            if (alt[i] != K3G_EMPTY)
                alt[k++] = alt[i];
        }
        r = alts_rule(s, alt, k);
    }
out:
    s->depth--;
    return s->e->code ? -1 : r;
}

int k3_gram_from_schema_json(k3_grammar **out, const k3_json *schema,
                             const k3_gram_schema_opts *opts, k3_buf *warn, k3_err *e)
{
    *out = NULL;
    k3_gram_schema_opts dflt = { 0, K3_GRAM_WS_SPACED };
    if (!opts)
        opts = &dflt;
    k3g_builder b;
    k3g_init(&b, e);
    k3g_schema s;
    k3g_schema_init(&s, &b, schema, opts->strict, opts->ws, warn, e);
    int64_t r = k3g_schema_value(&s, schema, K3G_T_ALL, 0);
    if (r == K3G_EMPTY)
        k3_fail(e, K3_EINPUT, "json schema: the schema allows no value");
    if (!e->code)
        k3g_finish(&b, (uint32_t)r, NULL, out);
    k3g_schema_dispose(&s);
    k3g_dispose(&b);
    return e->code;
}

int k3_gram_from_schema(k3_grammar **out, const char *json, size_t len,
                        const k3_gram_schema_opts *opts, k3_buf *warn, k3_err *e)
{
    *out = NULL;
    if (len > K3_GRAM_MAX_TEXT)
        return k3_fail(e, K3_EINPUT, "json schema: %zu bytes (more than K3_GRAM_MAX_TEXT)", len);
    char err[160];
    k3_json_doc *doc = k3_json_parse(json, len, err, sizeof err);
    if (!doc)
        return k3_fail(e, K3_EINPUT, "json schema: %s", err);
    k3_gram_from_schema_json(out, k3_json_root(doc), opts, warn, e);
    k3_json_free(doc);
    return e->code;
}
