/* image_jpeg.c - JPEG through libjpeg(-turbo) (image.h's rules): gray, YCbCr
 * and RGB JPEGs decoded to RGB with the library's defaults (islow DCT, fancy
 * upsampling: what Pillow's decoder uses), CMYK and YCCK refused. Every
 * warning of the library is an error here: libjpeg "recovers" from a
 * truncated or corrupt stream by inventing grey pixels, which would be a
 * silent wrong answer. Errors arrive by longjmp; what must survive the jump
 * lives in struct jpeg_ctx. */
#ifdef K3_HAVE_IMAGE
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "util/error.h"
#include "vision/image_dec.h"

struct jpeg_ctx {
    struct jpeg_error_mgr pub; /* first: libjpeg's err pointer is cast back to this */
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
    uint8_t *px;
};

static void jpeg_error_cb(j_common_ptr cinfo)
{
    struct jpeg_ctx *c = (struct jpeg_ctx *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, c->msg);
    longjmp(c->jump, 1);
}

/* level < 0 is a warning (corrupt or truncated data): an error for k3.
 * Levels >= 0 are trace messages, ignored. */
static void jpeg_emit_cb(j_common_ptr cinfo, int level)
{
    if (level < 0)
        jpeg_error_cb(cinfo);
}

/* A progressive JPEG may hold any number of scans, each a pass over the
 * whole frame: thousands of tiny scans over a large frame cost minutes of
 * CPU for a file of kilobytes. libjpeg-turbo's own tools stop at 500
 * (TJFLAG_LIMITSCANS, djpeg -maxscans); so does k3 (docs/SECURITY.md). */
#define K3_JPEG_MAX_SCANS 500

static void jpeg_progress_cb(j_common_ptr cinfo)
{
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (d->is_decompressor && d->input_scan_number > K3_JPEG_MAX_SCANS) {
        struct jpeg_ctx *c = (struct jpeg_ctx *)cinfo->err;
        snprintf(c->msg, sizeof c->msg, "more than %d scans (a progressive JPEG that costs "
                 "a pass over the frame per scan)", K3_JPEG_MAX_SCANS);
        longjmp(c->jump, 1);
    }
}

int k3_jpeg_decode(const uint8_t *data, size_t n, const char *what, int header_only,
                   k3_image *out, k3_err *e)
{
    struct jpeg_decompress_struct cinfo;
    struct jpeg_ctx c;
    memset(&c, 0, sizeof c);
    memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = jpeg_std_error(&c.pub);
    c.pub.error_exit = jpeg_error_cb;
    c.pub.emit_message = jpeg_emit_cb;
    struct jpeg_progress_mgr progress;
    memset(&progress, 0, sizeof progress);
    progress.progress_monitor = jpeg_progress_cb;
    volatile int rc = K3_EINPUT;
    if (setjmp(c.jump)) {
        k3_fail(e, K3_EINPUT, "%s: JPEG: %s", what, c.msg[0] ? c.msg : "decode failed");
        goto done;
    }
    jpeg_create_decompress(&cinfo);
    cinfo.progress = &progress;
    jpeg_mem_src(&cinfo, (const unsigned char *)data, (unsigned long)n);
    jpeg_read_header(&cinfo, TRUE);
    if (k3_image_check_size(cinfo.image_width, cinfo.image_height, what, e))
        goto done;
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        k3_fail(e, K3_EINPUT, "%s: CMYK JPEG is not supported (k3 reads gray, YCbCr and RGB "
                "JPEGs; docs/VISION.md §3.1)", what);
        goto done;
    }
    if (cinfo.jpeg_color_space != JCS_GRAYSCALE && cinfo.jpeg_color_space != JCS_YCbCr &&
        cinfo.jpeg_color_space != JCS_RGB) {
        k3_fail(e, K3_EINPUT, "%s: JPEG colour space %d is not supported", what,
                (int)cinfo.jpeg_color_space);
        goto done;
    }
    if (header_only) {
        out->width = (int)cinfo.image_width;
        out->height = (int)cinfo.image_height;
        rc = K3_OK;
        goto done;
    }
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    size_t w = cinfo.output_width, h = cinfo.output_height;
    if (cinfo.output_components != 3 || w != cinfo.image_width || h != cinfo.image_height) {
        k3_fail(e, K3_EINPUT, "%s: JPEG: unexpected output layout", what);
        goto done;
    }
    c.px = malloc(w * h * 3);
    if (!c.px) {
        k3_fail(e, K3_ERUNTIME, "%s: out of memory for a %zux%zu image", what, w, h);
        goto done;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = c.px + (size_t)cinfo.output_scanline * w * 3;
        if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
            k3_fail(e, K3_EINPUT, "%s: JPEG: truncated data", what);
            goto done;
        }
    }
    jpeg_finish_decompress(&cinfo);
    out->width = (int)w;
    out->height = (int)h;
    out->channels = 3;
    out->px = c.px;
    c.px = NULL;
    rc = K3_OK;
done:
    jpeg_destroy_decompress(&cinfo);
    free(c.px);
    return rc == K3_OK ? K3_OK : e->code;
}
#else
typedef int k3_jpeg_unused; /* ISO C forbids an empty translation unit */
#endif
