/* vocab.c - building the vocabulary trie (vocab.h) from the ids' bytes. */
#include "grammar/vocab.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

typedef struct sort_ent {
    const unsigned char *b;
    size_t len;
    uint32_t id;
} sort_ent;

static int cmp_ent(const void *a, const void *b)
{
    const sort_ent *x = a, *y = b;
    int c = memcmp(x->b, y->b, x->len < y->len ? x->len : y->len);
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void k3_gram_vocab_free(k3_gram_vocab *v)
{
    if (!v)
        return;
    if (v->bytes)
        for (uint32_t i = 0; i < v->n; i++)
            free(v->bytes[i]);
    free(v->bytes), free(v->lens), free(v->special), free(v->spec), free(v->empty);
    free(v->byte), free(v->depth), free(v->end), free(v->id_off), free(v->ids);
    free(v);
}

uint32_t k3_gram_vocab_size(const k3_gram_vocab *v)
{
    return v->n;
}

size_t k3_gram_mask_words(const k3_gram_vocab *v)
{
    return ((size_t)v->n + 31) / 32;
}

int64_t k3g_vocab_special(const k3_gram_vocab *v, const char *s, size_t n)
{
    for (uint32_t i = 0; i < v->nspec; i++) {
        uint32_t id = v->spec[i];
        if (v->lens[id] == n && !memcmp(v->bytes[id], s, n))
            return id;
    }
    return -1;
}

int k3_gram_vocab_new(k3_gram_vocab **out, uint32_t n, const unsigned char *const *bytes,
                      const size_t *lens, const unsigned char *special, k3_err *e)
{
    *out = NULL;
    if (n == 0 || n > (1u << 28))
        return k3_fail(e, K3_EINPUT, "grammar vocabulary: %u ids (1..2^28)", n);
    k3_gram_vocab *v = calloc(1, sizeof *v);
    if (!v)
        return k3_fail(e, K3_ERUNTIME, "grammar vocabulary: out of memory");
    v->n = n;
    v->bytes = calloc(n, sizeof *v->bytes);
    v->lens = calloc(n, sizeof *v->lens);
    v->special = calloc(n, 1);
    uint32_t *order = malloc((size_t)n * sizeof *order);
    size_t total = 0;
    if (!v->bytes || !v->lens || !v->special || !order)
        goto oom;
    uint32_t nord = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (lens[i] > 65535) {
            free(order);
            k3_gram_vocab_free(v);
            return k3_fail(e, K3_EINPUT, "grammar vocabulary: id %u has %zu bytes (max 65535)", i,
                           lens[i]);
        }
        v->lens[i] = lens[i];
        v->bytes[i] = malloc(lens[i] + 1);
        if (!v->bytes[i])
            goto oom;
        if (lens[i])
            memcpy(v->bytes[i], bytes[i], lens[i]);
        v->bytes[i][lens[i]] = 0;
        v->special[i] = special && special[i];
        if (v->special[i])
            v->nspec++;
        else if (!lens[i])
            v->nempty++;
        else {
            order[nord++] = i;
            total += lens[i];
        }
    }
    v->spec = malloc((v->nspec + 1) * sizeof *v->spec);
    v->empty = malloc((v->nempty + 1) * sizeof *v->empty);
    if (!v->spec || !v->empty)
        goto oom;
    v->nspec = v->nempty = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (v->special[i])
            v->spec[v->nspec++] = i;
        else if (!lens[i])
            v->empty[v->nempty++] = i;
    }
    {
        sort_ent *se = malloc(((size_t)nord + 1) * sizeof *se);
        if (!se)
            goto oom;
        for (uint32_t k = 0; k < nord; k++)
            se[k].b = v->bytes[order[k]], se[k].len = v->lens[order[k]], se[k].id = order[k];
        qsort(se, nord, sizeof *se, cmp_ent);
        for (uint32_t k = 0; k < nord; k++)
            order[k] = se[k].id;
        free(se);
    }
    /* at most one node per byte of all ids */
    v->byte = malloc(total + 1);
    v->depth = malloc((total + 1) * sizeof *v->depth);
    v->end = malloc((total + 1) * sizeof *v->end);
    v->id_off = malloc((total + 2) * sizeof *v->id_off);
    v->ids = malloc(((size_t)nord + 1) * sizeof *v->ids);
    uint32_t *path = malloc(65536 * sizeof *path); /* node at each depth of the current path */
    if (!v->byte || !v->depth || !v->end || !v->id_off || !v->ids || !path) {
        free(path);
        goto oom;
    }
    uint32_t nn = 0, pd = 0; /* pd: length of the current path */
    const unsigned char *prev = NULL;
    size_t prevlen = 0;
    for (uint32_t k = 0; k < nord; k++) {
        uint32_t id = order[k];
        const unsigned char *b = v->bytes[id];
        size_t l = v->lens[id], lcp = 0;
        while (prev && lcp < l && lcp < prevlen && prev[lcp] == b[lcp])
            lcp++;
        while (pd > lcp) /* close the nodes not shared */
            v->end[path[--pd]] = nn;
        while (pd < l) {
            v->byte[nn] = b[pd];
            v->depth[nn] = (uint16_t)(pd + 1);
            v->id_off[nn] = k;
            path[pd++] = nn++;
        }
        /* the id ends at the path's last node; ids are assigned in order,
         * so id_off[node] .. id_off[next node] covers them */
        v->ids[k] = id;
        if (l > v->maxdepth)
            v->maxdepth = (uint32_t)l;
        prev = b, prevlen = l;
    }
    while (pd)
        v->end[path[--pd]] = nn;
    free(path);
    v->id_off[nn] = nord;
    v->nnodes = nn;
    /* id_off[i] was set to the first id index at or after node i's
     * creation; ids ending at node i are those in [id_off[i], id_off[i+1])
     * whose length equals depth[i], which by preorder is exactly that
     * range (an id ending at node i sorts before any id through a child) */
    free(order);
    *out = v;
    return K3_OK;
oom:
    free(order);
    k3_gram_vocab_free(v);
    return k3_fail(e, K3_ERUNTIME, "grammar vocabulary: out of memory");
}

int k3_gram_vocab_from_tokenizer(k3_gram_vocab **out, const k3_tokenizer *tok, k3_err *e)
{
    *out = NULL;
    uint32_t n = k3_tok_vocab_size(tok);
    const unsigned char **b = malloc((size_t)n * sizeof *b);
    size_t *l = malloc((size_t)n * sizeof *l);
    unsigned char *sp = malloc(n);
    if (!b || !l || !sp) {
        free(b), free(l), free(sp);
        return k3_fail(e, K3_ERUNTIME, "grammar vocabulary: out of memory");
    }
    for (uint32_t i = 0; i < n && !e->code; i++) {
        k3_tok_piece(tok, i, &b[i], &l[i], e);
        sp[i] = (unsigned char)(k3_tok_is_special(tok, i) != 0);
    }
    if (!e->code)
        k3_gram_vocab_new(out, n, b, l, sp, e);
    free(b), free(l), free(sp);
    return e->code;
}
