/* load.c - builds a k3_tokenizer from DIR/tiktoken.model and
 * DIR/tokenizer_config.json.
 *
 * tiktoken.model is one "base64(token bytes) rank" per line. The loader is
 * strict where tiktoken's own loader is lax, because a silently different
 * vocabulary would tokenize every prompt differently: each line must be
 * canonical base64, one space and a decimal rank; the ranks must be exactly
 * 0..N-1 (the special range starts at N); no two lines may share a rank or
 * token bytes; and all 256 single bytes must be tokens (byte-level BPE falls
 * back to them). Errors name the file and line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer/tok.h"
#include "util/error.h"
#include "util/file.h"

/* Biggest tiktoken.model accepted; the release's is 2.8 MB. */
#define MODEL_MAX_BYTES ((size_t)256 << 20)

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decodes canonical padded base64 s[0..n) into out (room for 3n/4 bytes).
 * Returns the decoded length, or 0 for anything else (including empty). */
static size_t b64_decode(const char *s, size_t n, unsigned char *out)
{
    if (n == 0 || n % 4 != 0)
        return 0;
    size_t pad = s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
    size_t olen = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            int d = i + k >= n - pad ? 0 : b64_value((unsigned char)s[i + k]);
            if (d < 0)
                return 0;
            v = v << 6 | (uint32_t)d;
        }
        out[olen++] = (unsigned char)(v >> 16);
        out[olen++] = (unsigned char)(v >> 8);
        out[olen++] = (unsigned char)v;
    }
    /* Padding's bits must be zero, so every token has one spelling. */
    uint32_t last = (uint32_t)b64_value((unsigned char)s[n - pad - 1]);
    if ((pad == 1 && (last & 3)) || (pad == 2 && (last & 15)))
        return 0;
    return olen - pad;
}

/* Where each rank's bytes are while the file is parsed. */
typedef struct {
    uint32_t off, len; /* in the decode arena */
    uint32_t line;     /* 1-based; 0 = rank not seen yet */
} rank_src;

/* Parses the model file text into src[rank] (nlines entries), decoding the
 * tokens into arena (room for len bytes). */
static int parse_model(const char *path, const char *text, size_t len, uint32_t nlines,
                       rank_src *src, unsigned char *arena, k3_err *e)
{
    size_t at = 0;
    uint32_t used = 0;
    for (uint32_t line = 1; line <= nlines; line++) {
        const char *ls = text + at;
        const char *nl = memchr(ls, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - ls) : len - at;
        at += ll + 1;
        const char *sp = memchr(ls, ' ', ll);
        if (!sp)
            return k3_fail(e, K3_EINPUT, "%s:%u: malformed line (want \"base64 rank\")", path,
                           line);
        size_t blen = (size_t)(sp - ls);
        size_t dlen = b64_decode(ls, blen, arena + used);
        if (dlen == 0)
            return k3_fail(e, K3_EINPUT, "%s:%u: malformed line (token is not canonical base64)",
                           path, line);
        const char *r = sp + 1, *rend = ls + ll;
        uint64_t rank = 0;
        if (r == rend)
            return k3_fail(e, K3_EINPUT, "%s:%u: malformed line (no rank)", path, line);
        for (; r < rend; r++) {
            if (*r < '0' || *r > '9' || rank > UINT32_MAX)
                return k3_fail(e, K3_EINPUT, "%s:%u: malformed line (rank is not a number)",
                               path, line);
            rank = rank * 10 + (uint64_t)(*r - '0');
        }
        if (rank >= nlines)
            return k3_fail(e, K3_EINPUT,
                           "%s:%u: rank %llu is not below the number of ranks %u "
                           "(ranks must be 0..%u)",
                           path, line, (unsigned long long)rank, nlines, nlines - 1);
        if (src[rank].line)
            return k3_fail(e, K3_EINPUT, "%s:%u: duplicate rank %llu (also on line %u)", path,
                           line, (unsigned long long)rank, src[rank].line);
        src[rank] = (rank_src){used, (uint32_t)dlen, line};
        used += (uint32_t)dlen;
    }
    return K3_OK;
}

/* Lines of the model file: every '\n' ends one, and a last line may lack it. */
static uint32_t count_lines(const char *text, size_t len)
{
    uint32_t n = 0;
    for (const char *p = text; (p = memchr(p, '\n', len - (size_t)(p - text))) != NULL; p++)
        n++;
    return n + (len > 0 && text[len - 1] != '\n');
}

/* Lays out every id's bytes in id order: the ranks' from the decode arena,
 * then the special range's names. */
static int layout_tokens(k3_tokenizer *t, const rank_src *src, const unsigned char *arena,
                         char *const name[K3_TOK_NSPECIAL], k3_err *e)
{
    size_t total = 0;
    for (uint32_t r = 0; r < t->nranks; r++)
        total += src[r].len;
    for (uint32_t i = 0; i < K3_TOK_NSPECIAL; i++)
        total += strlen(name[i]);
    t->bytes = k3_malloc(e, total, "token bytes");
    t->off = k3_malloc(e, ((size_t)t->vocab + 1) * sizeof *t->off, "token offsets");
    if (!t->bytes || !t->off)
        return e->code;
    uint32_t at = 0;
    for (uint32_t id = 0; id < t->vocab; id++) {
        t->off[id] = at;
        const unsigned char *b = id < t->nranks ? arena + src[id].off
                                                : (const unsigned char *)name[id - t->nranks];
        size_t n = id < t->nranks ? src[id].len : strlen(name[id - t->nranks]);
        memcpy(t->bytes + at, b, n);
        at += (uint32_t)n;
    }
    t->off[t->vocab] = at;
    return K3_OK;
}

/* The BPE lookups: the rank map (refusing duplicate bytes), the single
 * bytes (all 256 must be there) and the two-byte table. */
static int index_ranks(k3_tokenizer *t, const char *path, const rank_src *src, k3_err *e)
{
    if (k3_bytemap_init(&t->ranks, t->nranks, t->bytes, t->off, e))
        return e->code;
    for (uint32_t r = 0; r < t->nranks; r++) {
        uint32_t dup = k3_bytemap_add(&t->ranks, r);
        if (dup != K3_BYTEMAP_NONE)
            return k3_fail(e, K3_EINPUT, "%s:%u: duplicate token bytes (also on line %u)", path,
                           src[r].line > src[dup].line ? src[r].line : src[dup].line,
                           src[r].line < src[dup].line ? src[r].line : src[dup].line);
    }
    for (unsigned b = 0; b < 256; b++) {
        unsigned char byte = (unsigned char)b;
        t->byte_rank[b] = k3_bytemap_get(&t->ranks, &byte, 1);
        if (t->byte_rank[b] == K3_BYTEMAP_NONE)
            return k3_fail(e, K3_EINPUT,
                           "%s: no token for the single byte 0x%02X (byte-level BPE needs all 256)",
                           path, b);
    }
    t->pair_rank = k3_malloc(e, 65536 * sizeof *t->pair_rank, "pair ranks");
    if (!t->pair_rank)
        return e->code;
    memset(t->pair_rank, 0xFF, 65536 * sizeof *t->pair_rank); /* K3_BYTEMAP_NONE */
    for (uint32_t r = 0; r < t->nranks; r++)
        if (t->off[r + 1] - t->off[r] == 2)
            t->pair_rank[t->bytes[t->off[r]] << 8 | t->bytes[t->off[r] + 1]] = r;
    return K3_OK;
}

/* The special-token lookups: the name map (refusing duplicate names), the
 * bytes that start a name, and the distinct name lengths, longest first. */
static int index_specials(k3_tokenizer *t, const char *path, k3_err *e)
{
    if (k3_bytemap_init(&t->specials, K3_TOK_NSPECIAL, t->bytes, t->off, e))
        return e->code;
    for (uint32_t id = t->nranks; id < t->vocab; id++) {
        const unsigned char *name = t->bytes + t->off[id];
        uint32_t n = t->off[id + 1] - t->off[id];
        uint32_t dup = k3_bytemap_add(&t->specials, id);
        if (dup != K3_BYTEMAP_NONE)
            return k3_fail(e, K3_EINPUT, "%s: special tokens %u and %u are both \"%.*s\"", path,
                           dup, id, (int)n, (const char *)name);
        t->special_lead[name[0]] = 1;
        size_t k = 0;
        while (k < t->nspecial_len && t->special_len[k] > n)
            k++;
        if (k == t->nspecial_len || t->special_len[k] != n) {
            memmove(t->special_len + k + 1, t->special_len + k,
                    (t->nspecial_len - k) * sizeof *t->special_len);
            t->special_len[k] = n;
            t->nspecial_len++;
        }
    }
    return K3_OK;
}

/* dir + "/" + file into buf, or an error when it does not fit. */
static int join_path(char *buf, size_t size, const char *dir, const char *file, k3_err *e)
{
    int n = snprintf(buf, size, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= size)
        return k3_fail(e, K3_EINPUT, "tokenizer directory path too long: %s", dir);
    return K3_OK;
}

int k3_tok_load(k3_tokenizer **out, const char *dir, k3_err *e)
{
    *out = NULL;
    char model_path[4096], config_path[4096];
    if (join_path(model_path, sizeof model_path, dir, "tiktoken.model", e) ||
        join_path(config_path, sizeof config_path, dir, "tokenizer_config.json", e))
        return e->code;

    size_t len;
    if (access(model_path, F_OK) != 0 && errno == ENOENT)
        return k3_fail(e, K3_EINPUT, "%s has no tiktoken.model, so it is not a tokenizer "
                                     "directory: pass --tok DIR (the release's directory, or "
                                     "the model's own tokenizer)", dir);
    char *text = k3_read_small_file(e, model_path, MODEL_MAX_BYTES, &len);
    if (!text)
        return e->code;
    k3_tokenizer *t = k3_calloc(e, 1, sizeof *t, "tokenizer");
    uint32_t nlines = count_lines(text, len);
    rank_src *src = k3_calloc(e, nlines, sizeof *src, "tiktoken.model index");
    unsigned char *arena = k3_malloc(e, len, "tiktoken.model tokens");
    char *name[K3_TOK_NSPECIAL], *names = NULL;
    int rc = !t || !src || !arena ? K3_ERUNTIME : K3_OK;
    if (rc == K3_OK && nlines == 0)
        rc = k3_fail(e, K3_EINPUT, "%s: empty", model_path);
    if (rc == K3_OK)
        rc = parse_model(model_path, text, len, nlines, src, arena, e);
    free(text);
    if (rc == K3_OK) {
        t->nranks = nlines;
        t->vocab = nlines + K3_TOK_NSPECIAL;
        rc = k3_tok_special_names(config_path, t->nranks, name, &names, e);
    }
    if (rc == K3_OK)
        rc = layout_tokens(t, src, arena, name, e);
    if (rc == K3_OK)
        rc = index_ranks(t, model_path, src, e);
    if (rc == K3_OK)
        rc = index_specials(t, config_path, e);
    free(names);
    free(arena);
    free(src);
    if (rc != K3_OK) {
        k3_tok_free(t);
        return rc;
    }
    *out = t;
    return K3_OK;
}

void k3_tok_free(k3_tokenizer *tok)
{
    if (!tok)
        return;
    k3_bytemap_free(&tok->ranks);
    k3_bytemap_free(&tok->specials);
    free(tok->bytes);
    free(tok->off);
    free(tok->pair_rank);
    free(tok);
}

uint32_t k3_tok_vocab_size(const k3_tokenizer *tok)
{
    return tok->vocab;
}
