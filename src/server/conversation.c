/* conversation.c - see conversation.h. */
#include "server/conversation.h"

#include <stdio.h>
#include <string.h>

#include "chat/jtext.h"
#include "util/json_write.h"

/* A rewrite in progress: the conversation and where errors go. */
typedef struct {
    const k3_api_conv *c;
    k3_api_error *err;
} parse;

static int oom(parse *p, const k3_err *e)
{
    return k3_api_fail(p->err, 500, NULL, NULL, "%s", e->msg);
}

/* "key": value, after a comma unless first. */
static int put_member(k3_buf *b, int first, const char *key, const k3_json *v, k3_err *e)
{
    if (k3_jtext_key(b, first, key, e))
        return e->code;
    return k3_json_write(b, v, 0, e);
}

/* Text parts of message i joined with "\n", as one JSON string. */
static int put_parts(parse *p, k3_buf *b, const k3_json *parts, size_t i, k3_err *e)
{
    k3_buf text = { 0 };
    char path[96];
    for (size_t j = 0; j < parts->count && !p->err->status; j++) {
        const k3_json *part = &parts->items[j], *type = k3_json_get(part, "type");
        const k3_json *t = k3_json_get(part, "text");
        snprintf(path, sizeof path, "messages[%zu].content[%zu]", i, j);
        if (part->type != K3J_OBJECT || !type || type->type != K3J_STRING)
            k3_api_fail(p->err, 400, "invalid_value", path,
                        "%s: expected a content part {\"type\": \"text\", \"text\": ...}", path);
        else if (strcmp(type->str, "text") != 0)
            k3_api_fail(p->err, 400, "unsupported_value", path,
                        "%s: only text content parts are supported, got type \"%s\"", path,
                        type->str);
        else if (!t || t->type != K3J_STRING)
            k3_api_fail(p->err, 400, "invalid_type", path, "%s.text: expected a string", path);
        else if ((j && k3_buf_put(&text, "\n", 1, e)) || k3_buf_put(&text, t->str, t->len, e))
            oom(p, e);
    }
    if (!p->err->status && k3_jtext_put(b, text.data ? text.data : "", text.len, e))
        oom(p, e);
    k3_buf_free(&text);
    return p->err->status;
}

/* Whether a content list holds an image part: then it goes to the renderer
 * as it is (chat/images.h reads the parts, data URLs and all). */
static int has_image(const k3_json *parts)
{
    for (size_t j = 0; j < parts->count; j++) {
        const k3_json *type = k3_json_get(&parts->items[j], "type");
        if (parts->items[j].type == K3J_OBJECT && type && type->type == K3J_STRING &&
            !strcmp(type->str, "image_url"))
            return 1;
    }
    return 0;
}

/* Whether message m is a system (or developer) message. */
static int is_system(const k3_json *m)
{
    const k3_json *role = k3_json_get(m, "role");
    return role && role->type == K3J_STRING &&
           (!strcmp(role->str, "system") || !strcmp(role->str, "developer"));
}

/* Message i as the renderer reads it: "developer" is "system"; text
 * content parts become one string (a list with an image part stays a
 * list); an assistant's name, refusal, audio and annotations (which the
 * format has no place for) are dropped. Everything else passes as it is,
 * for the reader to judge. */
static int put_message(parse *p, k3_buf *b, const k3_json *m, size_t i, k3_err *e)
{
    static const char *const assistant_only[] = { "name", "refusal", "audio", "annotations", NULL };
    if (m->type != K3J_OBJECT)
        return k3_json_write(b, m, 0, e) ? oom(p, e) : 0;
    const k3_json *role = k3_json_get(m, "role");
    int assistant = role && role->type == K3J_STRING && !strcmp(role->str, "assistant");
    int developer = role && role->type == K3J_STRING && !strcmp(role->str, "developer");
    int first = 1;
    if (k3_buf_put(b, "{", 1, e))
        return oom(p, e);
    for (size_t k = 0; k < m->count; k++) {
        const char *key = m->keys[k];
        const k3_json *v = &m->items[k];
        size_t d = 0;
        while (assistant && assistant_only[d] && strcmp(assistant_only[d], key) != 0)
            d++;
        if (assistant && assistant_only[d])
            continue;
        if (is_system(m) && !strcmp(key, "tools"))
            continue; /* K3's dynamic tools: declared with the others (put_tools) */
        if (!strcmp(key, "function_call")) {
            char path[64];
            snprintf(path, sizeof path, "messages[%zu].function_call", i);
            return k3_api_fail(p->err, 400, "unsupported_value", path,
                               "%s: the deprecated function_call is not supported; use "
                               "tool_calls",
                               path);
        }
        if (k3_jtext_key(b, first, key, e))
            return oom(p, e);
        first = 0;
        if (developer && !strcmp(key, "role")) {
            if (k3_jtext_put(b, "system", 6, e))
                return oom(p, e);
        } else if (!strcmp(key, "content") && v->type == K3J_ARRAY && !has_image(v)) {
            if (put_parts(p, b, v, i, e))
                return p->err->status;
        } else if (k3_json_write(b, v, 0, e)) {
            return oom(p, e);
        }
    }
    return k3_buf_put(b, "}", 1, e) ? oom(p, e) : 0;
}

static int put_options(parse *p, k3_buf *b, k3_err *e)
{
    k3_json v;
    int first = 1;
    memset(&v, 0, sizeof v);
    if (p->c->effort_none && p->c->thinking == 1)
        return k3_api_fail(p->err, 400, "invalid_value", "reasoning_effort",
                           "reasoning_effort \"none\" contradicts thinking: true.");
    if (k3_buf_put(b, "{", 1, e))
        return oom(p, e);
    if (p->c->thinking >= 0 || p->c->effort_none) {
        v.type = K3J_BOOL;
        v.boolean = p->c->effort_none ? 0 : p->c->thinking;
        if (put_member(b, first, "thinking", &v, e))
            return oom(p, e);
        first = 0;
    }
    if (p->c->effort) {
        v.type = K3J_STRING;
        v.str = p->c->effort;
        v.len = strlen(p->c->effort);
        if (put_member(b, first, "thinking_effort", &v, e))
            return oom(p, e);
        first = 0;
    }
    if (p->c->tool_choice) {
        if (put_member(b, first, "tool_choice", p->c->tool_choice, e))
            return oom(p, e);
        first = 0;
    }
    if (p->c->response_format) {
        if (put_member(b, first, "response_format", p->c->response_format, e))
            return oom(p, e);
        first = 0;
    }
    if (p->c->schema) { /* json_schema / guided_json: as a strict response_format */
        if (k3_jtext_key(b, first, "response_format", e) ||
            k3_buf_puts(b, "{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
                           "\"json_schema\",\"strict\":true,\"schema\":", e) ||
            k3_json_write(b, p->c->schema, 0, e) || k3_buf_puts(b, "}}", e))
            return oom(p, e);
        first = 0;
    }
    if (p->c->grammar && (k3_jtext_key(b, first, "grammar", e) ||
                          k3_jtext_put(b, p->c->grammar, strlen(p->c->grammar), e)))
        return oom(p, e);
    return k3_buf_put(b, "}", 1, e) ? oom(p, e) : 0;
}

/* The renderer's error "PATH: what" as a 400 naming the request field.
 * The renderer's "options." (its document's key for tools, tool_choice,
 * response_format) is not the request's, so it goes from both the param
 * and the message. */
static int conversation_error(parse *p, const char *msg)
{
    char param[128] = "";
    const char *colon = strstr(msg, ": ");
    size_t n = colon ? (size_t)(colon - msg) : 0;
    if (n && n < sizeof param && !memchr(msg, ' ', n) && strncmp(msg, "conversation", n) != 0) {
        memcpy(param, msg, n);
        param[n] = '\0';
        if (!strncmp(param, "options.", 8)) {
            memmove(param, param + 8, n - 7);
            msg += 8;
        }
    }
    return k3_api_fail(p->err, 400, "invalid_value", param, "%s", msg);
}

/* The tools member: the request's tools, then those declared on system
 * messages (K3's dynamic tools, "tools" on a system message) in message
 * order, as one list declared where the format declares tools (the
 * release's vectors show no other place); null when there are none at
 * all (and a request's "tools": [] stays []). *count: the declarations. */
static int put_tools(parse *p, k3_buf *b, size_t *count, k3_err *e)
{
    const k3_json *msgs = p->c->messages;
    int any = p->c->tools != NULL;
    *count = 0;
    for (size_t i = 0; i < msgs->count; i++) {
        const k3_json *t =
            is_system(&msgs->items[i]) ? k3_json_get(&msgs->items[i], "tools") : NULL;
        if (!t || t->type == K3J_NULL)
            continue;
        if (t->type != K3J_ARRAY) {
            char path[64];
            snprintf(path, sizeof path, "messages[%zu].tools", i);
            return k3_api_fail(p->err, 400, "invalid_type", path, "%s: expected an array", path);
        }
        any = 1;
    }
    if (p->c->tools && p->c->tools->type != K3J_ARRAY) /* the reader names it */
        return put_member(b, 1, "tools", p->c->tools, e) ? oom(p, e) : 0;
    if (k3_buf_puts(b, any ? "\"tools\":[" : "\"tools\":null", e))
        return oom(p, e);
    for (size_t i = 0; any && i <= msgs->count; i++) {
        const k3_json *t = i == 0 ? p->c->tools
                           : is_system(&msgs->items[i - 1])
                               ? k3_json_get(&msgs->items[i - 1], "tools")
                               : NULL;
        for (size_t k = 0; t && t->type == K3J_ARRAY && k < t->count; k++)
            if ((*count && k3_buf_put(b, ",", 1, e)) || k3_json_write(b, &t->items[k], 0, e))
                return oom(p, e);
            else
                ++*count;
    }
    return any && k3_buf_puts(b, "]", e) ? oom(p, e) : 0;
}

/* tool_choice "required" with no tool to call is a 400 (the reader would
 * render a demand the model cannot meet). */
static int check_choice(parse *p, size_t ntools)
{
    const k3_json *tc = p->c->tool_choice;
    if (tc && tc->type == K3J_STRING && !strcmp(tc->str, "required") && ntools == 0)
        return k3_api_fail(p->err, 400, "invalid_value", "tool_choice",
                           "tool_choice \"required\" needs at least one tool in 'tools'.");
    return 0;
}

int k3_api_read_conversation(const k3_api_conv *c, k3_chat **out, k3_api_error *err)
{
    size_t ntools = 0;
    parse pp = { c, err }, *p = &pp;
    k3_buf b = { 0 };
    k3_err e = { 0, "" };
    int rc = k3_buf_puts(&b, "{\"messages\":[", &e) ? oom(p, &e) : 0;
    for (size_t i = 0; i < c->messages->count && !rc; i++)
        rc = i && k3_buf_put(&b, ",", 1, &e) ? oom(p, &e)
                                             : put_message(p, &b, &c->messages->items[i], i, &e);
    if (!rc && k3_buf_puts(&b, "],", &e))
        rc = oom(p, &e);
    if (!rc)
        rc = put_tools(p, &b, &ntools, &e);
    if (!rc)
        rc = check_choice(p, ntools);
    if (!rc && k3_buf_puts(&b, ",\"options\":", &e))
        rc = oom(p, &e);
    if (!rc)
        rc = put_options(p, &b, &e);
    if (!rc && k3_buf_put(&b, "}", 1, &e))
        rc = oom(p, &e);
    if (!rc && k3_chat_read(out, b.data, b.len, &e) != K3_OK)
        rc = e.code == K3_EINPUT ? conversation_error(p, e.msg) : oom(p, &e);
    k3_buf_free(&b);
    return rc;
}
