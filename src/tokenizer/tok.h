/* tok.h - the tokenizer's in-memory form, shared by its source files.
 *
 * Ids [0, nranks) are the BPE ranks of tiktoken.model; ids
 * [nranks, nranks + K3_TOK_NSPECIAL) are the special range. Every id's bytes
 * sit in one table, in id order, so decoding is two loads and the hash maps
 * need no copies of their keys. */
#ifndef K3_TOKENIZER_TOK_H
#define K3_TOKENIZER_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/bytemap.h"
#include "k3/tokenizer.h"

/* The special range: Kimi's tokenizer reserves 256 ids after the ranks. */
#define K3_TOK_NSPECIAL 256u

struct k3_tokenizer {
    uint32_t nranks;
    uint32_t vocab;        /* nranks + K3_TOK_NSPECIAL */
    unsigned char *bytes;  /* id's bytes: bytes[off[id] .. off[id + 1]) */
    uint32_t *off;         /* vocab + 1 entries */
    k3_bytemap ranks;      /* BPE token bytes -> rank */
    k3_bytemap specials;   /* special-token text -> id */
    uint32_t byte_rank[256]; /* rank of each single byte: where BPE starts */
    uint32_t *pair_rank;     /* rank of each two-byte string (b0 << 8 | b1),
                                K3_BYTEMAP_NONE if none: BPE's first round
                                looks up every adjacent pair of a piece, and
                                this table stays in cache where the map's
                                megabytes do not */
    /* For finding special tokens in text: which bytes start one, and the
     * distinct special-token lengths, longest first (leftmost-longest
     * matching tries them in this order). */
    unsigned char special_lead[256];
    uint32_t special_len[K3_TOK_NSPECIAL];
    size_t nspecial_len;
};

/* The rank of the token with bytes p[0..n), n > 0, or K3_BYTEMAP_NONE. */
static inline uint32_t k3_tok_rank(const k3_tokenizer *t, const unsigned char *p, size_t n)
{
    if (n == 1)
        return t->byte_rank[p[0]];
    if (n == 2)
        return t->pair_rank[p[0] << 8 | p[1]];
    return k3_bytemap_get(&t->ranks, p, n);
}

/* Names of the special range from tokenizer_config.json: name[i] is the
 * text of id nranks + i (reserved ids get "<|reserved_token_{id}|>").
 * The strings live in *arena (one allocation; free it after use). */
int k3_tok_special_names(const char *path, uint32_t nranks,
                         char *name[K3_TOK_NSPECIAL], char **arena, k3_err *e);

#endif
