/* fuzz_tok_config.c - the tokenizer_config.json loader
 * (tokenizer/specials.c) on arbitrary files, beside the small tiktoken.model
 * of $K3_FUZZ_DATA/tok (256 + merges ranks; the seeds are configs renumbered
 * for it).
 *
 * Promises checked on an accepted config: each special id's text finds that
 * id; text made of every special token's text, and the input itself, encode
 * and round-trip in both modes (fz_check_encode), so odd special names
 * (prefixes of each other, one byte, multi-byte, sharing lead bytes with
 * ordinary text) cannot break the leftmost-longest matching. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tokenizer/tok.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char from[512];
    snprintf(from, sizeof from, "%s/tok/tiktoken.model", fz_data_dir());
    fz_link("tiktoken.model", from);
    return 0;
}

static void check_tokenizer(const k3_tokenizer *t, const uint8_t *data, size_t size)
{
    k3_err e = { 0, "" };
    size_t total = 0, n;
    for (uint32_t id = t->nranks; id < t->vocab; id++)
        total += t->off[id + 1] - t->off[id] + 3;
    char *all = malloc(total + 1), *at = all;
    FZ_ASSERT(all != NULL, "out of memory");
    for (uint32_t id = t->nranks; id < t->vocab; id++) {
        const unsigned char *b;
        size_t bl;
        FZ_ASSERT(k3_tok_piece(t, id, &b, &bl, &e) == K3_OK && bl > 0, "special %u empty", id);
        char *name = malloc(bl + 1);
        FZ_ASSERT(name != NULL, "out of memory");
        memcpy(name, b, bl);
        name[bl] = '\0';
        FZ_ASSERT(k3_tok_special_id(t, name) == (int64_t)id, "special %u not found by name", id);
        free(name);
        memcpy(at, b, bl);
        memcpy(at + bl, " x ", 3);
        at += bl + 3;
    }
    for (int allow = 0; allow < 2; allow++) {
        free(fz_check_encode(t, (const uint8_t *)all, total, allow, &n));
        free(fz_check_encode(t, data, size, allow, &n));
    }
    free(all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_write("tokenizer_config.json", data, size);
    k3_tokenizer *t = NULL;
    k3_err e = { 0, "" };
    int rc = k3_tok_load(&t, fz_tmpdir(), &e);
    if (rc != K3_OK) {
        fz_check_input_refusal(&e, rc);
        return 0;
    }
    check_tokenizer(t, data, size);
    k3_tok_free(t);
    return 0;
}
