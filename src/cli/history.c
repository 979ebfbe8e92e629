/* history.c - see history.h. */
#include "cli/history.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chat/images.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"

/* A history is text: generous, but not unbounded. */
#define MAX_HISTORY_BYTES (256u << 20)

/* The string member `key` of a line's object: NULL when absent or null
 * (if allowed); K3_EINPUT naming the line otherwise. */
static int member(const k3_json *obj, const char *key, int nullable, const k3_json **out,
                  const char *path, size_t line, k3_err *e)
{
    const k3_json *v = k3_json_get(obj, key);
    *out = NULL;
    if (!v || (nullable && v->type == K3J_NULL))
        return K3_OK;
    if (v->type != K3J_STRING)
        return k3_fail(e, K3_EINPUT, "%s:%zu: \"%s\" must be a string%s", path, line, key,
                       nullable ? " or null" : "");
    *out = v;
    return K3_OK;
}

static int read_line(const char *path, size_t line, const char *text, size_t len, k3_chat *c,
                     k3_err *e)
{
    static const char *const keys[] = { "role", "content", "reasoning_content" };
    char jerr[256];
    k3_json_doc *doc = k3_json_parse(text, len, jerr, sizeof jerr);
    if (!doc)
        return k3_fail(e, K3_EINPUT, "%s:%zu: not valid JSON: %s", path, line, jerr);
    const k3_json *o = k3_json_root(doc), *role, *content, *reasoning;
    if (o->type != K3J_OBJECT) {
        k3_fail(e, K3_EINPUT, "%s:%zu: expected an object {\"role\", \"content\", "
                              "\"reasoning_content\"}", path, line);
        goto done;
    }
    for (size_t i = 0; i < o->count; i++) {
        size_t k = 0;
        while (k < 3 && strcmp(o->keys[i], keys[k]))
            k++;
        if (k == 3) {
            k3_fail(e, K3_EINPUT, "%s:%zu: unknown key \"%s\" (expected role, content, "
                                  "reasoning_content)", path, line, o->keys[i]);
            goto done;
        }
    }
    const k3_json *parts = k3_json_get(o, "content");
    if (parts && parts->type != K3J_ARRAY)
        parts = NULL;
    if (member(o, "role", 0, &role, path, line, e) ||
        (!parts && member(o, "content", 0, &content, path, line, e)) ||
        member(o, "reasoning_content", 1, &reasoning, path, line, e))
        goto done;
    if (role && parts) {
        /* Content parts (chat/images.h): a system or user message with images. */
        char where[64];
        k3_msg m;
        k3_msg *slot;
        memset(&m, 0, sizeof m);
        snprintf(where, sizeof where, "%s:%zu", path, line);
        if (strcmp(role->str, "system") && strcmp(role->str, "user"))
            k3_fail(e, K3_EINPUT, "%s:%zu: only a system or user message has content parts",
                    path, line);
        else if (reasoning)
            k3_fail(e, K3_EINPUT, "%s:%zu: only an assistant message has reasoning_content",
                    path, line);
        else if (k3_chat_read_content(c, parts, where, &m, e) == K3_OK &&
                 k3_chat_push(c, strcmp(role->str, "user") ? K3_ROLE_SYSTEM : K3_ROLE_USER,
                              &slot, e) == K3_OK) {
            m.role = slot->role;
            *slot = m;
        }
    } else if (!role || !content) {
        k3_fail(e, K3_EINPUT, "%s:%zu: \"%s\" is missing", path, line, role ? "content" : "role");
    } else if (!strcmp(role->str, "assistant")) {
        k3_chat_add_assistant(c, content->str, content->len, reasoning ? reasoning->str : NULL,
                              reasoning ? reasoning->len : 0, e);
    } else if (strcmp(role->str, "system") && strcmp(role->str, "user")) {
        k3_fail(e, K3_EINPUT, "%s:%zu: unknown role \"%s\" (expected system, user or assistant)",
                path, line, role->str);
    } else if (reasoning) {
        k3_fail(e, K3_EINPUT, "%s:%zu: only an assistant message has reasoning_content", path,
                line);
    } else {
        k3_chat_add_message(c, role->str, content->str, content->len, e);
    }
done:
    k3_json_free(doc);
    return e->code;
}

int k3_history_open(k3_history *h, const char *path, k3_chat *c, k3_err *e)
{
    memset(h, 0, sizeof *h);
    h->path = path;
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT)
        return k3_buf_put(&h->text, "", 0, e); /* a new history (or a link to one) */
    size_t len;
    char *text = k3_read_small_file(e, path, MAX_HISTORY_BYTES, &len);
    if (!text)
        return e->code;
    size_t line = 1;
    /* The replay's images: headers only here; their pixels are decoded
     * when encoded, after the context check (chat/conv.h). */
    int header_only = c->images_header_only;
    c->images_header_only = 1;
    for (size_t at = 0; at < len && !e->code; line++) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len;
        if (end > at)
            read_line(path, line, text + at, end - at, c, e);
        at = end + 1;
    }
    c->images_header_only = header_only;
    if (!e->code)
        k3_buf_put(&h->text, text, len, e);
    free(text);
    return e->code;
}

/* A JSON string value. */
static int put_string(k3_buf *b, const char *s, size_t n, k3_err *e)
{
    k3_json v;
    memset(&v, 0, sizeof v);
    v.type = K3J_STRING;
    v.str = s;
    v.len = n;
    return k3_json_write(b, &v, 0, e);
}

/* A message's content: a string, or with images the parts (images first,
 * as data URLs, then the text), which read_line reads back. */
static int put_content(k3_buf *b, const k3_history_msg *m, k3_err *e)
{
    if (!m->nimages)
        return put_string(b, m->content, m->content_len, e);
    if (k3_buf_puts(b, "[", e))
        return e->code;
    for (size_t i = 0; i < m->nimages; i++)
        if (k3_buf_puts(b, i ? ", {\"type\": \"image_url\", \"image_url\": {\"url\": \""
                             : "{\"type\": \"image_url\", \"image_url\": {\"url\": \"", e) ||
            k3_chat_put_data_url(b, m->images[i], e) || k3_buf_puts(b, "\"}}", e))
            return e->code;
    if (m->content_len && (k3_buf_puts(b, ", {\"type\": \"text\", \"text\": ", e) ||
                           put_string(b, m->content, m->content_len, e) ||
                           k3_buf_puts(b, "}", e)))
        return e->code;
    return k3_buf_puts(b, "]", e);
}

int k3_history_add(k3_history *h, const k3_history_msg *msgs, size_t n, k3_err *e)
{
    size_t old = h->text.len;
    if (old && h->text.data[old - 1] != '\n' && k3_buf_put(&h->text, "\n", 1, e))
        return e->code;
    for (size_t i = 0; i < n && !e->code; i++) {
        const k3_history_msg *m = &msgs[i];
        if (k3_buf_puts(&h->text, "{\"role\": ", e) ||
            put_string(&h->text, m->role, strlen(m->role), e) ||
            k3_buf_puts(&h->text, ", \"content\": ", e) || put_content(&h->text, m, e) ||
            k3_buf_puts(&h->text, ", \"reasoning_content\": ", e) ||
            (m->reasoning ? put_string(&h->text, m->reasoning, m->reasoning_len, e)
                          : k3_buf_puts(&h->text, "null", e)) ||
            k3_buf_puts(&h->text, "}\n", e))
            break;
    }
    k3_atomic_file af;
    if (e->code || k3_atomic_begin(&af, h->path, e) != K3_OK) {
        h->text.len = old; /* the file was not changed: neither is our copy */
        return e->code;
    }
    if (h->text.len && fwrite(h->text.data, 1, h->text.len, af.f) != h->text.len) {
        k3_atomic_abort(&af);
        h->text.len = old;
        return k3_fail(e, K3_ERUNTIME, "%s: write failed: %s", h->path, strerror(errno));
    }
    if (k3_atomic_commit(&af, e) != K3_OK)
        h->text.len = old;
    return e->code;
}

void k3_history_free(k3_history *h) { k3_buf_free(&h->text); }
