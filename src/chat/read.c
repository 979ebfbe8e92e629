/* read.c - k3_chat_read / k3_chat_load: a conversation from JSON, checked
 * strictly (the contract is in k3/chat.h).
 *
 * Every error names the JSON path of the culprit ("messages[2].role"), so a
 * caller can fix a long conversation without guessing. Unknown keys are
 * errors too: a misspelt "reasoning_contents" would otherwise silently drop
 * the reasoning from the prompt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/conv.h"
#include "chat/images.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"
#include "util/json_write.h"

/* Largest conversation file k3_chat_load accepts. */
#define K3_CHAT_MAX_FILE ((size_t)1 << 30)

static int wrong_type(const char *path, const char *want, const k3_json *v, k3_err *e)
{
    return k3_fail(e, K3_EINPUT, "%s: expected %s, got %s", path, want, k3_json_type_name(v));
}

/* v must be an object whose keys are all in allowed (NULL-terminated). */
static int check_object(const k3_json *v, const char *path, const char *const *allowed, k3_err *e)
{
    if (v->type != K3J_OBJECT)
        return wrong_type(path, "an object", v, e);
    for (size_t i = 0; i < v->count; i++) {
        size_t j = 0;
        while (allowed[j] && (strlen(allowed[j]) != v->key_lens[i] ||
                              memcmp(allowed[j], v->keys[i], v->key_lens[i]) != 0))
            j++;
        if (!allowed[j])
            return k3_fail(e, K3_EINPUT, "%s: unknown key \"%s\"", path, v->keys[i]);
    }
    return K3_OK;
}

/* The index of the string v in the NULL-terminated list names, or fails
 * with a message listing them (what describes the list). */
static int pick(const k3_json *v, const char *path, const char *const *names, const char *what,
                int *out, k3_err *e)
{
    if (v->type != K3J_STRING)
        return wrong_type(path, "a string", v, e);
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == v->len && !memcmp(names[i], v->str, v->len)) {
            *out = i;
            return K3_OK;
        }
    return k3_fail(e, K3_EINPUT, "%s: \"%s\" is not %s", path, v->str, what);
}

/* obj.key as a string or null (absent stays absent). */
static int opt_text(k3_chat *c, const k3_json *obj, const char *key, const char *path,
                    k3_text *out, k3_err *e)
{
    const k3_json *v = k3_json_get(obj, key);
    if (!v || v->type == K3J_NULL)
        return K3_OK;
    if (v->type != K3J_STRING)
        return k3_fail(e, K3_EINPUT, "%s.%s: expected a string or null, got %s", path, key,
                       k3_json_type_name(v));
    return k3_chat_keep(c, v->str, v->len, out, e);
}

/* obj.key as a boolean, when present. */
static int opt_bool(const k3_json *obj, const char *key, const char *path, int *out, k3_err *e)
{
    const k3_json *v = k3_json_get(obj, key);
    if (!v)
        return K3_OK;
    if (v->type != K3J_BOOL)
        return k3_fail(e, K3_EINPUT, "%s.%s: expected a boolean, got %s", path, key,
                       k3_json_type_name(v));
    *out = v->boolean;
    return K3_OK;
}

/* Sorted compact JSON of v, as the encoder embeds declarations. */
static int keep_json(k3_chat *c, const k3_json *v, unsigned flags, k3_text *out, k3_err *e)
{
    k3_buf b = { 0 };
    if (k3_json_write(&b, v, flags, e) == K3_OK)
        k3_chat_keep(c, b.data, b.len, out, e);
    k3_buf_free(&b);
    return e->code;
}

static int read_call(k3_chat *c, const k3_json *v, const char *path, k3_tool_call *call,
                     k3_err *e)
{
    static const char *const call_keys[] = { "id", "type", "function", NULL };
    static const char *const fn_keys[] = { "name", "arguments", NULL };
    static const char *const types[] = { "function", NULL };
    char fpath[128], tpath[128];
    int only_function; /* the one accepted type */
    snprintf(fpath, sizeof fpath, "%s.function", path);
    snprintf(tpath, sizeof tpath, "%s.type", path);
    const k3_json *fn = k3_json_get(v, "function"), *type = k3_json_get(v, "type");
    if (check_object(v, path, call_keys, e) || opt_text(c, v, "id", path, &call->id, e))
        return e->code;
    if (type && pick(type, tpath, types, "\"function\"", &only_function, e))
        return e->code;
    if (!fn)
        return k3_fail(e, K3_EINPUT, "%s: missing \"function\"", path);
    if (check_object(fn, fpath, fn_keys, e) || opt_text(c, fn, "name", fpath, &call->name, e))
        return e->code;
    if (!call->name.s)
        return k3_fail(e, K3_EINPUT, "%s.name: missing (a tool call needs a name)", fpath);
    const k3_json *args = k3_json_get(fn, "arguments");
    if (!args || args->type == K3J_NULL)
        return K3_OK;
    if (args->type == K3J_STRING)
        return k3_chat_keep(c, args->str, args->len, &call->arguments, e);
    if (args->type == K3J_OBJECT)
        return keep_json(c, args, 0, &call->arguments, e);
    return k3_fail(e, K3_EINPUT,
                   "%s.arguments: expected a JSON-object string, an object or null, got %s", fpath,
                   k3_json_type_name(args));
}

static int read_calls(k3_chat *c, const k3_json *msg, const char *path, k3_msg *m, k3_err *e)
{
    const k3_json *v = k3_json_get(msg, "tool_calls");
    if (!v || v->type == K3J_NULL)
        return K3_OK;
    if (v->type != K3J_ARRAY)
        return k3_fail(e, K3_EINPUT, "%s.tool_calls: expected an array or null, got %s", path,
                       k3_json_type_name(v));
    if (v->count == 0)
        return K3_OK;
    k3_tool_call *calls = k3_chat_alloc(c, v->count * sizeof *calls, e);
    if (!calls)
        return e->code;
    memset(calls, 0, v->count * sizeof *calls);
    for (size_t i = 0; i < v->count; i++) {
        char cpath[96];
        snprintf(cpath, sizeof cpath, "%s.tool_calls[%zu]", path, i);
        if (read_call(c, &v->items[i], cpath, &calls[i], e))
            return e->code;
    }
    m->calls = calls;
    m->ncalls = v->count;
    return K3_OK;
}

static int read_message(k3_chat *c, const k3_json *v, size_t index, k3_err *e)
{
    static const char *const roles[] = { "system", "user", "assistant", "tool", NULL };
    /* Keys per role, in k3_role order. */
    static const char *const keys[][5] = {
        { "role", "content", "name", NULL },
        { "role", "content", "name", NULL },
        { "role", "content", "reasoning_content", "tool_calls", NULL },
        { "role", "content", "tool_call_id", "name", NULL },
    };
    char path[48];
    snprintf(path, sizeof path, "messages[%zu]", index);
    if (v->type != K3J_OBJECT)
        return wrong_type(path, "an object", v, e);
    const k3_json *role = k3_json_get(v, "role");
    if (!role)
        return k3_fail(e, K3_EINPUT, "%s: missing \"role\"", path);
    char rpath[56];
    snprintf(rpath, sizeof rpath, "%s.role", path);
    int r;
    k3_msg m = { 0 };
    /* Keys the role does not take are refused first, so every field can be
     * read for every role. */
    if (pick(role, rpath, roles, "a known role (system, user, assistant or tool)", &r, e) ||
        check_object(v, path, keys[r], e) ||
        (r <= K3_ROLE_USER ? k3_chat_read_content(c, k3_json_get(v, "content"), path, &m, e)
                           : opt_text(c, v, "content", path, &m.content, e)) ||
        opt_text(c, v, "name", path, &m.name, e) ||
        opt_text(c, v, "reasoning_content", path, &m.reasoning, e) ||
        opt_text(c, v, "tool_call_id", path, &m.tool_call_id, e) || read_calls(c, v, path, &m, e))
        return e->code;
    m.role = (k3_role)r;
    k3_msg *slot;
    if (k3_chat_push(c, m.role, &slot, e))
        return e->code;
    *slot = m;
    return K3_OK;
}

static int read_tools(k3_chat *c, const k3_json *tools, k3_err *e)
{
    if (!tools || tools->type == K3J_NULL)
        return K3_OK;
    if (tools->type != K3J_ARRAY)
        return wrong_type("tools", "an array or null", tools, e);
    for (size_t i = 0; i < tools->count; i++) {
        if (tools->items[i].type != K3J_OBJECT)
            return k3_fail(e, K3_EINPUT, "tools[%zu]: expected an object, got %s", i,
                           k3_json_type_name(&tools->items[i]));
        /* The chat format declares functions only (docs/SERVE.md): another
         * kind is refused, not rendered as if it were one. */
        const k3_json *type = k3_json_get(&tools->items[i], "type");
        if (type && (type->type != K3J_STRING || strcmp(type->str, "function") != 0))
            return k3_fail(e, K3_EINPUT, "tools[%zu].type: only \"function\" tools are "
                           "supported", i);
    }
    if (tools->count == 0) /* the encoder declares nothing for [] */
        return K3_OK;
    return keep_json(c, tools, K3_JW_SORT_KEYS, &c->tools_json, e);
}

static int read_response_format(k3_chat *c, const k3_json *v, k3_err *e)
{
    static const char *const rf_keys[] = { "type", "json_schema", NULL };
    static const char *const js_keys[] = { "name", "description", "schema", "strict", NULL };
    static const char *const types[] = { "text", "json_object", "json_schema", NULL };
    if (!v || v->type == K3J_NULL)
        return K3_OK;
    const k3_json *type = k3_json_get(v, "type"), *js = k3_json_get(v, "json_schema");
    int t;
    if (check_object(v, "options.response_format", rf_keys, e))
        return e->code;
    if (!type)
        return k3_fail(e, K3_EINPUT, "options.response_format: missing \"type\"");
    if (pick(type, "options.response_format.type", types, "text, json_object or json_schema", &t,
             e))
        return e->code;
    if (t != 2) {
        if (js)
            return k3_fail(e, K3_EINPUT,
                           "options.response_format: \"json_schema\" given with type \"%s\"",
                           types[t]);
        c->response_format = t == 1 ? "json_object" : NULL;
        return K3_OK;
    }
    if (!js)
        return k3_fail(e, K3_EINPUT,
                       "options.response_format: type json_schema needs \"json_schema\"");
    if (check_object(js, "options.response_format.json_schema", js_keys, e))
        return e->code;
    const k3_json *schema = k3_json_get(js, "schema");
    if (!schema)
        return k3_fail(e, K3_EINPUT, "options.response_format.json_schema: missing \"schema\"");
    if (schema->type != K3J_OBJECT)
        return wrong_type("options.response_format.json_schema.schema", "an object", schema, e);
    const k3_json *strict = k3_json_get(js, "strict");
    if (strict && strict->type != K3J_NULL && strict->type != K3J_BOOL)
        return wrong_type("options.response_format.json_schema.strict", "a boolean", strict, e);
    c->schema_strict = strict && strict->type == K3J_BOOL && strict->boolean;
    c->response_format = "json_schema";
    return keep_json(c, schema, K3_JW_SORT_KEYS, &c->schema_json, e);
}

/* The name of tool declaration t ({"type": "function", "function": {"name"}}),
 * or NULL. */
static const k3_json *tool_name_of(const k3_json *t)
{
    const k3_json *fn = k3_json_get(t, "function");
    const k3_json *name = fn && fn->type == K3J_OBJECT ? k3_json_get(fn, "name") : NULL;
    return name && name->type == K3J_STRING ? name : NULL;
}

/* tool_choice {"type": "function", "function": {"name": N}}: N must be
 * declared in tools. Rendered as "required" (chat/conv.h tool_name). */
static int read_named_choice(k3_chat *c, const k3_json *v, const k3_json *tools, k3_err *e)
{
    static const char *const keys[] = { "type", "function", NULL };
    static const char *const fn_keys[] = { "name", NULL };
    static const char *const types[] = { "function", NULL };
    const k3_json *type = k3_json_get(v, "type"), *fn = k3_json_get(v, "function");
    int only_function;
    if (check_object(v, "options.tool_choice", keys, e))
        return e->code;
    if (!type || !fn)
        return k3_fail(e, K3_EINPUT, "options.tool_choice: a named choice needs \"type\": "
                                     "\"function\" and \"function\": {\"name\": ...}");
    if (pick(type, "options.tool_choice.type", types, "\"function\"", &only_function, e) ||
        check_object(fn, "options.tool_choice.function", fn_keys, e))
        return e->code;
    const k3_json *name = k3_json_get(fn, "name");
    if (!name || name->type != K3J_STRING)
        return k3_fail(e, K3_EINPUT, "options.tool_choice.function.name: expected a string");
    size_t n = tools && tools->type == K3J_ARRAY ? tools->count : 0, i = 0;
    while (i < n && !(tool_name_of(&tools->items[i]) &&
                      tool_name_of(&tools->items[i])->len == name->len &&
                      !memcmp(tool_name_of(&tools->items[i])->str, name->str, name->len)))
        i++;
    if (i == n)
        return k3_fail(e, K3_EINPUT, "options.tool_choice.function.name: \"%s\" is not a "
                                     "declared tool", name->str);
    c->tool_choice = "required";
    return k3_chat_keep(c, name->str, name->len, &c->tool_name, e);
}

static int read_options(k3_chat *c, const k3_json *o, const k3_json *tools, k3_err *e)
{
    static const char *const keys[] = { "thinking", "thinking_effort", "add_generation_prompt",
                                        "tool_choice", "response_format", "grammar", NULL };
    static const char *const efforts[] = { "low", "high", "max", NULL };
    static const char *const choices[] = { "auto", "required", "none", NULL };
    if (!o)
        return K3_OK;
    if (check_object(o, "options", keys, e) ||
        opt_bool(o, "thinking", "options", &c->thinking, e) ||
        opt_bool(o, "add_generation_prompt", "options", &c->add_generation_prompt, e))
        return e->code;
    const k3_json *effort = k3_json_get(o, "thinking_effort");
    const k3_json *choice = k3_json_get(o, "tool_choice");
    int i;
    if (effort && effort->type != K3J_NULL) {
        if (pick(effort, "options.thinking_effort", efforts, "low, high or max", &i, e))
            return e->code;
        c->effort = efforts[i];
    }
    if (choice && choice->type != K3J_NULL) {
        if (choice->type == K3J_OBJECT) {
            if (read_named_choice(c, choice, tools, e))
                return e->code;
        } else if (pick(choice, "options.tool_choice", choices, "auto, required or none", &i,
                        e)) {
            return e->code;
        } else {
            c->tool_choice = i == 0 ? NULL : choices[i];
        }
    }
    const k3_json *grammar = k3_json_get(o, "grammar");
    if (grammar && grammar->type != K3J_NULL) {
        if (grammar->type != K3J_STRING)
            return wrong_type("options.grammar", "a string (a GBNF grammar)", grammar, e);
        if (k3_chat_keep(c, grammar->str, grammar->len, &c->grammar, e))
            return e->code;
    }
    return read_response_format(c, k3_json_get(o, "response_format"), e);
}

static int read_root(k3_chat *c, const k3_json *root, k3_err *e)
{
    static const char *const keys[] = { "messages", "tools", "options", NULL };
    if (check_object(root, "conversation", keys, e))
        return e->code;
    const k3_json *msgs = k3_json_get(root, "messages");
    if (!msgs)
        return k3_fail(e, K3_EINPUT, "conversation: missing \"messages\"");
    if (msgs->type != K3J_ARRAY)
        return wrong_type("messages", "an array", msgs, e);
    for (size_t i = 0; i < msgs->count; i++)
        if (read_message(c, &msgs->items[i], i, e))
            return e->code;
    if (read_tools(c, k3_json_get(root, "tools"), e))
        return e->code;
    return read_options(c, k3_json_get(root, "options"), k3_json_get(root, "tools"), e);
}

int k3_chat_read(k3_chat **out, const char *text, size_t len, k3_err *e)
{
    *out = NULL;
    char jerr[256];
    k3_json_doc *doc = k3_json_parse(text, len, jerr, sizeof jerr);
    if (!doc)
        return k3_fail(e, K3_EINPUT, "conversation is not valid JSON: %s", jerr);
    k3_chat *c = NULL;
    if (k3_chat_new(&c, e) == K3_OK && read_root(c, k3_json_root(doc), e) == K3_OK)
        *out = c;
    else
        k3_chat_free(c);
    k3_json_free(doc);
    return e->code;
}

int k3_chat_set_json_schema(k3_chat *c, const char *json, size_t len, int strict, k3_err *e)
{
    char jerr[256];
    k3_json_doc *doc = k3_json_parse(json, len, jerr, sizeof jerr);
    if (!doc)
        return k3_fail(e, K3_EINPUT, "the schema is not valid JSON: %s", jerr);
    if (k3_json_root(doc)->type != K3J_OBJECT)
        wrong_type("the schema", "an object", k3_json_root(doc), e);
    else if (keep_json(c, k3_json_root(doc), K3_JW_SORT_KEYS, &c->schema_json, e) == K3_OK) {
        c->response_format = "json_schema";
        c->schema_strict = strict;
    }
    k3_json_free(doc);
    return e->code;
}

int k3_chat_set_grammar(k3_chat *c, const char *gbnf, size_t len, k3_err *e)
{
    return k3_chat_keep(c, gbnf, len, &c->grammar, e);
}

int k3_chat_load(k3_chat **out, const char *path, k3_err *e)
{
    *out = NULL;
    size_t len;
    char *text = k3_read_small_file(e, path, K3_CHAT_MAX_FILE, &len);
    if (!text)
        return e->code;
    k3_err inner = { 0, "" };
    if (k3_chat_read(out, text, len, &inner))
        k3_fail(e, inner.code, "%s: %s", path, inner.msg);
    free(text);
    return e->code;
}
