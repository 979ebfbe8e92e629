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
 * lm_head is a run of its own.
 *
 * Sub-runs (when bound with subruns): the runs larger than the rest are
 * cut, so that the ring's slots (resid/trunk.h), sized for the largest
 * streamed run, can be sized for a MoE layer. A dense layer's run ends
 * before its MLP, and gate, up and down are a run each; lm_head is cut into
 * k = ceil(vocab / intermediate_size) row blocks of ceil(vocab / k) rows
 * (the last smaller), so no block is larger than a dense MLP matrix. The
 * cut depends on the config alone (not on how many layers are bound), so a
 * trunk packed from all layers serves a model bound with fewer. A layer's
 * runs hold its matrices in the order the forward pass uses them, so it
 * consumes them one after another, holding one at a time. The embedding is read whole when the plan
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
    /* Runs, in the order the forward pass uses them: layer i's are
     * [layer_run[i], layer_run[i + 1]), lm_head's [layer_run[n_layers],
     * nruns); lm_head run layer_run[n_layers] + j holds its rows
     * [head_rows[j], head_rows[j + 1]). Without sub-runs: one run each. */
    k3_run *runs;
    size_t nruns;
    size_t *layer_run;       /* [n_layers + 1] */
    int64_t *head_rows;      /* [lm_head runs + 1] */
    int subruns;             /* bound with sub-runs */
    k3_mat_slot **slots;     /* [run] -> matrices of that run */
    size_t *nslots;
    void **blocks;           /* every allocation, freed together */
    size_t nblocks, capblocks;
    uint64_t small_bytes;    /* bytes of resident small vectors */
} k3_weights;

/* Binds (checks) everything and reads the small vectors; subruns: cut the
 * large runs (above). */
int k3_weights_bind(k3_weights *w, const k3_config *c, const k3_st_index *ix, int n_layers,
                    int subruns, k3_err *e);
/* Reads the whole embedding into memory (otherwise rows are read on use). */
int k3_weights_load_embed(k3_weights *w, const k3_st_index *ix, k3_err *e);
void k3_weights_free(k3_weights *w);

/* Points the matrices of run r (one of layer view's) into its image
 * `image`; the others of the view are left as they are (w NULL in a view
 * copied from w->layers: a matrix of a run not yet viewed). */
void k3_weights_run_view(const k3_weights *w, size_t r, const uint8_t *image,
                         k3_layer_weights *view);
/* Block j of lm_head (its rows [head_rows[j], head_rows[j + 1])) pointing
 * into its run's image. */
k3_mat k3_weights_lm_head(const k3_weights *w, size_t j, const uint8_t *image);
/* How many runs lm_head is cut into. */
size_t k3_weights_head_runs(const k3_weights *w);
/* Row `id` of the embedding as floats (read from the shard when streamed,
 * into raw: hidden_size BF16 values of the caller's scratch). */
int k3_weights_embed_row(const k3_weights *w, const k3_st_index *ix, uint32_t id, float *out,
                         uint16_t *raw, k3_err *e);

#endif
