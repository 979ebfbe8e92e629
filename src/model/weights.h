/* weights.h - every tensor of the text model, bound by name (SPEC section 3).
 *
 * Binding looks each tensor up in the shard index, checks its dtype and
 * shape against the config (a mismatch or a missing tensor is K3_EINPUT
 * naming the tensor), and reads it with explicit offsets from its shard.
 * Matrices stay in their stored format (BF16 or MXFP4) and are used through
 * k3_mat; small vectors (norm weights, biases, conv taps) are converted to
 * float once, exactly. vision_tower.* and mm_projector.* are never touched. */
#ifndef K3_MODEL_WEIGHTS_H
#define K3_MODEL_WEIGHTS_H

#include "core/kernels.h"
#include "io/safetensors.h"
#include "model/config.h"

/* One routed expert: w1 gate and w3 up [moe_inter, latent], w2 down
 * [latent, moe_inter], all MXFP4. */
typedef struct k3_expert {
    k3_mat w1, w3, w2;
} k3_expert;

typedef struct k3_kda_weights {
    k3_mat q, k, v, g, o, f_a, f_b, b;
    float *conv[3];          /* q, k, v taps [C][K] */
    float *A_log;            /* [head_dim]: entry h is head h's */
    float *dt_bias;          /* [C] */
    float *o_norm;           /* [head_dim] */
} k3_kda_weights;

typedef struct k3_mla_weights {
    k3_mat q_a, q_b, kv_a, kv_b, g, o;
    float *q_a_norm;         /* [q_lora_rank] */
    float *kv_a_norm;        /* [kv_lora_rank] */
} k3_mla_weights;

typedef struct k3_moe_weights {
    k3_mat router;           /* [E, H] */
    float *router_bias;      /* [E] e_score_correction_bias: selection only */
    k3_mat latent_down, latent_up;
    float *latent_norm;      /* [latent] */
    k3_mat shared_gate, shared_up, shared_down;
    k3_expert *experts;      /* [E], resident in memory for now */
} k3_moe_weights;

typedef struct k3_layer_weights {
    int kind;                /* K3_LAYER_KDA or K3_LAYER_MLA */
    int dense;               /* dense SiTU MLP instead of MoE */
    float *input_norm, *post_norm;
    float *attn_res_norm, *attn_res_proj, *mlp_res_norm, *mlp_res_proj;
    k3_kda_weights kda;
    k3_mla_weights mla;
    k3_mat gate, up, down;   /* dense MLP */
    k3_moe_weights moe;
} k3_layer_weights;

typedef struct k3_weights {
    k3_mat embed;            /* [V, H] BF16: row id is the embedding */
    k3_mat lm_head;          /* [V, H] BF16 */
    float *final_norm, *out_res_norm, *out_res_proj;
    int n_layers;            /* bound layers (--layers may bind fewer) */
    k3_layer_weights *layers;
    void **blocks;           /* every allocation, freed together */
    size_t nblocks, capblocks;
    uint64_t bytes;          /* weight bytes read */
} k3_weights;

int k3_weights_bind(k3_weights *w, const k3_config *c, const k3_st_index *ix, int n_layers,
                    k3_err *e);
void k3_weights_free(k3_weights *w);

#endif
