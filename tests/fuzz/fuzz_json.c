/* fuzz_json.c - the strict JSON reader (util/json.h) on arbitrary bytes,
 * and the writer (util/json_write.h) on whatever the reader accepts.
 *
 * Promises checked on an accepted document: writing it and reading the
 * text back gives the same tree (types, values, key order, string bytes,
 * NUL escapes included); the sorted and spaced forms read back too. */
#include <string.h>

#include "fuzz.h"
#include "util/json.h"
#include "util/json_write.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void same(const k3_json *a, const k3_json *b)
{
    FZ_ASSERT(a->type == b->type, "type %d became %d", (int)a->type, (int)b->type);
    switch (a->type) {
    case K3J_NULL:
        break;
    case K3J_BOOL:
        FZ_ASSERT(a->boolean == b->boolean, "boolean changed");
        break;
    case K3J_NUMBER:
        FZ_ASSERT(a->is_int == b->is_int && (!a->is_int || a->integer == b->integer) &&
                      a->number == b->number,
                  "number %.17g became %.17g", a->number, b->number);
        break;
    case K3J_STRING:
        FZ_ASSERT(a->len == b->len && !memcmp(a->str, b->str, a->len) && b->str[b->len] == '\0',
                  "string changed");
        break;
    case K3J_ARRAY:
    case K3J_OBJECT:
        FZ_ASSERT(a->count == b->count, "%zu children became %zu", a->count, b->count);
        for (size_t i = 0; i < a->count; i++) {
            if (a->type == K3J_OBJECT)
                FZ_ASSERT(a->key_lens[i] == b->key_lens[i] &&
                              !memcmp(a->keys[i], b->keys[i], a->key_lens[i]),
                          "key %zu changed", i);
            same(&a->items[i], &b->items[i]);
        }
        break;
    }
}

/* Writes root with flags and reads it back; the document or NULL. */
static k3_json_doc *rewrite(const k3_json *root, unsigned flags)
{
    k3_err e = { 0, "" };
    k3_buf b = { 0 };
    int rc = k3_json_write(&b, root, flags, &e);
    FZ_ASSERT(rc == K3_OK, "writer failed: %s", e.msg);
    char err[256];
    k3_json_doc *d = k3_json_parse(b.data, b.len, err, sizeof err);
    FZ_ASSERT(d != NULL, "the writer's output (flags %u) does not read back: %s", flags, err);
    k3_buf_free(&b);
    return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    k3_json_doc *doc = k3_json_parse((const char *)data, size, err, sizeof err);
    if (!doc) {
        FZ_ASSERT(!strncmp(err, "byte ", 5), "refusal without a byte offset: %s", err);
        return 0;
    }
    const k3_json *root = k3_json_root(doc);
    k3_json_doc *back = rewrite(root, 0);
    same(root, k3_json_root(back));
    k3_json_free(back);
    k3_json_free(rewrite(root, K3_JW_SORT_KEYS | K3_JW_SPACED));
    k3_json_free(doc);
    return 0;
}
