/* grammar_check.c - drives the grammar engine for gate 51's schema
 * conformance (tests/gates/schema_conformance.py validates with Debian's
 * python3-jsonschema, an independent validator).
 *
 *   grammar_check gen SCHEMA N SEED BUDGET [strict]
 *       N outputs of random walks through SCHEMA's grammar, one per line:
 *       at each step the mask (with the end budget: BUDGET ids in all)
 *       and a seeded uniform pick among the allowed ids of a synthetic
 *       vocabulary (the 256 bytes, multi-byte pieces, an end id). A walk
 *       that does not end prints "INCOMPLETE".
 *   grammar_check check SCHEMA < LINES
 *       for each line: 1 if the grammar matches it whole, else 0.
 *   grammar_check gbnf FILE N SEED BUDGET: as gen, for a GBNF grammar.
 * K3_GRAMMAR_VOCAB=DIR: the vocabulary of the tokenizer in DIR (the
 * release's 163,840 ids) instead of the synthetic one; its end id is
 * <|end_of_msg|>.
 * SCHEMA is a file; a compile error prints "ERROR: message" and exits with
 * its code (2 for K3_EINPUT). Warnings (not strict) go to stderr. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "k3/tokenizer.h"

static const char *const pieces[] = {
    "\": ",  "\", \"",   "{\"",          "\"}",
    "true",  "false",    "null",         "00",
    "12",    "-1",       "0.",           "e+",
    "ab",    "abc",      "\\n",          "\\u00",
    "\\\"",  "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
    "[1",    "], ",      "\"a",          "a\"",
    "2024-", "-0",       "T1",           ":00",
    "@",     ".com",     "\": {\"",      "\": [\"",
};
#define NP     (sizeof pieces / sizeof *pieces)
#define NV     (256 + NP + 1)
#define END_ID (NV - 1)

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *s = malloc(cap);
    size_t k;
    while (s && (k = fread(s + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) {
            char *q = realloc(s, cap *= 2);
            if (!q) {
                free(s);
                s = NULL;
            }
            s = q;
        }
    }
    fclose(f);
    *n = len;
    return s;
}

static uint64_t rng;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: grammar_check gen|check|gbnf FILE [N SEED BUDGET [strict]]\n");
        return 2;
    }
    int gen = !strcmp(argv[1], "gen") || !strcmp(argv[1], "gbnf");
    size_t n;
    char *text = slurp(argv[2], &n);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    k3_err e = { 0, "" };
    k3_grammar *g = NULL;
    k3_buf warn = { 0 };
    k3_gram_schema_opts o = { argc > 6 && !strcmp(argv[6], "strict"), K3_GRAM_WS_SPACED };
    if (!strcmp(argv[1], "gbnf"))
        k3_gram_from_gbnf(&g, text, n, &e);
    else
        k3_gram_from_schema(&g, text, n, &o, &warn, &e);
    free(text);
    if (warn.len)
        fprintf(stderr, "%s", warn.data);
    k3_buf_free(&warn);
    if (e.code) {
        printf("ERROR: %s\n", e.msg);
        return e.code;
    }
    static unsigned char bytes[256];
    const unsigned char *b[NV];
    size_t l[NV];
    unsigned char sp[NV];
    for (int i = 0; i < 256; i++)
        bytes[i] = (unsigned char)i, b[i] = &bytes[i], l[i] = 1, sp[i] = 0;
    for (size_t i = 0; i < NP; i++)
        b[256 + i] = (const unsigned char *)pieces[i], l[256 + i] = strlen(pieces[i]),
                sp[256 + i] = 0;
    b[END_ID] = (const unsigned char *)"<|end_of_msg|>", l[END_ID] = 14, sp[END_ID] = 1;
    k3_gram_vocab *v = NULL;
    k3_gram_matcher *m = NULL;
    uint32_t end = END_ID;
    const char *vdir = getenv("K3_GRAMMAR_VOCAB");
    k3_tokenizer *tok = NULL;
    if (vdir && *vdir) {
        if (k3_tok_load(&tok, vdir, &e) || k3_gram_vocab_from_tokenizer(&v, tok, &e)) {
            printf("ERROR: %s\n", e.msg);
            return e.code;
        }
        end = (uint32_t)k3_tok_special_id(tok, "<|end_of_msg|>");
    } else if (k3_gram_vocab_new(&v, NV, b, l, sp, &e)) {
        printf("ERROR: %s\n", e.msg);
        return e.code;
    }
    if (k3_gram_matcher_new(&m, g, v, &end, 1, &e)) {
        printf("ERROR: %s\n", e.msg);
        return e.code;
    }
    int rc = 0;
    if (gen) {
        int count = argc > 3 ? atoi(argv[3]) : 1;
        rng = (uint64_t)(argc > 4 ? atoll(argv[4]) : 1) * 0x9E3779B97F4A7C15ull + 1;
        int budget = argc > 5 ? atoi(argv[5]) : 400;
        uint32_t nv = k3_gram_vocab_size(v);
        uint32_t *mask = malloc(k3_gram_mask_words(v) * 4), *ids = malloc((size_t)nv * 4);
        size_t outcap = 4096, len = 0;
        char *out = malloc(outcap);
        for (int k = 0; k < count && !rc; k++) {
            k3_gram_reset(m);
            int used = 0;
            len = 0;
            while (!k3_gram_is_done(m) && used < budget) {
                if (k3_gram_mask(m, budget - used, mask, &e)) {
                    printf("ERROR: %s\n", e.msg);
                    rc = e.code;
                    break;
                }
                uint32_t na = 0;
                for (uint32_t id = 0; id < nv; id++)
                    if ((mask[id >> 5] >> (id & 31)) & 1)
                        ids[na++] = id;
                if (!na)
                    break;
                uint32_t id = ids[next_rand() % na];
                if (k3_gram_accept(m, id, &e)) {
                    printf("ERROR: accept: %s\n", e.msg);
                    rc = e.code;
                    break;
                }
                used++;
                if (id != end) {
                    const unsigned char *pb = id < NV ? b[id] : NULL;
                    size_t pl = id < NV ? l[id] : 0;
                    if (tok && k3_tok_piece(tok, id, &pb, &pl, &e)) {
                        rc = e.code;
                        break;
                    }
                    if (len + pl + 1 > outcap) {
                        char *q = realloc(out, outcap = (len + pl) * 2 + 16);
                        if (!q) {
                            rc = 1;
                            break;
                        }
                        out = q;
                    }
                    memcpy(out + len, pb, pl);
                    len += pl;
                }
            }
            if (rc)
                break;
            if (!k3_gram_is_done(m))
                printf("INCOMPLETE\n");
            else {
                fwrite(out, 1, len, stdout);
                putchar('\n');
            }
        }
        free(out), free(mask), free(ids);
    } else {
        /* the id of each single byte (the release's byte tokens are not
         * in byte order) */
        uint32_t byte_id[256];
        for (int c = 0; c < 256; c++)
            byte_id[c] = (uint32_t)c;
        for (uint32_t id = 0; tok && id < k3_gram_vocab_size(v); id++) {
            const unsigned char *pb;
            size_t pl;
            if (!k3_tok_is_special(tok, id) && !k3_tok_piece(tok, id, &pb, &pl, &e) && pl == 1)
                byte_id[pb[0]] = id;
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t got;
        while ((got = getline(&line, &cap, stdin)) >= 0) {
            if (got && line[got - 1] == '\n')
                got--;
            k3_gram_reset(m);
            int ok = 1;
            for (ssize_t i = 0; i < got && ok; i++)
                ok = k3_gram_accept(m, byte_id[(unsigned char)line[i]], &e) == K3_OK;
            printf("%d\n", ok && k3_gram_is_accepting(m));
        }
        free(line);
    }
    k3_gram_matcher_free(m);
    k3_gram_vocab_free(v);
    k3_gram_free(g);
    k3_tok_free(tok);
    return rc;
}
