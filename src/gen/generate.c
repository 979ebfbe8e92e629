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
        size_t pos = (size_t)k3_state_pos(s);
        size_t nrecent = pos < p->repeat_last_n ? pos : p->repeat_last_n;
        uint32_t id = k3_sample(smp, logits, V, k3_state_ids(s) + pos - nrecent, nrecent, pos);
        ++*ngen;
        int rc = fn(user, id, logits, e);
        if (e->code)
            break;
        if (rc) {
            *end = K3_GEN_CALLER;
            break;
        }
        if (k3_gen_is_end(m, p, id)) {
            *end = K3_GEN_EOS;
            break;
        }
        if (*ngen >= p->max_tokens)
            break;
        if (p->max_context > 0 && (int64_t)pos + 1 >= p->max_context) {
            *end = K3_GEN_CONTEXT;
            break;
        }
        if ((p->recompute ? refeed(m, s, id, logits, e) : k3_forward(m, s, &id, 1, logits, 0, e)))
            break;
    }
    free(logits);
    return e->code;
}
