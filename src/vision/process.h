/* process.h - the image processor of docs/VISION.md §3 in C: from decoded
 * pixels (image.h) to the normalised patches the encoder reads.
 *
 * Every step is integer or float32 arithmetic in the order VISION.md states,
 * so the patches are bit-identical to tools/k3vision_ref.py's (which equals
 * Pillow byte for byte on the resize): the resize plan (§3.2, double), Pillow's
 * BICUBIC in 8-bit fixed point (§3.3), an image with alpha premultiplied,
 * resized, un-premultiplied and composited on the chessboard (§3.1 step 2),
 * zero padding (§3.4), 2·fl32(fl32(u/255) − 0.5) (§3.5), patches (§3.6).
 * The patch side p is the checkpoint's patch_size; the processor's limits
 * (65536 patches, 512 per side) and the merge factor 2 are VISION.md §1.2's. */
#ifndef K3_VISION_PROCESS_H
#define K3_VISION_PROCESS_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"
#include "vision/image.h"

#define K3_VISION_IN_PATCH_LIMIT 65536
#define K3_VISION_SIDE_LIMIT 512   /* patches on one side */

/* §3.2 for a width x height image and patch side p. */
typedef struct k3_vplan {
    int width, height;     /* the decoded image (the prompt shows these, §4) */
    int new_w, new_h;      /* after the resize */
    int pad_w, pad_h;      /* zeros added right and bottom */
    int grid_h, grid_w;    /* patches, both even */
    int64_t rows;          /* (grid_h/2)·(grid_w/2): the image's rows in the prompt */
} k3_vplan;

/* K3_EINPUT for a side < 1 or p outside 1..64. */
int k3_vision_plan(int width, int height, int p, k3_vplan *pl, k3_err *e);

/* Pillow's Image.resize((nw, nh), BICUBIC) of uint8 [h][w][ch] (ch 1..4, each
 * channel on its own) into out [nh][nw][ch]: the horizontal pass first, each
 * pass only if its side changes (§3.3 step 7). Returns K3_ERUNTIME when the
 * intermediate image cannot be allocated. */
int k3_bicubic_resize(const uint8_t *in, int w, int h, int ch, uint8_t *out, int nw, int nh,
                      k3_err *e);

/* §3.1 step 2 - §3.6: im (RGB or RGBA) -> *patches, malloc'd float
 * [grid_h·grid_w][3][p][p] in row-major grid order, and *pl. */
int k3_vision_preprocess(const k3_image *im, int p, float **patches, k3_vplan *pl, k3_err *e);

#endif
