/* state_sync.c - k3_state_sync and k3_state_sync_embeds: prompt reuse (see
 * k3/k3.h).
 *
 * The KDA recurrent state cannot be rolled back, so the only ways back to
 * an earlier position are a mark taken there or a reset; the MLA cache
 * could be truncated, but it is useless without the matching KDA state.
 *
 * Images (docs/VISION.md §10.5): equal ids do not mean equal inputs where
 * rows replaced the embedding lookups, so the common prefix also ends at
 * the first image span the state and the sequence do not share. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/error.h"

int k3_state_set_images(k3_state *s, const k3_image_span *img, size_t n, k3_err *e)
{
    if (n > s->img_cap) {
        k3_image_span *g = realloc(s->img, n * sizeof *g);
        if (!g)
            return k3_fail(e, K3_ERUNTIME, "out of memory for %zu image spans", n);
        s->img = g;
        s->img_cap = n;
    }
    if (n)
        memcpy(s->img, img, n * sizeof *img);
    s->nimg = n;
    return K3_OK;
}

size_t k3_state_images(const k3_state *s, const k3_image_span **img)
{
    size_t k = 0;
    while (k < s->nimg && s->img[k].start < s->pos)
        k++;
    *img = s->img;
    return k;
}

size_t k3_state_common(const k3_state *s, const uint32_t *ids, size_t n,
                       const k3_image_span *img, size_t nimg)
{
    size_t have = (size_t)s->pos, common = 0;
    while (common < have && common < n && s->ids[common] == ids[common])
        common++;
    /* Walk both span lists in ascending start below common: the first
     * start where they disagree (one lacks the span, or the hashes differ)
     * ends the prefix. A span the state holds only in part is the same
     * image when start and hash agree (the hash names all of its rows). */
    const k3_image_span *mine;
    size_t nm = k3_state_images(s, &mine), i = 0, j = 0;
    while ((i < nm && (size_t)mine[i].start < common) ||
           (j < nimg && (size_t)img[j].start < common)) {
        if (i < nm && j < nimg && mine[i].start == img[j].start &&
            mine[i].hash == img[j].hash) {
            i++, j++;
            continue;
        }
        int64_t a = i < nm ? mine[i].start : INT64_MAX, b = j < nimg ? img[j].start : INT64_MAX;
        common = (size_t)(a < b ? a : b);
        break;
    }
    return common;
}

int k3_state_sync_embeds(k3_model *m, k3_state *s, k3_state_mark *mark, const uint32_t *ids,
                         const float *const *embeds, size_t n, const k3_image_span *img,
                         size_t nimg, size_t *reused, k3_err *e)
{
    size_t have = (size_t)s->pos, common = k3_state_common(s, ids, n, img, nimg);
    *reused = 0;
    if (common < have) {
        k3_err stale = { 0, "" };
        if (!mark || k3_state_mark_pos(mark) > (int64_t)common ||
            k3_state_rewind(s, mark, &stale) != K3_OK)
            k3_state_reset(s);
    }
    /* From here the state's ids below pos are ids' and took img's rows. */
    if (k3_state_set_images(s, img, nimg, e))
        return e->code;
    size_t at = (size_t)s->pos;
    *reused = at;
    if (at == n)
        return K3_OK;
    /* No logits buffer: the state keeps the last row (k3_state_logits). */
    while (at < n && !e->code) {
        size_t T = n - at < K3_PREFILL_CHUNK ? n - at : K3_PREFILL_CHUNK;
        if (k3_forward_embeds(m, s, ids + at, embeds ? embeds + at : NULL, T, NULL, 0, e) ==
            K3_OK)
            at += T;
    }
    return e->code;
}

int k3_state_sync(k3_model *m, k3_state *s, k3_state_mark *mark, const uint32_t *ids, size_t n,
                  size_t *reused, k3_err *e)
{
    return k3_state_sync_embeds(m, s, mark, ids, NULL, n, NULL, 0, reused, e);
}
