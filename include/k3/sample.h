/* k3/sample.h - choosing the next token from a row of logits.
 *
 * Reproducible by construction: the token chosen for sequence position
 * `position` is a function only of the logits, the recent window, the
 * parameters, the seed and `position` - not of how many tokens were sampled
 * before, in what order, or by which run. So the same inputs give the same
 * token on every machine, compiler, thread count and memory budget, and a
 * run that checks a drafted token at a position (speculative decoding)
 * gets the token a plain run would have produced there. The exponentials
 * come from k3_expf (no libm), sums run in a fixed order and every ordering
 * breaks ties by the lower id; no rand(), no hidden stream state.
 *
 * The draw. With all arithmetic on uint64_t modulo 2^64,
 *   G      = 0x9E3779B97F4A7C15
 *   mix(z) = splitmix64's finalizer:
 *              z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
 *              z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
 *              return z ^ (z >> 31);
 *   key    = mix(seed + G)
 *   bits   = mix(key + (position + 1) * G)
 *   u      = (bits >> 11) * 2^-53   (a double in [0, 1), exact)
 * that is, bits is output number `position` (counting from 0) of a
 * splitmix64 generator whose state starts at the first splitmix64 output
 * of `seed`. k3_sample_uniform returns u.
 *
 * The steps, in llama.cpp's order:
 *   1. penalties, as llama.cpp's: each distinct id j of recent[] (ids
 *      outside the vocabulary ignored), occurring c_j times there, has its
 *      logit l (float) divided by repeat_penalty when positive or multiplied
 *      by it otherwise, then l - ((float)c_j * frequency_penalty +
 *      presence_penalty) (float arithmetic, in that order; OpenAI's
 *      frequency and presence penalties over the same window);
 *   2. temperature == 0: greedy, the highest logit (ties: the lowest id;
 *      neither seed nor position is read);
 *      otherwise the candidates are sorted by logit (ties: lower id first) and
 *   3. top_k > 0 keeps the k best;
 *   4. top_p < 1 keeps the shortest prefix whose softmax mass (over what
 *      is left, at temperature 1) reaches top_p;
 *   5. min_p > 0 keeps the ids whose probability is at least min_p times
 *      the best one's;
 *   6. the survivors' logits are divided by temperature into weights
 *      w_i = k3_expf((logit_i - logit_best) / temperature) (float), and the
 *      token is the first survivor i (in sorted order) with
 *      u * W < w_0 + ... + w_i, W the total, sums in double in that order
 *      (the last survivor when none is). At least one candidate always
 *      survives. Candidates at -inf (a grammar's mask) are dropped first
 *      (unless all are): they weigh 0, so this only keeps the fallback
 *      above from ever naming one. */
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
    float frequency_penalty; /* [-2, 2] (OpenAI's range); 0 (default) = off */
    float presence_penalty;  /* [-2, 2]; 0 (default) = off */
    int top_k;            /* 0 (default) = off */
    uint64_t seed;        /* 0 by default; read by every sampled draw */

    /* Internal. */
    size_t vocab;         /* rows the scratch below was made for */
    void *cand;           /* vocab candidates (id, logit) */
    uint32_t *seen;       /* [vocab] occurrences in the penalty window, kept all 0 */
} k3_sampler;

/* Sets the defaults above and allocates scratch for rows of `vocab`
 * logits (so k3_sample itself never allocates or fails). K3_ERUNTIME when
 * out of memory. */
int k3_sampler_init(k3_sampler *s, size_t vocab, k3_err *e);
void k3_sampler_free(k3_sampler *s);

/* Sets s->seed (assigning the field has the same effect). */
void k3_sampler_seed(k3_sampler *s, uint64_t seed);

/* The uniform u in [0, 1) that the draw above gives for (seed, position). */
double k3_sample_uniform(uint64_t seed, uint64_t position);

/* Checks the parameters; K3_EINPUT naming the bad one (e.g. "top_p must be
 * in (0, 1], got 1.5"). k3_sample assumes they are valid. */
int k3_sampler_check(const k3_sampler *s, k3_err *e);

/* The token for sequence position `position` (the index the chosen token
 * will have in the sequence: k3_state_pos before it is fed) from
 * logits[0..vocab) (vocab <= the init size), with recent[0..nrecent) as the
 * repeat-penalty window (the caller chooses its length; NULL/0 for none).
 * logits is not modified; s changes only in its scratch, so calls may come
 * in any order of positions. Not thread-safe on one s (shared scratch). */
uint32_t k3_sample(k3_sampler *s, const float *logits, size_t vocab, const uint32_t *recent,
                   size_t nrecent, uint64_t position);

#endif
