/* chat_images.h - the images of a --chat conversation as prompt rows
 * (docs/VISION.md §4, §10.6).
 *
 * The renderer leaves one <|media_pad|> per image (chat/images.h); each is
 * expanded to the image's N rows and given its rows by chat/rows.h.
 *
 * The rows are computed once per image: the conversation's images are
 * encoded together (cli/images.h: the tower opened, run and closed) when
 * one appears that has no rows yet, and kept until the conversation is
 * replaced (k3_chat_rows_reset). */
#ifndef K3_CLI_CHAT_IMAGES_H
#define K3_CLI_CHAT_IMAGES_H

#include <stddef.h>
#include <stdint.h>

#include "chat/images.h"
#include "chat/rows.h"
#include "cli/images.h"
#include "cli/options.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"

typedef struct k3_chat_rows {
    k3_cli_images enc;                 /* the rows of images [0, nencoded) */
    size_t nencoded, T;
    int64_t nrows[K3_CHAT_MAX_IMAGES]; /* per image of the conversation */
    size_t off[K3_CHAT_MAX_IMAGES];    /* its first row in enc.rows */
    uint64_t hash[K3_CHAT_MAX_IMAGES]; /* XXH64 of its rows */
    const float **embeds;              /* [the expanded prompt] a row or NULL; NULL: no images */
    k3_image_span span[K3_CHAT_MAX_IMAGES];
    size_t image[K3_CHAT_MAX_IMAGES];  /* span k is image image[k] of the conversation */
    size_t nspan;
} k3_chat_rows;

/* Turns the rendered prompt *ids[0..*n) of conversation c into the
 * prompt with its images' rows: *ids replaced (malloc'd) by the expanded
 * ids, r->embeds and r->span filled (none when c has no images).
 * K3_EINPUT when the pads do not match c's images. */
int k3_chat_rows_prompt(k3_chat_rows *r, const k3_options *o, const k3_tokenizer *tok,
                        const k3_chat *c, uint32_t **ids, size_t *n, k3_err *e);

/* Forgets every image's rows (a new conversation numbers its images anew). */
void k3_chat_rows_reset(k3_chat_rows *r);

#endif
