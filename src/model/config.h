/* config.h - the text model's hyper-parameters (docs/MODEL.md §2.2, §2.3).
 *
 * Read from config.json, nested (fields under "text_config", as released) or
 * flat. Every field the computation depends on is required: a missing or
 * mistyped field is an error that lists ALL such fields at once, and values
 * the engine does not implement (another router activation, grouped top-k,
 * another quantisation format) are refused rather than approximated.
 *
 * The size contract. An accepted config has every integer field inside its
 * documented range (config.c, LIMITS: each maximum at least 8 times the
 * release's) and its derived sizes, computed once with saturating
 * arithmetic (k3_config_sizes_of, config_sizes.c), inside the limits below:
 *   token_floats    <= K3_CFG_MAX_TOKEN_FLOATS (2^32)
 *   position_floats <= K3_CFG_MAX_POSITION_FLOATS (2^27)
 *   model_bytes, state_bytes <= K3_CFG_MAX_BYTES (2^50)
 * k3_forward takes calls of at most K3_MAX_CALL_TOKENS (2^26: the CLI's
 * largest prompt, 64 MiB, is at most that many tokens) ending at or before
 * position K3_MAX_POSITIONS (2^31). Hence every element count or byte size
 * the engine derives from the config, a call's token count and a position
 * stays below 2^62: a call's scratch is at most T x token_floats + positions
 * floats (< 2^59; give or take 64 bytes of alignment a buffer, plus the matmul
 * workspace, about 1 MB a thread), the KV caches at most positions x position_floats
 * (<= 2^58), any weight tensor, run, expert slot or KDA state at most 2^50
 * bytes. size_t is 64 bits (util/ckd.h), so binding, the kernels
 * and the state code multiply these as int64 or size_t without checks. Only
 * sizes that also depend on options (model/plan.c: budgets, contexts, slot
 * counts) or on file headers (io/safetensors.c) use checked arithmetic. */
#ifndef K3_MODEL_CONFIG_H
#define K3_MODEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

enum { K3_LAYER_KDA = 0, K3_LAYER_MLA = 1 };

#define K3_CFG_MAX_VOCAB ((int64_t)1 << 24)
#define K3_CFG_MAX_LAYERS 4096
#define K3_CFG_MAX_TOKEN_FLOATS ((uint64_t)1 << 32)
#define K3_CFG_MAX_POSITION_FLOATS ((uint64_t)1 << 27)
#define K3_CFG_MAX_BYTES ((uint64_t)1 << 50)
#define K3_MAX_CALL_TOKENS ((size_t)1 << 26)
#define K3_MAX_POSITIONS ((int64_t)1 << 31)

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

/* Sizes derived from a config, each exact or UINT64_MAX when it does not
 * fit 64 bits (see the size contract above). */
typedef struct k3_config_sizes {
    uint64_t token_floats;    /* k3_forward_scratch (model.h) for one token, no
                                 context, in floats (rounded up) */
    uint64_t position_floats; /* KV cache floats per position, all layers */
    uint64_t model_bytes;     /* every tensor the config implies, at 4 bytes an
                                 element (an upper bound: none takes more) */
    uint64_t state_bytes;     /* a sequence's KDA states and last logits */
} k3_config_sizes;
void k3_config_sizes_of(const k3_config *c, k3_config_sizes *s);

#endif
