/* grammar_bench.c - the cost of grammar-constrained decoding with the
 * release's vocabulary (docs/PERFORMANCE.md "Structured outputs").
 *
 *   grammar_bench TOKENIZER_DIR [STEPS]
 *
 * Prints: the vocabulary index build time; the compile time of a
 * 50-property tool schema (median of 20); then a random walk of STEPS
 * (default 300) ids through that schema's grammar (each step: the mask
 * with the end budget, then a seeded random allowed id), with the mean,
 * median and worst mask time per token and the first-mask time; then the
 * same for a chat reply (thinking, then a required call of a tool whose
 * parameters are that schema). The walk
 * is a stand-in for a random-weight model: it picks uniformly among the
 * allowed ids, which visits more distinct states than a trained model. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A tool's parameters: 50 properties of mixed types, half required. */
static char *schema50(void)
{
    static const char *const types[] = {
        "{\"type\":\"string\"}",
        "{\"type\":\"integer\",\"minimum\":0,\"maximum\":1000}",
        "{\"type\":\"boolean\"}",
        "{\"type\":\"number\"}",
        "{\"type\":\"string\",\"enum\":[\"red\",\"green\",\"blue\"]}",
        "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":4}",
        "{\"type\":\"string\",\"format\":\"date\"}",
        "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"},"
        "\"y\":{\"type\":\"string\"}},\"required\":[\"x\"]}",
    };
    size_t cap = 65536, n = 0;
    char *s = malloc(cap);
    n += (size_t)snprintf(s + n, cap - n, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 50; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s\"field_%02d\":%s", i ? "," : "", i, types[i % 8]);
    n += (size_t)snprintf(s + n, cap - n, "},\"required\":[");
    for (int i = 0; i < 50; i += 2)
        n += (size_t)snprintf(s + n, cap - n, "%s\"field_%02d\"", i ? "," : "", i);
    snprintf(s + n, cap - n, "],\"additionalProperties\":false}");
    return s;
}

/* A seeded random walk of up to steps ids through g under the end
 * budget; prints the mask times. */
static int walk(const char *what, const k3_grammar *g, const k3_gram_vocab *v, uint32_t end,
                int steps)
{
    k3_err e = { 0, "" };
    k3_gram_matcher *m = NULL;
    if (k3_gram_matcher_new(&m, g, v, &end, 1, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return e.code;
    }
    size_t words = k3_gram_mask_words(v);
    uint32_t *mask = malloc(words * 4), *ids = malloc((size_t)k3_gram_vocab_size(v) * 4);
    double *mt = malloc((size_t)steps * sizeof *mt), total = 0;
    size_t least = k3_gram_min_ids(m);
    srand(7);
    int t = 0;
    for (; t < steps && !k3_gram_is_done(m); t++) {
        double t0 = now();
        if (k3_gram_mask(m, steps - t, mask, &e)) {
            fprintf(stderr, "step %d: %s\n", t, e.msg);
            return e.code;
        }
        mt[t] = now() - t0;
        total += mt[t];
        uint32_t n = 0;
        for (uint32_t id = 0; id < k3_gram_vocab_size(v); id++)
            if ((mask[id >> 5] >> (id & 31)) & 1)
                ids[n++] = id;
        if (!n)
            break;
        if (k3_gram_accept(m, ids[(uint32_t)rand() % n], &e)) {
            fprintf(stderr, "step %d: %s\n", t, e.msg);
            return e.code;
        }
    }
    double first = mt[0];
    qsort(mt, (size_t)t, sizeof *mt, cmpd);
    printf("%s: %d ids of a %d-id budget (least %zu; %s), mask per id: mean %.3f ms, "
           "median %.3f ms, worst %.2f ms, first %.2f ms\n",
           what, t, steps, least, k3_gram_is_done(m) ? "complete" : "not complete", total / t * 1e3,
           mt[t / 2] * 1e3, mt[t - 1] * 1e3, first * 1e3);
    free(mask), free(ids), free(mt);
    k3_gram_matcher_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: grammar_bench TOKENIZER_DIR [STEPS]\n");
        return 2;
    }
    int steps = argc > 2 ? atoi(argv[2]) : 300;
    k3_err e = { 0, "" };
    k3_tokenizer *tok = NULL;
    if (k3_tok_load(&tok, argv[1], &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return e.code;
    }
    double t0 = now();
    k3_gram_vocab *v = NULL;
    if (k3_gram_vocab_from_tokenizer(&v, tok, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return e.code;
    }
    printf("vocabulary: %u ids, index built in %.1f ms\n", k3_gram_vocab_size(v),
           (now() - t0) * 1e3);
    char *schema = schema50();
    double ct[20];
    k3_grammar *g = NULL;
    for (int i = 0; i < 20; i++) {
        k3_gram_free(g);
        g = NULL;
        t0 = now();
        if (k3_gram_from_schema(&g, schema, strlen(schema), NULL, NULL, &e)) {
            fprintf(stderr, "%s\n", e.msg);
            return e.code;
        }
        ct[i] = now() - t0;
    }
    qsort(ct, 20, sizeof *ct, cmpd);
    printf("compile, 50-property tool schema (%zu bytes): median %.2f ms, worst %.2f ms\n",
           strlen(schema), ct[10] * 1e3, ct[19] * 1e3);
    uint32_t end = (uint32_t)k3_tok_special_id(tok, "<|end_of_msg|>");
    int rc = walk("schema walk", g, v, end, steps);
    /* a chat reply: thinking, then a required call of a tool taking the
     * same 50 parameters */
    char err[160];
    k3_json_doc *doc = rc ? NULL : k3_json_parse(schema, strlen(schema), err, sizeof err);
    if (doc) {
        k3_gram_tool tool = { "fill_form", k3_json_root(doc) };
        k3_gram_reply_spec sp;
        memset(&sp, 0, sizeof sp);
        sp.thinking = 1;
        sp.tools = &tool;
        sp.ntools = 1;
        sp.tool_mode = K3_GRAM_TOOLS_REQUIRED;
        k3_grammar *rg = NULL;
        t0 = now();
        if (k3_gram_chat_reply(&rg, &sp, NULL, &e)) {
            fprintf(stderr, "%s\n", e.msg);
            rc = e.code;
        } else {
            printf("compile, chat reply with that tool required: %.2f ms\n", (now() - t0) * 1e3);
            rc = walk("reply walk", rg, v, end, steps);
        }
        k3_gram_free(rg);
        k3_json_free(doc);
    }
    free(schema);
    k3_gram_free(g);
    k3_gram_vocab_free(v);
    k3_tok_free(tok);
    return rc;
}
