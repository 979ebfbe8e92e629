/* fuzz_tokenize.c - the bodies of POST /tokenize and POST /detokenize
 * (server/tokenize.c) on arbitrary bytes, with the tokenizer of
 * fz_tokenizer_dir(). Input: byte 0 bit 0 chooses the endpoint (0
 * tokenize, 1 detokenize); the rest is the body.
 *
 * Promises checked (tokenize.h): a refusal is 400 or 500 with a message;
 * an answer is one JSON object; /tokenize's ids decode back to the content
 * (it is a JSON string, so valid UTF-8) and /detokenize of them gives that
 * content again. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "server/tokenize.h"
#include "util/json.h"

static const k3_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tok = fz_tokenizer();
    return 0;
}

/* The answer parses as a JSON object; returns it (the caller frees doc). */
static const k3_json *answer_json(const k3_buf *out, k3_json_doc **doc)
{
    char why[160];
    *doc = k3_json_parse(out->data, out->len, why, sizeof why);
    FZ_ASSERT(*doc != NULL, "the answer is not JSON (%s): %.200s", why, out->data);
    const k3_json *root = k3_json_root(*doc);
    FZ_ASSERT(root->type == K3J_OBJECT, "the answer is not an object");
    return root;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int detok = data[0] & 1;
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    k3_buf out = { 0 };
    k3_api_error err;
    int status = detok ? k3_detokenize_answer(tok, body, n, &out, &err)
                       : k3_tokenize_answer(tok, body, n, &out, &err);
    if (status) {
        FZ_ASSERT(status == 400 || status == 500, "status %d", status);
        FZ_ASSERT(err.message[0] != '\0', "a refusal without a message");
        k3_buf_free(&out);
        return 0;
    }
    k3_json_doc *doc;
    const k3_json *root = answer_json(&out, &doc);
    if (!detok) {
        const k3_json *ids = k3_json_get(root, "tokens");
        FZ_ASSERT(ids && ids->type == K3J_ARRAY, "no tokens array");
        /* Re-ask /detokenize with the plain ids (with_pieces gives objects). */
        k3_buf req = { 0 }, back = { 0 };
        k3_err e = { 0, "" };
        int plain = ids->count == 0 || ids->items[0].type == K3J_NUMBER;
        k3_buf_puts(&req, "{\"tokens\":[", &e);
        for (size_t i = 0; i < ids->count; i++) {
            const k3_json *v = plain ? &ids->items[i] : k3_json_get(&ids->items[i], "id");
            FZ_ASSERT(v && v->type == K3J_NUMBER && v->is_int, "token %zu is not an id", i);
            k3_buf_printf(&req, &e, "%s%lld", i ? "," : "", (long long)v->integer);
        }
        k3_buf_puts(&req, "]}", &e);
        FZ_ASSERT(!e.code, "%s", e.msg);
        FZ_ASSERT(k3_detokenize_answer(tok, req.data, req.len, &back, &err) == 0,
                  "the ids /tokenize gave are refused by /detokenize: %s", err.message);
        k3_json_doc *bdoc;
        const k3_json *broot = answer_json(&back, &bdoc);
        char why[160];
        k3_json_doc *in = k3_json_parse(body, n, why, sizeof why);
        const k3_json *content = in ? k3_json_get(k3_json_root(in), "content") : NULL;
        const k3_json *text = k3_json_get(broot, "content");
        FZ_ASSERT(content && text && text->len == content->len &&
                      !memcmp(text->str, content->str, content->len),
                  "/detokenize(/tokenize(x)) is not x");
        k3_json_free(in);
        k3_json_free(bdoc);
        k3_buf_free(&req);
        k3_buf_free(&back);
    }
    k3_json_free(doc);
    k3_buf_free(&out);
    return 0;
}
