/* images.h - the --image inputs of a run (docs/VISION.md §3-§5, §10): each
 * file decoded (vision/image.h), processed (vision/process.h) and encoded by
 * the checkpoint's vision tower (vision/vmodel.h) before the text model
 * opens, the tower freed again; then the prompt: each image's markup (§4
 * step 1, its <|media_pad|> expanded to the image's rows, step 3) in order,
 * then the prompt text, and for every position the row that replaces its
 * embedding lookup (NULL for text ids; k3_forward_embeds). */
#ifndef K3_CLI_IMAGES_H
#define K3_CLI_IMAGES_H

#include <stddef.h>
#include <stdint.h>

#include "cli/options.h"
#include "k3/error.h"
#include "k3/tokenizer.h"

typedef struct k3_cli_images {
    float *rows;                /* [nrows][T]: the images' projected rows, in order */
    const float **embeds;       /* [the prompt's ids]: a row of `rows`, or NULL */
    size_t nrows;
    size_t row_bytes;           /* one row: T floats */
} k3_cli_images;

/* Builds the prompt ids (*ids, *n, malloc'd) of o->image[] then the text
 * (tokenized with o->prompt_special) into *ids, and im. K3_EINPUT for a bad
 * image or a checkpoint without a vision tower, naming it. */
int k3_cli_images_prompt(const k3_options *o, const k3_tokenizer *tok, const char *text,
                         size_t len, uint32_t **ids, size_t *n, k3_cli_images *im, k3_err *e);
/* Encodes ni images given as file bytes (data[i][0..len[i]), named what[i]
 * in messages), in one call of the tower, opened and closed again: im->rows
 * gets their rows in order ([sum nrows][*T]), nrows[i] image i's row count.
 * The vision plan is printed and checked (K3_EBUDGET) as for --prompt. */
int k3_cli_images_encode(const k3_options *o, const unsigned char *const *data,
                         const size_t *len, const char *const *what, size_t ni, int64_t *nrows,
                         size_t *T, k3_cli_images *im, k3_err *e);
void k3_cli_images_free(k3_cli_images *im);

#endif
