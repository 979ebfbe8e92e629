/* image.h - decoding an image file's bytes into 8-bit pixels, the one place k3
 * reads image formats (docs/VISION.md §3.1, §10).
 *
 * Formats: PNG (libpng) and JPEG (libjpeg-turbo), told apart by their
 * signatures. The result is row-major, row 0 at the top, 3 (RGB) or 4 (RGBA)
 * uint8 channels per pixel:
 *   - RGB and grayscale images become RGB (gray copied to R, G, B), as
 *     Pillow's convert("RGB") does; palette images are expanded to RGB
 *     (VISION.md §7 A5: k3 expands palettes before the resize);
 *   - an image with transparency (an alpha band, or a tRNS entry of a
 *     palette, gray or RGB PNG) becomes RGBA, for §3.1 step 2 (resize
 *     premultiplied, then composite). Gray + alpha is expanded to RGBA,
 *     which Pillow's LA path computes identically per channel;
 *   - no EXIF orientation, no gamma or colour profile is applied (the
 *     release's processor applies none).
 * Refused with K3_EINPUT and a message naming `what` (a file name): an
 * unknown format, zero width or height, a side above K3_IMAGE_MAX_SIDE or more
 * than K3_IMAGE_MAX_PIXELS pixels (checked from the header, before any pixel
 * buffer is allocated), truncated or corrupt data (libjpeg's warnings, such
 * as a premature end of data, are errors here: they would otherwise hand back
 * made-up grey pixels), 16-bit PNG samples, CMYK/YCCK JPEG, and animated PNG
 * (an acTL chunk): VISION.md §7 A5 refuses those rather than guess a
 * conversion. Out of memory is K3_ERUNTIME.
 *
 * A build without the libraries (make windows, make cross-aarch64, or
 * IMAGE=0) compiles this interface with every decode refused: "built without
 * image support" (K3_EINPUT), and k3_image_supported() is 0. */
#ifndef K3_VISION_IMAGE_H
#define K3_VISION_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

/* Caps on a decoded image: any side, and the pixel count (an RGBA image at
 * the cap is 400 MB). The processor shrinks everything to at most 7168 per
 * side (VISION.md §3.2), so these only bound what a decoder may allocate. */
#define K3_IMAGE_MAX_SIDE 32768
#define K3_IMAGE_MAX_PIXELS 100000000u
/* Image files larger than this are refused before they are read. */
#define K3_IMAGE_MAX_FILE (256u * 1024u * 1024u)

typedef struct k3_image {
    int width, height;   /* pixels, both >= 1 */
    int channels;        /* 3 = RGB, 4 = RGBA (straight, not premultiplied alpha) */
    uint8_t *px;         /* [height][width][channels], malloc'd */
} k3_image;

/* 1 when this build decodes PNG and JPEG, 0 otherwise. */
int k3_image_supported(void);

/* Decodes data[0..n) into *out (which owns px afterwards; zeroed on failure).
 * what names the input in messages. */
int k3_image_decode(const uint8_t *data, size_t n, const char *what, k3_image *out,
                    k3_err *e);

/* The size the header of data[0..n) declares, checked as k3_image_decode
 * checks it (format, caps, sample depth, colour space), without decoding a
 * pixel: what the vision plan needs (process.h) to refuse an image before
 * its cost is paid. A file that passes may still fail the decode (a
 * truncated stream). */
int k3_image_probe(const uint8_t *data, size_t n, const char *what, int *width, int *height,
                   k3_err *e);

/* Reads the file at path (a regular file of at most K3_IMAGE_MAX_FILE bytes)
 * and decodes it. */
int k3_image_load(const char *path, k3_image *out, k3_err *e);

void k3_image_free(k3_image *im);

#endif
