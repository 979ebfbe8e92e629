/* k3/sample.h - choosing the next token from a row of logits.
 *
 * Reproducible by construction: the same parameters, seed, logits and
 * recent window give the same token on every machine, compiler, thread
 * count and memory budget. The random numbers come from the sampler's own
 * generator (xoshiro256** seeded through splitmix64, never rand()), the
 * exponentials from k3_expf (no libm), sums run in a fixed order and
 * every ordering breaks ties by the lower id.
 *
 * The steps, in llama.cpp's order:
 *   1. repeat penalty: each distinct id of recent[] (ids outside the
 *      vocabulary ignored) has a positive logit divided by repeat_penalty
 *      and a negative one multiplied by it;
 *   2. temperature == 0: greedy, the highest logit (ties: the lowest id);
 *      otherwise the candidates are sorted by logit (ties: lower id first) and
 *   3. top_k > 0 keeps the k best;
 *   4. top_p < 1 keeps the shortest prefix whose softmax mass (over what
 *      is left, at temperature 1) reaches top_p;
 *   5. min_p > 0 keeps the ids whose probability is at least min_p times
 *      the best one's;
 *   6. the survivors' logits are divided by temperature, softmaxed, and one
 *      uniform draw picks the token (one draw per sampled token; greedy
 *      steps draw nothing). At least one candidate always survives. */
#ifndef K3_SAMPLE_H
#define K3_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

typedef struct k3_sampler {
    /* Parameters: k3_sampler_init sets the defaults, then the caller may
     * change them between calls. */
    float temperature;    /* 0 (default) = greedy; > 0 = sample */
    float top_p;          /* (0, 1]; 1 (default) = off */
    float min_p;          /* [0, 1]; 0 (default) = off */
    float repeat_penalty; /* > 0; 1 (default) = off */
    int top_k;            /* 0 (default) = off */
    uint64_t seed;        /* 0 by default; read when the stream (re)starts */

    /* Internal. */
    uint64_t rng[4];      /* xoshiro256** state */
    int rng_ready;        /* 0: seed from `seed` at the next draw */
    size_t vocab;         /* rows the scratch below was made for */
    void *cand;           /* vocab candidates (id, logit) */
    unsigned char *seen;  /* vocab flags for the repeat penalty, kept all 0 */
} k3_sampler;

/* Sets the defaults above and allocates scratch for rows of `vocab`
 * logits (so k3_sample itself never allocates or fails). K3_ERUNTIME when
 * out of memory. */
int k3_sampler_init(k3_sampler *s, size_t vocab, k3_err *e);
void k3_sampler_free(k3_sampler *s);

/* Restarts the random stream from `seed` (also stored in s->seed). Setting
 * s->seed before the first k3_sample call has the same effect. */
void k3_sampler_seed(k3_sampler *s, uint64_t seed);

/* Checks the parameters; K3_EINPUT naming the bad one (e.g. "top_p must be
 * in (0, 1], got 1.5"). k3_sample assumes they are valid. */
int k3_sampler_check(const k3_sampler *s, k3_err *e);

/* The next token from logits[0..vocab) (vocab <= the init size), with
 * recent[0..nrecent) as the repeat-penalty window (the caller chooses its
 * length; NULL/0 for none). logits is not modified. */
uint32_t k3_sample(k3_sampler *s, const float *logits, size_t vocab, const uint32_t *recent,
                   size_t nrecent);

#endif
