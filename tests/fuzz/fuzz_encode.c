/* fuzz_encode.c - the pre-tokeniser and BPE (tokenizer/encode.c, pretok.c,
 * bpe.c) on arbitrary bytes, with the tokenizer of fz_tokenizer_dir() (the
 * release's when ../shared/k3-release is there).
 *
 * Input: byte 0 bit 0 = allow_special; the rest is the text.
 * Promises checked (besides fz_check_encode's round trip and the
 * special-token rule): the ids equal a slow reference built from the same
 * pre-tokeniser but tiktoken's own O(n^2) merge loop and a naive
 * leftmost-longest special-token scan, so the heap BPE, the whole-piece
 * rule and the special matching are checked against a second
 * implementation on every input up to 1 KB (one call of the core; the
 * reference is quadratic). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tok.h"
#include "tokenizer/utf8.h"

static const k3_tokenizer *tok;
/* The special ids by their first byte: special_ids[special_at[b] ..
 * special_at[b + 1]) are the specials whose text starts with byte b, in id
 * order (so the naive scan only looks at candidates; scanning all 256 per
 * character was most of this target's time). */
static uint32_t *special_ids;
static size_t special_at[257];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    tok = fz_tokenizer();
    special_ids = malloc((tok->vocab - tok->nranks + 1) * sizeof *special_ids);
    FZ_ASSERT(special_ids != NULL, "out of memory");
    size_t n = 0;
    for (unsigned b = 0; b < 256; b++) {
        special_at[b] = n;
        for (uint32_t id = tok->nranks; id < tok->vocab; id++)
            if (tok->off[id + 1] > tok->off[id] && tok->bytes[tok->off[id]] == b)
                special_ids[n++] = id;
    }
    special_at[256] = n;
    return 0;
}

/* tiktoken's byte_pair_merge: merge the lowest-ranked adjacent pair
 * (leftmost on ties) until none is a token. Appends ids to out. */
static size_t naive_bpe(const unsigned char *p, size_t n, uint32_t *out)
{
    uint32_t id = k3_bytemap_get(&tok->ranks, p, n);
    if (id != K3_BYTEMAP_NONE) {
        out[0] = id;
        return 1;
    }
    size_t *cut = malloc((n + 1) * sizeof *cut), parts = n;
    FZ_ASSERT(cut != NULL, "out of memory");
    for (size_t i = 0; i <= n; i++)
        cut[i] = i;
    for (;;) {
        uint32_t best = K3_BYTEMAP_NONE;
        size_t at = 0;
        for (size_t i = 0; i + 1 < parts; i++) {
            uint32_t r = k3_bytemap_get(&tok->ranks, p + cut[i], cut[i + 2] - cut[i]);
            if (r < best) {
                best = r;
                at = i;
            }
        }
        if (best == K3_BYTEMAP_NONE)
            break;
        memmove(cut + at + 1, cut + at + 2, (parts - at - 1) * sizeof *cut);
        parts--;
    }
    for (size_t i = 0; i < parts; i++) {
        out[i] = k3_bytemap_get(&tok->ranks, p + cut[i], cut[i + 1] - cut[i]);
        FZ_ASSERT(out[i] != K3_BYTEMAP_NONE, "a part that is not a token");
    }
    free(cut);
    return parts;
}

/* The longest special token at text[at..len), or K3_BYTEMAP_NONE. */
static uint32_t naive_special(const unsigned char *text, size_t at, size_t len, size_t *slen)
{
    uint32_t best = K3_BYTEMAP_NONE;
    *slen = 0;
    for (size_t k = special_at[text[at]]; k < special_at[text[at] + 1]; k++) {
        uint32_t id = special_ids[k];
        size_t l = tok->off[id + 1] - tok->off[id];
        if (l > *slen && l <= len - at && !memcmp(text + at, tok->bytes + tok->off[id], l)) {
            best = id;
            *slen = l;
        }
    }
    return best;
}

/* Reference ids of valid UTF-8 text that is one call of the core (under
 * 25,000 characters); returns the count. out has room for len ids. */
static size_t reference(const unsigned char *text, size_t len, int allow_special, uint32_t *out)
{
    uint32_t *cp = malloc((len + 1) * sizeof *cp);
    unsigned char *cls = malloc(len + 1);
    size_t *off = malloc((len + 1) * sizeof *off), nc = 0, nout = 0;
    FZ_ASSERT(cp && cls && off, "out of memory");
    for (size_t at = 0; at < len; nc++) {
        size_t l = k3_utf8_decode(text + at, len - at, &cp[nc]);
        FZ_ASSERT(l > 0, "valid text does not decode");
        cls[nc] = (unsigned char)k3_pretok_class(cp[nc]);
        off[nc] = at;
        at += l;
    }
    off[nc] = len;
    /* Segments between special tokens are pre-tokenised on their own. */
    size_t seg = 0;
    for (size_t i = 0; i <= nc;) {
        size_t slen = 0;
        uint32_t sid = i < nc && allow_special ? naive_special(text, off[i], len, &slen)
                                               : K3_BYTEMAP_NONE;
        if (i < nc && sid == K3_BYTEMAP_NONE) {
            i++;
            continue;
        }
        for (size_t a = seg; a < i;) {
            size_t b = seg + k3_pretok_next(cp + seg, cls + seg, a - seg, i - seg);
            FZ_ASSERT(b > a && b <= i, "the pre-tokeniser did not advance");
            nout += naive_bpe(text + off[a], off[b] - off[a], out + nout);
            a = b;
        }
        if (i == nc)
            break;
        out[nout++] = sid;
        size_t end = off[i] + slen;
        while (i < nc && off[i] < end)
            i++;
        FZ_ASSERT(off[i] == end, "a special token ends inside a character");
        seg = i;
    }
    free(cp);
    free(cls);
    free(off);
    return nout;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int allow_special = data[0] & 1;
    const unsigned char *text = data + 1;
    size_t len = size - 1, n;
    uint32_t *ids = fz_check_encode(tok, text, len, allow_special, &n);
    if (ids && len <= 1024) {
        uint32_t *want = malloc((len + 1) * sizeof *want);
        FZ_ASSERT(want != NULL, "out of memory");
        size_t nw = reference(text, len, allow_special, want);
        FZ_ASSERT(nw == n, "%zu ids, the reference has %zu", n, nw);
        for (size_t i = 0; i < n; i++)
            FZ_ASSERT(ids[i] == want[i], "id %zu is %u, the reference says %u", i, ids[i],
                      want[i]);
        free(want);
    }
    free(ids);
    return 0;
}
