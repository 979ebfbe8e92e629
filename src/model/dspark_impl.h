/* dspark_impl.h - the DSpark drafter's insides, shared by dspark_load.c
 * (config and weights) and dspark.c (the forward pass); see dspark.h. */
#ifndef K3_MODEL_DSPARK_IMPL_H
#define K3_MODEL_DSPARK_IMPL_H

#include "core/kernels.h"
#include "model/dspark.h"
#include "model/model.h"

/* One drafter layer: pre-norm gated MLA with RoPE, then the dense SiTU MLP
 * (k3_layer_weights so the model's MLP block runs it). */
typedef struct dspark_layer {
    float *input_norm, *post_norm;
    k3_mla_weights mla;
    k3_layer_weights mlp; /* gate, up, down only */
} dspark_layer;

struct k3_dspark {
    const k3_model *m;
    k3_config c;         /* the drafter's dims in the model's config (MLA, MLP, eps,
                          * SiTU betas; layer_kind NULL) */
    int64_t block, mask_id, rank;
    double rope_theta;
    int ntaps;
    int taps[K3_MAX_TAPS];
    k3_mat fc;           /* [H][ntaps*H] */
    float *hidden_norm, *final_norm;
    dspark_layer *layers;
    k3_mat head;         /* the target's lm_head [V][H] (a copy) */
    k3_mat mk_embed, mk_proj; /* Markov head W1 [V][rank], W2 [V][rank] */
    void **blocks;       /* every allocation of the weights, freed together */
    size_t nblocks, capblocks;
    uint64_t bytes;      /* weights held */
    float *inv_freq;     /* [rope/2] theta^(-2i/rope) */
    /* the workspace of one call (dspark.c) */
    unsigned char *ws;
    size_t ws_floats;
    float *mm;           /* matmul workspace */
    size_t mm_cols, mm_rows;
};

struct k3_dspark_seq {
    int layers;
    float **kv;          /* [layer] -> [cap][R + rope]: context rows [0, n), then a
                          * pass's block rows at [P, P + block) */
    uint32_t *ids;       /* [cap] the ids whose taps made rows [0, n) */
    float *attend;       /* [2R + cap] k3_mla_attend's scratch */
    int64_t n, cap;
};

/* The chunk of context rows projected together (the workspace's rows). */
#define K3_DSPARK_ROWS 32

/* Config, tensors and the target's lm_head (dspark_load.c). */
int k3_dspark_load(k3_dspark *d, const char *dir, k3_err *e);
void k3_dspark_unload(k3_dspark *d);

#endif
