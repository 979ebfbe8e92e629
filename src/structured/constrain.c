/* constrain.c - see constrain.h. The engine's objects (grammar/grammar.h)
 * behind the turn driver's k3_constraint: a compiled grammar, a matcher
 * on the shared vocabulary, and a mask of words turned into -inf logits. */
#include "structured/constrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/conv.h"
#include "chat/turn.h"
#include "grammar/grammar.h"
#include "util/error.h"
#include "util/json.h"

struct k3_constrain_vocab {
    k3_gram_vocab *gv;
    const k3_tokenizer *tok;
};

struct k3_constrain {
    k3_grammar *g;
    k3_gram_matcher *mt;
    const k3_constrain_vocab *v;
    uint32_t *words; /* [k3_gram_mask_words] scratch for one mask */
    size_t nwords;
    k3_constraint iface;
};

int k3_constrain_vocab_new(const k3_tokenizer *tok, size_t vocab, k3_constrain_vocab **out,
                           k3_err *e)
{
    (void)vocab; /* ids past the tokenizer's are masked (constraint_mask) */
    *out = k3_calloc(e, 1, sizeof **out, "the grammar vocabulary");
    if (!*out)
        return e->code;
    (*out)->tok = tok;
    if (k3_gram_vocab_from_tokenizer(&(*out)->gv, tok, e)) {
        free(*out);
        *out = NULL;
    }
    return e->code;
}

void k3_constrain_vocab_free(k3_constrain_vocab *v)
{
    if (!v)
        return;
    k3_gram_vocab_free(v->gv);
    free(v);
}

/* gen/constraint.h over the matcher. */
static int constraint_mask(void *ctx, float *row, size_t vocab, size_t left, k3_err *e)
{
    k3_constrain *c = ctx;
    size_t known = k3_gram_vocab_size(c->v->gv);
    if (k3_gram_mask(c->mt, left > (size_t)INT64_MAX ? -1 : (int64_t)left, c->words, e))
        return e->code;
    for (size_t id = 0; id < vocab; id++)
        if (id >= known || !(c->words[id / 32] >> (id % 32) & 1u))
            row[id] = -INFINITY;
    return K3_OK;
}

static int constraint_can_end(void *ctx)
{
    const k3_constrain *c = ctx;
    return k3_gram_is_accepting(c->mt);
}

static int constraint_accept(void *ctx, uint32_t id, int *ok, k3_err *e)
{
    k3_constrain *c = ctx;
    k3_err refused = { 0, "" };
    *ok = k3_gram_accept(c->mt, id, &refused) == K3_OK;
    if (!*ok && refused.code != K3_EINPUT) /* out of memory: not a refusal */
        return k3_fail(e, refused.code, "%s", refused.msg);
    return K3_OK;
}

static int constraint_rollback(void *ctx, size_t n, k3_err *e)
{
    k3_constrain *c = ctx;
    if (n > k3_gram_count(c->mt))
        return k3_fail(e, K3_ERUNTIME, "grammar rollback of %zu ids past its %zu", n,
                       k3_gram_count(c->mt));
    k3_gram_rollback(c->mt, n);
    return K3_OK;
}

/* Takes grammar g (compiled, or NULL after a failure in e) into *out with
 * a matcher whose end ids are the turn's (chat/turn.h k3_turn_end_ids). */
static int wrap(const k3_constrain_vocab *v, k3_grammar *g, int chat, k3_constrain **out,
                k3_err *e)
{
    uint32_t ends[K3_TURN_MAX_END_IDS];
    size_t nends = 0;
    k3_constrain *c = NULL;
    *out = NULL;
    if (e->code) {
        k3_gram_free(g);
        return e->code;
    }
    k3_turn_end_ids(v->tok, chat, ends, &nends);
    if (!(c = k3_calloc(e, 1, sizeof *c, "a constraint"))) {
        k3_gram_free(g);
        return e->code;
    }
    c->g = g;
    c->v = v;
    c->nwords = k3_gram_mask_words(v->gv);
    if (!(c->words = k3_malloc(e, c->nwords * sizeof *c->words, "a grammar mask")) ||
        k3_gram_matcher_new(&c->mt, g, v->gv, ends, nends, e)) {
        k3_constrain_free(c);
        return e->code;
    }
    c->iface = (k3_constraint){ c, constraint_mask, constraint_can_end, constraint_accept,
                                constraint_rollback };
    *out = c;
    return K3_OK;
}

/* The engine's message behind what the request called it. */
static int named(k3_err *e, const char *what)
{
    if (e->code) {
        k3_err inner = *e;
        e->code = K3_OK; /* k3_fail keeps the first message: this one replaces it */
        k3_fail(e, inner.code, "%s: %s", what, inner.msg);
    }
    return e->code;
}

int k3_constrain_new(const k3_constrain_vocab *v, k3_constrain_kind kind, const char *text,
                     size_t len, int strict, k3_constrain **out, k3_buf *warnings, k3_err *e)
{
    k3_grammar *g = NULL;
    k3_gram_schema_opts so = { strict, K3_GRAM_WS_SPACED };
    *out = NULL;
    if (kind == K3_CONSTRAIN_GBNF) /* the engine's message says "grammar:LINE:COL" */
        k3_gram_from_gbnf(&g, text, len, e);
    else if (kind == K3_CONSTRAIN_JSON_SCHEMA)
        named((k3_gram_from_schema(&g, text, len, &so, warnings, e), e), "json_schema");
    else
        k3_gram_json_object(&g, K3_GRAM_WS_SPACED, e);
    return wrap(v, g, 0, out, e);
}

/* The conversation's tools as the engine's list: each declaration's
 * function name and parameters (tools_json is checked JSON of an array
 * of objects; a declaration without a function name cannot be called, so
 * it is left out). */
static int chat_tools(const k3_json *tools, k3_gram_tool **out, size_t *n, k3_err *e)
{
    *out = NULL;
    *n = 0;
    if (!tools || tools->type != K3J_ARRAY || tools->count == 0)
        return K3_OK;
    if (!(*out = k3_calloc(e, tools->count, sizeof **out, "the tools")))
        return e->code;
    for (size_t i = 0; i < tools->count; i++) {
        const k3_json *fn = k3_json_get(&tools->items[i], "function");
        const k3_json *name = fn && fn->type == K3J_OBJECT ? k3_json_get(fn, "name") : NULL;
        if (!name || name->type != K3J_STRING)
            continue;
        const k3_json *params = k3_json_get(fn, "parameters");
        (*out)[*n].name = name->str;
        (*out)[*n].parameters = params && params->type == K3J_OBJECT ? params : NULL;
        (*n)++;
    }
    return K3_OK;
}

/* Parses a conversation's stored JSON text (checked when it was read). */
static k3_json_doc *parse_kept(k3_text t, const char *what, k3_err *e)
{
    char jerr[128];
    k3_json_doc *d = t.s ? k3_json_parse(t.s, t.n, jerr, sizeof jerr) : NULL;
    if (t.s && !d)
        k3_fail(e, K3_ERUNTIME, "%s: %s", what, jerr);
    return d;
}

int k3_constrain_chat(const k3_constrain_vocab *v, const k3_chat *c, int thinking,
                      k3_constrain **out, k3_buf *warnings, k3_err *e)
{
    k3_gram_reply_spec spec;
    k3_gram_tool *tools = NULL;
    k3_json_doc *tdoc = NULL, *sdoc = NULL;
    k3_grammar *g = NULL;
    int json_schema = c->response_format && !strcmp(c->response_format, "json_schema");
    *out = NULL;
    memset(&spec, 0, sizeof spec);
    spec.thinking = thinking;
    spec.schema.strict = json_schema && c->schema_strict;
    spec.schema.ws = K3_GRAM_WS_SPACED;
    if (c->grammar.s) {
        spec.content = K3_GRAM_CONTENT_GBNF;
        spec.content_text = c->grammar.s;
        spec.content_len = c->grammar.n;
    } else if (json_schema) {
        spec.content = K3_GRAM_CONTENT_SCHEMA;
    } else if (c->response_format) {
        spec.content = K3_GRAM_CONTENT_JSON_OBJECT;
    }
    if (!c->tool_choice)
        spec.tool_mode = c->tools_json.s ? K3_GRAM_TOOLS_AUTO : K3_GRAM_TOOLS_NONE;
    else if (!strcmp(c->tool_choice, "none"))
        spec.tool_mode = K3_GRAM_TOOLS_NONE;
    else
        spec.tool_mode = c->tool_name.s ? K3_GRAM_TOOLS_NAMED : K3_GRAM_TOOLS_REQUIRED;
    spec.tool_name = c->tool_name.s;
    if (spec.tool_mode == K3_GRAM_TOOLS_NONE && spec.content == K3_GRAM_CONTENT_FREE)
        return K3_OK; /* nothing asked for */
    if ((sdoc = parse_kept(c->schema_json, "response_format schema", e)) != NULL)
        spec.content_schema = k3_json_root(sdoc);
    if (!e->code && (tdoc = parse_kept(c->tools_json, "tools", e)) != NULL)
        chat_tools(k3_json_root(tdoc), &tools, &spec.ntools, e);
    spec.tools = tools;
    if (!e->code && spec.tool_mode >= K3_GRAM_TOOLS_REQUIRED && spec.ntools == 0)
        k3_fail(e, K3_EINPUT, "tool_choice: \"required\" (or a named function) needs tools "
                              "declared with a function name");
    /* The engine names a tool's schema ("tools[i].parameters/...") and a
     * GBNF position ("grammar:LINE:COL"); the content schema is named here
     * for the request's field. */
    if (!e->code && k3_gram_chat_reply(&g, &spec, warnings, e) &&
        spec.content == K3_GRAM_CONTENT_SCHEMA && strncmp(e->msg, "tools", 5))
        named(e, "response_format.json_schema.schema");
    wrap(v, g, 1, out, e);
    free(tools);
    k3_json_free(tdoc);
    k3_json_free(sdoc);
    return e->code;
}

const k3_constraint *k3_constrain_get(k3_constrain *c)
{
    return &c->iface;
}

int k3_constrain_replay(k3_constrain *c, const uint32_t *ids, size_t n, k3_err *e)
{
    for (size_t i = 0; i < n; i++) {
        k3_err why = { 0, "" };
        if (k3_gram_accept(c->mt, ids[i], &why))
            return k3_fail(e, why.code, "id %zu of %zu (%u): %s", i + 1, n, ids[i], why.msg);
    }
    return K3_OK;
}

void k3_constrain_free(k3_constrain *c)
{
    if (!c)
        return;
    k3_gram_matcher_free(c->mt);
    k3_gram_free(c->g);
    free(c->words);
    free(c);
}
