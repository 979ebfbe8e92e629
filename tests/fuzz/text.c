/* text.c - the text checks of fuzz.h shared by the tokenizer, chat,
 * history and server targets: UTF-8 validity, encoding, and chat rendering
 * with the special-token rule. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

int fz_utf8_valid(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >> 5 == 6) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if (c >> 4 == 14) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if (c >> 3 == 30) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if (s[i + k] >> 6 != 2)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

uint32_t *fz_check_encode(const k3_tokenizer *tok, const uint8_t *text, size_t len,
                          int allow_special, size_t *n)
{
    uint32_t *ids = NULL;
    k3_err e = { 0, "" };
    *n = 0;
    int rc = k3_tok_encode(tok, (const char *)text, len, allow_special, &ids, n, &e);
    if (!fz_utf8_valid(text, len)) {
        FZ_ASSERT(rc == K3_EINPUT && ids == NULL, "invalid UTF-8 not refused (rc %d)", rc);
        fz_check_refusal(&e, rc);
        return NULL;
    }
    FZ_ASSERT(rc == K3_OK, "valid UTF-8 refused: %s", e.msg);
    uint32_t nranks = k3_tok_vocab_size(tok) - 256; /* K3_TOK_NSPECIAL */
    /* chunks: one buffer for every piece's stream output. A piece of bl
     * bytes gets its last bl + 4 bytes, so a stream that writes past that
     * room still runs off the end of an allocation, as ASan sees it (one
     * malloc per id was a good part of the tokenizer targets' time). */
    unsigned char *out = malloc(len + 8), *chunks = malloc(len + 4);
    FZ_ASSERT(out != NULL && chunks != NULL, "out of memory");
    size_t at = 0, streamed = 0;
    k3_utf8_stream us = { { 0 }, 0 };
    for (size_t i = 0; i < *n; i++) {
        const unsigned char *b;
        size_t bl;
        FZ_ASSERT(allow_special || ids[i] < nranks,
                  "id %u of text encoded with special tokens disallowed is special", ids[i]);
        rc = k3_tok_piece(tok, ids[i], &b, &bl, &e);
        FZ_ASSERT(rc == K3_OK && bl > 0 && bl <= len - at && !memcmp(text + at, b, bl),
                  "id %zu (%u) does not decode to the text at byte %zu", i, ids[i], at);
        at += bl;
        unsigned char *chunk = chunks + (len - bl); /* bl <= len: checked above */
        size_t got = k3_utf8_stream_push(&us, b, bl, chunk);
        FZ_ASSERT(streamed + got <= len, "the UTF-8 stream emits too much");
        memcpy(out + streamed, chunk, got);
        streamed += got;
        FZ_ASSERT(streamed == len || text[streamed] >> 6 != 2,
                  "the UTF-8 stream split a character at byte %zu", streamed);
    }
    free(chunks);
    FZ_ASSERT(at == len, "ids decode to %zu of %zu bytes", at, len);
    unsigned char tail[8];
    size_t tl = k3_utf8_stream_flush(&us, tail);
    FZ_ASSERT(tl == 0, "the UTF-8 stream held %zu bytes of valid text", tl);
    FZ_ASSERT(streamed == len && !memcmp(out, text, len), "the UTF-8 stream changed the text");
    free(out);
    return ids;
}

k3_tokenizer *fz_tokenizer(void)
{
    static k3_tokenizer *tok;
    if (!tok) {
        k3_err e = { 0, "" };
        const char *dir = fz_tokenizer_dir();
        FZ_ASSERT(k3_tok_load(&tok, dir, &e) == K3_OK, "%s: %s", dir, e.msg);
    }
    return tok;
}

void fz_check_chat(const k3_tokenizer *tok, const k3_chat *c)
{
    k3_chat_segments s = { 0 };
    k3_err e = { 0, "" };
    int rc = k3_chat_render(c, &s, &e);
    if (rc != K3_OK) {
        fz_check_refusal(&e, rc);
        FZ_ASSERT(rc == K3_EINPUT || rc == K3_ERUNTIME, "render code %d", rc);
        k3_chat_segments_free(&s);
        return;
    }
    uint32_t nranks = k3_tok_vocab_size(tok) - 256;
    size_t at = 0, total = 0;
    uint32_t *cat = NULL;
    int valid = fz_utf8_valid((const uint8_t *)s.text, s.len);
    for (size_t i = 0; i < s.n; i++) {
        const k3_chat_seg *g = &s.seg[i];
        FZ_ASSERT(g->off == at && g->len > 0, "segment %zu does not tile the text", i);
        at += g->len;
        size_t n;
        uint32_t *ids = fz_check_encode(tok, (const uint8_t *)s.text + g->off, g->len,
                                        g->allow_special, &n);
        if (!ids)
            continue; /* invalid UTF-8 in a text segment: refused, checked above */
        if (g->allow_special)
            FZ_ASSERT(n == 1 && ids[0] >= nranks, "structural segment %zu is %zu ids", i, n);
        cat = realloc(cat, (total + n + 1) * sizeof *cat);
        FZ_ASSERT(cat != NULL, "out of memory");
        memcpy(cat + total, ids, n * sizeof *ids);
        total += n;
        free(ids);
    }
    FZ_ASSERT(at == s.len && s.text[s.len] == '\0', "segments cover %zu of %zu bytes", at, s.len);
    uint32_t *ids = NULL;
    size_t n = 0;
    rc = k3_chat_encode(tok, &s, &ids, &n, &e);
    if (valid) {
        FZ_ASSERT(rc == K3_OK && n == total && (n == 0 || !memcmp(ids, cat, n * sizeof *ids)),
                  "k3_chat_encode differs from the segments' encodings (%s)", e.msg);
    } else {
        FZ_ASSERT(rc == K3_EINPUT && ids == NULL, "invalid UTF-8 rendered and encoded");
    }
    free(ids);
    free(cat);
    k3_chat_segments_free(&s);
}

