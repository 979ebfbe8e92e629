/* generate.c - see k3/generate.h. */
#include "k3/generate.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* The recompute schedule: the whole sequence plus `next`, fed again from
 * a reset state (T-token calls instead of 1-token calls, so agreement with
 * the incremental schedule checks the caches). */
static int refeed(k3_model *m, k3_state *s, uint32_t next, float *logits, k3_err *e)
{
    size_t n = (size_t)k3_state_pos(s);
    uint32_t *seq = k3_malloc(e, (n + 1) * sizeof *seq, "token sequence");
    if (!seq)
        return e->code;
    memcpy(seq, k3_state_ids(s), n * sizeof *seq);
    seq[n] = next;
    k3_state_reset(s);
    k3_forward(m, s, seq, n + 1, logits, 0, e);
    free(seq);
    return e->code;
}

int k3_gen_is_end(const k3_model *m, const k3_gen_params *p, uint32_t id)
{
    if (p->ignore_eos)
        return 0;
    for (size_t i = 0; i < p->n_end_ids; i++)
        if (p->end_ids[i] == id)
            return 1;
    return k3_model_is_eos(m, id);
}

uint32_t k3_gen_sample_at(k3_sampler *smp, const k3_gen_params *p, const k3_model *m,
                          const uint32_t *ids, size_t pos, const float *logits)
{
    size_t nrecent = pos < p->repeat_last_n ? pos : p->repeat_last_n;
    return k3_sample(smp, logits, k3_model_vocab(m), ids + pos - nrecent, nrecent, pos);
}

uint32_t k3_gen_sample(k3_sampler *smp, const k3_gen_params *p, const k3_model *m,
                       const k3_state *s, const float *logits)
{
    return k3_gen_sample_at(smp, p, m, k3_state_ids(s), (size_t)k3_state_pos(s), logits);
}

int k3_gen_ends_after(const k3_model *m, const k3_gen_params *p, uint32_t id, size_t ngen,
                      int64_t pos)
{
    if (k3_gen_is_end(m, p, id))
        return K3_GEN_EOS;
    if (ngen >= p->max_tokens)
        return K3_GEN_LENGTH;
    if (p->max_context > 0 && pos + 1 >= p->max_context)
        return K3_GEN_CONTEXT;
    return 0;
}

int k3_gen_feed(k3_model *m, k3_state *s, const k3_gen_params *p, uint32_t id, float *logits,
                k3_err *e)
{
    return p->recompute ? refeed(m, s, id, logits, e) : k3_forward(m, s, &id, 1, logits, 0, e);
}

int k3_generate(k3_model *m, k3_state *s, k3_sampler *smp, const k3_gen_params *p,
                k3_gen_fn fn, void *user, k3_gen_end *end, size_t *ngen, k3_err *e)
{
    size_t V = k3_model_vocab(m);
    *ngen = 0;
    *end = K3_GEN_LENGTH;
    if (!k3_state_logits(s))
        return k3_fail(e, K3_EINPUT, "nothing to continue from: the sequence is empty");
    if (p->max_tokens == 0)
        return K3_OK;
    float *logits = k3_malloc(e, V * sizeof *logits, "logits");
    if (!logits)
        return e->code;
    memcpy(logits, k3_state_logits(s), V * sizeof *logits);
    for (;;) {
        uint32_t id = k3_gen_sample(smp, p, m, s, logits);
        ++*ngen;
        int rc = fn(user, id, logits, e), ends;
        if (e->code)
            break;
        if (rc) {
            *end = K3_GEN_CALLER;
            break;
        }
        if ((ends = k3_gen_ends_after(m, p, id, *ngen, k3_state_pos(s)))) {
            *end = (k3_gen_end)ends;
            break;
        }
        if (k3_gen_feed(m, s, p, id, logits, e))
            break;
    }
    free(logits);
    return e->code;
}
