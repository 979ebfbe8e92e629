/* reply.c - see reply.h. */
#include "chat/reply.h"

#include <string.h>

#include "chat/jtext.h"
#include "util/json.h"

enum { BODY, OPEN_TAG, CLOSE_TAG };
enum { EL_OTHER, EL_MESSAGE, EL_THINK, EL_RESPONSE, EL_TOOLS, EL_CALL, EL_ARGUMENT, EL_JSON };

/* A tag longer than this is not one the format writes: the rest is dropped. */
#define MAX_TAG 4096

static int kind_of(const char *tag, size_t n)
{
    static const char *const names[] = { "", "message", "think", "response", "tools", "call",
                                         "argument", "json" };
    for (int k = 1; k < (int)(sizeof names / sizeof names[0]); k++)
        if (strlen(names[k]) == n && !memcmp(names[k], tag, n))
            return k;
    return EL_OTHER;
}

void k3_reply_init(k3_reply *r, int thinking, const k3_reply_sink *sink)
{
    memset(r, 0, sizeof *r);
    r->sink = *sink;
    r->kind[0] = EL_MESSAGE;
    r->kind[1] = thinking ? EL_THINK : EL_RESPONSE;
    r->depth = 2;
}

void k3_reply_free(k3_reply *r)
{
    k3_buf_free(&r->tag);
    k3_buf_free(&r->name);
    k3_buf_free(&r->args);
    k3_buf_free(&r->key);
    k3_buf_free(&r->value);
}

/* The value of attribute `key` in the tag text t[0..n) (after the tag
 * name), unescaped (&amp; and &quot;) into out; empty when absent. */
static int attribute(const char *t, size_t n, const char *key, k3_buf *out, k3_err *e)
{
    size_t kl = strlen(key);
    out->len = 0;
    if (k3_buf_put(out, "", 0, e))
        return e->code;
    for (size_t i = 0; i + kl + 3 <= n; i++) {
        if (t[i] != ' ' || memcmp(t + i + 1, key, kl) != 0 || memcmp(t + i + 1 + kl, "=\"", 2))
            continue;
        for (size_t j = i + kl + 3; j < n && t[j] != '"'; j++) {
            const char *c = t + j;
            size_t step = 1;
            if (n - j >= 5 && !memcmp(c, "&amp;", 5)) {
                c = "&";
                step = 5;
            } else if (n - j >= 6 && !memcmp(c, "&quot;", 6)) {
                c = "\"";
                step = 6;
            }
            if (k3_buf_put(out, c, 1, e))
                return e->code;
            j += step - 1;
        }
        return K3_OK;
    }
    return K3_OK;
}

/* An element opened: tag text t[0..n) is "NAME attrs...". */
static int opened(k3_reply *r, const char *t, size_t n, k3_err *e)
{
    size_t nl = 0;
    while (nl < n && t[nl] != ' ')
        nl++;
    int kind = kind_of(t, nl);
    if (r->depth == K3_REPLY_DEPTH)
        return K3_OK; /* deeper than any reply the format writes: not tracked */
    r->kind[r->depth++] = (unsigned char)kind;
    r->value.len = 0;
    if (kind == EL_CALL) {
        r->args.len = 0;
        r->nargs = 0;
        r->raw_args = 0;
        return attribute(t + nl, n - nl, "tool", &r->name, e);
    }
    if (kind == EL_ARGUMENT) {
        k3_buf type = { 0 };
        if (attribute(t + nl, n - nl, "type", &type, e) == K3_OK)
            r->arg_is_string = !strcmp(type.data, "string");
        k3_buf_free(&type);
        return e->code ? e->code : attribute(t + nl, n - nl, "key", &r->key, e);
    }
    return K3_OK;
}

/* The current argument as a member of the call's arguments object. */
static int argument_done(k3_reply *r, k3_err *e)
{
    char jerr[8];
    if (k3_buf_puts(&r->args, r->nargs++ ? ", " : "{", e) ||
        k3_jtext_put(&r->args, r->key.data ? r->key.data : "", r->key.len, e) ||
        k3_buf_puts(&r->args, ": ", e))
        return e->code;
    k3_json_doc *doc = NULL;
    if (!r->arg_is_string && r->value.len)
        doc = k3_json_parse(r->value.data, r->value.len, jerr, sizeof jerr);
    int rc = doc ? k3_buf_put(&r->args, r->value.data, r->value.len, e)
                 : k3_jtext_put(&r->args, r->value.data ? r->value.data : "", r->value.len, e);
    k3_json_free(doc);
    return rc;
}

static int call_done(k3_reply *r, k3_err *e)
{
    if (r->raw_args)
        return r->sink.call(r->sink.ctx, r->name.data, r->name.len, r->value.data, r->value.len,
                            e);
    if (k3_buf_puts(&r->args, r->nargs ? "}" : "{}", e))
        return e->code;
    return r->sink.call(r->sink.ctx, r->name.data, r->name.len, r->args.data, r->args.len, e);
}

/* A close tag named t[0..n): closes the innermost open element of that
 * kind and everything inside it; matching nothing, it is ignored. */
static int closed(k3_reply *r, const char *t, size_t n, k3_err *e)
{
    int kind = kind_of(t, n), at = r->depth - 1;
    while (at >= 0 && r->kind[at] != kind)
        at--;
    while (at >= 0 && r->depth > at) {
        int k = r->kind[--r->depth];
        int rc = K3_OK;
        if (k == EL_ARGUMENT && r->depth > 0 && r->kind[r->depth - 1] == EL_CALL)
            rc = argument_done(r, e);
        else if (k == EL_JSON && r->depth > 0 && r->kind[r->depth - 1] == EL_CALL)
            r->raw_args = 1;
        else if (k == EL_CALL)
            rc = call_done(r, e);
        if (rc)
            return rc;
    }
    return K3_OK;
}

int k3_reply_markup(k3_reply *r, int which, k3_err *e)
{
    if (which == K3_REPLY_OPEN || which == K3_REPLY_CLOSE) {
        /* A new tag starts; one left unfinished is dropped. */
        r->mode = which == K3_REPLY_OPEN ? OPEN_TAG : CLOSE_TAG;
        r->tag.len = 0;
        return k3_buf_put(&r->tag, "", 0, e);
    }
    int mode = r->mode;
    r->mode = BODY;
    if (mode == OPEN_TAG)
        return opened(r, r->tag.data, r->tag.len, e);
    if (mode == CLOSE_TAG)
        return closed(r, r->tag.data, r->tag.len, e);
    return K3_OK; /* a stray <|sep|> */
}

int k3_reply_thinking(const k3_reply *r)
{
    for (int i = 0; i < r->depth; i++)
        if (r->kind[i] == EL_THINK)
            return 1;
    return 0;
}

int k3_reply_text(k3_reply *r, const char *s, size_t n, k3_err *e)
{
    if (r->mode != BODY) {
        size_t room = MAX_TAG > r->tag.len ? MAX_TAG - r->tag.len : 0;
        return k3_buf_put(&r->tag, s, n < room ? n : room, e);
    }
    int kind = r->depth ? r->kind[r->depth - 1] : EL_MESSAGE;
    switch (kind) {
    case EL_THINK:
        return r->sink.text(r->sink.ctx, K3_REPLY_REASONING, s, n, e);
    case EL_ARGUMENT:
    case EL_JSON:
        return k3_buf_put(&r->value, s, n, e);
    case EL_TOOLS:
    case EL_CALL:
        return K3_OK;
    default:
        return r->sink.text(r->sink.ctx, K3_REPLY_CONTENT, s, n, e);
    }
}
