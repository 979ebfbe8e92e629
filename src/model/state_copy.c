/* state_copy.c - k3_state_copy and k3_state_bytes (model.h): a state's
 * whole sequence duplicated into another state of the same model, the
 * prefix cache's snapshot and restore (server and chat, model/prefix_cache.h).
 *
 * A copy is exact: the destination holds the same ids, image spans, last
 * logits, KDA conv and recurrent states and MLA rows [0, pos) as the
 * source, so feeding both the same ids gives the same bits. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/error.h"

int k3_state_copy(k3_state *dst, const k3_state *src, k3_err *e)
{
    const k3_config *c = &src->m->cfg;
    if (dst->m != src->m)
        return k3_fail(e, K3_EINPUT, "state copy: the states are of different models");
    if (dst == src)
        return K3_OK;
    /* A drafter reads dst's taps: they must be src's, of the same layers. */
    if (dst->ntaps && (dst->ntaps != src->ntaps ||
                       memcmp(dst->tap_layer, src->tap_layer, (size_t)dst->ntaps * sizeof(int))))
        return k3_fail(e, K3_EINPUT, "state copy: the source keeps other taps than the "
                                     "destination's drafter needs");
    k3_state_reset(dst); /* ends a speculative step; older marks go stale */
    const k3_image_span *img;
    size_t nimg = k3_state_images(src, &img);
    /* exactly src's positions when dst has fewer: a snapshot holds no spare
     * rows (a slot's state grows by doubling from there) */
    if ((src->pos > dst->kv_cap && k3_state_resize(dst, src->pos, e)) ||
        k3_state_set_images(dst, img, nimg, e))
        return e->code;
    size_t w = k3_state_kv_width(c), nc = k3_state_conv_floats(c), ns = k3_state_s_floats(c);
    for (int i = 0; i < src->m->w.n_layers; i++) {
        if (src->conv[i]) {
            memcpy(dst->conv[i], src->conv[i], nc * sizeof(float));
            memcpy(dst->S[i], src->S[i], ns * sizeof(float));
        } else if (src->pos) {
            memcpy(dst->kv[i], src->kv[i], (size_t)src->pos * w * sizeof(float));
        }
    }
    if (src->pos)
        memcpy(dst->ids, src->ids, (size_t)src->pos * sizeof *dst->ids);
    if (src->pos && dst->ntaps)
        memcpy(dst->taps, src->taps,
               (size_t)src->pos * (size_t)dst->ntaps * (size_t)c->hidden_size * sizeof(float));
    memcpy(dst->last, src->last, (size_t)c->vocab_size * sizeof *dst->last);
    dst->pos = src->pos;
    return K3_OK;
}

uint64_t k3_state_bytes(const k3_state *s)
{
    const k3_config *c = &s->m->cfg;
    uint64_t per_pos = 4, fixed = (uint64_t)c->vocab_size * 4 + sizeof *s;
    for (int i = 0; i < s->m->w.n_layers; i++) {
        if (s->conv[i])
            fixed += (k3_state_conv_floats(c) + k3_state_s_floats(c)) * 4;
        else if (s->kv[i])
            per_pos += k3_state_kv_width(c) * 4;
    }
    per_pos += (uint64_t)s->ntaps * (uint64_t)c->hidden_size * 4;
    return fixed + per_pos * (uint64_t)s->kv_cap + s->img_cap * sizeof *s->img;
}
