/* api.c - see api.h. A request is checked field by field against one
 * table; a chat's conversation then goes to conversation.h. */
#include "server/api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/conversation.h"
#include "util/error.h"
#include "util/json.h"
#include "util/json_write.h"

int k3_api_fail(k3_api_error *err, int status, const char *code, const char *param,
                const char *fmt, ...)
{
    va_list ap;
    err->status = status;
    err->type = status >= 500 ? "server_error" : "invalid_request_error";
    err->code = code;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return status;
}

/* A parse in progress. */
typedef struct {
    k3_api_request *out;
    k3_api_error *err;
    const k3_api_limits *lim;
    k3_api_conv conv; /* chat: what goes to the renderer */
    int top_logprobs_given; /* chat: top_logprobs > 0 was asked */
    /* The structured-output extension given (api.h), at most one: */
    const char *structured;   /* its field's name, or NULL */
    char *grammar;            /* GBNF text (grammar, guided_grammar, guided_choice) */
    const k3_json *schema;    /* json_schema, guided_json: the schema object */
    k3_json_doc *schema_doc;  /* a schema given as JSON text, parsed */
    const k3_json *completion_format; /* completions: response_format */
    int thinking_given;     /* "thinking" was given (it wins over chat_template_kwargs) */
    int effort_given;       /* reasoning_effort was given (it wins over thinking.effort) */
    const char *thinking_effort; /* thinking.effort, or NULL */
    int kwargs_thinking;    /* chat_template_kwargs' thinking: -1 not given, 0 / 1 */
} parse;

int k3_api_is_chat(const k3_api_request *r)
{
    return r->kind != K3_API_COMPLETION;
}

void k3_api_note_ignored(k3_api_request *r, const char *name)
{
    size_t n = strlen(r->ignored), room = sizeof r->ignored - n;
    if (room > 1)
        snprintf(r->ignored + n, room, "%s%s", n ? ", " : "", name);
}

static int oom(parse *p, const k3_err *e)
{
    return k3_api_fail(p->err, 500, NULL, NULL, "%s", e->msg);
}

static int wrong_type(parse *p, const char *name, const char *want, const k3_json *v)
{
    return k3_api_fail(p->err, 400, "invalid_type", name,
                       "Invalid type for '%s': expected %s, but got %s instead.", name, want,
                       k3_json_type_name(v));
}

static int want(parse *p, const char *name, const k3_json *v, k3_json_type t, const char *what)
{
    return v->type == t ? 0 : wrong_type(p, name, what, v);
}

/* A number in [lo, hi], or (lo, hi] when lo_open. */
static int number_in(parse *p, const char *name, const k3_json *v, double lo, int lo_open,
                     double hi, float *out)
{
    if (want(p, name, v, K3J_NUMBER, "a number"))
        return p->err->status;
    /* An open bound is checked on the float the sampler will use: a double
     * such as 1e-300 is above 0 but rounds to 0 as a float. */
    if (v->number < lo || v->number > hi || (lo_open && (float)v->number <= lo))
        return k3_api_fail(p->err, 400, "invalid_value", name,
                           "Invalid value for '%s': expected a number in %c%g, %g], got %g.",
                           name, lo_open ? '(' : '[', lo, hi, v->number);
    *out = (float)v->number;
    return 0;
}

static int integer_in(parse *p, const char *name, const k3_json *v, long long lo, long long hi,
                      long long *out)
{
    if (v->type != K3J_NUMBER || !v->is_int)
        return wrong_type(p, name, "an integer", v);
    if (v->integer < lo || v->integer > hi)
        return k3_api_fail(p->err, 400, "invalid_value", name,
                           "Invalid value for '%s': expected an integer from %lld to %lld, "
                           "got %lld.", name, lo, hi, (long long)v->integer);
    *out = v->integer;
    return 0;
}

static int unsupported(parse *p, const char *name, const char *only)
{
    return k3_api_fail(p->err, 400, "unsupported_value", name,
                       "'%s' is not supported by k3 serve except as %s.", name, only);
}

/* The field handlers: v is the field's value, never null. */

static int f_string(parse *p, const char *name, const k3_json *v)
{
    return want(p, name, v, K3J_STRING, "a string");
}

static int f_bool(parse *p, const char *name, const k3_json *v)
{
    return want(p, name, v, K3J_BOOL, "a boolean");
}

static int f_object(parse *p, const char *name, const k3_json *v)
{
    return want(p, name, v, K3J_OBJECT, "an object");
}

static int f_stream(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_BOOL, "a boolean"))
        return p->err->status;
    p->out->stream = v->boolean;
    return 0;
}

static int f_ignore_eos(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_BOOL, "a boolean"))
        return p->err->status;
    p->out->ignore_eos = v->boolean;
    return 0;
}

static int f_spec(parse *p, const char *name, const k3_json *v)
{
    long long n = 0;
    if (integer_in(p, name, v, 0, 16, &n))
        return p->err->status;
    p->out->spec = (int)n;
    return 0;
}

static int f_return_token_ids(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_BOOL, "a boolean"))
        return p->err->status;
    p->out->return_token_ids = v->boolean;
    return 0;
}

static int f_stream_options(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_OBJECT, "an object"))
        return p->err->status;
    for (size_t i = 0; i < v->count; i++) {
        if (strcmp(v->keys[i], "include_usage") != 0)
            return k3_api_fail(p->err, 400, "unknown_parameter", name,
                               "Unrecognized request argument supplied: %s.%s", name, v->keys[i]);
        if (v->items[i].type != K3J_NULL &&
            want(p, "stream_options.include_usage", &v->items[i], K3J_BOOL, "a boolean"))
            return p->err->status;
        p->out->include_usage = v->items[i].type == K3J_BOOL && v->items[i].boolean;
    }
    return 0;
}

/* max_tokens, max_completion_tokens and n_predict: one limit, clamped to
 * the server's (api.h). n_predict -1 is llama-server's "no limit". */
static int f_max_tokens(parse *p, const char *name, const k3_json *v)
{
    if (v->type != K3J_NUMBER || !v->is_int)
        return wrong_type(p, name, "an integer", v);
    if (!strcmp(name, "n_predict") && v->integer == -1)
        return 0;
    if (v->integer < 1)
        return k3_api_fail(p->err, 400, "invalid_value", name,
                           "Invalid value for '%s': expected an integer of at least 1, got "
                           "%lld.", name, (long long)v->integer);
    if (p->out->max_tokens >= 0)
        return k3_api_fail(p->err, 400, "invalid_value", name,
                           "Give one of max_tokens, max_completion_tokens and n_predict.");
    p->out->max_tokens = v->integer > p->lim->max_tokens ? p->lim->max_tokens : (long)v->integer;
    return 0;
}

static int f_temperature(parse *p, const char *name, const k3_json *v)
{
    return number_in(p, name, v, 0, 0, 2, &p->out->temperature);
}

static int f_top_p(parse *p, const char *name, const k3_json *v)
{
    return number_in(p, name, v, 0, 1, 1, &p->out->top_p);
}

static int f_min_p(parse *p, const char *name, const k3_json *v)
{
    return number_in(p, name, v, 0, 0, 1, &p->out->min_p);
}

static int f_repetition_penalty(parse *p, const char *name, const k3_json *v)
{
    return number_in(p, name, v, 0, 1, 10, &p->out->repeat_penalty);
}

static int f_top_k(parse *p, const char *name, const k3_json *v)
{
    long long k = 0;
    if (integer_in(p, name, v, 0, 1 << 30, &k))
        return p->err->status;
    p->out->top_k = (int)k;
    return 0;
}

static int f_seed(parse *p, const char *name, const k3_json *v)
{
    long long s = 0;
    if (integer_in(p, name, v, INT64_MIN, INT64_MAX, &s))
        return p->err->status;
    p->out->has_seed = 1;
    p->out->seed = (uint64_t)s;
    return 0;
}

static int add_stop(parse *p, const char *name, const k3_json *s)
{
    k3_err e = { 0, "" };
    if (want(p, name, s, K3J_STRING, "a string or an array of strings"))
        return p->err->status;
    if (s->len == 0 || strlen(s->str) != s->len)
        return k3_api_fail(p->err, 400, "invalid_value", name,
                           "Stop strings must not be empty or contain \\u0000.");
    if (p->out->nstop == K3_API_MAX_STOP)
        return k3_api_fail(p->err, 400, "invalid_value", name,
                           "At most %d stop strings are allowed.", K3_API_MAX_STOP);
    char *copy = k3_malloc(&e, s->len + 1, "stop string");
    if (!copy)
        return oom(p, &e);
    memcpy(copy, s->str, s->len + 1);
    p->out->stop[p->out->nstop++] = copy;
    return 0;
}

static int f_stop(parse *p, const char *name, const k3_json *v)
{
    if (v->type != K3J_ARRAY)
        return add_stop(p, name, v);
    for (size_t i = 0; i < v->count; i++)
        if (add_stop(p, name, &v->items[i]))
            return p->err->status;
    return 0;
}

/* n and best_of: only 1. */
static int f_one(parse *p, const char *name, const k3_json *v)
{
    long long n = 0;
    if (integer_in(p, name, v, 1, 128, &n))
        return p->err->status;
    return n == 1 ? 0 : unsupported(p, name, "1 (one choice per request)");
}

/* frequency_penalty, presence_penalty: only 0. */
static int f_frequency_penalty(parse *p, const char *name, const k3_json *v)
{
    return number_in(p, name, v, -2, 0, 2, &p->out->frequency_penalty);
}

static int f_presence_penalty(parse *p, const char *name, const k3_json *v)
{
    return number_in(p, name, v, -2, 0, 2, &p->out->presence_penalty);
}

static int f_logit_bias(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_OBJECT, "an object"))
        return p->err->status;
    return v->count == 0 ? 0 : unsupported(p, name, "{}");
}

/* Chat: logprobs is a boolean, top_logprobs 0..20 (it needs logprobs:
 * checked once every field is read). */
static int f_chat_logprobs(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_BOOL, "a boolean"))
        return p->err->status;
    p->out->logprobs = v->boolean;
    return 0;
}

static int f_top_logprobs(parse *p, const char *name, const k3_json *v)
{
    long long n = 0;
    if (integer_in(p, name, v, 0, 20, &n))
        return p->err->status;
    p->top_logprobs_given = n > 0;
    p->out->top_logprobs = (int)n;
    return 0;
}

/* Completions: logprobs N (0..5) asks for the ids' log-probabilities and
 * the N most likely at each step; false is the same as absent. */
static int f_completion_logprobs(parse *p, const char *name, const k3_json *v)
{
    long long n = 0;
    if (v->type == K3J_BOOL && !v->boolean)
        return 0;
    if (integer_in(p, name, v, 0, 5, &n))
        return p->err->status;
    p->out->logprobs = 1;
    p->out->top_logprobs = (int)n;
    return 0;
}

static int f_echo(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_BOOL, "a boolean"))
        return p->err->status;
    return v->boolean ? unsupported(p, name, "false") : 0;
}

static int f_suffix(parse *p, const char *name, const k3_json *v)
{
    (void)v;
    return unsupported(p, name, "null");
}

static int f_messages(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_ARRAY, "an array"))
        return p->err->status;
    if (v->count == 0)
        return k3_api_fail(p->err, 400, "invalid_value", name,
                           "'messages' must contain at least one message.");
    p->conv.messages = v;
    return 0;
}

static int f_model(parse *p, const char *name, const k3_json *v)
{
    k3_err e = { 0, "" };
    if (want(p, name, v, K3J_STRING, "a string"))
        return p->err->status;
    if (!(p->out->model = k3_malloc(&e, v->len + 1, "model")))
        return oom(p, &e);
    memcpy(p->out->model, v->str, v->len + 1);
    p->out->model_len = v->len;
    return 0;
}

static int keep_prompt(parse *p, const k3_json *v)
{
    k3_err e = { 0, "" };
    if (!(p->out->prompt = k3_malloc(&e, v->len + 1, "prompt")))
        return oom(p, &e);
    memcpy(p->out->prompt, v->str, v->len + 1);
    p->out->prompt_len = v->len;
    return 0;
}

/* A string, a list of one string, or a list of ids (answer.h checks them
 * against the vocabulary). */
static int f_prompt(parse *p, const char *name, const k3_json *v)
{
    k3_err e = { 0, "" };
    if (v->type == K3J_STRING)
        return keep_prompt(p, v);
    if (v->type != K3J_ARRAY)
        return wrong_type(p, name, "a string, or an array of one string or of token ids", v);
    if (v->count == 0)
        return k3_api_fail(p->err, 400, "invalid_value", name, "'prompt' is an empty list.");
    if (v->items[0].type == K3J_STRING) {
        if (v->count != 1)
            return unsupported(p, name, "one prompt per request (a list of one string)");
        return keep_prompt(p, &v->items[0]);
    }
    if (!(p->out->prompt_ids = k3_malloc(&e, v->count * sizeof *p->out->prompt_ids, "prompt")))
        return oom(p, &e);
    for (size_t i = 0; i < v->count; i++) {
        long long id = 0;
        if (integer_in(p, name, &v->items[i], 0, UINT32_MAX, &id))
            return p->err->status;
        p->out->prompt_ids[i] = (uint32_t)id;
    }
    p->out->nprompt_ids = v->count;
    return 0;
}

/* tools, tool_choice and response_format go to the renderer, which
 * checks them. */
static int f_tools(parse *p, const char *name, const k3_json *v)
{
    (void)name;
    p->conv.tools = v;
    return 0;
}

static int f_tool_choice(parse *p, const char *name, const k3_json *v)
{
    (void)name;
    p->conv.tool_choice = v;
    return 0;
}

static int f_response_format(parse *p, const char *name, const k3_json *v)
{
    (void)name;
    p->conv.response_format = v;
    return 0;
}

/* The structured-output extensions (api.h): at most one per request. */
static int structured(parse *p, const char *name)
{
    if (p->structured)
        return k3_api_fail(p->err, 400, "invalid_value", name,
                           "Give at most one of grammar, guided_grammar, json_schema, "
                           "guided_json and guided_choice (got '%s' and '%s').",
                           p->structured, name);
    p->structured = name;
    return 0;
}

static int keep_grammar(parse *p, const char *s, size_t n)
{
    k3_err e = { 0, "" };
    if (!(p->grammar = k3_malloc(&e, n + 1, "grammar")))
        return oom(p, &e);
    memcpy(p->grammar, s, n);
    p->grammar[n] = '\0';
    return 0;
}

/* grammar, guided_grammar: GBNF text. */
static int f_grammar(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_STRING, "a string (a GBNF grammar)") || structured(p, name))
        return p->err->status;
    if (strlen(v->str) != v->len)
        return k3_api_fail(p->err, 400, "invalid_value", name, "'%s' contains \\u0000.", name);
    return keep_grammar(p, v->str, v->len);
}

/* json_schema, guided_json: a schema object, or its JSON text. */
static int f_json_schema(parse *p, const char *name, const k3_json *v)
{
    char jerr[256];
    if (structured(p, name))
        return p->err->status;
    if (v->type == K3J_STRING) {
        if (!(p->schema_doc = k3_json_parse(v->str, v->len, jerr, sizeof jerr)))
            return k3_api_fail(p->err, 400, "invalid_value", name,
                               "'%s' is not valid JSON (%s).", name, jerr);
        v = k3_json_root(p->schema_doc);
    }
    if (v->type != K3J_OBJECT)
        return wrong_type(p, name, "a JSON Schema (an object, or its JSON text)", v);
    p->schema = v;
    return 0;
}

/* guided_choice: the answer is exactly one of the strings, as a GBNF
 * alternation of literals (bytes below 0x20, '"' and '\\' escaped). */
static int f_guided_choice(parse *p, const char *name, const k3_json *v)
{
    k3_err e = { 0, "" };
    k3_buf b = { 0 };
    if (want(p, name, v, K3J_ARRAY, "an array of strings") || structured(p, name))
        return p->err->status;
    if (v->count == 0)
        return k3_api_fail(p->err, 400, "invalid_value", name, "'%s' is empty.", name);
    int rc = k3_buf_puts(&b, "root ::=", &e) ? oom(p, &e) : 0;
    for (size_t i = 0; i < v->count && !rc; i++) {
        const k3_json *c = &v->items[i];
        if (c->type != K3J_STRING) {
            rc = wrong_type(p, name, "an array of strings", c);
            break;
        }
        if (k3_buf_puts(&b, i ? " | \"" : " \"", &e))
            rc = oom(p, &e);
        for (size_t k = 0; k < c->len && !rc; k++) {
            unsigned char ch = (unsigned char)c->str[k];
            char esc[8];
            if (ch < 0x20 || ch == '"' || ch == '\\')
                snprintf(esc, sizeof esc, "\\x%02X", ch);
            else
                esc[0] = (char)ch, esc[1] = '\0';
            if (k3_buf_puts(&b, esc, &e))
                rc = oom(p, &e);
        }
        if (!rc && k3_buf_puts(&b, "\"", &e))
            rc = oom(p, &e);
    }
    if (!rc)
        rc = keep_grammar(p, b.data, b.len);
    k3_buf_free(&b);
    return rc;
}

/* Completions: response_format as in chat (no notice: there is no
 * conversation to render it into). */
static int f_completion_format(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_OBJECT, "an object"))
        return p->err->status;
    p->completion_format = v;
    return 0;
}

static const char *const efforts[] = { "low", "high", "max", NULL };

/* A boolean, or Moonshot's object {type, keep, effort} (api.h). */
static int f_thinking(parse *p, const char *name, const k3_json *v)
{
    p->thinking_given = 1;
    if (v->type == K3J_BOOL) {
        p->conv.thinking = v->boolean;
        return 0;
    }
    if (v->type != K3J_OBJECT)
        return wrong_type(p, name, "a boolean or an object {type, keep, effort}", v);
    for (size_t i = 0; i < v->count; i++) {
        const char *key = v->keys[i];
        const k3_json *f = &v->items[i];
        char path[64];
        snprintf(path, sizeof path, "thinking.%.40s", key);
        if (f->type == K3J_NULL)
            continue;
        if (strcmp(key, "type") && strcmp(key, "keep") && strcmp(key, "effort"))
            return k3_api_fail(p->err, 400, "unknown_parameter", path,
                               "Unrecognized request argument supplied: %s", path);
        if (want(p, path, f, K3J_STRING, "a string"))
            return p->err->status;
        if (!strcmp(key, "type")) {
            if (strcmp(f->str, "enabled") && strcmp(f->str, "disabled"))
                return k3_api_fail(p->err, 400, "invalid_value", path,
                                   "Invalid value for '%s': expected enabled or disabled.", path);
            p->conv.thinking = !strcmp(f->str, "enabled");
        } else if (!strcmp(key, "keep")) {
            if (strcmp(f->str, "all"))
                return unsupported(p, path, "\"all\" (the format keeps every past reasoning)");
        } else {
            int e = 0;
            while (efforts[e] && strcmp(efforts[e], f->str))
                e++;
            if (!efforts[e])
                return k3_api_fail(p->err, 400, "invalid_value", path,
                                   "Invalid value for '%s': expected low, high or max.", path);
            p->thinking_effort = efforts[e];
        }
    }
    return 0;
}

/* vLLM's chat_template_kwargs: thinking / enable_thinking switch thinking;
 * other keys (template variables k3's one format has no use for) are
 * ignored and logged. */
static int f_chat_template_kwargs(parse *p, const char *name, const k3_json *v)
{
    if (want(p, name, v, K3J_OBJECT, "an object"))
        return p->err->status;
    for (size_t i = 0; i < v->count; i++) {
        const char *key = v->keys[i];
        char path[80];
        snprintf(path, sizeof path, "%s.%.40s", name, key);
        if (strcmp(key, "thinking") && strcmp(key, "enable_thinking")) {
            k3_api_note_ignored(p->out, path);
            continue;
        }
        if (v->items[i].type == K3J_NULL)
            continue;
        if (want(p, path, &v->items[i], K3J_BOOL, "a boolean"))
            return p->err->status;
        p->kwargs_thinking = v->items[i].boolean;
    }
    return 0;
}

/* Accepted: a boolean (cache_prompt, skip_special_tokens), changing nothing. */
static int f_bool_noop(parse *p, const char *name, const k3_json *v)
{
    return want(p, name, v, K3J_BOOL, "a boolean");
}

/* Accepted, not enforced, logged (api.h). */
static int f_noted(parse *p, const char *name, const k3_json *v)
{
    if (!strcmp(name, "min_tokens")) {
        long long n = 0;
        if (integer_in(p, name, v, 0, INT32_MAX, &n))
            return p->err->status;
    } else if (want(p, name, v, K3J_ARRAY, "an array of token ids")) {
        return p->err->status;
    }
    k3_api_note_ignored(p->out, name);
    return 0;
}

static int f_reasoning_effort(parse *p, const char *name, const k3_json *v)
{
    /* OpenAI's levels (and the format's "max") onto the renderer's. */
    static const char *const names[] = { "none", "minimal", "low", "medium", "high", "max", NULL };
    static const char *const effort[] = { NULL, "low", "low", NULL, "high", "max" };
    if (want(p, name, v, K3J_STRING, "a string"))
        return p->err->status;
    for (int i = 0; names[i]; i++)
        if (!strcmp(v->str, names[i])) {
            p->conv.effort = effort[i];
            p->conv.effort_none = i == 0;
            p->effort_given = 1;
            return 0;
        }
    return k3_api_fail(p->err, 400, "invalid_value", name,
                       "Invalid value for '%s': expected none, minimal, low, medium, high or "
                       "max, got \"%s\".", name, v->str);
}

enum { CHAT = 1, COMPLETION = 2, BOTH = 3 };

typedef struct {
    const char *name;
    unsigned where;
    int (*apply)(parse *p, const char *name, const k3_json *v);
} field;

static const field fields[] = {
    { "model", BOTH, f_model },
    { "messages", CHAT, f_messages },
    { "prompt", COMPLETION, f_prompt },
    { "stream", BOTH, f_stream },
    { "stream_options", BOTH, f_stream_options },
    { "max_tokens", BOTH, f_max_tokens },
    { "max_completion_tokens", CHAT, f_max_tokens },
    { "temperature", BOTH, f_temperature },
    { "top_p", BOTH, f_top_p },
    { "seed", BOTH, f_seed },
    { "stop", BOTH, f_stop },
    { "tools", CHAT, f_tools },
    { "tool_choice", CHAT, f_tool_choice },
    { "response_format", CHAT, f_response_format },
    { "response_format", COMPLETION, f_completion_format },
    { "grammar", BOTH, f_grammar },
    { "guided_grammar", BOTH, f_grammar },
    { "json_schema", BOTH, f_json_schema },
    { "guided_json", BOTH, f_json_schema },
    { "guided_choice", BOTH, f_guided_choice },
    { "thinking", CHAT, f_thinking },
    { "chat_template_kwargs", CHAT, f_chat_template_kwargs },
    { "n_predict", BOTH, f_max_tokens },
    { "cache_prompt", BOTH, f_bool_noop },
    { "skip_special_tokens", BOTH, f_bool_noop },
    { "min_tokens", BOTH, f_noted },
    { "stop_token_ids", BOTH, f_noted },
    { "reasoning_effort", CHAT, f_reasoning_effort },
    { "top_k", BOTH, f_top_k },
    { "min_p", BOTH, f_min_p },
    { "repetition_penalty", BOTH, f_repetition_penalty },
    { "ignore_eos", BOTH, f_ignore_eos },
    { "return_token_ids", BOTH, f_return_token_ids },
    { "spec", BOTH, f_spec },
    { "user", BOTH, f_string },
    { "service_tier", CHAT, f_string },
    { "store", CHAT, f_bool },
    { "parallel_tool_calls", CHAT, f_bool },
    { "metadata", CHAT, f_object },
    { "n", BOTH, f_one },
    { "best_of", COMPLETION, f_one },
    { "frequency_penalty", BOTH, f_frequency_penalty },
    { "presence_penalty", BOTH, f_presence_penalty },
    { "logit_bias", BOTH, f_logit_bias },
    { "logprobs", CHAT, f_chat_logprobs },
    { "logprobs", COMPLETION, f_completion_logprobs },
    { "top_logprobs", CHAT, f_top_logprobs },
    { "echo", COMPLETION, f_echo },
    { "suffix", COMPLETION, f_suffix },
};

/* llama-server's and vLLM's knobs that change nothing k3 computes an answer
 * from in a way a client relies on (sampler variants k3 does not have, slot
 * and timing switches): accepted whatever their value, and logged. Fields
 * that would change the answer's meaning (a grammar, a JSON schema, another
 * template, several choices) are not here: they stay 400. */
static const char *const ignorable[] = {
    "typical_p", "tfs_z", "mirostat", "mirostat_tau", "mirostat_eta", "penalize_nl",
    "n_keep", "n_probs", "id_slot", "slot_id", "dynatemp_range", "dynatemp_exponent",
    "xtc_probability", "xtc_threshold", "dry_multiplier", "dry_base", "dry_allowed_length",
    "dry_penalty_last_n", "dry_sequence_breakers", "samplers", "t_max_predict_ms",
    "timings_per_token", "post_sampling_probs", "return_progress", "use_beam_search",
    "length_penalty", "include_stop_str_in_output", "spaces_between_special_tokens",
    "add_special_tokens", "priority", "request_id", "prompt_cache_key", "safety_identifier",
    NULL
};

int k3_api_ignorable(const char *key)
{
    for (size_t i = 0; ignorable[i]; i++)
        if (!strcmp(ignorable[i], key))
            return 1;
    return 0;
}

static int apply_fields(parse *p, const k3_json *root, unsigned where)
{
    for (size_t i = 0; i < root->count; i++) {
        const char *key = root->keys[i];
        size_t f = 0, nf = sizeof fields / sizeof fields[0];
        while (f < nf && !((fields[f].where & where) && !strcmp(fields[f].name, key)))
            f++;
        if (f == nf && k3_api_ignorable(key)) {
            k3_api_note_ignored(p->out, key);
            continue;
        }
        if (f == nf)
            return k3_api_fail(p->err, 400, "unknown_parameter", key,
                               "Unrecognized request argument supplied: %s", key);
        if (root->items[i].type != K3J_NULL && fields[f].apply(p, key, &root->items[i]))
            return p->err->status;
    }
    return 0;
}

/* The compact JSON text of v into *out (malloc'd). */
static int json_text(parse *p, const k3_json *v, char **out)
{
    k3_err e = { 0, "" };
    k3_buf b = { 0 };
    if (k3_json_write(&b, v, K3_JW_SORT_KEYS, &e) || k3_buf_put(&b, "", 1, &e)) {
        k3_buf_free(&b);
        return oom(p, &e);
    }
    *out = b.data; /* NUL-terminated by the put above */
    return 0;
}

/* Whether a response_format object asks for JSON (json_object or
 * json_schema); its type is checked where it is read. */
static int asks_json(const k3_json *rf)
{
    const k3_json *t = rf ? k3_json_get(rf, "type") : NULL;
    return t && t->type == K3J_STRING && strcmp(t->str, "text") != 0;
}

/* Completions: the structured-output field or response_format into the
 * request's constraint (chat reads response_format in k3_chat_read). */
static int completion_constraint(parse *p)
{
    k3_api_request *r = p->out;
    const k3_json *rf = p->completion_format;
    if (p->grammar) {
        r->constraint = "gbnf";
        r->constraint_text = p->grammar;
        p->grammar = NULL;
        return 0;
    }
    if (p->schema) {
        r->constraint = "json_schema";
        r->constraint_strict = 1;
        return json_text(p, p->schema, &r->constraint_text);
    }
    if (!rf)
        return 0;
    const k3_json *type = k3_json_get(rf, "type"), *js = k3_json_get(rf, "json_schema");
    if (!type || type->type != K3J_STRING)
        return k3_api_fail(p->err, 400, "invalid_value", "response_format.type",
                           "response_format: \"type\" must be text, json_object or "
                           "json_schema.");
    for (size_t i = 0; i < rf->count; i++)
        if (strcmp(rf->keys[i], "type") && strcmp(rf->keys[i], "json_schema"))
            return k3_api_fail(p->err, 400, "unknown_parameter", "response_format",
                               "response_format: unknown key \"%s\".", rf->keys[i]);
    if (!strcmp(type->str, "text"))
        return 0;
    if (!strcmp(type->str, "json_object")) {
        r->constraint = "json_object";
        return 0;
    }
    if (strcmp(type->str, "json_schema") != 0)
        return k3_api_fail(p->err, 400, "invalid_value", "response_format.type",
                           "response_format: \"%s\" is not text, json_object or json_schema.",
                           type->str);
    const k3_json *schema = js && js->type == K3J_OBJECT ? k3_json_get(js, "schema") : NULL;
    const k3_json *strict = js && js->type == K3J_OBJECT ? k3_json_get(js, "strict") : NULL;
    if (!schema || schema->type != K3J_OBJECT)
        return k3_api_fail(p->err, 400, "invalid_value", "response_format.json_schema",
                           "response_format: type json_schema needs \"json_schema\": "
                           "{\"schema\": {...}}.");
    r->constraint = "json_schema";
    r->constraint_strict = strict && strict->type == K3J_BOOL && strict->boolean;
    return json_text(p, schema, &r->constraint_text);
}

static int parse_request(const char *body, size_t len, const k3_api_limits *lim,
                         k3_api_request *out, k3_api_error *err, k3_api_kind kind)
{
    parse p;
    char jerr[256];
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    memset(&p, 0, sizeof p);
    out->kind = kind;
    out->max_tokens = -1;
    out->temperature = 1; /* OpenAI's default */
    out->top_p = 1;
    out->repeat_penalty = 1;
    out->spec = -1;
    p.out = out;
    p.err = err;
    p.lim = lim;
    p.conv.thinking = -1;
    p.kwargs_thinking = -1;
    k3_json_doc *doc = k3_json_parse(body, len, jerr, sizeof jerr);
    if (!doc)
        return k3_api_fail(err, 400, "invalid_json", NULL,
                           "The request body is not valid JSON (%s).", jerr);
    const k3_json *root = k3_json_root(doc);
    if (root->type != K3J_OBJECT)
        k3_api_fail(err, 400, "invalid_type", NULL, "The request body must be a JSON object.");
    else if (!apply_fields(&p, root, kind == K3_API_CHAT ? CHAT : COMPLETION)) {
        if (kind == K3_API_CHAT && !p.conv.messages)
            k3_api_fail(err, 400, "missing_required_parameter", "messages",
                        "Missing required parameter: 'messages'.");
        else if (kind == K3_API_COMPLETION && !out->prompt && !out->prompt_ids)
            k3_api_fail(err, 400, "missing_required_parameter", "prompt",
                        "Missing required parameter: 'prompt'.");
        else if (kind == K3_API_CHAT && p.top_logprobs_given && !out->logprobs)
            k3_api_fail(err, 400, "invalid_value", "top_logprobs",
                        "Invalid value for 'top_logprobs': it requires 'logprobs' to be true.");
        else if (p.structured && asks_json(kind == K3_API_CHAT ? p.conv.response_format
                                                                : p.completion_format))
            k3_api_fail(err, 400, "invalid_value", p.structured,
                        "Give '%s' or a JSON response_format, not both.", p.structured);
        else if (kind == K3_API_CHAT) {
            if (!p.thinking_given && p.kwargs_thinking >= 0)
                p.conv.thinking = p.kwargs_thinking;
            if (!p.effort_given && p.thinking_effort)
                p.conv.effort = p.thinking_effort;
            p.conv.grammar = p.grammar;
            p.conv.schema = p.schema;
            k3_api_read_conversation(&p.conv, &out->chat, err);
        } else {
            completion_constraint(&p);
        }
    }
    free(p.grammar);
    k3_json_free(p.schema_doc);
    k3_json_free(doc);
    return err->status;
}

int k3_api_parse_chat_request(const char *body, size_t len, const k3_api_limits *lim,
                              k3_api_request *out, k3_api_error *err)
{
    return parse_request(body, len, lim, out, err, K3_API_CHAT);
}

int k3_api_parse_completion_request(const char *body, size_t len, const k3_api_limits *lim,
                                    k3_api_request *out, k3_api_error *err)
{
    return parse_request(body, len, lim, out, err, K3_API_COMPLETION);
}

void k3_api_request_free(k3_api_request *r)
{
    k3_chat_free(r->chat);
    free(r->prompt);
    free(r->prompt_ids);
    free(r->model);
    free(r->constraint_text);
    for (size_t i = 0; i < r->nstop; i++)
        free(r->stop[i]);
    memset(r, 0, sizeof *r);
    r->max_tokens = -1;
}
