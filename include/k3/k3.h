/* k3/k3.h - the k3 engine: Kimi K3's text model on a CPU.
 *
 * Open a checkpoint directory in the release's format, make a state (the
 * per-sequence caches), and feed tokens. Feeding n tokens at once or one at
 * a time gives bit-identical logits: the state carries everything (MLA
 * latent KV cache, KDA short-conv history and recurrent state). */
#ifndef K3_K3_H
#define K3_K3_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

typedef struct k3_model k3_model;
typedef struct k3_state k3_state;

typedef struct k3_model_opts {
    int n_layers;  /* bind and run only the first n layers (diagnostics); 0 = all */
} k3_model_opts;

int k3_model_open(k3_model **out, const char *dir, const k3_model_opts *opts, k3_err *e);
void k3_model_close(k3_model *m);

uint32_t k3_model_vocab(const k3_model *m);
int k3_model_n_layers(const k3_model *m);
/* Generation stops on these ids (the config's eos_token_id list). */
int k3_model_is_eos(const k3_model *m, uint32_t id);
/* Bytes of weights read into memory. */
uint64_t k3_model_weight_bytes(const k3_model *m);

int k3_state_new(k3_state **out, const k3_model *m, k3_err *e);
void k3_state_free(k3_state *s);
/* Forgets the sequence: the next token is position 0. */
void k3_state_reset(k3_state *s);
/* Tokens consumed so far. */
int64_t k3_state_pos(const k3_state *s);

/* Consumes ids[0..n) at the state's next positions. logits receives
 * vocab floats for the last token, or n rows of vocab floats when
 * all_positions is set. An id outside the vocabulary is K3_EINPUT and
 * leaves the state unchanged. */
int k3_forward(k3_model *m, k3_state *s, const uint32_t *ids, size_t n, float *logits,
               int all_positions, k3_err *e);

#endif
