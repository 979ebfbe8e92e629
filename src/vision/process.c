/* process.c - docs/VISION.md §3 (see process.h): plan, Pillow BICUBIC,
 * transparency, padding, normalisation, patches. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "vision/process.h"

#define PIL_PRECISION_BITS 22 /* Pillow's 32 - 8 - 2 (§3.3 step 5) */

int k3_vision_plan(int width, int height, int p, k3_vplan *pl, k3_err *e)
{
    memset(pl, 0, sizeof *pl);
    if (width < 1 || height < 1)
        return k3_fail(e, K3_EINPUT, "image size %dx%d: both sides must be at least 1", width,
                       height);
    if (p < 1 || p > 64)
        return k3_fail(e, K3_EINPUT, "patch size %d outside 1..64", p);
    /* §3.2 steps 1-4, in double as the processor computes them. */
    double pw = width / p > 1 ? (double)(width / p) : 1.0;
    double ph = height / p > 1 ? (double)(height / p) : 1.0;
    double s1 = sqrt((double)K3_VISION_IN_PATCH_LIMIT / (pw * ph));
    double s2 = (double)(K3_VISION_SIDE_LIMIT * p) / width;
    double s3 = (double)(K3_VISION_SIDE_LIMIT * p) / height;
    double scale = 1.0;
    scale = s1 < scale ? s1 : scale;
    scale = s2 < scale ? s2 : scale;
    scale = s3 < scale ? s3 : scale;
    int side = K3_VISION_SIDE_LIMIT * p;
    int nw = (int)(width * scale), nh = (int)(height * scale);
    nw = nw < 1 ? 1 : nw > side ? side : nw;
    nh = nh < 1 ? 1 : nh > side ? side : nh;
    int f = 2 * p; /* §3.2 step 5: the merge factor */
    pl->width = width;
    pl->height = height;
    pl->new_w = nw;
    pl->new_h = nh;
    pl->pad_w = (f - nw % f) % f;
    pl->pad_h = (f - nh % f) % f;
    pl->grid_w = (nw + pl->pad_w) / p;
    pl->grid_h = (nh + pl->pad_h) / p;
    pl->rows = (int64_t)(pl->grid_h / 2) * (pl->grid_w / 2);
    return K3_OK;
}

/* §3.3 step 3: Keys' cubic, a = -0.5, in Pillow's evaluation order. */
static double bicubic(double x)
{
    const double a = -0.5;
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* §3.3 steps 1-5 for one axis: first[o], count[o] and the fixed-point taps
 * k[o * ksize + j]. */
typedef struct axis_coeffs {
    int ksize;
    int *first, *count;
    int32_t *k;
} axis_coeffs;

static void coeffs_free(axis_coeffs *c)
{
    free(c->first);
    free(c->count);
    free(c->k);
}

static int coeffs_make(axis_coeffs *c, int n_in, int n_out, k3_err *e)
{
    double scale = (double)n_in / n_out;
    double filterscale = scale > 1.0 ? scale : 1.0;
    double support = 2.0 * filterscale;
    double ss = 1.0 / filterscale;
    c->ksize = (int)ceil(support) * 2 + 1;
    c->first = malloc(sizeof *c->first * (size_t)n_out);
    c->count = malloc(sizeof *c->count * (size_t)n_out);
    c->k = malloc(sizeof *c->k * (size_t)n_out * (size_t)c->ksize);
    double *pre = malloc(sizeof *pre * (size_t)c->ksize);
    if (!c->first || !c->count || !c->k || !pre) {
        free(pre);
        coeffs_free(c);
        return k3_fail(e, K3_ERUNTIME, "out of memory for the resize coefficients");
    }
    for (int o = 0; o < n_out; o++) {
        double center = (o + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > n_in)
            xmax = n_in;
        xmax -= xmin;
        double ww = 0.0;
        for (int j = 0; j < xmax; j++) {
            pre[j] = bicubic((j + xmin - center + 0.5) * ss);
            ww += pre[j];
        }
        int32_t *k = c->k + (size_t)o * c->ksize;
        for (int j = 0; j < xmax; j++) {
            double v = ww != 0.0 ? pre[j] / ww : pre[j];
            k[j] = v < 0 ? (int32_t)(-0.5 + v * (1 << PIL_PRECISION_BITS))
                         : (int32_t)(0.5 + v * (1 << PIL_PRECISION_BITS));
        }
        c->first[o] = xmin;
        c->count[o] = xmax;
    }
    free(pre);
    return K3_OK;
}

/* §3.3 step 6: the rounding offset, the shift and the clamp to uint8. */
static uint8_t clip8(int64_t acc)
{
    if (acc <= 0)
        return 0;
    acc >>= PIL_PRECISION_BITS;
    return acc > 255 ? 255 : (uint8_t)acc;
}

/* One pass: along x (horizontal) when stride_in == ch, along y when it is a
 * row. Generic form: out sample o of a line reads in[first + j] at the axis
 * stride. */
static void resample_h(const uint8_t *in, int w, int h, int ch, uint8_t *out, int nw,
                       const axis_coeffs *c)
{
    for (int y = 0; y < h; y++) {
        const uint8_t *row = in + (size_t)y * w * ch;
        uint8_t *orow = out + (size_t)y * nw * ch;
        for (int o = 0; o < nw; o++) {
            const int32_t *k = c->k + (size_t)o * c->ksize;
            for (int q = 0; q < ch; q++) {
                int64_t acc = 1 << (PIL_PRECISION_BITS - 1);
                for (int j = 0; j < c->count[o]; j++)
                    acc += (int64_t)row[(size_t)(c->first[o] + j) * ch + q] * k[j];
                orow[(size_t)o * ch + q] = clip8(acc);
            }
        }
    }
}

static void resample_v(const uint8_t *in, int w, int ch, uint8_t *out, int nh,
                       const axis_coeffs *c)
{
    size_t line = (size_t)w * ch;
    for (int o = 0; o < nh; o++) {
        const int32_t *k = c->k + (size_t)o * c->ksize;
        uint8_t *orow = out + (size_t)o * line;
        for (size_t i = 0; i < line; i++) {
            int64_t acc = 1 << (PIL_PRECISION_BITS - 1);
            for (int j = 0; j < c->count[o]; j++)
                acc += (int64_t)in[(size_t)(c->first[o] + j) * line + i] * k[j];
            orow[i] = clip8(acc);
        }
    }
}

int k3_bicubic_resize(const uint8_t *in, int w, int h, int ch, uint8_t *out, int nw, int nh,
                      k3_err *e)
{
    if (w == nw && h == nh) {
        memcpy(out, in, (size_t)w * h * ch);
        return K3_OK;
    }
    axis_coeffs c;
    uint8_t *mid = NULL;
    const uint8_t *src = in;
    if (w != nw) {
        if (coeffs_make(&c, w, nw, e))
            return e->code;
        mid = h != nh ? malloc((size_t)nw * h * ch) : out;
        if (!mid) {
            coeffs_free(&c);
            return k3_fail(e, K3_ERUNTIME, "out of memory resizing an image");
        }
        resample_h(in, w, h, ch, mid, nw, &c);
        coeffs_free(&c);
        src = mid;
    }
    if (h != nh) {
        if (coeffs_make(&c, h, nh, e)) {
            if (mid != out)
                free(mid);
            return e->code;
        }
        resample_v(src, nw, ch, out, nh, &c);
        coeffs_free(&c);
    }
    if (mid != out)
        free(mid);
    return K3_OK;
}

/* §3.1 step 2a, Pillow's RGBA -> RGBa. */
static void premultiply(uint8_t *px, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t *q = px + 4 * i;
        for (int c = 0; c < 3; c++) {
            unsigned t = (unsigned)q[c] * q[3] + 128;
            q[c] = (uint8_t)(((t >> 8) + t) >> 8);
        }
    }
}

/* §3.1 step 2c, Pillow's RGBa -> RGBA. */
static void unpremultiply(uint8_t *px, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t *q = px + 4 * i;
        unsigned a = q[3];
        if (a == 0 || a == 255)
            continue;
        for (int c = 0; c < 3; c++) {
            unsigned v = 255u * q[c] / a;
            q[c] = (uint8_t)(v > 255 ? 255 : v);
        }
    }
}

/* §3.1 step 2d: RGBA [h][w][4] onto the chessboard, into RGB [h][w][3]
 * (float32, truncated). */
static void composite(const uint8_t *in, int w, int h, uint8_t *out)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *q = in + ((size_t)y * w + x) * 4;
            uint8_t *o = out + ((size_t)y * w + x) * 3;
            float bg = ((y / 8 + x / 8) % 2) ? 180.0f : 255.0f;
            float alpha = (float)q[3] / 255.0f;
            float inv = 1.0f - alpha;
            for (int c = 0; c < 3; c++) {
                float a = alpha * (float)q[c];
                float b = inv * bg;
                float v = a + b;
                o[c] = (uint8_t)v;
            }
        }
}

int k3_vision_preprocess(const k3_image *im, int p, float **patches, k3_vplan *pl, k3_err *e)
{
    *patches = NULL;
    if (im->channels != 3 && im->channels != 4)
        return k3_fail(e, K3_EINPUT, "image with %d channels (3 or 4 expected)", im->channels);
    if (k3_vision_plan(im->width, im->height, p, pl, e))
        return e->code;
    int ch = im->channels, nw = pl->new_w, nh = pl->new_h;
    size_t n_in = (size_t)im->width * im->height, n_out = (size_t)nw * nh;
    uint8_t *small = malloc(n_out * ch), *rgb = ch == 4 ? malloc(n_out * 3) : NULL;
    uint8_t *work = NULL;
    /* grid sides <= 512 + 1 and p <= 64: the products fit a size_t easily. */
    size_t npatch = (size_t)pl->grid_h * pl->grid_w, vec = (size_t)3 * p * p;
    size_t total = npatch * vec;
    float *out = NULL;
    int rc = K3_OK;
    if (!small || (ch == 4 && !rgb)) {
        rc = k3_fail(e, K3_ERUNTIME, "out of memory preprocessing a %dx%d image", im->width,
                     im->height);
        goto done;
    }
    if (ch == 4 && (nw != im->width || nh != im->height)) {
        work = malloc(n_in * 4);
        if (!work) {
            rc = k3_fail(e, K3_ERUNTIME, "out of memory preprocessing an image");
            goto done;
        }
        memcpy(work, im->px, n_in * 4);
        premultiply(work, n_in);
        if ((rc = k3_bicubic_resize(work, im->width, im->height, 4, small, nw, nh, e)))
            goto done;
        unpremultiply(small, n_out);
    } else if ((rc = k3_bicubic_resize(im->px, im->width, im->height, ch, small, nw, nh, e))) {
        goto done;
    }
    if (ch == 4)
        composite(small, nw, nh, rgb);
    const uint8_t *img = ch == 4 ? rgb : small;
    out = malloc(sizeof *out * total);
    if (!out) {
        rc = k3_fail(e, K3_ERUNTIME, "out of memory for %zu image patches", npatch);
        goto done;
    }
    /* §3.4-§3.6: padding is u = 0 (-1 after §3.5); patch (gy, gx) is row
     * gy·grid_w + gx, laid out [c][py][px]. */
    for (int gy = 0; gy < pl->grid_h; gy++)
        for (int gx = 0; gx < pl->grid_w; gx++) {
            float *v = out + ((size_t)gy * pl->grid_w + gx) * vec;
            for (int c = 0; c < 3; c++)
                for (int py = 0; py < p; py++)
                    for (int px = 0; px < p; px++) {
                        int y = gy * p + py, x = gx * p + px;
                        unsigned u = (y < nh && x < nw) ? img[((size_t)y * nw + x) * 3 + c] : 0;
                        float f = (float)u / 255.0f;
                        f = f - 0.5f;
                        *v++ = f * 2.0f;
                    }
        }
    *patches = out;
    out = NULL;
done:
    free(small);
    free(rgb);
    free(work);
    free(out);
    return rc;
}
