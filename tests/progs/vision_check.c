/* vision_check - the C vision path (src/vision) driven from the gate
 * tests/gates/17-vision-c.sh, which compares its outputs with
 * tools/k3vision_ref.py and Pillow.
 *
 *   vision_check decode FILE OUT        decodes; prints "W H C"; writes the
 *                                       pixels (uint8 [H][W][C]) to OUT
 *   vision_check preprocess FILE P OUT  decodes and runs the processor at
 *                                       patch side P; prints the plan
 *                                       "new_w new_h pad_w pad_h grid_h grid_w
 *                                       rows"; writes the patches (float32 LE)
 *   vision_check encode MODEL PIXELS OUT T,H,W [T,H,W ...]
 *                                       the encoder and projector of MODEL on the
 *                                       packed patches in PIXELS (float32 LE, as
 *                                       tools/k3vision_ref.py --pixels reads them);
 *                                       prints each item's row count; writes the
 *                                       projected rows (float32 LE) to OUT
 *
 * Exit: the k3 status of the first failure (2 bad input, 1 runtime), with
 * its message on stderr; 0 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k3/error.h"
#include "vision/image.h"
#include "vision/process.h"
#include "vision/vmodel.h"

static int write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "vision_check: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static int fail(const k3_err *e)
{
    fprintf(stderr, "vision_check: %s\n", e->msg);
    return e->code ? e->code : 1;
}

static int encode(const char *model, const char *pixels, const char *outp, char **grids,
                  size_t n)
{
    k3_err e = { 0, "" };
    k3_vitem *items = calloc(n, sizeof *items);
    if (!items)
        return 1;
    size_t patches = 0, rows = 0;
    for (size_t i = 0; i < n; i++) {
        if (sscanf(grids[i], "%d,%d,%d", &items[i].t, &items[i].h, &items[i].w) != 3) {
            fprintf(stderr, "vision_check: bad grid %s\n", grids[i]);
            return 2;
        }
        patches += (size_t)items[i].t * items[i].h * items[i].w;
        rows += (size_t)k3_vision_item_rows(&items[i]);
    }
    k3_vision *v;
    if (k3_vision_open(&v, model, &e))
        return fail(&e);
    size_t per = (size_t)3 * v->cfg.p * v->cfg.p, want = patches * per;
    float *px = malloc(sizeof *px * (want ? want : 1));
    float *out = malloc(sizeof *out * rows * (size_t)v->cfg.T);
    FILE *f = fopen(pixels, "rb");
    size_t got = f && px ? fread(px, sizeof *px, want, f) : 0;
    int extra = f ? fgetc(f) != EOF : 0;
    if (f)
        fclose(f);
    if (!out || got != want || extra) {
        fprintf(stderr, "vision_check: %s: needs exactly %zu floats\n", pixels, want);
        return 2;
    }
    int rc = k3_vision_encode(v, items, n, px, out, &e);
    if (rc)
        return fail(&e);
    for (size_t i = 0; i < n; i++)
        printf("%s%lld", i ? " " : "", (long long)k3_vision_item_rows(&items[i]));
    printf("\n");
    rc = write_file(outp, out, sizeof *out * rows * (size_t)v->cfg.T);
    free(px);
    free(out);
    free(items);
    k3_vision_close(v);
    return rc;
}

int main(int argc, char **argv)
{
    k3_err e = { 0, "" };
    if (argc == 4 && strcmp(argv[1], "decode") == 0) {
        k3_image im;
        if (k3_image_load(argv[2], &im, &e))
            return fail(&e);
        printf("%d %d %d\n", im.width, im.height, im.channels);
        int rc = write_file(argv[3], im.px, (size_t)im.width * im.height * im.channels);
        k3_image_free(&im);
        return rc;
    }
    if (argc == 5 && strcmp(argv[1], "preprocess") == 0) {
        k3_image im;
        if (k3_image_load(argv[2], &im, &e))
            return fail(&e);
        int p = atoi(argv[3]);
        float *patches;
        k3_vplan pl;
        int rc = k3_vision_preprocess(&im, p, &patches, &pl, &e);
        k3_image_free(&im);
        if (rc)
            return fail(&e);
        printf("%d %d %d %d %d %d %lld\n", pl.new_w, pl.new_h, pl.pad_w, pl.pad_h, pl.grid_h,
               pl.grid_w, (long long)pl.rows);
        rc = write_file(argv[4], patches,
                        sizeof *patches * (size_t)pl.grid_h * pl.grid_w * 3 * p * p);
        free(patches);
        return rc;
    }
    if (argc >= 6 && strcmp(argv[1], "encode") == 0)
        return encode(argv[2], argv[3], argv[4], argv + 5, (size_t)(argc - 5));
    fprintf(stderr, "usage: vision_check decode FILE OUT | preprocess FILE P OUT | "
            "encode MODEL PIXELS OUT T,H,W...\n");
    return 2;
}
