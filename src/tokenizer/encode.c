/* encode.c - text to ids (k3_tok_encode), in the order Kimi's
 * tokenization_kimi.py drives the tiktoken core:
 *
 *   1. cut the text into chunks of 400,000 characters (code points);
 *   2. cut each chunk so that no run of whitespace or of non-whitespace
 *      (Python str.isspace) is longer than 25,000 characters; each piece of
 *      that is one call of the core (so the pattern sees its end as the end
 *      of the text, and a special token cut in two is not recognised);
 *   3. in the core, with special tokens allowed, split at their leftmost-
 *      longest occurrences; pre-tokenise the text between them (pretok.h);
 *      emit each piece that is a token as such, and BPE the others (bpe.h).
 *
 * A chunk is decoded once into code points and pattern classes, so the
 * pre-tokeniser can look back and ahead by characters; memory is bounded by
 * the chunk size whatever the text's length. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/bpe.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tok.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

#define CHUNK_CHARS 400000 /* TIKTOKEN_MAX_ENCODE_CHARS */
#define RUN_CHARS 25000    /* MAX_NO_WHITESPACES_CHARS */

typedef struct {
    const k3_tokenizer *tok;
    int allow_special;
    const unsigned char *base; /* the chunk's first byte */
    uint32_t *cp;              /* the chunk's characters */
    unsigned char *cls;        /* their k3_pretok_class */
    uint32_t *off;             /* their byte offsets from base, plus the end */
    uint32_t *ids;
    size_t nids, capids;
    k3_bpe_work bpe;
    k3_err *e;
} encoder;

/* Room for extra more ids. */
static int reserve_ids(encoder *en, size_t extra)
{
    if (en->capids - en->nids >= extra)
        return K3_OK;
    size_t cap = en->capids ? en->capids : 256;
    while (cap - en->nids < extra)
        cap *= 2;
    uint32_t *ids = realloc(en->ids, cap * sizeof *ids);
    if (!ids)
        return k3_fail(en->e, K3_ERUNTIME, "out of memory for %zu token ids", cap);
    en->ids = ids;
    en->capids = cap;
    return K3_OK;
}

/* Pre-tokenises characters [a, b) (the pattern sees b as the end of the
 * text) and emits each piece's ids. */
static int encode_ordinary(encoder *en, size_t a, size_t b)
{
    for (size_t i = a; i < b;) {
        size_t j = a + k3_pretok_next(en->cp + a, en->cls + a, i - a, b - a);
        const unsigned char *piece = en->base + en->off[i];
        size_t len = en->off[j] - en->off[i];
        if (reserve_ids(en, len))
            return en->e->code;
        uint32_t id = k3_tok_rank(en->tok, piece, len);
        if (id != K3_BYTEMAP_NONE) {
            en->ids[en->nids++] = id; /* a piece that is a token is emitted whole */
        } else {
            if (k3_bpe_reserve(&en->bpe, len, en->e))
                return en->e->code;
            en->nids += k3_bpe(en->tok, piece, len, &en->bpe, en->ids + en->nids);
        }
        i = j;
    }
    return K3_OK;
}

/* The special token (leftmost-longest) starting at p, which has avail
 * bytes: its id, with *len set; or K3_BYTEMAP_NONE. */
static uint32_t special_at(const k3_tokenizer *tok, const unsigned char *p, size_t avail,
                           size_t *len)
{
    if (!tok->special_lead[*p])
        return K3_BYTEMAP_NONE;
    for (size_t k = 0; k < tok->nspecial_len; k++) {
        size_t n = tok->special_len[k];
        uint32_t id = n <= avail ? k3_bytemap_get(&tok->specials, p, n) : K3_BYTEMAP_NONE;
        if (id != K3_BYTEMAP_NONE) {
            *len = n;
            return id;
        }
    }
    return K3_BYTEMAP_NONE;
}

/* One call of the core on characters [a, b). */
static int encode_call(encoder *en, size_t a, size_t b)
{
    if (!en->allow_special)
        return encode_ordinary(en, a, b);
    size_t seg = a;
    for (size_t i = a; i < b;) {
        size_t len;
        uint32_t id = special_at(en->tok, en->base + en->off[i], en->off[b] - en->off[i], &len);
        if (id == K3_BYTEMAP_NONE) {
            i++;
            continue;
        }
        if (encode_ordinary(en, seg, i) || reserve_ids(en, 1))
            return en->e->code;
        en->ids[en->nids++] = id;
        /* Special tokens are valid UTF-8, so the match ends on a character. */
        uint32_t end = en->off[i] + (uint32_t)len;
        while (en->off[i] < end)
            i++;
        seg = i;
    }
    return encode_ordinary(en, seg, b);
}

/* Step 2 on a chunk of n characters: Python's
 * _split_whitespaces_or_nonwhitespaces, which cuts a run when it would
 * exceed RUN_CHARS, so every run of either kind is cut into pieces of
 * RUN_CHARS characters. */
static int encode_chunk(encoder *en, size_t n)
{
    size_t start = 0, run = 0;
    int run_space = n > 0 && (en->cls[0] & K3_PT_PY_SPACE);
    for (size_t i = 0; i < n; i++) {
        int space = (en->cls[i] & K3_PT_PY_SPACE) != 0;
        if (space != run_space) {
            run = 1;
            run_space = space;
        } else if (++run > RUN_CHARS) {
            if (encode_call(en, start, i))
                return en->e->code;
            start = i;
            run = 1;
        }
    }
    return encode_call(en, start, n);
}

/* Decodes up to CHUNK_CHARS characters of text[pos..len) into the chunk
 * arrays; returns how many, or 0 with an error. */
static size_t decode_chunk(encoder *en, const unsigned char *text, size_t len, size_t pos)
{
    en->base = text + pos;
    size_t n = 0;
    uint32_t at = 0;
    while (n < CHUNK_CHARS && pos + at < len) {
        uint32_t c;
        size_t l = k3_utf8_decode(text + pos + at, len - pos - at, &c);
        if (l == 0) {
            k3_fail(en->e, K3_EINPUT, "text is not valid UTF-8 at byte offset %zu", pos + at);
            return 0;
        }
        en->cp[n] = c;
        en->cls[n] = (unsigned char)k3_pretok_class(c);
        en->off[n++] = at;
        at += (uint32_t)l;
    }
    en->off[n] = at;
    return n;
}

int k3_tok_encode(const k3_tokenizer *tok, const char *text, size_t len, int allow_special,
                  uint32_t **ids, size_t *n, k3_err *e)
{
    *ids = NULL;
    *n = 0;
    size_t chars = len < CHUNK_CHARS ? len : CHUNK_CHARS;
    encoder en = {.tok = tok, .allow_special = allow_special, .e = e};
    en.cp = k3_malloc(e, (chars + 1) * sizeof *en.cp, "text characters");
    en.cls = k3_malloc(e, chars + 1, "text classes");
    en.off = k3_malloc(e, (chars + 1) * sizeof *en.off, "text offsets");
    int rc = !en.cp || !en.cls || !en.off ? K3_ERUNTIME : reserve_ids(&en, len / 4 + 16);
    const unsigned char *t = (const unsigned char *)text;
    for (size_t pos = 0; rc == K3_OK && pos < len;) {
        size_t nc = decode_chunk(&en, t, len, pos);
        rc = nc ? encode_chunk(&en, nc) : e->code;
        pos += en.off[nc];
    }
    free(en.cp);
    free(en.cls);
    free(en.off);
    k3_bpe_work_free(&en.bpe);
    if (rc != K3_OK) {
        free(en.ids);
        return rc;
    }
    *ids = en.ids;
    *n = en.nids;
    return K3_OK;
}
