/* reply_grammar.c - the grammar of a whole K3 chat reply (grammar.h,
 * k3_gram_chat_reply): the XTML markup the renderer writes
 * (src/chat/render.c), with the special ids <|open|> <|close|> <|sep|> as
 * token terminals and the tag names, attributes and values as text.
 *
 * Tool arguments: one element per property of the tool's parameters, in
 * the schema's "properties" order, required ones present and optional
 * ones optional; each element's type attribute is the JSON type name of
 * its value (render.c writes k3_json_type_name: an integer is "number")
 * and its body the value: a string's raw text (constrained by the
 * string's schema, unescaped), anything else its JSON with json.dumps's
 * default separators. A tool without properties takes any argument
 * elements. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/schema.h"
#include "util/error.h"

typedef struct rb {
    k3g_builder *b;
    k3g_schema args;           /* tool arguments: spaced JSON, as render.c */
    uint32_t open, close, sep; /* token indices */
    k3_err *e;
} rb;

static int tok(rb *x, uint32_t r, uint32_t t)
{
    return k3g_add(x->b, r, K3G_TOKEN, t);
}

static int text(rb *x, uint32_t r, const char *s)
{
    return k3g_bytes(x->b, r, s, strlen(s));
}

static int sub(rb *x, uint32_t r, int64_t s)
{
    if (s < 0)
        return x->e->code ? x->e->code : k3_fail(x->e, K3_EINPUT, "grammar: empty part");
    return k3g_add(x->b, r, K3G_RULE, (uint32_t)s);
}

/* An attribute value as render.c escapes it (& and "). */
static int attr(rb *x, uint32_t r, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *t = s[i] == '&' ? "&amp;" : s[i] == '"' ? "&quot;" : NULL;
        if (t ? text(x, r, t) : k3g_byte(x->b, r, (unsigned char)s[i]))
            return x->e->code;
    }
    return K3_OK;
}

/* <|close|>NAME<|sep|> */
static int close_tag(rb *x, uint32_t r, const char *name)
{
    return tok(x, r, x->close) || text(x, r, name) || tok(x, r, x->sep);
}

static const struct {
    const char *name;
    unsigned mask;
} arg_types[] = { { "string", K3G_T_STR },   { "number", K3G_T_INT | K3G_T_NUM },
                  { "boolean", K3G_T_BOOL }, { "null", K3G_T_NULL },
                  { "array", K3G_T_ARR },    { "object", K3G_T_OBJ } };

/* One argument element for key k whose value matches schema (NULL: any
 * value). Returns a rule, K3G_EMPTY when no value fits. */
static int64_t argument(rb *x, const char *k, size_t kl, const k3_json *schema)
{
    k3g_builder *b = x->b;
    int64_t r = k3g_rule(b);
    if (r < 0)
        return -1;
    int any = 0;
    for (size_t t = 0; t < sizeof arg_types / sizeof *arg_types; t++) {
        int raw = arg_types[t].mask == K3G_T_STR;
        int64_t v;
        if (schema)
            v = k3g_schema_value(&x->args, schema, arg_types[t].mask, raw);
        else if (raw)
            v = k3g_any_text(&x->args.j);
        else {
            static const k3_json yes = { K3J_BOOL, 1, 0, 0, 0, NULL, 0, 0, NULL, NULL, NULL };
            v = k3g_schema_value(&x->args, &yes, arg_types[t].mask, 0);
        }
        if (v == -1)
            return -1;
        if (v == K3G_EMPTY)
            continue;
        if (tok(x, (uint32_t)r, x->open) || text(x, (uint32_t)r, "argument key=\"") ||
            attr(x, (uint32_t)r, k, kl) || text(x, (uint32_t)r, "\" type=\"") ||
            text(x, (uint32_t)r, arg_types[t].name) || text(x, (uint32_t)r, "\"") ||
            tok(x, (uint32_t)r, x->sep) || sub(x, (uint32_t)r, v) ||
            close_tag(x, (uint32_t)r, "argument") || k3g_alt(b, (uint32_t)r))
            return -1;
        any = 1;
    }
    return any ? r : K3G_EMPTY;
}

/* Any argument elements (a tool without declared properties). */
static int64_t any_arguments(rb *x)
{
    k3g_builder *b = x->b;
    /* a key: attribute text (no raw '"' or '&'; &amp; and &quot; allowed) */
    uint32_t kr[] = { 0, '"' - 1, '"' + 1, '&' - 1, '&' + 1, 0x10FFFF };
    int64_t kc = k3g_class(b, kr, 3), ke = k3g_rule(b);
    if (kc < 0 || ke < 0 || sub(x, (uint32_t)ke, kc) || k3g_alt(b, (uint32_t)ke) ||
        text(x, (uint32_t)ke, "&amp;") || k3g_alt(b, (uint32_t)ke) ||
        text(x, (uint32_t)ke, "&quot;") || k3g_alt(b, (uint32_t)ke))
        return -1;
    int64_t key = k3g_repeat(b, k3g_r(ke), 1, K3G_INF);
    /* reuse argument() with a placeholder key, then splice: simpler to
     * write the element here with the key rule */
    int64_t el = k3g_rule(b);
    if (key < 0 || el < 0)
        return -1;
    for (size_t t = 0; t < sizeof arg_types / sizeof *arg_types; t++) {
        int raw = arg_types[t].mask == K3G_T_STR;
        static const k3_json yes = { K3J_BOOL, 1, 0, 0, 0, NULL, 0, 0, NULL, NULL, NULL };
        int64_t v =
            raw ? k3g_any_text(&x->args.j) : k3g_schema_value(&x->args, &yes, arg_types[t].mask, 0);
        if (v < 0)
            return -1;
        if (tok(x, (uint32_t)el, x->open) || text(x, (uint32_t)el, "argument key=\"") ||
            sub(x, (uint32_t)el, key) || text(x, (uint32_t)el, "\" type=\"") ||
            text(x, (uint32_t)el, arg_types[t].name) || text(x, (uint32_t)el, "\"") ||
            tok(x, (uint32_t)el, x->sep) || sub(x, (uint32_t)el, v) ||
            close_tag(x, (uint32_t)el, "argument") || k3g_alt(b, (uint32_t)el))
            return -1;
    }
    return k3g_repeat(b, k3g_r(el), 0, K3G_INF);
}

/* The argument elements of one tool. */
static int64_t arguments(rb *x, const k3_gram_tool *t, size_t ti)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "tools[%zu].parameters", ti);
    x->args.prefix = prefix;
    x->args.root = t->parameters;
    x->args.plen = 0;
    x->args.ptr[0] = 0;
    x->args.nrefs = 0; /* refs are per document */
    const k3_json *p = t->parameters;
    int64_t r = -1;
    if (!p || p->type == K3J_BOOL) {
        r = any_arguments(x);
        goto out;
    }
    if (p->type != K3J_OBJECT) {
        k3_fail(x->e, K3_EINPUT, "%s: expected a JSON Schema object", prefix);
        goto out;
    }
    {
        /* check the top level's keywords like any schema (strict refuses
         * what is not enforced); the object itself is unrolled here */
        const k3_json *props = k3_json_get(p, "properties"), *req = k3_json_get(p, "required");
        const k3_json *ty = k3_json_get(p, "type");
        if (ty && !(ty->type == K3J_STRING && !strcmp(ty->str, "object"))) {
            k3_fail(x->e, K3_EINPUT, "%s/type: tool parameters must be an object schema", prefix);
            goto out;
        }
        for (size_t i = 0; i < p->count; i++) {
            static const char *const ok[] = {
                "type",        "properties", "required", "additionalProperties",
                "description", "title",      "$defs",    "definitions",
                "$schema",     "$id",        "$comment", "default",
                "examples",    NULL
            };
            int known = 0;
            for (const char *const *k = ok; *k; k++)
                known |= !strcmp(*k, p->keys[i]);
            if (!known && k3g_unsupported(&x->args, p->keys[i]))
                goto out;
        }
        if (!props || props->type != K3J_OBJECT || !props->count) {
            if (req && req->type == K3J_ARRAY && req->count) {
                k3_fail(x->e, K3_EINPUT, "%s: required arguments without properties", prefix);
                goto out;
            }
            r = props ? k3g_rule(x->b) : any_arguments(x);
            if (props && r >= 0 && k3g_alt(x->b, (uint32_t)r))
                r = -1;
            goto out;
        }
        r = k3g_rule(x->b);
        if (r < 0)
            goto out;
        for (size_t i = 0; i < props->count; i++) {
            int required = 0;
            for (size_t k = 0; req && req->type == K3J_ARRAY && k < req->count; k++)
                required |= req->items[k].type == K3J_STRING &&
                            req->items[k].len == props->key_lens[i] &&
                            !memcmp(req->items[k].str, props->keys[i], props->key_lens[i]);
            size_t m = k3g_ptr_push(&x->args, "properties"),
                   m2 = k3g_ptr_push(&x->args, props->keys[i]);
            int64_t a = argument(x, props->keys[i], props->key_lens[i], &props->items[i]);
            k3g_ptr_pop(&x->args, m2);
            k3g_ptr_pop(&x->args, m);
            if (a == -1) {
                r = -1;
                goto out;
            }
            if (a == K3G_EMPTY) {
                if (required) {
                    k3_fail(x->e, K3_EINPUT,
                            "%s/properties/%s: a required argument allows no "
                            "value",
                            prefix, props->keys[i]);
                    r = -1;
                    goto out;
                }
                continue;
            }
            if (!required) {
                a = k3g_repeat(x->b, k3g_r(a), 0, 1);
                if (a < 0) {
                    r = -1;
                    goto out;
                }
            }
            if (sub(x, (uint32_t)r, a)) {
                r = -1;
                goto out;
            }
        }
        if (k3g_alt(x->b, (uint32_t)r))
            r = -1;
    }
out:
    x->args.prefix = "";
    return x->e->code ? -1 : r;
}

/* One call element, the index-th (1-based), of any of the tools (or only
 * tools[only] when only >= 0); argsr[t] are the tools' argument rules. */
static int64_t call(rb *x, const k3_gram_reply_spec *sp, const int64_t *argsr, size_t index,
                    int64_t only)
{
    int64_t r = k3g_rule(x->b);
    if (r < 0)
        return -1;
    char idx[48];
    snprintf(idx, sizeof idx, "\" index=\"%zu\"", index);
    for (size_t t = 0; t < sp->ntools; t++) {
        if (only >= 0 && (size_t)only != t)
            continue;
        const char *name = sp->tools[t].name;
        if (tok(x, (uint32_t)r, x->open) || text(x, (uint32_t)r, "call tool=\"") ||
            attr(x, (uint32_t)r, name, strlen(name)) || text(x, (uint32_t)r, idx) ||
            tok(x, (uint32_t)r, x->sep) || sub(x, (uint32_t)r, argsr[t]) ||
            close_tag(x, (uint32_t)r, "call") || k3g_alt(x->b, (uint32_t)r))
            return -1;
    }
    return r;
}

/* <|open|>tools<|sep|> calls 1..max <|close|>tools<|sep|> */
static int64_t tools_el(rb *x, const k3_gram_reply_spec *sp, const int64_t *argsr, size_t max,
                        int64_t only)
{
    int64_t tail = -1; /* calls from index i on, built from the last */
    for (size_t i = max; i >= 1; i--) {
        int64_t c = call(x, sp, argsr, i, only), r = k3g_rule(x->b);
        if (c < 0 || r < 0 || sub(x, (uint32_t)r, c))
            return -1;
        if (tail >= 0 && (sub(x, (uint32_t)r, k3g_repeat(x->b, k3g_r(tail), 0, 1))))
            return -1;
        if (k3g_alt(x->b, (uint32_t)r))
            return -1;
        tail = r;
    }
    int64_t r = k3g_rule(x->b);
    if (r < 0 || tok(x, (uint32_t)r, x->open) || text(x, (uint32_t)r, "tools") ||
        tok(x, (uint32_t)r, x->sep) || sub(x, (uint32_t)r, tail) ||
        close_tag(x, (uint32_t)r, "tools") || k3g_alt(x->b, (uint32_t)r))
        return -1;
    return r;
}

static int64_t content(rb *x, const k3_gram_reply_spec *sp, k3_buf *warn)
{
    k3g_builder *b = x->b;
    switch (sp->content) {
    case K3_GRAM_CONTENT_FREE: {
        k3g_json j;
        k3g_json_init(&j, b, sp->schema.ws);
        return k3g_any_text(&j);
    }
    case K3_GRAM_CONTENT_JSON_OBJECT: {
        k3g_json j;
        k3g_json_init(&j, b, sp->schema.ws);
        return k3g_json_object(&j);
    }
    case K3_GRAM_CONTENT_SCHEMA: {
        if (!sp->content_schema)
            return k3_fail(x->e, K3_EINPUT, "chat reply grammar: no content schema"), -1;
        k3g_schema s;
        k3g_schema_init(&s, b, sp->content_schema, sp->schema.strict, sp->schema.ws, warn, x->e);
        int64_t r = k3g_schema_value(&s, sp->content_schema, K3G_T_ALL, 0);
        k3g_schema_dispose(&s);
        if (r == K3G_EMPTY)
            return k3_fail(x->e, K3_EINPUT, "json schema: the schema allows no value"), -1;
        return r;
    }
    case K3_GRAM_CONTENT_GBNF: {
        uint32_t root;
        if (k3g_gbnf_into(b, sp->content_text, sp->content_len, &root, NULL))
            return -1;
        return root;
    }
    default:
        return k3_fail(x->e, K3_EINPUT, "chat reply grammar: unknown content kind %d", sp->content),
               -1;
    }
}

int k3_gram_chat_reply(k3_grammar **out, const k3_gram_reply_spec *sp, k3_buf *warn, k3_err *e)
{
    *out = NULL;
    k3g_builder b;
    k3g_init(&b, e);
    rb x;
    memset(&x, 0, sizeof x);
    x.b = &b;
    x.e = e;
    k3g_schema_init(&x.args, &b, NULL, sp->schema.strict, K3_GRAM_WS_SPACED, warn, e);
    int64_t ti[3] = { k3g_token_add(&b, -1, "<|open|>", 8, 0),
                      k3g_token_add(&b, -1, "<|close|>", 9, 0),
                      k3g_token_add(&b, -1, "<|sep|>", 7, 0) };
    int64_t *argsr = NULL;
    int64_t root = -1;
    if (ti[0] < 0 || ti[1] < 0 || ti[2] < 0)
        goto out;
    x.open = (uint32_t)ti[0], x.close = (uint32_t)ti[1], x.sep = (uint32_t)ti[2];
    int mode = sp->tool_mode;
    if (mode < K3_GRAM_TOOLS_NONE || mode > K3_GRAM_TOOLS_NAMED) {
        k3_fail(e, K3_EINPUT, "chat reply grammar: unknown tool mode %d", mode);
        goto out;
    }
    if (mode != K3_GRAM_TOOLS_NONE && !sp->ntools) {
        k3_fail(e, K3_EINPUT, "chat reply grammar: tool_choice %s without tools",
                mode == K3_GRAM_TOOLS_AUTO       ? "auto"
                : mode == K3_GRAM_TOOLS_REQUIRED ? "required"
                                                 : "named");
        goto out;
    }
    size_t max = sp->max_calls ? sp->max_calls : 8;
    if (max > 64) {
        k3_fail(e, K3_EINPUT, "chat reply grammar: more than 64 calls per reply");
        goto out;
    }
    int64_t only = -1;
    if (mode == K3_GRAM_TOOLS_NAMED) {
        for (size_t t = 0; t < sp->ntools && only < 0; t++)
            if (sp->tool_name && !strcmp(sp->tools[t].name, sp->tool_name))
                only = (int64_t)t;
        if (only < 0) {
            k3_fail(e, K3_EINPUT,
                    "tool_choice names the function '%s', which is not among the "
                    "tools",
                    sp->tool_name ? sp->tool_name : "");
            goto out;
        }
        max = 1;
    }
    int64_t tools = -1;
    if (mode != K3_GRAM_TOOLS_NONE) {
        argsr = calloc(sp->ntools + 1, sizeof *argsr);
        if (!argsr) {
            k3_fail(e, K3_ERUNTIME, "grammar: out of memory");
            goto out;
        }
        for (size_t t = 0; t < sp->ntools; t++) {
            if (only >= 0 && (size_t)only != t)
                continue;
            if (!sp->tools[t].name || !*sp->tools[t].name) {
                k3_fail(e, K3_EINPUT, "tools[%zu]: a tool without a name", t);
                goto out;
            }
            if ((argsr[t] = arguments(&x, &sp->tools[t], t)) < 0)
                goto out;
        }
        if ((tools = tools_el(&x, sp, argsr, max, only)) < 0)
            goto out;
    }
    /* the body after the response element opened */
    int64_t body = k3g_rule(&b);
    if (body < 0)
        goto out;
    if (mode == K3_GRAM_TOOLS_REQUIRED || mode == K3_GRAM_TOOLS_NAMED) {
        if (close_tag(&x, (uint32_t)body, "response") || sub(&x, (uint32_t)body, tools) ||
            k3g_alt(&b, (uint32_t)body))
            goto out;
    } else {
        int64_t c = content(&x, sp, warn);
        if (c < 0 || sub(&x, (uint32_t)body, c) || close_tag(&x, (uint32_t)body, "response"))
            goto out;
        if (mode == K3_GRAM_TOOLS_AUTO && sp->content == K3_GRAM_CONTENT_FREE) {
            if (sub(&x, (uint32_t)body, k3g_repeat(&b, k3g_r(tools), 0, 1)))
                goto out;
        }
        if (k3g_alt(&b, (uint32_t)body))
            goto out;
        if (mode == K3_GRAM_TOOLS_AUTO && sp->content != K3_GRAM_CONTENT_FREE &&
            (close_tag(&x, (uint32_t)body, "response") || sub(&x, (uint32_t)body, tools) ||
             k3g_alt(&b, (uint32_t)body)))
            goto out;
    }
    root = k3g_rule(&b);
    if (root < 0)
        goto out;
    if (sp->thinking) {
        k3g_json j;
        k3g_json_init(&j, &b, K3_GRAM_WS_SPACED);
        if (sub(&x, (uint32_t)root, k3g_any_text(&j)) || close_tag(&x, (uint32_t)root, "think") ||
            tok(&x, (uint32_t)root, x.open) || text(&x, (uint32_t)root, "response") ||
            tok(&x, (uint32_t)root, x.sep))
            goto out;
    }
    if (sub(&x, (uint32_t)root, body) || close_tag(&x, (uint32_t)root, "message") ||
        k3g_alt(&b, (uint32_t)root))
        goto out;
    k3g_finish(&b, (uint32_t)root, NULL, out);
out:
    free(argsr);
    k3g_schema_dispose(&x.args);
    k3g_dispose(&b);
    return e->code;
}
