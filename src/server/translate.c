/* translate.c - see translate.h. */
#include "server/translate.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chat/jtext.h"

void k3_xl_init(k3_xl *x, k3_api_error *err)
{
    memset(x, 0, sizeof *x);
    x->first = 1;
    x->err = err;
    memset(err, 0, sizeof *err);
}

void k3_xl_free(k3_xl *x)
{
    k3_buf_free(&x->body);
    k3_buf_free(&x->msgs);
}

void k3_xl_ignore(k3_xl *x, const char *name)
{
    size_t n = strlen(x->ignored), room = sizeof x->ignored - n;
    if (room > 1)
        snprintf(x->ignored + n, room, "%s%s", n ? ", " : "", name);
}

int k3_xl_fail(k3_xl *x, const char *param, const char *fmt, ...)
{
    char msg[sizeof x->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return k3_api_fail(x->err, 400, "invalid_value", param, "%s", msg);
}

int k3_xl_type(k3_xl *x, const char *path, const char *want, const k3_json *v)
{
    return k3_api_fail(x->err, 400, "invalid_type", path, "%s: expected %s, got %s", path, want,
                       k3_json_type_name(v));
}

int k3_xl_oom(k3_xl *x)
{
    return k3_api_fail(x->err, 500, NULL, NULL, "%s", x->e.msg);
}

static int key(k3_xl *x, const char *name)
{
    if (k3_buf_puts(&x->body, x->first ? "{" : ",", &x->e) ||
        k3_jtext_key(&x->body, 1, name, &x->e))
        return k3_xl_oom(x);
    x->first = 0;
    return 0;
}

int k3_xl_member(k3_xl *x, const char *name, const k3_json *v)
{
    if (key(x, name))
        return x->err->status;
    return k3_json_write(&x->body, v, 0, &x->e) ? k3_xl_oom(x) : 0;
}

int k3_xl_member_raw(k3_xl *x, const char *name, const char *raw)
{
    if (key(x, name))
        return x->err->status;
    return k3_buf_puts(&x->body, raw, &x->e) ? k3_xl_oom(x) : 0;
}

const k3_json *k3_xl_string(k3_xl *x, const k3_json *v, const char *name, const char *path,
                            int *fail)
{
    const k3_json *s = k3_json_get(v, name);
    char p[160];
    if (!s || s->type == K3J_NULL)
        return NULL;
    if (s->type == K3J_STRING)
        return s;
    snprintf(p, sizeof p, "%s.%s", path, name);
    k3_xl_type(x, p, "a string", s);
    *fail = 1;
    return NULL;
}

void k3_xl_msg_start(k3_xl_msg *m, const char *role)
{
    m->role = role;
    m->parts.len = m->reasoning.len = m->calls.len = m->call_id.len = 0;
    m->nparts = m->ncalls = 0;
    m->has_reasoning = 0;
}

void k3_xl_msg_free(k3_xl_msg *m)
{
    k3_buf_free(&m->parts);
    k3_buf_free(&m->reasoning);
    k3_buf_free(&m->calls);
    k3_buf_free(&m->call_id);
}

int k3_xl_text(k3_xl *x, k3_xl_msg *m, const char *s, size_t n)
{
    if ((m->nparts && k3_buf_puts(&m->parts, ",", &x->e)) ||
        k3_buf_puts(&m->parts, "{\"type\":\"text\",\"text\":", &x->e) ||
        k3_jtext_put(&m->parts, s, n, &x->e) || k3_buf_puts(&m->parts, "}", &x->e))
        return k3_xl_oom(x);
    m->nparts++;
    return 0;
}

int k3_xl_image(k3_xl *x, k3_xl_msg *m, const char *url, size_t n, const char *media_type)
{
    k3_buf u = { 0 };
    int rc = 0;
    if ((media_type && (k3_buf_puts(&u, "data:", &x->e) || k3_buf_puts(&u, media_type, &x->e) ||
                        k3_buf_puts(&u, ";base64,", &x->e))) ||
        k3_buf_put(&u, url, n, &x->e) || (m->nparts && k3_buf_puts(&m->parts, ",", &x->e)) ||
        k3_buf_puts(&m->parts, "{\"type\":\"image_url\",\"image_url\":{\"url\":", &x->e) ||
        k3_jtext_put(&m->parts, u.data, u.len, &x->e) || k3_buf_puts(&m->parts, "}}", &x->e))
        rc = k3_xl_oom(x);
    else
        m->nparts++;
    k3_buf_free(&u);
    return rc;
}

int k3_xl_reasoning(k3_xl *x, k3_xl_msg *m, const char *s, size_t n)
{
    m->has_reasoning = 1;
    return k3_buf_put(&m->reasoning, s, n, &x->e) ? k3_xl_oom(x) : 0;
}

int k3_xl_call(k3_xl *x, k3_xl_msg *m, const char *id, size_t idn, const char *name, size_t nn,
               const k3_json *arguments)
{
    k3_buf *b = &m->calls;
    if ((m->ncalls && k3_buf_puts(b, ",", &x->e)) || k3_buf_puts(b, "{\"id\":", &x->e) ||
        k3_jtext_put(b, id, idn, &x->e) ||
        k3_buf_puts(b, ",\"type\":\"function\",\"function\":{\"name\":", &x->e) ||
        k3_jtext_put(b, name, nn, &x->e) || k3_buf_puts(b, ",\"arguments\":", &x->e) ||
        (arguments ? k3_json_write(b, arguments, 0, &x->e) : k3_buf_puts(b, "{}", &x->e)) ||
        k3_buf_puts(b, "}}", &x->e))
        return k3_xl_oom(x);
    m->ncalls++;
    return 0;
}

int k3_xl_flush(k3_xl *x, k3_xl_msg *m)
{
    k3_buf *b = &x->msgs;
    k3_err *e = &x->e;
    int tool = m->role && !strcmp(m->role, "tool");
    if (!m->role || (!m->nparts && !m->has_reasoning && !m->ncalls && !tool)) {
        m->role = NULL;
        return 0;
    }
    if ((x->nmsgs && k3_buf_puts(b, ",", e)) || k3_buf_puts(b, "{\"role\":", e) ||
        k3_jtext_put(b, m->role, strlen(m->role), e) || k3_buf_puts(b, ",\"content\":", e))
        return k3_xl_oom(x);
    if (m->nparts ? k3_buf_puts(b, "[", e) || k3_buf_put(b, m->parts.data, m->parts.len, e) ||
                        k3_buf_puts(b, "]", e)
                  : k3_buf_puts(b, m->ncalls ? "null" : "\"\"", e))
        return k3_xl_oom(x);
    if (m->has_reasoning &&
        (k3_buf_puts(b, ",\"reasoning_content\":", e) ||
         k3_jtext_put(b, m->reasoning.data ? m->reasoning.data : "", m->reasoning.len, e)))
        return k3_xl_oom(x);
    if (m->ncalls && (k3_buf_puts(b, ",\"tool_calls\":[", e) ||
                      k3_buf_put(b, m->calls.data, m->calls.len, e) || k3_buf_puts(b, "]", e)))
        return k3_xl_oom(x);
    if (tool && (k3_buf_puts(b, ",\"tool_call_id\":", e) ||
                 k3_jtext_put(b, m->call_id.data ? m->call_id.data : "", m->call_id.len, e)))
        return k3_xl_oom(x);
    if (k3_buf_puts(b, "}", e))
        return k3_xl_oom(x);
    x->nmsgs++;
    k3_xl_msg_start(m, NULL);
    return 0;
}

int k3_xl_tool(k3_xl *x, k3_buf *b, size_t n, const k3_json *name, const k3_json *desc,
               const k3_json *params)
{
    if ((n && k3_buf_puts(b, ",", &x->e)) ||
        k3_buf_puts(b, "{\"type\":\"function\",\"function\":{\"name\":", &x->e) ||
        k3_json_write(b, name, 0, &x->e) ||
        (desc && desc->type != K3J_NULL &&
         (k3_buf_puts(b, ",\"description\":", &x->e) || k3_json_write(b, desc, 0, &x->e))) ||
        (params && params->type != K3J_NULL &&
         (k3_buf_puts(b, ",\"parameters\":", &x->e) || k3_json_write(b, params, 0, &x->e))) ||
        k3_buf_puts(b, "}}", &x->e))
        return k3_xl_oom(x);
    return 0;
}

int k3_xl_tools(k3_xl *x, const k3_json *v, k3_xl_tool_fn one)
{
    k3_buf b = { 0 };
    size_t n = 0;
    char p[48];
    if (v->type != K3J_ARRAY)
        return k3_xl_type(x, "tools", "an array", v);
    int rc = k3_buf_puts(&b, "[", &x->e) ? k3_xl_oom(x) : 0;
    for (size_t i = 0; i < v->count && !rc; i++) {
        snprintf(p, sizeof p, "tools[%zu]", i);
        rc = one(x, &v->items[i], p, &b, &n);
    }
    if (!rc && k3_buf_puts(&b, "]", &x->e))
        rc = k3_xl_oom(x);
    if (!rc)
        rc = k3_xl_member_raw(x, "tools", b.data);
    k3_buf_free(&b);
    return rc;
}

int k3_xl_named_choice(k3_xl *x, const k3_json *name)
{
    k3_buf b = { 0 };
    int rc = k3_buf_puts(&b, "{\"type\":\"function\",\"function\":{\"name\":", &x->e) ||
             k3_json_write(&b, name, 0, &x->e) || k3_buf_puts(&b, "}}", &x->e);
    rc = rc ? k3_xl_oom(x) : k3_xl_member_raw(x, "tool_choice", b.data);
    k3_buf_free(&b);
    return rc;
}

int k3_xl_finish(k3_xl *x, const k3_api_limits *lim, k3_api_kind kind, k3_api_request *out)
{
    memset(out, 0, sizeof *out);
    if (x->err->status)
        return x->err->status;
    if (x->nmsgs == 0)
        return k3_xl_fail(x, "messages", "The conversation has no message.");
    if (key(x, "messages") || k3_buf_puts(&x->body, "[", &x->e) ||
        k3_buf_put(&x->body, x->msgs.data, x->msgs.len, &x->e) ||
        k3_buf_puts(&x->body, "]}", &x->e))
        return k3_xl_oom(x);
    if (k3_api_parse_chat_request(x->body.data, x->body.len, lim, out, x->err))
        return x->err->status;
    out->kind = kind;
    if (x->ignored[0])
        k3_api_note_ignored(out, x->ignored);
    return 0;
}

int k3_xl_content(k3_xl *x, k3_xl_msg *m, const k3_json *v, const char *path, const char *what,
                  k3_xl_part_fn part)
{
    char p[176], want[96];
    if (!v || v->type == K3J_NULL)
        return 0;
    if (v->type == K3J_STRING)
        return k3_xl_text(x, m, v->str, v->len);
    if (v->type != K3J_ARRAY) {
        snprintf(want, sizeof want, "a string or an array of %s", what);
        return k3_xl_type(x, path, want, v);
    }
    for (size_t j = 0; j < v->count; j++) {
        snprintf(p, sizeof p, "%s[%zu]", path, j);
        if (part(x, m, &v->items[j], p))
            return x->err->status;
    }
    return 0;
}

int k3_xl_parse(const char *body, size_t len, const k3_api_limits *lim, k3_api_kind kind,
                k3_xl_fields_fn fields, void *ctx, k3_api_request *out, k3_api_error *err)
{
    char jerr[256];
    k3_xl x;
    k3_xl_msg m;
    memset(&m, 0, sizeof m);
    memset(out, 0, sizeof *out);
    k3_xl_init(&x, err);
    k3_json_doc *doc = k3_json_parse(body, len, jerr, sizeof jerr);
    if (!doc)
        k3_api_fail(err, 400, "invalid_json", NULL, "The request body is not valid JSON (%s).",
                    jerr);
    else if (!fields(&x, k3_json_root(doc), &m, ctx))
        k3_xl_finish(&x, lim, kind, out);
    k3_json_free(doc);
    k3_xl_msg_free(&m);
    k3_xl_free(&x);
    return err->status;
}
