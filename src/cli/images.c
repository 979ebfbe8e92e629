/* images.c - see images.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/images.h"
#include "cli/generate.h"
#include "model/plan.h"
#include "util/error.h"
#include "util/file.h"
#include "vision/image.h"
#include "vision/rows.h"

void k3_cli_images_free(k3_cli_images *im)
{
    free(im->rows);
    free((void *)im->embeds);
    memset(im, 0, sizeof *im);
}

/* Appends src[0..n) to the growing array *dst of *len ids. */
static int put_ids(uint32_t **dst, size_t *len, size_t *cap, const uint32_t *src, size_t n,
                   k3_err *e)
{
    if (*len + n > *cap) {
        size_t c = (*len + n) * 2;
        uint32_t *g = realloc(*dst, sizeof *g * c);
        if (!g)
            return k3_fail(e, K3_ERUNTIME, "out of memory building the prompt");
        *dst = g;
        *cap = c;
    }
    memcpy(*dst + *len, src, sizeof *src * n);
    *len += n;
    return K3_OK;
}

/* The ids of §4 steps 1-2 for one image, its pad at *pad_at. */
static int markup_ids(const k3_tokenizer *tok, const k3_vplan *pl, int64_t media_id,
                      uint32_t **ids, size_t *n, size_t *pad_at, k3_err *e)
{
    static const char *const names[4] = { "<|media_begin|>", "<|media_content|>",
                                          "<|media_pad|>", "<|media_end|>" };
    int64_t sp[4];
    for (int i = 0; i < 4; i++)
        if ((sp[i] = k3_tok_special_id(tok, names[i])) < 0)
            return k3_fail(e, K3_EINPUT, "the tokenizer has no %s: it cannot place an image",
                           names[i]);
    if (media_id >= 0 && sp[2] != media_id)
        return k3_fail(e, K3_EINPUT, "the tokenizer's <|media_pad|> is %lld, the config's "
                       "media_placeholder_token_id %lld", (long long)sp[2], (long long)media_id);
    char text[64];
    snprintf(text, sizeof text, "image %dx%d", pl->width, pl->height);
    uint32_t *mid = NULL;
    size_t nm = 0, cap = 0;
    *pad_at = 0;
    *ids = NULL;
    *n = 0;
    if (k3_tok_encode(tok, text, strlen(text), 0, &mid, &nm, e))
        return e->code;
    uint32_t a = (uint32_t)sp[0], b[3] = { (uint32_t)sp[1], (uint32_t)sp[2], (uint32_t)sp[3] };
    int rc = put_ids(ids, n, &cap, &a, 1, e) || put_ids(ids, n, &cap, mid, nm, e) ||
             put_ids(ids, n, &cap, b, 3, e);
    free(mid);
    *pad_at = *n - 2;
    return rc ? e->code : K3_OK;
}

/* The vision plan: what encoding the images holds (the tower, its work,
 * the patches and the rows), printed unless --quiet and refused (K3_EBUDGET)
 * when it exceeds what the machine allows, as the text plan is, or the
 * total budget the run was given (--budget-gb or --preset): the encoding
 * must fit in the run's budget too. A k3_vcost_check (ctx: the options). */
static int vision_plan(void *ctx, const k3_vcost *c, k3_err *e)
{
    const k3_options *o = ctx;
    const double gib = 1073741824.0;
    uint64_t avail = 0, cg = 0, room = k3_mem_available(&avail, &cg);
    k3_model_opts mo;
    if (k3_options_model(&o->memory, &mo, e))
        return e->code;
    if (!o->quiet) {
        fprintf(stderr, "vision plan (GB = 2^30 bytes), while the images are encoded (the "
                "tower is freed after):\n");
        fprintf(stderr, "  vision tower     %9.3f GB  resident, BF16 as stored\n",
                c->tower / gib);
        fprintf(stderr, "  encoder work     %9.3f GB  %zu images, %zu patches\n",
                c->work / gib, c->images, c->patches);
        fprintf(stderr, "  image rows       %9.3f GB  %zu rows, kept for the prompt\n",
                c->row_bytes / gib, c->rows);
        fprintf(stderr, "  total            %9.3f GB\n", c->total / gib);
    }
    if (o->memory.no_mem_check)
        return K3_OK;
    if (mo.budget_gb >= 0 && c->total > mo.budget_gb * gib)
        return k3_fail(e, K3_EBUDGET, "encoding the images needs %.3f GB, more than the run's "
                       "%.3f GB budget (--budget-gb or --preset); --no-mem-check tries anyway",
                       c->total / gib, mo.budget_gb);
    if (room && c->total > room)
        return k3_fail(e, K3_EBUDGET, "encoding the images needs %.3f GB, this machine allows "
                       "%.3f GB; --no-mem-check tries anyway", c->total / gib, room / gib);
    return K3_OK;
}

/* Decodes, processes and encodes every image of src in one call of the
 * tower (vision/rows.h): plans[i], im->rows, im->nrows, im->row_bytes; the
 * vision plan printed and checked first. */
static int encode(const k3_options *o, const k3_vsrc *src, const k3_vcfg *cfg, k3_vplan *plans,
                  k3_cli_images *im, k3_err *e)
{
    if (k3_vision_rows(o->model_dir, cfg, src, vision_plan, (void *)o, plans, &im->rows, e))
        return e->code;
    for (size_t i = 0; i < src->n; i++)
        im->nrows += (size_t)plans[i].rows;
    im->row_bytes = (size_t)cfg->T * sizeof(float);
    return K3_OK;
}

int k3_cli_images_encode(const k3_options *o, const unsigned char *const *data,
                         const size_t *len, const char *const *what, size_t ni, int64_t *nrows,
                         size_t *T, k3_cli_images *im, k3_err *e)
{
    memset(im, 0, sizeof *im);
    k3_vcfg cfg;
    k3_vplan plans[K3_MAX_IMAGES];
    k3_vsrc src = { NULL, data, len, what, ni };
    if (k3_vision_config(o->model_dir, &cfg, e) || encode(o, &src, &cfg, plans, im, e)) {
        k3_cli_images_free(im);
        return e->code;
    }
    for (size_t i = 0; i < ni; i++)
        nrows[i] = plans[i].rows;
    *T = (size_t)cfg.T;
    return K3_OK;
}

/* Reads --image's files (*bytes[i] malloc'd, len[i]) and plans each from
 * its header (vision/image.h k3_image_probe, vision/process.h): the rows
 * are known before any pixel is decoded. */
static int plan_files(const k3_options *o, const k3_vcfg *cfg, unsigned char **bytes,
                      size_t *len, k3_vplan *plans, k3_err *e)
{
    for (size_t i = 0; i < o->nimage; i++) {
        int w = 0, h = 0;
        k3_err pe = { 0, "" };
        bytes[i] = (unsigned char *)k3_read_small_file(e, o->image[i], K3_IMAGE_MAX_FILE,
                                                       &len[i]);
        if (!bytes[i])
            return e->code ? e->code : k3_fail(e, K3_EINPUT, "%s: cannot read", o->image[i]);
        if (k3_image_probe(bytes[i], len[i], o->image[i], &w, &h, e))
            return e->code;
        if (k3_vision_plan(w, h, cfg->p, &plans[i], &pe))
            return k3_fail(e, pe.code, "%s: %s", o->image[i], pe.msg);
    }
    return K3_OK;
}

int k3_cli_images_prompt(const k3_options *o, const k3_tokenizer *tok, const char *text,
                         size_t len, uint32_t **ids, size_t *n, k3_cli_images *im, k3_err *e)
{
    memset(im, 0, sizeof *im);
    *ids = NULL;
    *n = 0;
    size_t ni = o->nimage, cap = 0;
    k3_vplan plans[K3_MAX_IMAGES], got[K3_MAX_IMAGES];
    unsigned char *bytes[K3_MAX_IMAGES] = { 0 };
    size_t blen[K3_MAX_IMAGES] = { 0 };
    uint32_t *out = NULL;
    size_t *pad_pos = NULL;
    k3_vcfg cfg;
    /* The tower is checked (present, every tensor's shape) before the
     * markup is built: a checkpoint without one is named as such. */
    int rc = k3_vision_config(o->model_dir, &cfg, e);
    if (rc || (rc = k3_vision_probe(o->model_dir, e)) ||
        (rc = plan_files(o, &cfg, bytes, blen, plans, e)))
        goto done;
    size_t T = (size_t)cfg.T;
    /* The prompt: each image's markup with its pad expanded, then the text. */
    pad_pos = malloc(sizeof *pad_pos * (ni ? ni : 1));
    if (!pad_pos) {
        rc = k3_fail(e, K3_ERUNTIME, "out of memory building the prompt");
        goto done;
    }
    for (size_t i = 0; i < ni && !rc; i++) {
        uint32_t *mk = NULL;
        size_t nm = 0, at = 0;
        if ((rc = markup_ids(tok, &plans[i], cfg.media_id, &mk, &nm, &at, e)))
            break;
        rc = put_ids(&out, n, &cap, mk, at, e);
        pad_pos[i] = *n;
        for (int64_t r = 0; r < plans[i].rows && !rc; r++)
            rc = put_ids(&out, n, &cap, &mk[at], 1, e);
        if (!rc)
            rc = put_ids(&out, n, &cap, mk + at + 1, nm - at - 1, e);
        free(mk);
    }
    uint32_t *tid = NULL;
    size_t nt = 0;
    if (!rc && len && !(rc = k3_tok_encode(tok, text, len, o->prompt_special, &tid, &nt, e)))
        rc = put_ids(&out, n, &cap, tid, nt, e);
    free(tid);
    /* Over --max-context: refused now, from the headers' plans, before the
     * images are decoded and encoded (issue 35 F1: the encoding of one
     * large image is minutes of CPU). */
    if (rc || (rc = k3_cli_check_context(o, 0, *n, e)))
        goto done;
    const char *what[K3_MAX_IMAGES];
    for (size_t i = 0; i < ni; i++)
        what[i] = o->image[i];
    k3_vsrc src = { NULL, (const unsigned char *const *)bytes, blen, what, ni };
    if ((rc = encode(o, &src, &cfg, got, im, e)))
        goto done;
    for (size_t i = 0; i < ni; i++)
        if (got[i].rows != plans[i].rows) /* the header lied about the size */
            rc = k3_fail(e, K3_EINPUT, "%s: the image decodes to %dx%d, its header says %dx%d",
                         o->image[i], got[i].width, got[i].height, plans[i].width,
                         plans[i].height);
    if (!rc && !(im->embeds = calloc(*n ? *n : 1, sizeof *im->embeds)))
        rc = k3_fail(e, K3_ERUNTIME, "out of memory building the prompt");
    for (size_t i = 0, row = 0; i < ni && !rc; i++)
        for (int64_t r = 0; r < plans[i].rows; r++, row++)
            im->embeds[pad_pos[i] + (size_t)r] = im->rows + row * T;
done:
    free(pad_pos);
    for (size_t i = 0; i < ni; i++)
        free(bytes[i]);
    if (rc) {
        free(out);
        *n = 0;
        k3_cli_images_free(im);
        return e->code ? e->code : rc;
    }
    *ids = out;
    return K3_OK;
}
