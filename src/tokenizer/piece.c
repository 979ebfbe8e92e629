/* piece.c - from ids back to bytes, and special tokens by name. */
#include <string.h>

#include "tokenizer/tok.h"
#include "util/error.h"

int k3_tok_piece(const k3_tokenizer *tok, uint32_t id, const unsigned char **bytes,
                 size_t *len, k3_err *e)
{
    if (id >= tok->vocab)
        return k3_fail(e, K3_EINPUT, "token id %u is outside the vocabulary (0..%u)", id,
                       tok->vocab - 1);
    *bytes = tok->bytes + tok->off[id];
    *len = tok->off[id + 1] - tok->off[id];
    return K3_OK;
}

int64_t k3_tok_special_id(const k3_tokenizer *tok, const char *text)
{
    uint32_t id = k3_bytemap_get(&tok->specials, (const unsigned char *)text, strlen(text));
    return id == K3_BYTEMAP_NONE ? -1 : (int64_t)id;
}

int k3_tok_is_special(const k3_tokenizer *tok, uint32_t id)
{
    return id >= tok->nranks;
}
