/* bpe.c - see bpe.h. */
#include "tokenizer/bpe.h"

#include <stdlib.h>

#include "util/error.h"

#define NO_RANK UINT32_MAX

int k3_bpe_reserve(k3_bpe_work *w, size_t n, k3_err *e)
{
    if (n <= w->cap)
        return K3_OK;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < n)
        cap *= 2;
    k3_bpe_work_free(w);
    w->next = k3_malloc(e, cap * sizeof *w->next, "BPE scratch");
    w->prev = k3_malloc(e, cap * sizeof *w->prev, "BPE scratch");
    w->pair = k3_malloc(e, cap * sizeof *w->pair, "BPE scratch");
    w->part = k3_malloc(e, cap * sizeof *w->part, "BPE scratch");
    w->heap = k3_malloc(e, 2 * cap * sizeof *w->heap, "BPE scratch");
    if (!w->next || !w->prev || !w->pair || !w->part || !w->heap) {
        k3_bpe_work_free(w);
        return e->code;
    }
    w->cap = cap;
    return K3_OK;
}

void k3_bpe_work_free(k3_bpe_work *w)
{
    free(w->next);
    free(w->prev);
    free(w->pair);
    free(w->part);
    free(w->heap);
    *w = (k3_bpe_work){0};
}

/* Min-heap on (rank, position): the order tiktoken merges in. */
static void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = v;
    return top;
}

/* Rank of the pair of parts starting at i (NO_RANK if it is not a token or
 * i is the last part), and queues it as a candidate. */
static void update_pair(const k3_tokenizer *tok, const unsigned char *piece, size_t n,
                        k3_bpe_work *w, size_t *nheap, uint32_t i)
{
    uint32_t j = w->next[i];
    uint32_t r = NO_RANK;
    if (j < n)
        r = k3_tok_rank(tok, piece + i, w->next[j] - i);
    w->pair[i] = r;
    if (r != NO_RANK)
        heap_push(w->heap, nheap, (uint64_t)r << 32 | i);
}

size_t k3_bpe(const k3_tokenizer *tok, const unsigned char *piece, size_t n, k3_bpe_work *w,
              uint32_t *out)
{
    size_t nheap = 0;
    for (uint32_t i = 0; i < n; i++) {
        w->next[i] = i + 1;
        w->prev[i] = i - 1; /* unused for i = 0 */
        w->part[i] = tok->byte_rank[piece[i]];
    }
    for (uint32_t i = 0; i < n; i++)
        update_pair(tok, piece, n, w, &nheap, i);
    /* Each pair is queued once with its rank when it forms; an entry whose
     * part was merged away or has since grown (its rank changed: ranks are
     * unique per byte string, and parts only grow) is stale and skipped. */
    while (nheap > 0) {
        uint64_t top = heap_pop(w->heap, &nheap);
        uint32_t i = (uint32_t)top, r = (uint32_t)(top >> 32);
        if (w->next[i] == 0 || w->pair[i] != r)
            continue;
        uint32_t j = w->next[i];
        w->next[i] = w->next[j];
        w->next[j] = 0;
        w->part[i] = r;
        if (w->next[i] < n)
            w->prev[w->next[i]] = i;
        update_pair(tok, piece, n, w, &nheap, i);
        if (i > 0)
            update_pair(tok, piece, n, w, &nheap, w->prev[i]);
    }
    size_t count = 0;
    for (uint32_t i = 0; i < n; i = w->next[i])
        out[count++] = w->part[i];
    return count;
}
