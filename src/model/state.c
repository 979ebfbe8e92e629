/* state.c - per-sequence caches (see model.h for their layout), and marks. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/error.h"

size_t k3_state_conv_floats(const k3_config *c)
{
    return 3 * (size_t)(c->short_conv_kernel_size - 1) *
           (size_t)(c->kda_num_heads * c->kda_head_dim);
}

size_t k3_state_s_floats(const k3_config *c)
{
    return (size_t)c->kda_num_heads * (size_t)(c->kda_head_dim * c->kda_head_dim);
}

size_t k3_state_kv_width(const k3_config *c)
{
    return (size_t)(c->kv_lora_rank + c->qk_rope_head_dim);
}

int k3_state_new(k3_state **out, const k3_model *m, k3_err *e)
{
    *out = NULL;
    k3_state *s = k3_calloc(e, 1, sizeof *s, "state");
    if (!s)
        return e->code;
    int L = m->w.n_layers;
    s->m = m;
    s->conv = k3_calloc(e, (size_t)L, sizeof *s->conv, "state");
    s->S = k3_calloc(e, (size_t)L, sizeof *s->S, "state");
    s->kv = k3_calloc(e, (size_t)L, sizeof *s->kv, "state");
    for (int i = 0; i < L && !e->code; i++)
        if (m->w.layers[i].kind == K3_LAYER_KDA) {
            s->conv[i] =
                k3_calloc(e, k3_state_conv_floats(&m->cfg), sizeof(float), "KDA conv state");
            s->S[i] =
                k3_calloc(e, k3_state_s_floats(&m->cfg), sizeof(float), "KDA recurrent state");
        }
    s->last = k3_calloc(e, (size_t)m->cfg.vocab_size, sizeof *s->last, "state logits");
    if (!e->code)
        k3_state_reserve(s, 64, e);
    if (e->code) {
        k3_state_free(s);
        return e->code;
    }
    *out = s;
    return K3_OK;
}

int k3_state_reserve(k3_state *s, int64_t need, k3_err *e)
{
    if (need <= s->kv_cap)
        return K3_OK;
    int64_t cap = s->kv_cap ? s->kv_cap : 64;
    while (cap < need)
        cap *= 2;
    size_t w = k3_state_kv_width(&s->m->cfg);
    for (int i = 0; i < s->m->w.n_layers; i++) {
        if (s->m->w.layers[i].kind != K3_LAYER_MLA)
            continue;
        float *n = realloc(s->kv[i], (size_t)cap * w * sizeof *n);
        if (!n)
            return k3_fail(e, K3_ERUNTIME,
                           "out of memory growing the MLA KV cache to %lld positions",
                           (long long)cap);
        s->kv[i] = n;
    }
    uint32_t *ids = realloc(s->ids, (size_t)cap * sizeof *ids);
    if (!ids)
        return k3_fail(e, K3_ERUNTIME, "out of memory growing the token history to %lld ids",
                       (long long)cap);
    s->ids = ids;
    s->kv_cap = cap;
    return K3_OK;
}

void k3_state_reset(k3_state *s)
{
    const k3_config *c = &s->m->cfg;
    for (int i = 0; i < s->m->w.n_layers; i++)
        if (s->conv[i]) {
            memset(s->conv[i], 0, k3_state_conv_floats(c) * sizeof(float));
            memset(s->S[i], 0, k3_state_s_floats(c) * sizeof(float));
        }
    s->pos = 0;
    s->epoch++;
}

void k3_state_commit(k3_state *s, const uint32_t *ids, size_t T, const float *last_row)
{
    memcpy(s->ids + s->pos, ids, T * sizeof *ids);
    memcpy(s->last, last_row, (size_t)s->m->cfg.vocab_size * sizeof *s->last);
    s->pos += (int64_t)T;
}

int64_t k3_state_pos(const k3_state *s) { return s->pos; }

const uint32_t *k3_state_ids(const k3_state *s) { return s->ids; }

const float *k3_state_logits(const k3_state *s) { return s->pos ? s->last : NULL; }

struct k3_state_mark {
    const k3_state *s;
    int64_t pos;
    uint64_t epoch;
    float *kda;  /* every KDA layer's conv then recurrent state, in layer order */
    float *last; /* [vocab] */
};

/* Copies the KDA states into a mark's block (to_block) or back. */
static void copy_kda(const k3_state *s, float *block, int to_block)
{
    size_t nc = k3_state_conv_floats(&s->m->cfg), ns = k3_state_s_floats(&s->m->cfg);
    for (int i = 0; i < s->m->w.n_layers; i++) {
        if (!s->conv[i])
            continue;
        if (to_block) {
            memcpy(block, s->conv[i], nc * sizeof *block);
            memcpy(block + nc, s->S[i], ns * sizeof *block);
        } else {
            memcpy(s->conv[i], block, nc * sizeof *block);
            memcpy(s->S[i], block + nc, ns * sizeof *block);
        }
        block += nc + ns;
    }
}

int k3_state_mark_take(const k3_state *s, k3_state_mark **mark, k3_err *e)
{
    k3_state_mark *mk = *mark;
    if (!mk) {
        size_t per = k3_state_conv_floats(&s->m->cfg) + k3_state_s_floats(&s->m->cfg), n = 0;
        for (int i = 0; i < s->m->w.n_layers; i++)
            n += s->conv[i] ? per : 0;
        mk = k3_calloc(e, 1, sizeof *mk, "state mark");
        if (mk) {
            mk->kda = k3_malloc(e, (n ? n : 1) * sizeof(float), "state mark");
            mk->last = k3_malloc(e, (size_t)s->m->cfg.vocab_size * sizeof(float), "state mark");
        }
        if (e->code) {
            k3_state_mark_free(mk);
            return e->code;
        }
        *mark = mk;
    }
    mk->s = s;
    mk->pos = s->pos;
    mk->epoch = s->epoch;
    copy_kda(s, mk->kda, 1);
    memcpy(mk->last, s->last, (size_t)s->m->cfg.vocab_size * sizeof *mk->last);
    return K3_OK;
}

int64_t k3_state_mark_pos(const k3_state_mark *mark) { return mark->pos; }

int k3_state_rewind(k3_state *s, k3_state_mark *mark, k3_err *e)
{
    if (mark->s != s)
        return k3_fail(e, K3_EINPUT, "state mark: made from another state");
    if (mark->epoch != s->epoch || mark->pos > s->pos)
        return k3_fail(e, K3_EINPUT, "state mark: stale (the state was reset, loaded or "
                                     "rewound since)");
    copy_kda(s, mark->kda, 0);
    memcpy(s->last, mark->last, (size_t)s->m->cfg.vocab_size * sizeof *s->last);
    s->pos = mark->pos;
    mark->epoch = ++s->epoch;
    return K3_OK;
}

void k3_state_mark_free(k3_state_mark *mark)
{
    if (!mark)
        return;
    free(mark->kda);
    free(mark->last);
    free(mark);
}

void k3_state_free(k3_state *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->m->w.n_layers; i++) {
        if (s->conv) free(s->conv[i]);
        if (s->S) free(s->S[i]);
        if (s->kv) free(s->kv[i]);
    }
    free(s->conv);
    free(s->S);
    free(s->kv);
    free(s->ids);
    free(s->last);
    free(s);
}
