/* rows.c - see rows.h. */
#include "chat/rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/xxh64.h"

void k3_chat_sources_of(const k3_chat *c, const char *label, k3_chat_sources *s)
{
    s->n = c->nimages < K3_CHAT_MAX_IMAGES ? c->nimages : K3_CHAT_MAX_IMAGES;
    for (size_t i = 0; i < s->n; i++) {
        s->data[i] = c->images[i].data;
        s->len[i] = c->images[i].n;
        snprintf(s->names[i], sizeof s->names[i], "%s %zu", label, i + 1);
        s->what[i] = s->names[i];
    }
}

int k3_chat_expand_pads(const k3_tokenizer *tok, const k3_chat *c, const int64_t *nrows,
                        uint32_t **ids, size_t *n, k3_image_span span[K3_CHAT_MAX_IMAGES],
                        size_t image[K3_CHAT_MAX_IMAGES], size_t *nspan, k3_err *e)
{
    int64_t pad = k3_tok_special_id(tok, "<|media_pad|>");
    size_t norder, count = 0, total;
    *nspan = 0;
    if (pad < 0)
        return k3_fail(e, K3_EINPUT, "the tokenizer has no <|media_pad|>: it cannot place an "
                                     "image");
    k3_chat_image_order(c, image, &norder);
    for (size_t i = 0; i < *n; i++)
        count += (*ids)[i] == (uint32_t)pad;
    if (count != norder)
        return k3_fail(e, K3_EINPUT, "the rendered conversation has %zu <|media_pad|> ids for "
                                     "%zu image parts", count, norder);
    total = *n;
    for (size_t k = 0; k < norder; k++) /* bounded: at most 16 images of 65536 rows (§1.2) */
        total += (size_t)nrows[image[k]] - 1;
    uint32_t *out = malloc((total ? total : 1) * sizeof *out);
    if (!out)
        return k3_fail(e, K3_ERUNTIME, "out of memory for a prompt of %zu ids", total);
    size_t at = 0, k = 0;
    for (size_t i = 0; i < *n; i++) {
        if ((*ids)[i] != (uint32_t)pad) {
            out[at++] = (*ids)[i];
            continue;
        }
        span[k].start = (int64_t)at;
        span[k].n = nrows[image[k]];
        span[k].hash = 0;
        for (int64_t j = 0; j < span[k].n; j++)
            out[at++] = (uint32_t)pad;
        k++;
    }
    *nspan = k;
    free(*ids);
    *ids = out;
    *n = at;
    return K3_OK;
}

void k3_chat_index_rows(const float *rows, const int64_t *nrows, size_t ni, size_t T,
                        size_t *off, uint64_t *hash)
{
    for (size_t i = 0, at = 0; i < ni; at += (size_t)nrows[i], i++) {
        off[i] = at;
        hash[i] = k3_xxh64(rows + at * T, (size_t)nrows[i] * T * sizeof(float), 0);
    }
}

int k3_chat_point_rows(k3_image_span *span, const size_t *image, size_t nspan,
                       const float *rows, const size_t *off, const uint64_t *hash, size_t T,
                       size_t n, const float ***embeds, k3_err *e)
{
    const float **emb = calloc(n ? n : 1, sizeof *emb);
    if (!emb)
        return k3_fail(e, K3_ERUNTIME, "out of memory for a prompt of %zu ids", n);
    for (size_t k = 0; k < nspan; k++) {
        size_t im = image[k];
        span[k].hash = hash[im];
        for (int64_t j = 0; j < span[k].n; j++)
            emb[span[k].start + j] = rows + (off[im] + (size_t)j) * T;
    }
    *embeds = emb;
    return K3_OK;
}

int k3_chat_image_plans(const k3_chat *c, int p, k3_vplan *plans, int64_t *nrows, k3_err *e)
{
    for (size_t i = 0; i < c->nimages; i++) {
        k3_err pe = { 0, "" };
        if (k3_vision_plan(c->images[i].width, c->images[i].height, p, &plans[i], &pe))
            return k3_fail(e, pe.code, "image %zu: %s", i + 1, pe.msg);
        nrows[i] = plans[i].rows;
    }
    return K3_OK;
}
