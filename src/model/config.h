/* config.h - the text model's hyper-parameters (SPEC section 2).
 *
 * Read from config.json, nested (fields under "text_config", as released) or
 * flat. Every field the computation depends on is required: a missing or
 * mistyped field is an error that lists ALL such fields at once, and values
 * the engine does not implement (another router activation, grouped top-k,
 * another quantisation format) are refused rather than approximated. */
#ifndef K3_MODEL_CONFIG_H
#define K3_MODEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

enum { K3_LAYER_KDA = 0, K3_LAYER_MLA = 1 };

typedef struct k3_config {
    int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers;
    /* MLA */
    int64_t num_attention_heads, q_lora_rank, kv_lora_rank;
    int64_t qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    /* KDA (linear_attn_config) */
    int64_t kda_head_dim, kda_num_heads, short_conv_kernel_size;
    double gate_lower_bound;
    /* MoE */
    int64_t first_k_dense_replace, num_experts, num_experts_per_token, num_shared_experts;
    int64_t moe_intermediate_size, routed_expert_hidden_size;
    int latent_moe_use_norm, moe_renormalize;
    double routed_scaling_factor;
    /* everything else */
    double situ_beta, situ_linear_beta, rms_norm_eps;
    int64_t attn_res_block_size;
    int tie_word_embeddings;
    int64_t bos_token_id, pad_token_id;
    int64_t eos_ids[4];
    int n_eos;
    uint8_t *layer_kind;     /* [num_hidden_layers]: K3_LAYER_KDA or K3_LAYER_MLA */
} k3_config;

/* Parses MODEL_DIR/config.json into cfg. On failure returns K3_EINPUT with
 * a message naming config.json and every offending field. */
int k3_config_load(k3_config *cfg, const char *dir, k3_err *e);
/* The same from JSON text already in memory (path is used in messages). */
int k3_config_parse(k3_config *cfg, const char *text, size_t len, const char *path, k3_err *e);
void k3_config_free(k3_config *cfg);

#endif
