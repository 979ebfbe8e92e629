/* fuzz_grammar.c - the grammar engine (grammar/grammar.h) on arbitrary
 * GBNF and JSON Schema text.
 *
 * The first byte picks the front end: 'g' GBNF, 's' a strict schema, any
 * other a non-strict schema (with warnings); the rest is the text. A
 * refusal must carry a message. An accepted grammar is driven on a small
 * vocabulary (the 256 bytes, a few pieces, three special ids and an end
 * id) for up to 24 steps, each taking the first allowed id after a
 * position the input picks; promises checked: the mask is never empty
 * before the end (every live stack can finish), every id in the mask is
 * accepted, an id outside it is refused, and after a rollback of one id
 * the mask is what it was. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "grammar/grammar.h"

static k3_gram_vocab *vocab;
#define NPIECE 8
#define NV     (256 + NPIECE + 4)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const char *const pieces[NPIECE] = { "\": ", "{\"",      "true",     "ab",
                                                "12",   "\xC3\xA9", "<|open|>", "\", \"" };
    static const char *const specials[4] = { "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>" };
    static unsigned char bytes[256];
    const unsigned char *b[NV];
    size_t l[NV];
    unsigned char sp[NV];
    for (int i = 0; i < 256; i++)
        bytes[i] = (unsigned char)i, b[i] = &bytes[i], l[i] = 1, sp[i] = 0;
    for (int i = 0; i < NPIECE; i++)
        b[256 + i] = (const unsigned char *)pieces[i], l[256 + i] = strlen(pieces[i]),
                sp[256 + i] = 0;
    for (int i = 0; i < 4; i++)
        b[256 + NPIECE + i] = (const unsigned char *)specials[i],
                         l[256 + NPIECE + i] = strlen(specials[i]), sp[256 + NPIECE + i] = 1;
    k3_err e = { 0, "" };
    if (k3_gram_vocab_new(&vocab, NV, b, l, sp, &e))
        abort();
    return 0;
}

static int bit(const uint32_t *m, uint32_t id)
{
    return (m[id >> 5] >> (id & 31)) & 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!vocab)
        LLVMFuzzerInitialize(NULL, NULL);
    if (size < 1)
        return 0;
    k3_err e = { 0, "" };
    k3_grammar *g = NULL;
    k3_buf warn = { 0 };
    const char *text = (const char *)data + 1;
    int rc;
    if (data[0] == 'g') {
        rc = k3_gram_from_gbnf(&g, text, size - 1, &e);
    } else {
        k3_gram_schema_opts o = { data[0] == 's', K3_GRAM_WS_SPACED };
        rc = k3_gram_from_schema(&g, text, size - 1, &o, &warn, &e);
    }
    k3_buf_free(&warn);
    if (rc) {
        FZ_ASSERT(e.msg[0] && g == NULL, "refusal without a message");
        return 0;
    }
    uint32_t end = NV - 1;
    k3_gram_matcher *m = NULL;
    if (k3_gram_matcher_new(&m, g, vocab, &end, 1, &e)) {
        FZ_ASSERT(e.msg[0], "matcher refusal without a message");
        k3_gram_free(g);
        return 0;
    }
    uint32_t mask[(NV + 31) / 32], again[(NV + 31) / 32];
    for (int step = 0; step < 24 && !k3_gram_is_done(m); step++) {
        if (k3_gram_mask(m, 64 - step, mask, &e)) {
            FZ_ASSERT(e.code == K3_EINPUT && e.msg[0], "mask failed: %s", e.msg);
            break;
        }
        uint32_t first = NV;
        uint32_t start = (uint32_t)(size > (size_t)step + 1 ? data[step + 1] : 0) * 7 % NV;
        for (uint32_t k = 0; k < NV && first == NV; k++)
            if (bit(mask, (start + k) % NV))
                first = (start + k) % NV;
        FZ_ASSERT(first < NV, "empty mask before the end at step %d", step);
        /* an id outside the mask is refused (when there is one and the
         * budget does not hide it: only check with no budget) */
        uint32_t plain[(NV + 31) / 32];
        if (!k3_gram_mask(m, -1, plain, &e))
            for (uint32_t k = 0; k < NV; k++)
                if (!bit(plain, k)) {
                    FZ_ASSERT(k3_gram_accept(m, k, &e) == K3_EINPUT,
                              "id %u accepted outside "
                              "the mask",
                              k);
                    break;
                }
        e.code = 0;
        FZ_ASSERT(k3_gram_accept(m, first, &e) == K3_OK, "allowed id %u refused: %s", first, e.msg);
        k3_gram_rollback(m, 1);
        FZ_ASSERT(k3_gram_mask(m, 64 - step, again, &e) == K3_OK &&
                      !memcmp(mask, again, sizeof mask),
                  "rollback changed the mask");
        FZ_ASSERT(k3_gram_accept(m, first, &e) == K3_OK, "re-accept failed");
    }
    k3_gram_matcher_free(m);
    k3_gram_free(g);
    return 0;
}
