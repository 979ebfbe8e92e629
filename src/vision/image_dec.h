/* image_dec.h - the format decoders behind image.h (image_png.c,
 * image_jpeg.c); only image.c calls them.
 *
 * Each decodes a whole file already in memory into *out (RGB or RGBA, see
 * image.h) or fails with K3_EINPUT (K3_ERUNTIME for out of memory), out
 * untouched. Both check the caps of image.h from the header before they
 * allocate pixels, through k3_image_check_size. header_only: stop after the
 * header's checks (size caps, sample depth, colour space) with out->width
 * and out->height set and no pixel decoded (out->px NULL). */
#ifndef K3_VISION_IMAGE_DEC_H
#define K3_VISION_IMAGE_DEC_H

#include <stddef.h>
#include <stdint.h>

#include "vision/image.h"

int k3_png_decode(const uint8_t *data, size_t n, const char *what, int header_only,
                  k3_image *out, k3_err *e);
int k3_jpeg_decode(const uint8_t *data, size_t n, const char *what, int header_only,
                   k3_image *out, k3_err *e);

/* K3_OK when width x height is within the caps of image.h and neither is 0;
 * else K3_EINPUT naming what and the size. */
int k3_image_check_size(uint64_t width, uint64_t height, const char *what, k3_err *e);

#endif
