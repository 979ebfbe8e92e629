/* state.c - per-sequence caches (see model.h for their layout). */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/error.h"

static size_t conv_floats(const k3_config *c)
{
    return 3 * (size_t)(c->short_conv_kernel_size - 1) * (size_t)(c->kda_num_heads * c->kda_head_dim);
}

static size_t s_floats(const k3_config *c)
{
    return (size_t)c->kda_num_heads * (size_t)(c->kda_head_dim * c->kda_head_dim);
}

static size_t kv_width(const k3_config *c)
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
            s->conv[i] = k3_calloc(e, conv_floats(&m->cfg), sizeof(float), "KDA conv state");
            s->S[i] = k3_calloc(e, s_floats(&m->cfg), sizeof(float), "KDA recurrent state");
        }
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
    size_t w = kv_width(&s->m->cfg);
    for (int i = 0; i < s->m->w.n_layers; i++) {
        if (s->m->w.layers[i].kind != K3_LAYER_MLA)
            continue;
        float *n = realloc(s->kv[i], (size_t)cap * w * sizeof *n);
        if (!n)
            return k3_fail(e, K3_ERUNTIME, "out of memory growing the MLA KV cache to %lld positions",
                           (long long)cap);
        s->kv[i] = n;
    }
    s->kv_cap = cap;
    return K3_OK;
}

void k3_state_reset(k3_state *s)
{
    const k3_config *c = &s->m->cfg;
    for (int i = 0; i < s->m->w.n_layers; i++)
        if (s->conv[i]) {
            memset(s->conv[i], 0, conv_floats(c) * sizeof(float));
            memset(s->S[i], 0, s_floats(c) * sizeof(float));
        }
    s->pos = 0;
}

int64_t k3_state_pos(const k3_state *s) { return s->pos; }

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
    free(s);
}
