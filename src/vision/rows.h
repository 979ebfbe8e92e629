/* rows.h - images to prompt rows (docs/VISION.md §3-§5, §10): every image
 * decoded (image.h), processed (process.h) and all of them encoded in one
 * call of the checkpoint's vision tower (vmodel.h), opened for that call
 * and closed again (the text model never needs it). The front ends differ
 * only in where the images come from (files or bytes) and in how they judge
 * the cost: the CLI prints a vision plan and refuses it over the budget
 * (exit 3), the server refuses the request (server/images.h). */
#ifndef K3_VISION_ROWS_H
#define K3_VISION_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"
#include "vision/process.h"
#include "vision/vmodel.h"

/* Most images one call encodes (a run's --image, a conversation). */
#define K3_VISION_MAX_IMAGES 16

/* What encoding a set of images holds at its peak, in bytes. */
typedef struct k3_vcost {
    size_t images, patches, rows;  /* counts */
    uint64_t tower;                /* the vision tensors, resident while encoding */
    uint64_t work;                 /* the encoder's working memory + the patches */
    uint64_t row_bytes;            /* the rows kept for the prompt */
    uint64_t total;
} k3_vcost;

/* The cost of encoding n images whose plans (k3_vision_plan) are given,
 * by a tower of config c. */
void k3_vision_cost(const k3_vcfg *c, const k3_vplan *plans, size_t n, k3_vcost *out);

/* Where the images come from: files, or bytes in memory (named what[i]). */
typedef struct k3_vsrc {
    const char *const *path;          /* [n], or NULL for data */
    const unsigned char *const *data; /* [n] with len[n] */
    const size_t *len;
    const char *const *what;
    size_t n;
} k3_vsrc;

/* Judges a cost before anything large is allocated; non-zero (an error in
 * e) refuses it. */
typedef int (*k3_vcost_check)(void *ctx, const k3_vcost *c, k3_err *e);

/* Encodes src's images with model_dir's tower (config c): plans[i] each
 * image's plan, *rows (malloc'd) their rows in order, [sum plans[i].rows][c->T].
 * check (may be NULL) sees the cost first. K3_EINPUT for a bad image, naming
 * it; the tower's and check's errors as they come. */
int k3_vision_rows(const char *model_dir, const k3_vcfg *c, const k3_vsrc *src,
                   k3_vcost_check check, void *ctx, k3_vplan *plans, float **rows, k3_err *e);

#endif
