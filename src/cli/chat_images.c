/* chat_images.c - see chat_images.h. */
#include "cli/chat_images.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "vision/vmodel.h"

void k3_chat_rows_reset(k3_chat_rows *r)
{
    k3_cli_images_free(&r->enc);
    free((void *)r->embeds);
    memset(r, 0, sizeof *r);
}

/* Encodes all of c's images (their rows, offsets and hashes). */
static int encode_all(k3_chat_rows *r, const k3_options *o, const k3_chat *c, k3_err *e)
{
    k3_chat_sources src;
    k3_chat_sources_of(c, "the chat's image", &src);
    k3_chat_rows_reset(r);
    if (k3_cli_images_encode(o, src.data, src.len, src.what, src.n, r->nrows, &r->T, &r->enc,
                             e))
        return e->code;
    k3_chat_index_rows(r->enc.rows, r->nrows, src.n, r->T, r->off, r->hash);
    r->nencoded = src.n;
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
    if (k3_tok_special_id(tok, "<|media_pad|>") < 0)
        return k3_fail(e, K3_EINPUT, "the tokenizer has no <|media_pad|>: it cannot place an "
                                     "image");
    /* The rows each image will have, from its header's size (the plan),
     * and the expanded prompt's length (each image's one pad becomes its
     * rows) judged against --max-context before the tower runs: a history
     * or /image over the context is refused at once (issue 35 F1), as k3
     * serve refuses it. */
    k3_vcfg cfg;
    k3_vplan plans[K3_CHAT_MAX_IMAGES];
    int64_t nrows[K3_CHAT_MAX_IMAGES];
    if (k3_vision_config(o->model_dir, &cfg, e) ||
        k3_chat_image_plans(c, cfg.p, plans, nrows, e))
        return e->code;
    long long total = (long long)*n;
    for (size_t i = 0; i < c->nimages; i++)
        total += nrows[i] - 1;
    if (total > (long long)o->memory.max_context)
        return k3_fail(e, K3_EINPUT, "the conversation with its images' rows is %lld tokens, "
                       "more than --max-context %ld (refused before encoding the images)", total,
                       o->memory.max_context);
    if (c->nimages > r->nencoded && encode_all(r, o, c, e))
        return e->code;
    for (size_t i = 0; i < c->nimages; i++)
        if (r->nrows[i] != nrows[i])
            return k3_fail(e, K3_EINPUT, "image %zu: encoded to %lld rows, its plan said %lld",
                           i + 1, (long long)r->nrows[i], (long long)nrows[i]);
    if (k3_chat_expand_pads(tok, c, r->nrows, ids, n, r->span, r->image, &r->nspan, e))
        return e->code;
    return k3_chat_point_rows(r->span, r->image, r->nspan, r->enc.rows, r->off, r->hash, r->T,
                              *n, &r->embeds, e);
}
