/* messages.c - see messages.h. */
#include "server/messages.h"

#include <stdio.h>
#include <string.h>

#include "server/translate.h"
#include "util/json.h"

/* The block's "type", or NULL after a 400. */
static const char *block_type(k3_xl *x, const k3_json *b, const char *path)
{
    const k3_json *t = k3_json_get(b, "type");
    if (b->type != K3J_OBJECT)
        k3_xl_type(x, path, "a content block (an object)", b);
    else if (!t || t->type != K3J_STRING)
        k3_xl_fail(x, path, "%s: a content block needs a string \"type\"", path);
    else
        return t->str;
    return NULL;
}

/* One text block of a text-only content (system, tool_result). */
static int text_block(k3_xl *x, k3_xl_msg *m, const k3_json *b, const char *p)
{
    int fail = 0;
    const char *type = block_type(x, b, p);
    if (!type)
        return x->err->status;
    if (strcmp(type, "text"))
        return k3_xl_fail(x, p, "%s: only text blocks are supported here, got \"%s\"", p, type);
    const k3_json *t = k3_xl_string(x, b, "text", p, &fail);
    return fail || (t && k3_xl_text(x, m, t->str, t->len)) ? x->err->status : 0;
}

/* Text of a string or of text blocks (tool_result content), as one
 * message's text parts. */
static int text_blocks(k3_xl *x, k3_xl_msg *m, const k3_json *v, const char *path)
{
    return k3_xl_content(x, m, v, path, "text blocks", text_block);
}

/* An image block's source: base64 data with its media type, or a URL. */
static int image(k3_xl *x, k3_xl_msg *m, const k3_json *b, const char *path)
{
    const k3_json *src = k3_json_get(b, "source");
    int fail = 0;
    if (!src || src->type != K3J_OBJECT)
        return k3_xl_fail(x, path, "%s: an image block needs a \"source\" object", path);
    const k3_json *type = k3_xl_string(x, src, "type", path, &fail);
    const k3_json *data = k3_xl_string(x, src, "data", path, &fail);
    const k3_json *mt = k3_xl_string(x, src, "media_type", path, &fail);
    const k3_json *url = k3_xl_string(x, src, "url", path, &fail);
    if (fail)
        return x->err->status;
    if (type && !strcmp(type->str, "base64") && data && mt)
        return k3_xl_image(x, m, data->str, data->len, mt->str);
    if (type && !strcmp(type->str, "url") && url)
        return k3_xl_image(x, m, url->str, url->len, NULL);
    return k3_xl_fail(x, path,
                      "%s.source: expected {type: \"base64\", media_type, data} or "
                      "{type: \"url\", url}",
                      path);
}

/* One user or assistant message (index i): user blocks become a user
 * message, each tool_result a tool message in place; assistant blocks one
 * assistant message. */
static int message(k3_xl *x, k3_xl_msg *m, const k3_json *v, size_t i)
{
    char path[64], p[160];
    int fail = 0;
    snprintf(path, sizeof path, "messages[%zu]", i);
    if (v->type != K3J_OBJECT)
        return k3_xl_type(x, path, "an object", v);
    for (size_t k = 0; k < v->count; k++)
        if (strcmp(v->keys[k], "role") && strcmp(v->keys[k], "content"))
            return k3_xl_fail(x, path, "%s: unknown key \"%s\"", path, v->keys[k]);
    const k3_json *role = k3_xl_string(x, v, "role", path, &fail);
    const k3_json *content = k3_json_get(v, "content");
    if (fail)
        return x->err->status;
    if (!role || (strcmp(role->str, "user") && strcmp(role->str, "assistant") &&
                  strcmp(role->str, "system")))
        return k3_xl_fail(x, path, "%s.role: expected \"user\", \"assistant\" or \"system\"", path);
    int user = role->str[0] == 'u';
    snprintf(path, sizeof path, "messages[%zu].content", i);
    if (role->str[0] == 's') { /* Claude Code's mid-conversation system text */
        k3_xl_msg_start(m, "system");
        return text_blocks(x, m, content, path) || k3_xl_flush(x, m) ? x->err->status : 0;
    }
    k3_xl_msg_start(m, user ? "user" : "assistant");
    if (!content || content->type == K3J_STRING)
        return text_blocks(x, m, content, path) || k3_xl_flush(x, m) ? x->err->status : 0;
    if (content->type != K3J_ARRAY)
        return k3_xl_type(x, path, "a string or an array of content blocks", content);
    for (size_t j = 0; j < content->count; j++) {
        const k3_json *b = &content->items[j];
        snprintf(p, sizeof p, "%s[%zu]", path, j);
        const char *type = block_type(x, b, p);
        if (!type)
            return x->err->status;
        if (!strcmp(type, "text")) {
            const k3_json *t = k3_xl_string(x, b, "text", p, &fail);
            if (fail || (t && k3_xl_text(x, m, t->str, t->len)))
                return x->err->status;
        } else if (user && !strcmp(type, "image")) {
            if (image(x, m, b, p))
                return x->err->status;
        } else if (user && !strcmp(type, "tool_result")) {
            k3_xl_msg tool;
            char tp[176];
            const k3_json *id = k3_xl_string(x, b, "tool_use_id", p, &fail);
            if (fail || k3_xl_flush(x, m))
                return x->err->status;
            memset(&tool, 0, sizeof tool);
            k3_xl_msg_start(&tool, "tool");
            snprintf(tp, sizeof tp, "%s.content", p);
            if ((id && k3_buf_put(&tool.call_id, id->str, id->len, &x->e)) ||
                text_blocks(x, &tool, k3_json_get(b, "content"), tp) || k3_xl_flush(x, &tool))
                fail = 1;
            k3_xl_msg_free(&tool);
            if (fail)
                return x->err->status ? x->err->status : k3_xl_oom(x);
            k3_xl_msg_start(m, "user");
        } else if (!user && !strcmp(type, "tool_use")) {
            const k3_json *id = k3_xl_string(x, b, "id", p, &fail);
            const k3_json *name = k3_xl_string(x, b, "name", p, &fail);
            const k3_json *input = k3_json_get(b, "input");
            if (fail)
                return x->err->status;
            if (!name)
                return k3_xl_fail(x, p, "%s: a tool_use block needs a \"name\"", p);
            if (input && input->type != K3J_OBJECT)
                return k3_xl_type(x, p, "an object as \"input\"", input);
            if (k3_xl_call(x, m, id ? id->str : "", id ? id->len : 0, name->str, name->len, input))
                return x->err->status;
        } else if (!user && !strcmp(type, "thinking")) {
            const k3_json *t = k3_xl_string(x, b, "thinking", p, &fail);
            if (fail || (t && k3_xl_reasoning(x, m, t->str, t->len)))
                return x->err->status;
        } else if (!user && !strcmp(type, "redacted_thinking")) {
            continue;
        } else {
            return k3_xl_fail(x, p,
                              "%s: content blocks of type \"%s\" are not supported in %s "
                              "messages",
                              p, type, role->str);
        }
    }
    return k3_xl_flush(x, m);
}

/* One of Anthropic's custom tools as a chat completions function tool. */
static int tool(k3_xl *x, const k3_json *t, const char *p, k3_buf *b, size_t *n)
{
    int fail = 0;
    if (t->type != K3J_OBJECT)
        return k3_xl_type(x, p, "an object", t);
    const k3_json *type = k3_xl_string(x, t, "type", p, &fail);
    const k3_json *name = k3_xl_string(x, t, "name", p, &fail);
    const k3_json *desc = k3_xl_string(x, t, "description", p, &fail);
    const k3_json *schema = k3_json_get(t, "input_schema");
    if (fail)
        return x->err->status;
    if (type && strcmp(type->str, "custom"))
        return k3_xl_fail(x, p, "%s: server tools (type \"%s\") are not supported by k3 serve",
                          p, type->str);
    if (!name || !schema || schema->type != K3J_OBJECT)
        return k3_xl_fail(x, p, "%s: a tool needs \"name\" and an \"input_schema\" object", p);
    return k3_xl_tool(x, b, (*n)++, name, desc, schema);
}

/* tools: Anthropic's custom tools as chat completions' function tools. */
static int tools(k3_xl *x, const k3_json *v)
{
    return k3_xl_tools(x, v, tool);
}

/* tool_choice: Anthropic's types as chat completions' values. */
static int tool_choice(k3_xl *x, const k3_json *v)
{
    int fail = 0;
    char raw[200];
    const k3_json *type =
        v->type == K3J_OBJECT ? k3_xl_string(x, v, "type", "tool_choice", &fail) : NULL;
    const k3_json *name = type ? k3_xl_string(x, v, "name", "tool_choice", &fail) : NULL;
    if (fail)
        return x->err->status;
    if (!type)
        return k3_xl_fail(x, "tool_choice",
                          "tool_choice: expected {\"type\": \"auto\" | \"any\" "
                          "| \"tool\" | \"none\"}");
    if (!strcmp(type->str, "auto") || !strcmp(type->str, "none"))
        snprintf(raw, sizeof raw, "\"%s\"", type->str);
    else if (!strcmp(type->str, "any"))
        snprintf(raw, sizeof raw, "\"required\"");
    else if (!strcmp(type->str, "tool") && name)
        return k3_xl_named_choice(x, name);
    else
        return k3_xl_fail(x, "tool_choice.type",
                          "tool_choice.type: expected auto, any, tool "
                          "(with a name) or none");
    return k3_xl_member_raw(x, "tool_choice", raw);
}

/* thinking {type, budget_tokens} (messages.h for the effort mapping). */
static int thinking(k3_xl *x, const k3_json *v, const k3_json *root)
{
    const k3_json *oc = k3_json_get(root, "output_config");
    int fail = 0;
    const k3_json *type =
        v->type == K3J_OBJECT ? k3_xl_string(x, v, "type", "thinking", &fail) : NULL;
    const k3_json *budget = type ? k3_json_get(v, "budget_tokens") : NULL;
    if (fail)
        return x->err->status;
    if (!type)
        return k3_xl_fail(x, "thinking",
                          "thinking: expected {\"type\": \"enabled\", "
                          "\"budget_tokens\": N} or {\"type\": \"disabled\"}");
    if (!strcmp(type->str, "disabled"))
        return k3_xl_member_raw(x, "thinking", "false");
    if (strcmp(type->str, "enabled") && strcmp(type->str, "adaptive"))
        return k3_xl_fail(x, "thinking.type",
                          "thinking.type: expected enabled, adaptive or "
                          "disabled");
    if (budget && (budget->type != K3J_NUMBER || !budget->is_int || budget->integer < 0))
        return k3_xl_type(x, "thinking.budget_tokens", "a non-negative integer", budget);
    if (k3_xl_member_raw(x, "thinking", "true"))
        return x->err->status;
    if (!budget || !strcmp(type->str, "adaptive") || k3_json_get(oc, "effort"))
        return 0; /* output_config.effort, when given, says the effort */
    return k3_xl_member_raw(x, "reasoning_effort",
                            budget->integer < 8192    ? "\"low\""
                            : budget->integer < 24576 ? "\"high\""
                                                      : "\"max\"");
}

/* output_config {effort: low | medium | high | max, format: {type:
 * "json_schema", schema}}: the effort as reasoning_effort (it overrides
 * what thinking's budget says), the format as response_format. */
static int output_config(k3_xl *x, const k3_json *v)
{
    int fail = 0;
    if (v->type != K3J_OBJECT)
        return k3_xl_type(x, "output_config", "an object", v);
    const k3_json *effort = k3_xl_string(x, v, "effort", "output_config", &fail);
    const k3_json *format = k3_json_get(v, "format");
    if (fail)
        return x->err->status;
    for (size_t i = 0; i < v->count; i++)
        if (strcmp(v->keys[i], "effort") && strcmp(v->keys[i], "format"))
            return k3_xl_fail(x, "output_config", "output_config: unknown key \"%s\"", v->keys[i]);
    if (effort && k3_xl_member(x, "reasoning_effort", effort))
        return x->err->status;
    if (!format || format->type == K3J_NULL)
        return 0;
    const k3_json *schema = k3_json_get(format, "schema");
    if (format->type != K3J_OBJECT || !schema)
        return k3_xl_fail(x, "output_config.format",
                          "output_config.format: expected {\"type\": "
                          "\"json_schema\", \"schema\": {...}}");
    k3_buf b = { 0 };
    int rc = k3_buf_puts(&b,
                         "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"output\","
                         "\"schema\":",
                         &x->e) ||
             k3_json_write(&b, schema, 0, &x->e) || k3_buf_puts(&b, "}}", &x->e);
    rc = rc ? k3_xl_oom(x) : k3_xl_member_raw(x, "response_format", b.data);
    k3_buf_free(&b);
    return rc;
}

/* system: a string or text blocks, as the first message. */
static int system_prompt(k3_xl *x, k3_xl_msg *m, const k3_json *v)
{
    k3_xl_msg_start(m, "system");
    return text_blocks(x, m, v, "system") || k3_xl_flush(x, m);
}

/* Fields copied as they are (the chat parser checks them) under the chat
 * name; NULL name: accepted and dropped. */
static const struct {
    const char *from, *to;
} same[] = {
    { "model", "model" },
    { "max_tokens", "max_tokens" },
    { "temperature", "temperature" },
    { "top_p", "top_p" },
    { "top_k", "top_k" },
    { "stream", "stream" },
    { "stop_sequences", "stop" },
    { "metadata", NULL },
    { "service_tier", NULL },
    { "context_management", NULL },
    { "return_token_ids", "return_token_ids" },
};

/* The body's top level (ctx: the int count, count_tokens' body). */
static int fields(k3_xl *x, const k3_json *root, k3_xl_msg *m, void *ctx)
{
    int count = *(const int *)ctx;
    const k3_json *msgs = k3_json_get(root, "messages"), *sys = k3_json_get(root, "system");
    if (root->type != K3J_OBJECT)
        return k3_xl_fail(x, NULL, "The request body must be a JSON object.");
    if (!count && !k3_json_get(root, "max_tokens"))
        return k3_xl_fail(x, "max_tokens", "max_tokens: Field required");
    if (!msgs || msgs->type != K3J_ARRAY)
        return k3_xl_fail(x, "messages", "messages: Field required (an array)");
    if (sys && sys->type != K3J_NULL && system_prompt(x, m, sys))
        return x->err->status;
    /* No "thinking": Anthropic's meaning, thinking off (messages.h). */
    const k3_json *th = k3_json_get(root, "thinking");
    if ((!th || th->type == K3J_NULL) && k3_xl_member_raw(x, "thinking", "false"))
        return x->err->status;
    for (size_t i = 0; i < msgs->count; i++)
        if (message(x, m, &msgs->items[i], i))
            return x->err->status;
    for (size_t i = 0; i < root->count; i++) {
        const char *k = root->keys[i];
        const k3_json *v = &root->items[i];
        size_t f = 0, nf = sizeof same / sizeof same[0];
        while (f < nf && strcmp(same[f].from, k))
            f++;
        if (v->type == K3J_NULL || !strcmp(k, "messages") || !strcmp(k, "system") ||
            (f < nf && !same[f].to))
            continue;
        if (count && (!strcmp(k, "stream") || !strcmp(k, "max_tokens")))
            return k3_xl_fail(x, k, "%s: not a field of count_tokens", k);
        if (f < nf                      ? k3_xl_member(x, same[f].to, v)
            : !strcmp(k, "tools")       ? tools(x, v)
            : !strcmp(k, "tool_choice") ? tool_choice(x, v)
            : !strcmp(k, "thinking")    ? thinking(x, v, root)
            : !strcmp(k, "output_config")
                ? output_config(x, v)
                : k3_xl_fail(x, k, "%s: Extra inputs are not permitted", k))
            return x->err->status;
    }
    return 0;
}

int k3_messages_parse(const char *body, size_t len, const k3_api_limits *lim, int count,
                      k3_api_request *out, k3_api_error *err)
{
    return k3_xl_parse(body, len, lim, K3_API_MESSAGES, fields, &count, out, err);
}
