/* tokenize.c - see tokenize.h. */
#include "server/tokenize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jtext.h"
#include "tokenizer/utf8.h"
#include "util/json.h"

/* The body as a JSON object whose keys are all in allowed[] (NULL-ended). */
static const k3_json *object_body(const char *body, size_t n, const char *const *allowed,
                                  k3_json_doc **doc, k3_api_error *err)
{
    char why[160];
    *doc = k3_json_parse(body, n, why, sizeof why);
    if (!*doc) {
        k3_api_fail(err, 400, NULL, NULL, "The body is not valid JSON: %s", why);
        return NULL;
    }
    const k3_json *root = k3_json_root(*doc);
    if (root->type != K3J_OBJECT) {
        k3_api_fail(err, 400, NULL, NULL, "The body must be a JSON object.");
        return NULL;
    }
    for (size_t i = 0; i < root->count; i++) {
        size_t a = 0;
        while (allowed[a] && strcmp(allowed[a], root->keys[i]))
            a++;
        if (!allowed[a]) {
            k3_api_fail(err, 400, "unknown_parameter", root->keys[i],
                        "Unrecognized request argument supplied: %s", root->keys[i]);
            return NULL;
        }
    }
    return root;
}

/* An optional boolean member (absent or null: dflt); -1 and err when it is
 * another type. */
static int flag(const k3_json *root, const char *key, int dflt, k3_api_error *err)
{
    const k3_json *v = k3_json_get(root, key);
    if (!v || v->type == K3J_NULL)
        return dflt;
    if (v->type != K3J_BOOL) {
        k3_api_fail(err, 400, "invalid_type", key, "Invalid type for '%s': expected a boolean.",
                    key);
        return -1;
    }
    return v->boolean;
}

static int put_id(k3_buf *b, int first, uint32_t id, k3_err *e)
{
    char s[16];
    snprintf(s, sizeof s, "%s%lu", first ? "" : ",", (unsigned long)id);
    return k3_buf_puts(b, s, e);
}

/* {"id":ID,"piece":...}: the piece as a string when it is valid UTF-8 on
 * its own, else as its bytes. */
static int put_piece(const k3_tokenizer *tok, k3_buf *b, int first, uint32_t id, k3_err *e)
{
    const unsigned char *p;
    size_t n, at = 0, step;
    uint32_t cp;
    if ((!first && k3_buf_puts(b, ",", e)) || k3_buf_puts(b, "{\"id\":", e) ||
        put_id(b, 1, id, e) || k3_buf_puts(b, ",\"piece\":", e) ||
        k3_tok_piece(tok, id, &p, &n, e))
        return e->code;
    while (at < n && (step = k3_utf8_decode(p + at, n - at, &cp)))
        at += step;
    if (at == n) {
        if (k3_jtext_put(b, (const char *)p, n, e))
            return e->code;
    } else {
        if (k3_buf_puts(b, "[", e))
            return e->code;
        for (size_t i = 0; i < n; i++)
            if (put_id(b, i == 0, p[i], e))
                return e->code;
        if (k3_buf_puts(b, "]", e))
            return e->code;
    }
    return k3_buf_puts(b, "}", e);
}

int k3_tokenize_answer(const k3_tokenizer *tok, const char *body, size_t n, k3_buf *out,
                       k3_api_error *err)
{
    static const char *const allowed[] = { "content", "parse_special", "with_pieces",
                                           "add_special", NULL };
    k3_json_doc *doc = NULL;
    k3_err e = { 0, "" };
    uint32_t *ids = NULL;
    size_t nids = 0;
    int status = 400;
    const k3_json *root = object_body(body, n, allowed, &doc, err), *content;
    int special = root ? flag(root, "parse_special", 1, err) : -1;
    int pieces = special >= 0 ? flag(root, "with_pieces", 0, err) : -1;
    if (pieces < 0 || flag(root, "add_special", 0, err) < 0)
        goto done;
    content = k3_json_get(root, "content");
    if (!content || content->type != K3J_STRING) {
        k3_api_fail(err, 400, content ? "invalid_type" : "missing_parameter", "content",
                    "'content' must be a string.");
        goto done;
    }
    if (k3_tok_encode(tok, content->str, content->len, special, &ids, &nids, &e) ||
        k3_buf_puts(out, "{\"tokens\":[", &e))
        goto failed;
    for (size_t i = 0; i < nids; i++)
        if (pieces ? put_piece(tok, out, i == 0, ids[i], &e) : put_id(out, i == 0, ids[i], &e))
            goto failed;
    if (k3_buf_puts(out, "]}", &e))
        goto failed;
    status = 0;
    goto done;
failed:
    status = k3_api_fail(err, e.code == K3_EINPUT ? 400 : 500, NULL, "content", "%s", e.msg);
done:
    free(ids);
    k3_json_free(doc);
    return status;
}

int k3_detokenize_answer(const k3_tokenizer *tok, const char *body, size_t n, k3_buf *out,
                         k3_api_error *err)
{
    static const char *const allowed[] = { "tokens", NULL };
    k3_json_doc *doc = NULL;
    k3_err e = { 0, "" };
    k3_buf bytes = { 0 };
    int status = 400;
    const k3_json *root = object_body(body, n, allowed, &doc, err);
    const k3_json *ids = root ? k3_json_get(root, "tokens") : NULL;
    if (root && (!ids || ids->type != K3J_ARRAY)) {
        k3_api_fail(err, 400, ids ? "invalid_type" : "missing_parameter", "tokens",
                    "'tokens' must be an array of token ids.");
        goto done;
    }
    for (size_t i = 0; root && i < ids->count; i++) {
        const k3_json *v = &ids->items[i];
        const unsigned char *p;
        size_t len;
        if (v->type != K3J_NUMBER || !v->is_int || v->integer < 0 ||
            v->integer >= (int64_t)k3_tok_vocab_size(tok)) {
            k3_api_fail(err, 400, "invalid_value", "tokens",
                        "tokens[%zu] is not a token id (0 to %lu).", i,
                        (unsigned long)k3_tok_vocab_size(tok) - 1);
            goto done;
        }
        if (k3_tok_piece(tok, (uint32_t)v->integer, &p, &len, &e) ||
            k3_buf_put(&bytes, p, len, &e))
            goto failed;
    }
    if (!root)
        goto done;
    if (k3_buf_puts(out, "{\"content\":", &e) ||
        k3_jtext_put(out, bytes.data ? bytes.data : "", bytes.len, &e) ||
        k3_buf_puts(out, "}", &e))
        goto failed;
    status = 0;
    goto done;
failed:
    status = k3_api_fail(err, e.code == K3_EINPUT ? 400 : 500, NULL, "tokens", "%s", e.msg);
done:
    k3_buf_free(&bytes);
    k3_json_free(doc);
    return status;
}
