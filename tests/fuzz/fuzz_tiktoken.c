/* fuzz_tiktoken.c - the tiktoken.model loader (tokenizer/load.c) on
 * arbitrary files. The input is written as tiktoken.model beside a
 * tokenizer_config.json naming six specials at the start of the special
 * range the input's line count implies (so accepted models go on to build
 * every table), and loaded with k3_tok_load.
 *
 * Promises checked on an accepted model: 256 special ids follow the ranks;
 * every rank's bytes are non-empty and map back to that rank; the named
 * specials are found by name; and encoding (fz_check_encode: both modes,
 * sample texts and the input itself) round-trips. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tokenizer/tok.h"

static const char *const SPECIALS[] = { "[BOS]", "[EOS]", "<|end_of_msg|>",
                                        "<|open|>", "<|close|>", "<|sep|>" };
#define NSPECIALS (sizeof SPECIALS / sizeof *SPECIALS)

static const char *const SAMPLES[] = {
    "Hello, world! It's 2025; we'll see.\n\n  indented\tTAB",
    "<|open|>message<|sep|>hi<|close|>message<|sep|><|end_of_msg|>",
    "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80 caf\xc3\xa9",
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_tmpdir();
    return 0;
}

/* Lines as load.c counts them: every '\n' ends one; a last line may lack it. */
static uint64_t count_lines(const uint8_t *d, size_t n)
{
    uint64_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += d[i] == '\n';
    return lines + (n > 0 && d[n - 1] != '\n');
}

/* tokenizer_config.json for a model of nranks ranks (rewritten when the
 * count changes). */
static void write_config(uint64_t nranks)
{
    static uint64_t written = UINT64_MAX;
    if (nranks == written)
        return;
    char buf[1024];
    size_t at = (size_t)snprintf(buf, sizeof buf, "{\"added_tokens_decoder\": {");
    for (size_t k = 0; k < NSPECIALS; k++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s\"%llu\": {\"content\": \"%s\"}",
                               k ? ", " : "", (unsigned long long)(nranks + k), SPECIALS[k]);
    at += (size_t)snprintf(buf + at, sizeof buf - at, "}}");
    fz_write("tokenizer_config.json", buf, at);
    written = nranks;
}

static void check_tokenizer(const k3_tokenizer *t, const uint8_t *data, size_t size)
{
    FZ_ASSERT(t->vocab == t->nranks + K3_TOK_NSPECIAL, "vocab %u for %u ranks", t->vocab,
              t->nranks);
    k3_err e = { 0, "" };
    for (uint32_t r = 0; r < t->nranks; r++) {
        const unsigned char *b;
        size_t bl;
        FZ_ASSERT(k3_tok_piece(t, r, &b, &bl, &e) == K3_OK && bl > 0, "rank %u empty", r);
        FZ_ASSERT(k3_bytemap_get(&t->ranks, b, bl) == r, "rank %u does not map back", r);
    }
    for (size_t k = 0; k < NSPECIALS; k++)
        FZ_ASSERT(k3_tok_special_id(t, SPECIALS[k]) == (int64_t)(t->nranks + k),
                  "special %s not found", SPECIALS[k]);
    size_t n;
    for (int allow = 0; allow < 2; allow++) {
        for (size_t i = 0; i < sizeof SAMPLES / sizeof *SAMPLES; i++)
            free(fz_check_encode(t, (const uint8_t *)SAMPLES[i], strlen(SAMPLES[i]), allow, &n));
        free(fz_check_encode(t, data, size, allow, &n));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_config(count_lines(data, size));
    fz_write("tiktoken.model", data, size);
    k3_tokenizer *t = NULL;
    k3_err e = { 0, "" };
    int rc = k3_tok_load(&t, fz_tmpdir(), &e);
    if (rc != K3_OK) {
        fz_check_input_refusal(&e, rc);
        FZ_ASSERT(t == NULL, "refused but returned a tokenizer");
        return 0;
    }
    check_tokenizer(t, data, size);
    k3_tok_free(t);
    return 0;
}
