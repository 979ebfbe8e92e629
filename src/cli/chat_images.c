/* chat_images.c - see chat_images.h. */
#include "cli/chat_images.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/xxh64.h"

void k3_chat_rows_reset(k3_chat_rows *r)
{
    k3_cli_images_free(&r->enc);
    free((void *)r->embeds);
    memset(r, 0, sizeof *r);
}

/* Encodes all of c's images (their rows, offsets and hashes). */
static int encode_all(k3_chat_rows *r, const k3_options *o, const k3_chat *c, k3_err *e)
{
    const unsigned char *data[K3_CHAT_MAX_IMAGES];
    size_t len[K3_CHAT_MAX_IMAGES];
    char names[K3_CHAT_MAX_IMAGES][48];
    const char *what[K3_CHAT_MAX_IMAGES];
    size_t ni = c->nimages;
    for (size_t i = 0; i < ni; i++) {
        data[i] = c->images[i].data;
        len[i] = c->images[i].n;
        snprintf(names[i], sizeof names[i], "the chat's image %zu", i + 1);
        what[i] = names[i];
    }
    k3_chat_rows_reset(r);
    if (k3_cli_images_encode(o, data, len, what, ni, r->nrows, &r->T, &r->enc, e))
        return e->code;
    for (size_t i = 0, at = 0; i < ni; at += (size_t)r->nrows[i], i++) {
        r->off[i] = at;
        r->hash[i] = k3_xxh64(r->enc.rows + at * r->T,
                              (size_t)r->nrows[i] * r->T * sizeof(float), 0);
    }
    r->nencoded = ni;
    return K3_OK;
}

int k3_chat_rows_prompt(k3_chat_rows *r, const k3_options *o, const k3_tokenizer *tok,
                        const k3_chat *c, uint32_t **ids, size_t *n, k3_err *e)
{
    free((void *)r->embeds);
    r->embeds = NULL;
    r->nspan = 0;
    if (!c->nimages)
        return K3_OK;
    int64_t pad = k3_tok_special_id(tok, "<|media_pad|>");
    if (pad < 0)
        return k3_fail(e, K3_EINPUT, "the tokenizer has no <|media_pad|>: it cannot place an "
                                     "image");
    if (c->nimages > r->nencoded && encode_all(r, o, c, e))
        return e->code;
    size_t order[K3_CHAT_MAX_IMAGES], norder, count = 0;
    k3_chat_image_order(c, order, &norder);
    for (size_t i = 0; i < *n; i++)
        count += (*ids)[i] == (uint32_t)pad;
    if (count != norder)
        return k3_fail(e, K3_EINPUT, "the rendered conversation has %zu <|media_pad|> ids for "
                                     "%zu image parts", count, norder);
    size_t total = *n;
    for (size_t k = 0; k < norder; k++)
        total += (size_t)r->nrows[order[k]] - 1; /* bounded: the rows exist in memory */
    uint32_t *out = malloc((total ? total : 1) * sizeof *out);
    const float **emb = calloc(total ? total : 1, sizeof *emb);
    if (!out || !emb) {
        free(out);
        free((void *)emb);
        return k3_fail(e, K3_ERUNTIME, "out of memory for a prompt of %zu ids", total);
    }
    size_t at = 0, k = 0;
    for (size_t i = 0; i < *n; i++) {
        if ((*ids)[i] != (uint32_t)pad) {
            out[at++] = (*ids)[i];
            continue;
        }
        size_t im = order[k];
        r->span[k].start = (int64_t)at;
        r->span[k].n = r->nrows[im];
        r->span[k].hash = r->hash[im];
        for (int64_t j = 0; j < r->nrows[im]; j++) {
            emb[at] = r->enc.rows + (r->off[im] + (size_t)j) * r->T;
            out[at++] = (uint32_t)pad;
        }
        k++;
    }
    r->nspan = k;
    r->embeds = emb;
    free(*ids);
    *ids = out;
    *n = at;
    return K3_OK;
}
