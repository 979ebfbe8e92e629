/* specials.c - the names of the special range, from tokenizer_config.json.
 *
 * added_tokens_decoder maps decimal ids to {"content": text, ...}; only the
 * content matters to encoding (lstrip, rstrip and normalized are false for
 * every Kimi token, and the tiktoken core ignores them). Ids the file does
 * not name are "<|reserved_token_{id}|>", as Kimi's tokenization_kimi.py
 * names them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"

/* Parses a decimal id key; -1 when it is not plain digits or too long. */
static int64_t parse_id(const char *s, size_t len)
{
    if (len == 0 || len > 10)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* Collects the named entries into named[] (indexed from nranks). */
static int read_names(const char *path, const k3_json *root, uint32_t nranks,
                      const k3_json *named[K3_TOK_NSPECIAL], k3_err *e)
{
    const k3_json *dec = k3_json_get(root, "added_tokens_decoder");
    if (!dec || dec->type != K3J_OBJECT)
        return k3_fail(e, K3_EINPUT, "%s: no \"added_tokens_decoder\" object", path);
    for (size_t i = 0; i < dec->count; i++) {
        const char *key = dec->keys[i];
        int64_t id = parse_id(key, dec->key_lens[i]);
        if (id < 0)
            return k3_fail(e, K3_EINPUT, "%s: added_tokens_decoder key \"%s\" is not a token id",
                           path, key);
        if (id < nranks || id >= (int64_t)nranks + K3_TOK_NSPECIAL)
            return k3_fail(e, K3_EINPUT,
                           "%s: added token id %s is outside the special range %u..%u "
                           "(tiktoken.model has %u ranks)",
                           path, key, nranks, nranks + K3_TOK_NSPECIAL - 1, nranks);
        const k3_json *content = k3_json_get(&dec->items[i], "content");
        if (!content || content->type != K3J_STRING || content->len == 0 ||
            strlen(content->str) != content->len)
            return k3_fail(e, K3_EINPUT,
                           "%s: added token %s has no \"content\" string (non-empty, no NUL)",
                           path, key);
        if (named[id - nranks])
            return k3_fail(e, K3_EINPUT, "%s: added token id %s is given twice", path, key);
        named[id - nranks] = content;
    }
    return K3_OK;
}

int k3_tok_special_names(const char *path, uint32_t nranks,
                         char *name[K3_TOK_NSPECIAL], char **arena, k3_err *e)
{
    *arena = NULL;
    size_t len;
    char *text = k3_read_small_file(e, path, (size_t)16 << 20, &len);
    if (!text)
        return e->code;
    char jerr[256];
    k3_json_doc *doc = k3_json_parse(text, len, jerr, sizeof jerr);
    free(text);
    if (!doc)
        return k3_fail(e, K3_EINPUT, "%s: %s", path, jerr);

    const k3_json *named[K3_TOK_NSPECIAL] = {0};
    int rc = read_names(path, k3_json_root(doc), nranks, named, e);
    /* "<|reserved_token_" + 10 digits + "|>" + NUL */
    enum { RESERVED_MAX = 17 + 10 + 2 + 1 };
    size_t total = 0;
    for (uint32_t i = 0; rc == K3_OK && i < K3_TOK_NSPECIAL; i++)
        total += named[i] ? named[i]->len + 1 : RESERVED_MAX;
    if (rc == K3_OK && !(*arena = k3_malloc(e, total, "special token names")))
        rc = e->code;
    size_t at = 0;
    for (uint32_t i = 0; rc == K3_OK && i < K3_TOK_NSPECIAL; i++) {
        name[i] = *arena + at;
        if (named[i]) {
            memcpy(name[i], named[i]->str, named[i]->len + 1);
            at += named[i]->len + 1;
        } else {
            at += (size_t)snprintf(name[i], RESERVED_MAX, "<|reserved_token_%u|>", nranks + i) + 1;
        }
    }
    k3_json_free(doc);
    return rc;
}
