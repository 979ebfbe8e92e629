/* image_png.c - PNG through libpng (image.h's rules): 8-bit samples only,
 * palettes and gray expanded to RGB, any tRNS turned into alpha, interlacing
 * undone; 16-bit samples and animated PNG refused. libpng reports errors by
 * longjmp to the setjmp below; everything that must survive the jump lives
 * in struct png_ctx (never in a local modified after setjmp). */
#ifdef K3_HAVE_IMAGE
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "vision/image_dec.h"

struct png_ctx {
    const uint8_t *data;
    size_t n, off;
    char msg[256];
    uint8_t *px;
    png_bytep *rows;
};

static void png_error_cb(png_structp png, png_const_charp msg)
{
    struct png_ctx *c = png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}

/* Warnings are about ancillary chunks (bad CRC, odd values) that the decode
 * skips; they change no pixel. */
static void png_warn_cb(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void png_read_cb(png_structp png, png_bytep dst, size_t len)
{
    struct png_ctx *c = png_get_io_ptr(png);
    if (len > c->n - c->off)
        png_error(png, "truncated data");
    memcpy(dst, c->data + c->off, len);
    c->off += len;
}

/* 1 when a chunk acTL (animation control) comes before the first IDAT. The
 * walk stops at anything that does not parse; libpng then reports it. */
static int png_is_animated(const uint8_t *d, size_t n)
{
    size_t off = 8;
    while (n - off >= 12) {
        uint32_t len = (uint32_t)d[off] << 24 | (uint32_t)d[off + 1] << 16 |
                       (uint32_t)d[off + 2] << 8 | d[off + 3];
        const uint8_t *type = d + off + 4;
        if (memcmp(type, "acTL", 4) == 0)
            return 1;
        if (memcmp(type, "IDAT", 4) == 0 || len > 0x7fffffffu || len > n - off - 12)
            return 0;
        off += 12 + (size_t)len;
    }
    return 0;
}

int k3_png_decode(const uint8_t *data, size_t n, const char *what, int header_only,
                  k3_image *out, k3_err *e)
{
    if (png_is_animated(data, n))
        return k3_fail(e, K3_EINPUT, "%s: animated PNG (APNG) is not supported; give one frame "
                       "as a still image", what);
    struct png_ctx c;
    memset(&c, 0, sizeof c);
    c.data = data;
    c.n = n;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &c, png_error_cb,
                                             png_warn_cb);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return k3_fail(e, K3_ERUNTIME, "%s: out of memory starting the PNG decoder", what);
    }
    volatile int rc = K3_EINPUT;
    if (setjmp(png_jmpbuf(png))) {
        k3_fail(e, K3_EINPUT, "%s: PNG: %s", what, c.msg[0] ? c.msg : "decode failed");
        goto done;
    }
    png_set_read_fn(png, &c, png_read_cb);
    /* Our own caps (image.h) decide, with our message: libpng's are wider. */
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
    if (k3_image_check_size(w, h, what, e))
        goto done;
    if (depth == 16) {
        k3_fail(e, K3_EINPUT, "%s: 16-bit PNG samples are not supported (k3 reads 8-bit "
                "images; docs/VISION.md §3.1)", what);
        goto done;
    }
    if (header_only) {
        out->width = (int)w;
        out->height = (int)h;
        rc = K3_OK;
        goto done;
    }
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    int alpha = (type & PNG_COLOR_MASK_ALPHA) != 0;
    if (png_get_valid(png, info, PNG_INFO_tRNS)) {
        png_set_tRNS_to_alpha(png);
        alpha = 1;
    }
    if (!(type & PNG_COLOR_MASK_COLOR))
        png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int ch = alpha ? 4 : 3;
    if (png_get_channels(png, info) != ch || png_get_bit_depth(png, info) != 8 ||
        png_get_rowbytes(png, info) != (size_t)w * (size_t)ch) {
        k3_fail(e, K3_EINPUT, "%s: PNG: unexpected sample layout after expansion", what);
        goto done;
    }
    c.px = malloc((size_t)w * h * (size_t)ch);
    c.rows = malloc(sizeof *c.rows * h);
    if (!c.px || !c.rows) {
        k3_fail(e, K3_ERUNTIME, "%s: out of memory for a %ux%u image", what, (unsigned)w,
                (unsigned)h);
        goto done;
    }
    for (png_uint_32 y = 0; y < h; y++)
        c.rows[y] = c.px + (size_t)y * w * (size_t)ch;
    png_read_image(png, c.rows);
    /* The chunks after the image up to IEND: a file cut after its last IDAT
     * is refused as truncated, as one cut inside it is (docs/SECURITY.md). */
    png_read_end(png, NULL);
    out->width = (int)w;
    out->height = (int)h;
    out->channels = ch;
    out->px = c.px;
    c.px = NULL;
    rc = K3_OK;
done:
    png_destroy_read_struct(&png, &info, NULL);
    free(c.px);
    free(c.rows);
    return rc == K3_OK ? K3_OK : e->code;
}
#else
typedef int k3_png_unused; /* ISO C forbids an empty translation unit */
#endif
