/* model.h - the engine's internal view of an open model and its state. */
#ifndef K3_MODEL_MODEL_H
#define K3_MODEL_MODEL_H

#include "io/safetensors.h"
#include "k3/k3.h"
#include "model/config.h"
#include "model/weights.h"

struct k3_model {
    k3_config cfg;
    k3_st_index *ix;
    k3_weights w;
};

/* Per-sequence state. KDA layers keep the last K-1 pre-conv inputs of q, k
 * and v (oldest first) and the recurrent state S [heads][key d][value d];
 * MLA layers keep, per position, the normed KV latent followed by the
 * shared (unrotated) rope key: kv_lora_rank + qk_rope_head_dim floats. */
struct k3_state {
    const k3_model *m;
    int64_t pos;
    float **conv;     /* [layer] -> [3][K-1][C], NULL for MLA layers */
    float **S;        /* [layer] -> [NH][D][D], NULL for MLA layers */
    float **kv;       /* [layer] -> [kv_cap][kv_lora + rope], NULL for KDA layers */
    int64_t kv_cap;   /* positions allocated in each kv cache */
};

/* Makes room for positions [0, need) in every MLA cache. */
int k3_state_reserve(k3_state *s, int64_t need, k3_err *e);

/* The three blocks, over T consecutive tokens at positions s->pos... x is
 * [T][H] (already normed); out is [T][H]. */
int k3_kda_forward(const k3_model *m, k3_state *s, int layer, const float *x, size_t T,
                   float *out, k3_err *e);
int k3_mla_forward(const k3_model *m, k3_state *s, int layer, const float *x, size_t T,
                   float *out, k3_err *e);
int k3_moe_forward(const k3_model *m, int layer, const float *x, size_t T, float *out,
                   k3_err *e);
int k3_dense_mlp_forward(const k3_model *m, int layer, const float *x, size_t T, float *out,
                         k3_err *e);

#endif
