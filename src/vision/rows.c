/* rows.c - see rows.h. */
#include "vision/rows.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "vision/image.h"

/* The items of plans: one frame of each image's patch grid. */
static void items_of(const k3_vplan *plans, size_t n, k3_vitem *items)
{
    for (size_t i = 0; i < n; i++) {
        items[i].t = 1;
        items[i].h = plans[i].grid_h;
        items[i].w = plans[i].grid_w;
    }
}

void k3_vision_cost(const k3_vcfg *c, const k3_vplan *plans, size_t n, k3_vcost *out)
{
    k3_vitem items[K3_VISION_MAX_IMAGES];
    size_t P3 = (size_t)3 * c->p * c->p;
    memset(out, 0, sizeof *out);
    if (n > K3_VISION_MAX_IMAGES)
        n = K3_VISION_MAX_IMAGES; /* callers refuse more first */
    items_of(plans, n, items);
    out->images = n;
    for (size_t i = 0; i < n; i++) { /* bounded: grids are at most 512 x 512 (§1.2) */
        out->patches += (size_t)plans[i].grid_h * (size_t)plans[i].grid_w;
        out->rows += (size_t)plans[i].rows;
    }
    out->tower = k3_vision_tensor_bytes(c);
    out->work = k3_vision_work_bytes(c, items, n) + (uint64_t)out->patches * P3 * sizeof(float);
    out->row_bytes = (uint64_t)out->rows * (uint64_t)c->T * sizeof(float);
    out->total = out->tower + out->work + out->row_bytes;
}

/* Image i of src decoded and processed: its patches (*pt, malloc'd) and plan. */
static int patches_of(const k3_vsrc *src, size_t i, int p, float **pt, k3_vplan *plan,
                      k3_err *e)
{
    k3_image img;
    const char *what = src->path ? src->path[i] : src->what[i];
    if (src->path ? k3_image_load(src->path[i], &img, e)
                  : k3_image_decode(src->data[i], src->len[i], what, &img, e))
        return e->code;
    int rc = k3_vision_preprocess(&img, p, pt, plan, e);
    k3_image_free(&img);
    if (rc)
        return k3_fail(e, rc, "%s: the image processor failed", what);
    return K3_OK;
}

int k3_vision_rows(const char *model_dir, const k3_vcfg *c, const k3_vsrc *src,
                   k3_vcost_check check, void *ctx, k3_vplan *plans, float **rows, k3_err *e)
{
    size_t ni = src->n, npatch = 0, P3 = (size_t)3 * c->p * c->p;
    k3_vitem items[K3_VISION_MAX_IMAGES];
    k3_vision *v = NULL;
    float *patches = NULL, *out = NULL;
    k3_vcost cost;
    *rows = NULL;
    if (ni > K3_VISION_MAX_IMAGES)
        return k3_fail(e, K3_EINPUT, "%zu images: at most %d", ni, K3_VISION_MAX_IMAGES);
    for (size_t i = 0; i < ni; i++) {
        float *pt = NULL;
        if (patches_of(src, i, c->p, &pt, &plans[i], e))
            goto done;
        size_t np = (size_t)plans[i].grid_h * (size_t)plans[i].grid_w;
        float *grown = realloc(patches, sizeof *grown * (npatch + np) * P3);
        if (!grown) {
            free(pt);
            k3_fail(e, K3_ERUNTIME, "out of memory for the images' patches");
            goto done;
        }
        patches = grown;
        memcpy(patches + npatch * P3, pt, sizeof *pt * np * P3);
        free(pt);
        npatch += np;
    }
    k3_vision_cost(c, plans, ni, &cost);
    if (check && check(ctx, &cost, e))
        goto done;
    if (!(out = malloc(cost.row_bytes ? cost.row_bytes : 1))) {
        k3_fail(e, K3_ERUNTIME, "out of memory for %zu image rows", cost.rows);
        goto done;
    }
    items_of(plans, ni, items);
    if (k3_vision_open(&v, model_dir, e) == K3_OK)
        k3_vision_encode(v, items, ni, patches, out, e);
done:
    k3_vision_close(v); /* the tower is not needed by the text model */
    free(patches);
    if (e->code) {
        free(out);
        return e->code;
    }
    *rows = out;
    return K3_OK;
}
