/* weights.h - every tensor of the text model, bound by name (MODEL.md §2.6).
 *
 * Binding looks each tensor up in the shard index and checks its dtype and
 * shape against the config (a mismatch or a missing tensor is K3_EINPUT
 * naming the tensor). It reads only the small vectors (norm weights, biases,
 * conv taps: converted to float once, exactly), each of whose values must be
 * finite (else K3_EINPUT naming the shard, tensor and element). The
 * matrices are DESCRIBED,
 * not read: each layer's BF16 matrices form one run (see io/run.h), an
 * image laid out by binding (64-byte aligned offsets), and a layer's view is
 * made by pointing its k3_mats into the run's image once it is resident.
 * lm_head is a run of its own. The embedding is read whole when the plan
 * keeps it resident, else row by row as tokens need it. Routed experts are
 * not bound here: the expert cache (resid/expert_cache.h) resolves and
 * streams them. vision_tower.* and mm_projector.* are never touched. */
#ifndef K3_MODEL_WEIGHTS_H
#define K3_MODEL_WEIGHTS_H

#include "core/kernels.h"
#include "io/run.h"
#include "io/safetensors.h"
#include "model/config.h"

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
    float *latent_norm;      /* [latent], NULL when latent_moe_use_norm is false */
    k3_mat shared_gate, shared_up, shared_down;
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

/* Where one matrix of a run lives: the k3_mat at byte `field` of the view
 * structure gets w = image + image_off. */
typedef struct k3_mat_slot {
    size_t field;
    uint64_t image_off;
} k3_mat_slot;

typedef struct k3_weights {
    int n_layers;            /* bound layers (--layers may bind fewer) */
    k3_layer_weights *layers;/* small vectors set, matrices' w == NULL */
    k3_mat embed;            /* w == NULL when the embedding is streamed */
    const k3_tensor_info *embed_info;
    k3_mat lm_head;          /* w set by k3_weights_lm_head */
    float *final_norm, *out_res_norm, *out_res_proj;
    /* Runs: [0, n_layers) the layers, n_layers lm_head. */
    k3_run *runs;
    size_t nruns;
    k3_mat_slot **slots;     /* [run] -> matrices of that run */
    size_t *nslots;
    void **blocks;           /* every allocation, freed together */
    size_t nblocks, capblocks;
    uint64_t small_bytes;    /* bytes of resident small vectors */
} k3_weights;

/* Binds (checks) everything and reads the small vectors. */
int k3_weights_bind(k3_weights *w, const k3_config *c, const k3_st_index *ix, int n_layers,
                    k3_err *e);
/* Reads the whole embedding into memory (otherwise rows are read on use). */
int k3_weights_load_embed(k3_weights *w, const k3_st_index *ix, k3_err *e);
void k3_weights_free(k3_weights *w);

/* The view of layer i whose matrices point into the run image `image`. */
void k3_weights_layer_view(const k3_weights *w, int i, const uint8_t *image,
                           k3_layer_weights *view);
/* lm_head pointing into its run image. */
k3_mat k3_weights_lm_head(const k3_weights *w, const uint8_t *image);
/* Row `id` of the embedding as floats (read from the shard when streamed,
 * into raw: hidden_size BF16 values of the caller's scratch). */
int k3_weights_embed_row(const k3_weights *w, const k3_st_index *ix, uint32_t id, float *out,
                         uint16_t *raw, k3_err *e);

#endif
