/* bpe.h - byte pair encoding of one piece, exactly as tiktoken does it.
 *
 * tiktoken's rule: start from single bytes; while some adjacent pair of
 * parts concatenates to a token, merge the pair with the lowest rank (the
 * leftmost such pair on a tie, which can only be the same bytes twice).
 * tiktoken rescans all parts after each merge, O(n^2) in the piece length;
 * this does the same merges in the same order with a heap of candidate
 * pairs, O(n log n), because a piece can be 25,000 characters long. */
#ifndef K3_TOKENIZER_BPE_H
#define K3_TOKENIZER_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"
#include "tokenizer/tok.h"

/* Scratch memory of k3_bpe, reused across pieces. Zero-initialise. */
typedef struct k3_bpe_work {
    uint32_t *next; /* per byte position: end of the part starting there (0 = merged away) */
    uint32_t *prev; /* start of the previous part */
    uint32_t *pair; /* rank of the pair starting there (UINT32_MAX: no token) */
    uint32_t *part; /* token id of the part starting there */
    uint64_t *heap; /* candidate pairs, rank << 32 | position (2 cap: each
                     merge queues at most two) */
    size_t cap;
} k3_bpe_work;

/* Makes w able to encode pieces of up to n bytes. */
int k3_bpe_reserve(k3_bpe_work *w, size_t n, k3_err *e);
void k3_bpe_work_free(k3_bpe_work *w);

/* Encodes piece[0..n) (0 < n <= reserved size) into out (room for n ids);
 * returns the number of ids. */
size_t k3_bpe(const k3_tokenizer *tok, const unsigned char *piece, size_t n, k3_bpe_work *w,
              uint32_t *out);

#endif
