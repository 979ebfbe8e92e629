/* rows.h - a rendered conversation's images as prompt rows (docs/VISION.md
 * §4 step 3, §10.6), for every front end (the CLI chat, k3 serve).
 *
 * The renderer leaves one <|media_pad|> per image (images.h). Here each is
 * expanded to its image's N rows, each such position gets a pointer to its
 * projected row (for k3_forward_embeds / k3_seq.embeds), and each image is
 * a span (start, N, XXH64 of its rows' float bytes) so that prompt reuse
 * compares images and not only ids (k3_state_sync_embeds). Two steps,
 * because the row counts are known from the images' sizes (the plan) long
 * before the rows are (the tower): k3_chat_expand_pads needs only the
 * counts, k3_chat_point_rows the rows. Who encodes them is the caller's
 * business (vision/rows.h). */
#ifndef K3_CHAT_ROWS_H
#define K3_CHAT_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "chat/images.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"
#include "vision/process.h"

/* The images of a conversation as the tower's inputs (vision/rows.h):
 * their bytes, named "LABEL N" (1-based) in messages. */
typedef struct k3_chat_sources {
    const unsigned char *data[K3_CHAT_MAX_IMAGES];
    size_t len[K3_CHAT_MAX_IMAGES];
    char names[K3_CHAT_MAX_IMAGES][48];
    const char *what[K3_CHAT_MAX_IMAGES];
    size_t n;
} k3_chat_sources;
void k3_chat_sources_of(const k3_chat *c, const char *label, k3_chat_sources *s);

/* Each of c's images' plan (vision/process.h k3_vision_plan, patch size p)
 * from the size its header declares (the chat reader's width and height):
 * plans[i] and nrows[i] = plans[i].rows. The row counts for
 * k3_chat_expand_pads before anything is encoded, so that a front end
 * refuses a prompt over its context before paying for the tower (k3 serve,
 * the CLI's --chat and --history). K3_EINPUT naming "image N". */
int k3_chat_image_plans(const k3_chat *c, int p, k3_vplan *plans, int64_t *nrows, k3_err *e);

/* Replaces *ids[0..*n) (malloc'd; c rendered and encoded) by the prompt with
 * every pad expanded: the k-th pad becomes nrows[order[k]] pads, order
 * being k3_chat_image_order's (image[k] gets order[k]), and span[k] its
 * start and n (hash 0), *nspan = the pads. K3_EINPUT when the tokenizer
 * has no <|media_pad|> or the pads do not match c's image parts. */
int k3_chat_expand_pads(const k3_tokenizer *tok, const k3_chat *c, const int64_t *nrows,
                        uint32_t **ids, size_t *n, k3_image_span span[K3_CHAT_MAX_IMAGES],
                        size_t image[K3_CHAT_MAX_IMAGES], size_t *nspan, k3_err *e);

/* The rows of c's ni images, packed in image order ([sum nrows][T]):
 * off[i] image i's first row, hash[i] the XXH64 of its rows' bytes. */
void k3_chat_index_rows(const float *rows, const int64_t *nrows, size_t ni, size_t T,
                        size_t *off, uint64_t *hash);

/* *embeds (calloc'd, n pointers): span k's positions point at the rows of
 * image[k] (rows + (off[image[k]] + j) * T), every other position NULL; and
 * span[k].hash = hash[image[k]]. */
int k3_chat_point_rows(k3_image_span *span, const size_t *image, size_t nspan,
                       const float *rows, const size_t *off, const uint64_t *hash, size_t T,
                       size_t n, const float ***embeds, k3_err *e);

#endif
