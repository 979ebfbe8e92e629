/* responses.c - see responses.h. */
#include "server/responses.h"

#include <stdio.h>
#include <string.h>

#include "server/translate.h"
#include "util/json.h"

/* One content part: text of any text type, input_image with an image_url. */
static int part(k3_xl *x, k3_xl_msg *m, const k3_json *v, const char *p)
{
    int fail = 0;
    const k3_json *type = k3_xl_string(x, v, "type", p, &fail);
    const k3_json *text = k3_xl_string(x, v, "text", p, &fail);
    const k3_json *url = k3_xl_string(x, v, "image_url", p, &fail);
    if (fail)
        return x->err->status;
    if (!type)
        return k3_xl_fail(x, p, "%s: a content part needs a \"type\"", p);
    if ((!strcmp(type->str, "input_text") || !strcmp(type->str, "output_text") ||
         !strcmp(type->str, "text") || !strcmp(type->str, "summary_text") ||
         !strcmp(type->str, "reasoning_text")) &&
        text)
        return k3_xl_text(x, m, text->str, text->len) ? x->err->status : 0;
    if (!strcmp(type->str, "input_image") && url)
        return k3_xl_image(x, m, url->str, url->len, NULL) ? x->err->status : 0;
    return k3_xl_fail(x, p, "%s: content parts of type \"%s\" are not supported", p, type->str);
}

/* Parts of a message's content (or a call output). */
static int parts(k3_xl *x, k3_xl_msg *m, const k3_json *v, const char *path)
{
    return k3_xl_content(x, m, v, path, "content parts", part);
}

/* Ends the pending message unless it is an assistant turn (which
 * reasoning, assistant text and calls extend). */
static int to_assistant(k3_xl *x, k3_xl_msg *m)
{
    if (m->role && !strcmp(m->role, "assistant"))
        return 0;
    if (k3_xl_flush(x, m))
        return x->err->status;
    k3_xl_msg_start(m, "assistant");
    return 0;
}

/* Reasoning text: the item's content, else its summary. */
static int reasoning(k3_xl *x, k3_xl_msg *m, const k3_json *item, const char *path)
{
    const k3_json *c = k3_json_get(item, "content"), *sum = k3_json_get(item, "summary");
    const k3_json *v = c && c->type == K3J_ARRAY && c->count ? c : sum;
    k3_xl_msg r;
    int rc = 0;
    memset(&r, 0, sizeof r);
    k3_xl_msg_start(&r, "assistant");
    if (v && v->type != K3J_NULL && parts(x, &r, v, path))
        rc = x->err->status;
    /* The parts' texts, back to back, are the reasoning. */
    for (size_t j = 0; !rc && v && v->type == K3J_ARRAY && j < v->count; j++) {
        const k3_json *t = k3_json_get(&v->items[j], "text");
        if (t && t->type == K3J_STRING && k3_xl_reasoning(x, m, t->str, t->len))
            rc = x->err->status;
    }
    if (!rc && (!v || v->type == K3J_NULL || !v->count))
        rc = k3_xl_reasoning(x, m, "", 0);
    k3_xl_msg_free(&r);
    return rc;
}

static int item(k3_xl *x, k3_xl_msg *m, const k3_json *it, size_t i)
{
    char path[48];
    int fail = 0;
    snprintf(path, sizeof path, "input[%zu]", i);
    if (it->type != K3J_OBJECT)
        return k3_xl_type(x, path, "an object", it);
    const k3_json *type = k3_xl_string(x, it, "type", path, &fail);
    const k3_json *role = k3_xl_string(x, it, "role", path, &fail);
    if (fail)
        return x->err->status;
    const char *t = type ? type->str : role ? "message" : "";
    char cpath[64];
    snprintf(cpath, sizeof cpath, "%s.content", path);
    if (!strcmp(t, "message")) {
        static const char *const roles[] = { "user", "system", "developer", "assistant", NULL };
        size_t r = 0;
        while (role && roles[r] && strcmp(roles[r], role->str))
            r++;
        if (!role || !roles[r])
            return k3_xl_fail(x, path, "%s.role: expected user, system, developer or assistant",
                              path);
        if (r == 3) {
            if (to_assistant(x, m))
                return x->err->status;
        } else if (k3_xl_flush(x, m)) {
            return x->err->status;
        } else {
            k3_xl_msg_start(m, r == 0 ? "user" : "system");
        }
        if (parts(x, m, k3_json_get(it, "content"), cpath))
            return x->err->status;
        return r == 3 ? 0 : k3_xl_flush(x, m);
    }
    if (!strcmp(t, "reasoning"))
        return to_assistant(x, m) || reasoning(x, m, it, cpath) ? x->err->status : 0;
    if (!strcmp(t, "function_call")) {
        const k3_json *id = k3_xl_string(x, it, "call_id", path, &fail);
        const k3_json *name = k3_xl_string(x, it, "name", path, &fail);
        const k3_json *args = k3_xl_string(x, it, "arguments", path, &fail);
        if (fail)
            return x->err->status;
        if (!name)
            return k3_xl_fail(x, path, "%s: a function_call needs a \"name\"", path);
        if (to_assistant(x, m))
            return x->err->status;
        return k3_xl_call(x, m, id ? id->str : "", id ? id->len : 0, name->str, name->len, args);
    }
    if (!strcmp(t, "function_call_output")) {
        const k3_json *id = k3_xl_string(x, it, "call_id", path, &fail);
        if (fail || k3_xl_flush(x, m))
            return x->err->status;
        k3_xl_msg_start(m, "tool");
        snprintf(cpath, sizeof cpath, "%s.output", path);
        if ((id && k3_buf_put(&m->call_id, id->str, id->len, &x->e)))
            return k3_xl_oom(x);
        return parts(x, m, k3_json_get(it, "output"), cpath) || k3_xl_flush(x, m) ? x->err->status
                                                                                  : 0;
    }
    return k3_xl_fail(x, path, "%s: items of type \"%s\" are not supported", path, t);
}

static int input(k3_xl *x, k3_xl_msg *m, const k3_json *v)
{
    if (v->type == K3J_STRING) {
        k3_xl_msg_start(m, "user");
        return k3_xl_text(x, m, v->str, v->len) || k3_xl_flush(x, m) ? x->err->status : 0;
    }
    if (v->type != K3J_ARRAY)
        return k3_xl_type(x, "input", "a string or an array of items", v);
    for (size_t i = 0; i < v->count; i++)
        if (item(x, m, &v->items[i], i))
            return x->err->status;
    return k3_xl_flush(x, m);
}

/* A function tool as a chat tool; the other types are dropped (logged). */
static int tool(k3_xl *x, const k3_json *t, const char *p, k3_buf *b, size_t *n)
{
    int fail = 0;
    const k3_json *type = t->type == K3J_OBJECT ? k3_xl_string(x, t, "type", p, &fail) : NULL;
    const k3_json *name = type ? k3_xl_string(x, t, "name", p, &fail) : NULL;
    const k3_json *desc = type ? k3_xl_string(x, t, "description", p, &fail) : NULL;
    if (fail)
        return x->err->status;
    if (!type)
        return k3_xl_fail(x, p, "%s: a tool needs a \"type\"", p);
    if (strcmp(type->str, "function")) {
        char note[80];
        snprintf(note, sizeof note, "%s (type %.40s)", p, type->str);
        k3_xl_ignore(x, note);
        return 0;
    }
    if (!name)
        return k3_xl_fail(x, p, "%s: a function tool needs a \"name\"", p);
    return k3_xl_tool(x, b, (*n)++, name, desc, k3_json_get(t, "parameters"));
}

/* Function tools as chat tools. */
static int tools(k3_xl *x, const k3_json *v)
{
    return k3_xl_tools(x, v, tool);
}

/* tool_choice: the strings as they are, {type: "function", name} as
 * chat's named form. */
static int tool_choice(k3_xl *x, const k3_json *v)
{
    int fail = 0;
    if (v->type == K3J_STRING)
        return k3_xl_member(x, "tool_choice", v);
    const k3_json *type =
        v->type == K3J_OBJECT ? k3_xl_string(x, v, "type", "tool_choice", &fail) : NULL;
    const k3_json *name = type ? k3_xl_string(x, v, "name", "tool_choice", &fail) : NULL;
    if (fail)
        return x->err->status;
    if (!type || strcmp(type->str, "function") || !name)
        return k3_xl_fail(x, "tool_choice",
                          "tool_choice: expected auto, none, required or "
                          "{\"type\": \"function\", \"name\": ...}");
    return k3_xl_named_choice(x, name);
}

/* reasoning {effort, summary}. */
static int reasoning_field(k3_xl *x, const k3_json *v)
{
    int fail = 0;
    if (v->type != K3J_OBJECT)
        return k3_xl_type(x, "reasoning", "an object", v);
    const k3_json *effort = k3_xl_string(x, v, "effort", "reasoning", &fail);
    k3_xl_string(x, v, "summary", "reasoning", &fail);
    if (fail)
        return x->err->status;
    if (!effort)
        return 0;
    if (!strcmp(effort->str, "xhigh"))
        return k3_xl_member_raw(x, "reasoning_effort", "\"max\"");
    return k3_xl_member(x, "reasoning_effort", effort);
}

/* text {format, verbosity}: format as chat's response_format. */
static int text_field(k3_xl *x, const k3_json *v)
{
    int fail = 0;
    if (v->type != K3J_OBJECT)
        return k3_xl_type(x, "text", "an object", v);
    const k3_json *f = k3_json_get(v, "format");
    if (!f || f->type == K3J_NULL)
        return 0;
    const k3_json *type =
        f->type == K3J_OBJECT ? k3_xl_string(x, f, "type", "text.format", &fail) : NULL;
    if (fail)
        return x->err->status;
    if (!type)
        return k3_xl_fail(x, "text.format", "text.format: expected {\"type\": ...}");
    if (strcmp(type->str, "json_schema"))
        return k3_xl_member_raw(x, "response_format",
                                !strcmp(type->str, "json_object") ? "{\"type\":\"json_object\"}"
                                                                  : "{\"type\":\"text\"}");
    /* {type, name, schema, strict, description} -> {type, json_schema: {...}} */
    k3_buf b = { 0 };
    int rc = k3_buf_puts(&b, "{\"type\":\"json_schema\",\"json_schema\":{", &x->e);
    for (size_t i = 0, n = 0; !rc && i < f->count; i++) {
        if (!strcmp(f->keys[i], "type"))
            continue;
        rc = (n++ && k3_buf_puts(&b, ",", &x->e)) || k3_buf_puts(&b, "\"", &x->e) ||
             k3_buf_puts(&b, f->keys[i], &x->e) || k3_buf_puts(&b, "\":", &x->e) ||
             k3_json_write(&b, &f->items[i], 0, &x->e);
    }
    rc = rc || k3_buf_puts(&b, "}}", &x->e) ? k3_xl_oom(x)
                                            : k3_xl_member_raw(x, "response_format", b.data);
    k3_buf_free(&b);
    return rc;
}

static int fields(k3_xl *x, const k3_json *root, k3_xl_msg *m, void *ctx)
{
    (void)ctx;
    static const char *const dropped[] = { "store",
                                           "metadata",
                                           "user",
                                           "include",
                                           "prompt_cache_key",
                                           "safety_identifier",
                                           "service_tier",
                                           "truncation",
                                           "max_tool_calls",
                                           "stream_options",
                                           "top_logprobs",
                                           "client_metadata",
                                           NULL };
    static const char *const refused[] = { "previous_response_id", "conversation", "prompt", NULL };
    if (root->type != K3J_OBJECT)
        return k3_xl_fail(x, NULL, "The request body must be a JSON object.");
    const k3_json *in = k3_json_get(root, "input"), *ins = k3_json_get(root, "instructions");
    if (!in || in->type == K3J_NULL)
        return k3_xl_fail(x, "input", "Missing required parameter: 'input'.");
    if (ins && ins->type != K3J_NULL) {
        if (ins->type != K3J_STRING)
            return k3_xl_type(x, "instructions", "a string", ins);
        k3_xl_msg_start(m, "system");
        if (k3_xl_text(x, m, ins->str, ins->len) || k3_xl_flush(x, m))
            return x->err->status;
    }
    if (input(x, m, in))
        return x->err->status;
    for (size_t i = 0; i < root->count; i++) {
        const char *k = root->keys[i];
        const k3_json *v = &root->items[i];
        size_t d = 0, r = 0;
        while (dropped[d] && strcmp(dropped[d], k))
            d++;
        while (refused[r] && strcmp(refused[r], k))
            r++;
        if (v->type == K3J_NULL || dropped[d] || !strcmp(k, "input") || !strcmp(k, "instructions"))
            continue;
        if (refused[r])
            return k3_xl_fail(x, k,
                              "'%s' is not supported: k3 serve stores no responses or "
                              "conversations; send the whole conversation as 'input'.",
                              k);
        if (!strcmp(k, "background")) {
            if (v->type != K3J_BOOL || v->boolean)
                return k3_xl_fail(x, k, "'background' is supported only as false.");
            continue;
        }
        if (!strcmp(k, "model") || !strcmp(k, "temperature") || !strcmp(k, "top_p") ||
            !strcmp(k, "stream") || !strcmp(k, "parallel_tool_calls") ||
            !strcmp(k, "return_token_ids")) {
            if (k3_xl_member(x, k, v))
                return x->err->status;
        } else if (!strcmp(k, "max_output_tokens") ? k3_xl_member(x, "max_tokens", v)
                   : !strcmp(k, "tools")           ? tools(x, v)
                   : !strcmp(k, "tool_choice")     ? tool_choice(x, v)
                   : !strcmp(k, "reasoning")       ? reasoning_field(x, v)
                   : !strcmp(k, "text")            ? text_field(x, v)
                                        : k3_xl_fail(x, k, "Unknown parameter: '%s'.", k)) {
            return x->err->status;
        }
    }
    return 0;
}

int k3_responses_parse(const char *body, size_t len, const k3_api_limits *lim, k3_api_request *out,
                       k3_api_error *err)
{
    return k3_xl_parse(body, len, lim, K3_API_RESPONSES, fields, NULL, out, err);
}
