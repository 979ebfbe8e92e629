/* translate.h - what the Anthropic Messages and OpenAI Responses front
 * ends (messages.h, responses.h) share: they rewrite their request into a
 * chat completions body and hand it to k3_api_parse_chat_request, so all
 * three APIs end in the same k3_api_request (one conversation reader, one
 * renderer, one turn driver); only their parse and their emit differ.
 *
 * A k3_xl is that body being written: the top-level fields go in as they
 * are read, and the messages through a k3_xl_msg that gathers one chat
 * message (text and image parts, reasoning, tool calls) until it is
 * flushed. Errors are 400 invalid_request_error naming the front end's own
 * field ("messages[2].content[0].type"), 500 when out of memory. */
#ifndef K3_SERVER_TRANSLATE_H
#define K3_SERVER_TRANSLATE_H

#include <stddef.h>

#include "server/api.h"
#include "util/json.h"
#include "util/json_write.h"

typedef struct k3_xl {
    k3_buf body;       /* the chat completions body so far: "{" then members */
    int first;         /* no member written yet */
    k3_buf msgs;       /* the "messages" array's items */
    size_t nmsgs;
    k3_api_error *err;
    k3_err e;
    char ignored[K3_API_IGNORED_MAX]; /* fields dropped, for the log (api.h) */
} k3_xl;

/* Notes that the front end dropped name (it reaches the request's log note). */
void k3_xl_ignore(k3_xl *x, const char *name);

/* A chat message in the making. role: "system", "user", "assistant" or
 * "tool"; parts: content parts as JSON array items; reasoning: the
 * assistant's reasoning_content; calls: tool_calls items; call_id: a tool
 * message's tool_call_id. */
typedef struct k3_xl_msg {
    const char *role;
    k3_buf parts;
    size_t nparts;
    k3_buf reasoning;
    int has_reasoning;
    k3_buf calls;
    size_t ncalls;
    k3_buf call_id;
} k3_xl_msg;

void k3_xl_init(k3_xl *x, k3_api_error *err);
void k3_xl_free(k3_xl *x);

/* 400 invalid_request_error: param and the message. Returns 400. */
int k3_xl_fail(k3_xl *x, const char *param, const char *fmt, ...) K3_PRINTF(3, 4);
/* 400: "PATH: expected WANT, got TYPE". */
int k3_xl_type(k3_xl *x, const char *path, const char *want, const k3_json *v);
/* 500 from x->e. */
int k3_xl_oom(k3_xl *x);

/* A top-level member of the body: "key": v (v written as JSON), or
 * "key": raw (raw JSON text). */
int k3_xl_member(k3_xl *x, const char *key, const k3_json *v);
int k3_xl_member_raw(k3_xl *x, const char *key, const char *raw);

/* The object v's string member key, or NULL when absent or null; a value
 * of another type is a 400 naming path.key (*fail set). */
const k3_json *k3_xl_string(k3_xl *x, const k3_json *v, const char *key, const char *path,
                            int *fail);

/* Message building: start (role), add a text part, an image part (a URL:
 * data: URLs as the chat reader takes them), reasoning text, a tool call
 * (id, name, arguments: a JSON object or a JSON-object string), then flush
 * (writes the message when it has anything, resets m to role NULL). */
void k3_xl_msg_start(k3_xl_msg *m, const char *role);
int k3_xl_text(k3_xl *x, k3_xl_msg *m, const char *s, size_t n);
int k3_xl_image(k3_xl *x, k3_xl_msg *m, const char *url, size_t n, const char *media_type);
int k3_xl_reasoning(k3_xl *x, k3_xl_msg *m, const char *s, size_t n);
int k3_xl_call(k3_xl *x, k3_xl_msg *m, const char *id, size_t idn, const char *name, size_t nn,
               const k3_json *arguments);
int k3_xl_flush(k3_xl *x, k3_xl_msg *m);

/* One item of a content array (path: "content[3]"), added to m by the
 * front end's own rules: 0 or the error's status. */
typedef int (*k3_xl_part_fn)(k3_xl *x, k3_xl_msg *m, const k3_json *item, const char *path);
/* A content value v at path, as both front ends take it: absent or null
 * adds nothing, a string is one text part, an array gives each item to
 * part; anything else is a 400 "expected a string or an array of WHAT". */
int k3_xl_content(k3_xl *x, k3_xl_msg *m, const k3_json *v, const char *path, const char *what,
                  k3_xl_part_fn part);
void k3_xl_msg_free(k3_xl_msg *m);

/* Appends to b (a tools array's items, n written so far) one chat
 * function tool {"type": "function", "function": {name, description,
 * parameters}} (desc and params may be NULL or null). */
int k3_xl_tool(k3_xl *x, k3_buf *b, size_t n, const k3_json *name, const k3_json *desc,
               const k3_json *params);
/* One item t of a front end's tools array (path "tools[3]"): appends its
 * chat tool to b (k3_xl_tool with *n, then ++*n), or drops it (noted with
 * k3_xl_ignore), or fails: 0 or the error's status. */
typedef int (*k3_xl_tool_fn)(k3_xl *x, const k3_json *t, const char *path, k3_buf *b,
                             size_t *n);
/* The front end's "tools" v (an array, else 400) as the body's chat
 * "tools", each item through one. */
int k3_xl_tools(k3_xl *x, const k3_json *v, k3_xl_tool_fn one);
/* "tool_choice": chat's named form {"type": "function", "function": {name}}. */
int k3_xl_named_choice(k3_xl *x, const k3_json *name);

/* Closes the body (messages last) and parses it as a chat request into
 * *out with kind; returns 0 or the error's status. */
int k3_xl_finish(k3_xl *x, const k3_api_limits *lim, k3_api_kind kind, k3_api_request *out);

/* A front end's reader of its request's top level (root), messages built
 * in m; ctx its own. 0 or the error's status. */
typedef int (*k3_xl_fields_fn)(k3_xl *x, const k3_json *root, k3_xl_msg *m, void *ctx);
/* A front end's whole parse: body[0..len) as JSON (else 400 invalid_json),
 * read by fields, then k3_xl_finish with kind into *out (zeroed first).
 * Returns 0 or err's status. */
int k3_xl_parse(const char *body, size_t len, const k3_api_limits *lim, k3_api_kind kind,
                k3_xl_fields_fn fields, void *ctx, k3_api_request *out, k3_api_error *err);

#endif
