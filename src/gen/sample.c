/* sample.c - see k3/sample.h.
 *
 * Arithmetic choices, all for bit-reproducibility: probabilities are
 * k3_expf of (logit - max) in float, summed in double in candidate order;
 * the uniform draw (k3_sample_uniform) is the top 53 bits of a 64-bit
 * hash of (seed, position) scaled by 2^-53 (exact in double). The build
 * forbids FMA contraction, so every step rounds the same way on every
 * target. */
#include "k3/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mathfn.h"
#include "util/error.h"

/* One candidate; w is its weight exp((logit - best) / t) once computed. */
typedef struct cand {
    uint32_t id;
    float logit, w;
} cand;

#define GOLDEN 0x9E3779B97F4A7C15ull

/* splitmix64's finalizer (Stafford's Mix13), a bijection on 64 bits. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double k3_sample_uniform(uint64_t seed, uint64_t position)
{
    uint64_t key = mix(seed + GOLDEN);
    uint64_t bits = mix(key + (position + 1) * GOLDEN);
    return (double)(bits >> 11) * (1.0 / 9007199254740992.0);
}

void k3_sampler_seed(k3_sampler *s, uint64_t seed)
{
    s->seed = seed;
}

int k3_sampler_init(k3_sampler *s, size_t vocab, k3_err *e)
{
    memset(s, 0, sizeof *s);
    s->temperature = 0.0f;
    s->top_p = 1.0f;
    s->min_p = 0.0f;
    s->repeat_penalty = 1.0f;
    s->vocab = vocab;
    s->cand = k3_malloc(e, (vocab ? vocab : 1) * sizeof(cand), "sampler candidates");
    s->seen = k3_calloc(e, vocab ? vocab : 1, sizeof *s->seen, "sampler counts");
    if (e->code)
        k3_sampler_free(s);
    return e->code;
}

void k3_sampler_free(k3_sampler *s)
{
    free(s->cand);
    free(s->seen);
    s->cand = NULL;
    s->seen = NULL;
}

int k3_sampler_check(const k3_sampler *s, k3_err *e)
{
    if (!(s->temperature >= 0.0f) || s->temperature > 1e6f)
        return k3_fail(e, K3_EINPUT, "temperature must be >= 0, got %g", (double)s->temperature);
    if (!(s->top_p > 0.0f && s->top_p <= 1.0f))
        return k3_fail(e, K3_EINPUT, "top_p must be in (0, 1], got %g", (double)s->top_p);
    if (!(s->min_p >= 0.0f && s->min_p <= 1.0f))
        return k3_fail(e, K3_EINPUT, "min_p must be in [0, 1], got %g", (double)s->min_p);
    if (!(s->repeat_penalty > 0.0f) || s->repeat_penalty > 1e6f)
        return k3_fail(e, K3_EINPUT, "repeat_penalty must be > 0, got %g",
                       (double)s->repeat_penalty);
    if (!(s->frequency_penalty >= -2.0f && s->frequency_penalty <= 2.0f))
        return k3_fail(e, K3_EINPUT, "frequency_penalty must be in [-2, 2], got %g",
                       (double)s->frequency_penalty);
    if (!(s->presence_penalty >= -2.0f && s->presence_penalty <= 2.0f))
        return k3_fail(e, K3_EINPUT, "presence_penalty must be in [-2, 2], got %g",
                       (double)s->presence_penalty);
    if (s->top_k < 0)
        return k3_fail(e, K3_EINPUT, "top_k must be >= 0, got %d", s->top_k);
    return K3_OK;
}

/* Descending logit, then ascending id: a total order, so qsort's result
 * does not depend on its algorithm. */
static int by_logit_desc(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->logit != b->logit)
        return a->logit > b->logit ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Copies the logits (NaN becomes -inf so the order stays total) and
 * applies the penalties (k3/sample.h step 1) once per distinct recent id,
 * with its count in the window. */
static void load_candidates(k3_sampler *s, const float *logits, size_t V, const uint32_t *recent,
                            size_t nrecent)
{
    cand *c = s->cand;
    for (size_t i = 0; i < V; i++) {
        c[i].id = (uint32_t)i;
        c[i].logit = isnan(logits[i]) ? -INFINITY : logits[i];
    }
    if (s->repeat_penalty == 1.0f && s->frequency_penalty == 0.0f && s->presence_penalty == 0.0f)
        return;
    for (size_t i = 0; i < nrecent; i++)
        if (recent[i] < V)
            s->seen[recent[i]]++;
    for (size_t i = 0; i < nrecent; i++) {
        uint32_t id = recent[i];
        if (id >= V || s->seen[id] == 0)
            continue;
        float *l = &c[id].logit, count = (float)s->seen[id];
        s->seen[id] = 0; /* once per distinct id; the array is all 0 again at the end */
        *l = *l > 0.0f ? *l / s->repeat_penalty : *l * s->repeat_penalty;
        *l = *l - (count * s->frequency_penalty + s->presence_penalty);
    }
}

/* Sets c[i].w = exp((logit_i - logit_0) / t) for i < n (c sorted, so
 * logit_0 is the largest) and returns their sum, in candidate order. */
static double weigh(cand *c, size_t n, float t)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        c[i].w = k3_expf((c[i].logit - c[0].logit) / t);
        sum += (double)c[i].w;
    }
    return sum;
}

/* The shortest prefix of c[0..n) whose weight reaches top_p of the total. */
static size_t top_p_prefix(const cand *c, size_t n, double total, float top_p)
{
    double mass = 0.0;
    for (size_t i = 0; i < n; i++) {
        mass += (double)c[i].w;
        if (mass >= (double)top_p * total)
            return i + 1;
    }
    return n;
}

uint32_t k3_sample(k3_sampler *s, const float *logits, size_t V, const uint32_t *recent,
                   size_t nrecent, uint64_t position)
{
    cand *c = s->cand;
    if (V > s->vocab) /* a caller's bug: never run past the scratch */
        V = s->vocab;
    load_candidates(s, logits, V, recent, nrecent);
    if (s->temperature == 0.0f) {
        size_t best = 0;
        for (size_t i = 1; i < V; i++)
            if (c[i].logit > c[best].logit)
                best = i;
        return (uint32_t)best;
    }
    qsort(c, V, sizeof *c, by_logit_desc);
    /* An infinite best logit leaves nothing to weigh: it wins outright. */
    if (isinf(c[0].logit))
        return c[0].id;
    size_t n = V;
    /* Ids at -inf (a grammar's mask, gen/constraint.h) weigh 0 and are never
     * drawn: not even as the fallback "last survivor" when rounding leaves
     * u * W at the total. Dropping them changes nothing else. */
    while (n > 1 && c[n - 1].logit == -INFINITY)
        n--;
    if (s->top_k > 0 && (size_t)s->top_k < n)
        n = (size_t)s->top_k;
    if (s->top_p < 1.0f)
        n = top_p_prefix(c, n, weigh(c, n, 1.0f), s->top_p);
    if (s->min_p > 0.0f) {
        /* p_i / p_best = exp(logit_i - logit_best) at temperature 1. */
        size_t keep = 1;
        while (keep < n && k3_expf(c[keep].logit - c[0].logit) >= s->min_p)
            keep++;
        n = keep;
    }
    double r = k3_sample_uniform(s->seed, position) * weigh(c, n, s->temperature), acc = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        acc += (double)c[i].w;
        if (r < acc)
            return c[i].id;
    }
    return c[n - 1].id;
}
