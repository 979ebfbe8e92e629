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

int k3_state_set_draft_trunk(k3_state *s, int on, k3_err *e)
{
    if (on && !s->m->draft)
        return k3_fail(e, K3_EINPUT, "the model was opened without a draft trunk (--draft-trunk)");
    s->draft_trunk = on != 0;
    return K3_OK;
}

int k3_state_set_route_k(k3_state *s, int k, k3_err *e)
{
    if (k < 0 || k > s->m->cfg.num_experts_per_token)
        return k3_fail(e, K3_EINPUT, "routed experts per token: %d is not in 0..%lld", k,
                       (long long)s->m->cfg.num_experts_per_token);
    s->route_k = k;
    return K3_OK;
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

int k3_state_resize(k3_state *s, int64_t cap, k3_err *e)
{
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
    if (s->ntaps) {
        size_t row = (size_t)s->ntaps * (size_t)s->m->cfg.hidden_size;
        float *n = realloc(s->taps, (size_t)cap * row * sizeof *n);
        if (!n)
            return k3_fail(e, K3_ERUNTIME, "out of memory growing the drafter's taps to %lld "
                           "positions", (long long)cap);
        s->taps = n;
    }
    uint32_t *ids = realloc(s->ids, (size_t)cap * sizeof *ids);
    if (!ids)
        return k3_fail(e, K3_ERUNTIME, "out of memory growing the token history to %lld ids",
                       (long long)cap);
    s->ids = ids;
    s->kv_cap = cap;
    return K3_OK;
}

int k3_state_reserve(k3_state *s, int64_t need, k3_err *e)
{
    if (need <= s->kv_cap)
        return K3_OK;
    int64_t cap = s->kv_cap ? s->kv_cap : 64;
    while (cap < need)
        cap *= 2;
    return k3_state_resize(s, cap, e);
}

void k3_state_reset(k3_state *s)
{
    if (s->spec)
        s->spec->active = 0;
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
    if (last_row != s->last) /* the head may write there itself (forward.c) */
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

static void k3_state_spec_free(k3_state *s);

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
    if (s->spec && s->spec->active)
        return k3_fail(e, K3_EINPUT, "state mark: not during a speculative step");
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
    k3_state_spec_free(s);
    for (int i = 0; i < s->m->w.n_layers; i++) {
        if (s->conv) free(s->conv[i]);
        if (s->S) free(s->S[i]);
        if (s->kv) free(s->kv[i]);
    }
    free(s->conv);
    free(s->S);
    free(s->kv);
    free(s->ids);
    free(s->img);
    free(s->last);
    free(s->taps);
    free(s);
}

int k3_state_set_taps(k3_state *s, const int *layers, int n, k3_err *e)
{
    if (n < 0 || n > K3_MAX_TAPS)
        return k3_fail(e, K3_EINPUT, "a drafter taps %d layers: at most %d", n, K3_MAX_TAPS);
    if (s->pos)
        return k3_fail(e, K3_EINPUT, "taps are set on an empty state, not at position %lld",
                       (long long)s->pos);
    for (int i = 0; i < n; i++)
        if (layers[i] < 0 || layers[i] >= s->m->w.n_layers)
            return k3_fail(e, K3_EINPUT, "a drafter taps layer %d: the model has layers "
                           "0..%d", layers[i], s->m->w.n_layers - 1);
    free(s->taps);
    s->taps = NULL;
    s->ntaps = n;
    for (int i = 0; i < n; i++)
        s->tap_layer[i] = layers[i];
    if (n && s->kv_cap) {
        size_t row = (size_t)n * (size_t)s->m->cfg.hidden_size;
        s->taps = k3_malloc(e, (size_t)s->kv_cap * row * sizeof *s->taps, "drafter taps");
        if (!s->taps) {
            s->ntaps = 0;
            return e->code;
        }
    }
    return K3_OK;
}

size_t k3_spec_record_floats(const k3_config *c)
{
    size_t NH = (size_t)c->kda_num_heads, C = NH * (size_t)c->kda_head_dim;
    return 4 * C + NH;
}

static void spec_free(k3_spec_journal *j, int n_layers)
{
    if (!j)
        return;
    for (int i = 0; j->in && i < n_layers; i++)
        free(j->in[i]);
    free(j->in);
    free(j->snap);
    free(j->step);
    free(j);
}

int k3_state_spec_begin(k3_state *s, size_t max_tokens, k3_err *e)
{
    const k3_config *c = &s->m->cfg;
    int L = s->m->w.n_layers;
    k3_spec_journal *j = s->spec;
    if (max_tokens == 0)
        return k3_fail(e, K3_EINPUT, "a speculative step of no tokens");
    if (j && j->cap < max_tokens) {
        spec_free(j, L);
        j = s->spec = NULL;
    }
    if (!j) {
        size_t per = k3_state_conv_floats(c) + k3_state_s_floats(c), n = 0;
        size_t rec = k3_spec_record_floats(c), C = (size_t)c->kda_num_heads * c->kda_head_dim;
        for (int i = 0; i < L; i++)
            n += s->conv[i] ? per : 0;
        j = k3_calloc(e, 1, sizeof *j, "speculation journal");
        if (!j)
            return e->code;
        j->cap = max_tokens;
        j->snap = k3_malloc(e, (n ? n : 1) * sizeof *j->snap, "speculation journal");
        j->in = k3_calloc(e, (size_t)L, sizeof *j->in, "speculation journal");
        j->step = k3_malloc(e, (4 * C + 2 * (size_t)c->kda_head_dim + 1) * sizeof *j->step,
                            "speculation journal");
        for (int i = 0; !e->code && i < L; i++)
            if (s->conv[i] && !(j->in[i] = k3_malloc(e, max_tokens * rec * sizeof(float),
                                                      "speculation journal")))
                break;
        if (e->code) {
            spec_free(j, L);
            return e->code;
        }
        s->spec = j;
    }
    j->pos0 = s->pos;
    j->active = 1;
    copy_kda(s, j->snap, 1);
    return K3_OK;
}

int k3_state_spec_end(k3_state *s, size_t keep, const float *last_row, k3_err *e)
{
    k3_spec_journal *j = s->spec;
    if (!j || !j->active)
        return k3_fail(e, K3_EINPUT, "no speculative step to end");
    j->active = 0;
    size_t fed = (size_t)(s->pos - j->pos0);
    if (keep > fed)
        return k3_fail(e, K3_EINPUT, "a speculative step fed %zu ids, not %zu", fed, keep);
    if (keep == fed)
        return K3_OK;
    /* Back to the start, then the recurrence alone over the kept ids: the
     * KDA states are then those of feeding just them (k3_kda_step is what
     * the forward ran on the same inputs). The MLA rows of the kept
     * positions are already in place; later rows are dropped with pos. */
    const k3_config *c = &s->m->cfg;
    size_t NH = (size_t)c->kda_num_heads, C = NH * (size_t)c->kda_head_dim;
    size_t rec = k3_spec_record_floats(c);
    copy_kda(s, j->snap, 0);
    for (int i = 0; i < s->m->w.n_layers; i++) {
        if (!s->conv[i])
            continue;
        const k3_kda_weights *w = &s->m->w.layers[i].kda; /* the small vectors */
        for (size_t t = 0; t < keep; t++) {
            const float *r = j->in[i] + t * rec;
            k3_kda_step(c, w, s->conv[i], s->S[i], r, r + C, r + 2 * C, r + 3 * C, r + 4 * C,
                        j->step + 3 * C + 2 * (size_t)c->kda_head_dim, j->step);
        }
    }
    s->pos = j->pos0 + (int64_t)keep;
    memcpy(s->last, last_row, (size_t)c->vocab_size * sizeof *s->last);
    return K3_OK;
}

static void k3_state_spec_free(k3_state *s)
{
    spec_free(s->spec, s->m->w.n_layers);
    s->spec = NULL;
}
