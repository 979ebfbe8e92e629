/* k3/generate.h - the decode loop: sample, report, feed, until a stop.
 *
 * The loop deals in ids and owns the end rule (k3_gen_is_end). Every
 * front end reaches it through the turn driver (src/chat/turn.h), which
 * adds the tokenizer's end ids and turns the ids into text, so `k3 MODEL
 * --prompt ...`, `k3 MODEL --chat` and the server stop, cap and sample
 * the same way. */
#ifndef K3_GENERATE_H
#define K3_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "k3/k3.h"
#include "k3/sample.h"

typedef struct k3_gen_params {
    size_t max_tokens;    /* ids to generate at most */
    int64_t max_context;  /* > 0: prompt + generated ids never exceed it */
    int ignore_eos;       /* keep going past every end id (k3_gen_is_end) */
    const uint32_t *end_ids; /* [n_end_ids]: ids that end the generation besides the
                              * config's eos ids (k3_model_is_eos); the turn driver
                              * adds the tokenizer's (chat/turn.h) */
    size_t n_end_ids;
    size_t repeat_last_n; /* repeat-penalty window: the last n ids of the sequence */
    int recompute;        /* verification: refeed the whole sequence to a reset
                           * state every step (slow; must give the same ids) */
} k3_gen_params;

/* Why a generation ended. */
typedef enum {
    K3_GEN_EOS = 1,  /* an end id was generated (it is reported, not fed) */
    K3_GEN_LENGTH,   /* max_tokens ids were generated */
    K3_GEN_CONTEXT,  /* the sequence reached max_context */
    K3_GEN_CALLER    /* the callback asked to stop */
} k3_gen_end;

/* Called with each generated id and the logits row it was drawn from.
 * Returns 0 to go on, nonzero to stop after this id. To abort, it fails e
 * (k3_fail): the loop then returns e's code. */
typedef int (*k3_gen_fn)(void *user, uint32_t id, const float *logits, k3_err *e);

/* Whether id ends a generation under p: an eos id of the config or one of
 * p->end_ids, unless p->ignore_eos. The one end rule of every front end. */
int k3_gen_is_end(const k3_model *m, const k3_gen_params *p, uint32_t id);

/* The pieces of the loop below, for drivers that run it themselves (the
 * turn driver; later, several sequences in one forward call):
 * k3_gen_sample draws the next id from logits[0..vocab of m) with the
 * state's last repeat_last_n ids as the penalty window, for sequence
 * position k3_state_pos(s) (the draw depends only on the seed and that
 * position, k3/sample.h); k3_gen_ends_after
 * says whether the generation ends once id, its ngen-th id, is reported
 * with the state at position pos (id not yet fed): K3_GEN_EOS, then
 * K3_GEN_LENGTH, then K3_GEN_CONTEXT, or 0 to go on; k3_gen_feed feeds id
 * (incrementally, or refeeding the whole sequence when p->recompute) and
 * leaves the next logits in logits. */
uint32_t k3_gen_sample(k3_sampler *smp, const k3_gen_params *p, const k3_model *m,
                       const k3_state *s, const float *logits);
/* The same for the id at sequence position pos after ids[0..pos) (a
 * speculative step samples positions its state has already passed). */
uint32_t k3_gen_sample_at(k3_sampler *smp, const k3_gen_params *p, const k3_model *m,
                          const uint32_t *ids, size_t pos, const float *logits);
int k3_gen_ends_after(const k3_model *m, const k3_gen_params *p, uint32_t id, size_t ngen,
                      int64_t pos);
int k3_gen_feed(k3_model *m, k3_state *s, const k3_gen_params *p, uint32_t id, float *logits,
                k3_err *e);

/* Generates from the state's last logits (the caller fed the prompt:
 * K3_EINPUT when the state is empty). Each step samples the next id from
 * the logits (repeat penalty over the sequence's last repeat_last_n ids),
 * reports it, and - unless the generation ends there - feeds it. So on
 * return the state holds the sequence minus the last id reported, and
 * *end says why it ended. *ngen receives the ids reported. */
int k3_generate(k3_model *m, k3_state *s, k3_sampler *smp, const k3_gen_params *p,
                k3_gen_fn fn, void *user, k3_gen_end *end, size_t *ngen, k3_err *e);

#endif
