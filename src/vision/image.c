/* image.c - the decode interface of image.h: format by signature, the size
 * caps, reading a file, and the "built without image support" refusal. */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/file.h"
#include "vision/image.h"
#include "vision/image_dec.h"

static const uint8_t png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

int k3_image_check_size(uint64_t width, uint64_t height, const char *what, k3_err *e)
{
    if (width == 0 || height == 0)
        return k3_fail(e, K3_EINPUT, "%s: image size %llux%llu: zero width or height", what,
                       (unsigned long long)width, (unsigned long long)height);
    if (width > K3_IMAGE_MAX_SIDE || height > K3_IMAGE_MAX_SIDE ||
        width * height > K3_IMAGE_MAX_PIXELS)
        return k3_fail(e, K3_EINPUT,
                       "%s: image size %llux%llu is above k3's limit (%d per side, %u pixels)",
                       what, (unsigned long long)width, (unsigned long long)height,
                       K3_IMAGE_MAX_SIDE, K3_IMAGE_MAX_PIXELS);
    return K3_OK;
}

#ifdef K3_HAVE_IMAGE
int k3_image_supported(void)
{
    return 1;
}

/* The format by its signature, decoded whole or its header only. */
static int decode(const uint8_t *data, size_t n, const char *what, int header_only,
                  k3_image *out, k3_err *e)
{
    memset(out, 0, sizeof *out);
    if (n == 0)
        return k3_fail(e, K3_EINPUT, "%s: empty image file", what);
    if (n >= 8 && memcmp(data, png_sig, 8) == 0)
        return k3_png_decode(data, n, what, header_only, out, e);
    if (n >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
        return k3_jpeg_decode(data, n, what, header_only, out, e);
    return k3_fail(e, K3_EINPUT, "%s: not a PNG or JPEG image (k3 reads those two formats)",
                   what);
}

int k3_image_decode(const uint8_t *data, size_t n, const char *what, k3_image *out, k3_err *e)
{
    return decode(data, n, what, 0, out, e);
}

int k3_image_probe(const uint8_t *data, size_t n, const char *what, int *width, int *height,
                   k3_err *e)
{
    k3_image im;
    int rc = decode(data, n, what, 1, &im, e);
    *width = rc ? 0 : im.width;
    *height = rc ? 0 : im.height;
    return rc;
}
#else
int k3_image_supported(void)
{
    return 0;
}

int k3_image_decode(const uint8_t *data, size_t n, const char *what, k3_image *out, k3_err *e)
{
    (void)data;
    (void)n;
    (void)png_sig;
    memset(out, 0, sizeof *out);
    return k3_fail(e, K3_EINPUT, "%s: this k3 was built without image support (PNG and JPEG "
                   "need libpng and libjpeg at build time)", what);
}

int k3_image_probe(const uint8_t *data, size_t n, const char *what, int *width, int *height,
                   k3_err *e)
{
    k3_image im;
    *width = *height = 0;
    return k3_image_decode(data, n, what, &im, e);
}
#endif

int k3_image_load(const char *path, k3_image *out, k3_err *e)
{
    memset(out, 0, sizeof *out);
    size_t n = 0;
    char *buf = k3_read_small_file(e, path, K3_IMAGE_MAX_FILE, &n);
    if (!buf)
        return e->code ? e->code : K3_EINPUT;
    int rc = k3_image_decode((const uint8_t *)buf, n, path, out, e);
    free(buf);
    return rc;
}

void k3_image_free(k3_image *im)
{
    if (!im)
        return;
    free(im->px);
    memset(im, 0, sizeof *im);
}
