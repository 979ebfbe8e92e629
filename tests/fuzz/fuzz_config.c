/* fuzz_config.c - the config reader (k3_config_parse) on arbitrary text,
 * and, for text it accepts, what the engine does with the numbers:
 * binding a checkpoint's tensors against them and planning memory
 * (k3_model_open with plan_only over the tiny-a shards of $K3_FUZZ_DATA/model,
 * with the input as config.json). A config is the first file of a download
 * the engine believes; its integers size every allocation.
 *
 * Promises checked on an accepted config: every layer has a kind, 1..4 eos
 * ids inside the vocabulary, top-k within the experts, the ranges
 * check_ranges documents; the size contract of model/config.h, recomputed
 * here independently (each product of fields the engine forms, at the
 * largest call and position, must fit int64: a wrap aborts); and model
 * opening either succeeds or refuses with a code and a message. When the
 * shards bind against a config of shapes not seen before, one 3-token
 * forward step runs, so a size that binding accepted but the kernels
 * overrun is an ASan report. The dictionary (k3.dict) holds values near
 * powers of two, where products wrap. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "k3/k3.h"
#include "model/config.h"

/* Links the tiny-a index and shards next to the fuzzed config.json. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const char *const files[] = {
        "model.safetensors.index.json", "model-00001-of-000003.safetensors",
        "model-00002-of-000003.safetensors", "model-00003-of-000003.safetensors",
    };
    char from[512];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(from, sizeof from, "%s/model/%s", fz_data_dir(), files[i]);
        fz_link(files[i], from);
    }
    return 0;
}

/* a * b, which the size contract promises fits int64. */
static int64_t mul(int64_t a, int64_t b)
{
    int64_t r;
    FZ_ASSERT(!__builtin_mul_overflow(a, b, &r), "%lld x %lld wraps int64", (long long)a,
              (long long)b);
    return r;
}

static int64_t add(int64_t a, int64_t b)
{
    int64_t r;
    FZ_ASSERT(!__builtin_add_overflow(a, b, &r), "%lld + %lld wraps int64", (long long)a,
              (long long)b);
    return r;
}

/* The products binding, the plan, the kernels and the state code form,
 * at the largest call (T tokens) and position (P): each must fit, and the
 * engine's own sizes must be within config.h's limits. */
static void check_sizes(const k3_config *c)
{
    const int64_t T = (int64_t)K3_MAX_CALL_TOKENS, P = K3_MAX_POSITIONS;
    int64_t H = c->hidden_size, V = c->vocab_size, L = c->num_hidden_layers;
    int64_t D = c->kda_head_dim, KN = c->kda_num_heads, C = mul(KN, D);
    int64_t NH = c->num_attention_heads, DN = c->qk_nope_head_dim, DR = c->qk_rope_head_dim;
    int64_t DV = c->v_head_dim, DQ = add(DN, DR), R = c->kv_lora_rank, QL = c->q_lora_rank;
    int64_t E = c->num_experts, K = c->num_experts_per_token, Z = c->routed_expert_hidden_size;
    int64_t F = c->moe_intermediate_size, S = mul(F, c->num_shared_experts);
    int64_t block = c->attn_res_block_size, nbank = add(L, block - 1) / block + 1;
    int64_t I = c->intermediate_size, KW = add(R, DR);
    /* weights (elements) */
    int64_t w = mul(mul(2, V), H);
    w = add(w, mul(L, add(add(mul(mul(5, C), H), mul(mul(NH, DQ), QL)),
                          add(mul(mul(NH, add(DN, DV)), R), mul(mul(2, mul(NH, DV)), H)))));
    w = add(w, mul(L, add(add(mul(mul(E, 3), mul(F, Z)), mul(mul(3, S), H)),
                          add(mul(mul(3, I), H), mul(mul(E, H), 2)))));
    FZ_ASSERT(mul(w, 2) > 0, "weight bytes");
    /* one call's scratch, the KV cache and the KDA state */
    int64_t fwd = add(add(mul(mul(5, T), H), mul(mul(T, nbank), H)), mul(T, V));
    int64_t att = add(add(mul(mul(6, T), C), mul(mul(T, NH), DQ)),
                      add(mul(mul(2, T), mul(NH, DV)), add(mul(T, KW), P)));
    int64_t moe = add(add(mul(T, E), mul(mul(3, T), Z)), add(mul(K, add(Z, mul(2, F))),
                                                             mul(mul(2, T), add(S, F))));
    FZ_ASSERT(mul(add(add(fwd, att), add(moe, mul(mul(2, T), I))), 4) > 0, "scratch bytes");
    FZ_ASSERT(mul(mul(mul(P, KW), L), 4) > 0, "KV cache bytes");
    FZ_ASSERT(mul(mul(L, add(mul(mul(3, c->short_conv_kernel_size), C), mul(mul(KN, D), D))),
                  4) > 0, "KDA state bytes");
    k3_config_sizes z;
    k3_config_sizes_of(c, &z);
    FZ_ASSERT(z.token_floats <= K3_CFG_MAX_TOKEN_FLOATS && z.model_bytes <= K3_CFG_MAX_BYTES &&
                  z.state_bytes <= K3_CFG_MAX_BYTES &&
                  z.position_floats <= K3_CFG_MAX_POSITION_FLOATS,
              "derived sizes over config.h's limits");
}

static void check_config(const k3_config *c)
{
    FZ_ASSERT(c->num_hidden_layers >= 1 && c->num_hidden_layers <= 4096 && c->layer_kind,
              "layers %lld", (long long)c->num_hidden_layers);
    for (int64_t i = 0; i < c->num_hidden_layers; i++)
        FZ_ASSERT(c->layer_kind[i] == K3_LAYER_KDA || c->layer_kind[i] == K3_LAYER_MLA,
                  "layer %lld has no kind", (long long)i);
    FZ_ASSERT(c->n_eos >= 1 && c->n_eos <= 4, "%d eos ids", c->n_eos);
    for (int i = 0; i < c->n_eos; i++)
        FZ_ASSERT(c->eos_ids[i] >= 0 && c->eos_ids[i] < c->vocab_size, "eos id outside vocab");
    FZ_ASSERT(c->num_experts_per_token <= c->num_experts, "top-k beyond the experts");
    FZ_ASSERT(c->routed_expert_hidden_size % 32 == 0 && c->moe_intermediate_size % 32 == 0,
              "MXFP4 widths");
    FZ_ASSERT(c->kda_num_heads <= c->kda_head_dim && c->short_conv_kernel_size <= 64 &&
                  c->first_k_dense_replace <= c->num_hidden_layers,
              "ranges");
    FZ_ASSERT(c->rms_norm_eps > 0 && c->situ_beta > 0 && c->situ_linear_beta > 0, "positive");
    FZ_ASSERT(c->attn_res_block_size >= 1 && c->bos_token_id < c->vocab_size &&
                  c->pad_token_id < c->vocab_size && c->num_shared_experts >= 0,
              "block size, bos, pad");
    check_sizes(c);
}

/* Whether the shapes of c (its integer fields and layer map) are new to
 * this process: the forward step runs once per shape, not once per mutation
 * of a string or a real (which cannot change a size). */
static int new_shape(const k3_config *c)
{
    static uint64_t seen[4096];
    const int64_t f[] = {
        c->vocab_size, c->hidden_size, c->intermediate_size, c->num_hidden_layers,
        c->num_attention_heads, c->q_lora_rank, c->kv_lora_rank, c->qk_nope_head_dim,
        c->qk_rope_head_dim, c->v_head_dim, c->kda_head_dim, c->kda_num_heads,
        c->short_conv_kernel_size, c->first_k_dense_replace, c->num_experts,
        c->num_experts_per_token, c->num_shared_experts, c->moe_intermediate_size,
        c->routed_expert_hidden_size, c->attn_res_block_size, c->latent_moe_use_norm,
        c->tie_word_embeddings,
    };
    uint64_t h = 14695981039346656037u; /* FNV-1a */
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        for (int k = 0; k < 8; k++)
            h = (h ^ (uint8_t)((uint64_t)f[i] >> (8 * k))) * 1099511628211u;
    for (int64_t i = 0; i < c->num_hidden_layers; i++)
        h = (h ^ c->layer_kind[i]) * 1099511628211u;
    h |= 1;
    uint64_t *slot = &seen[h % (sizeof seen / sizeof *seen)];
    if (*slot == h)
        return 0;
    *slot = h;
    return 1;
}

/* A model that opened for planning: open it whole and run 3 tokens. */
static void forward_step(void)
{
    k3_model_opts o;
    k3_model_opts_default(&o);
    o.no_mem_check = 1;
    o.max_context = 8;
    o.max_batch = 3;
    k3_model *m = NULL;
    k3_state *s = NULL;
    k3_err e = { 0, "" };
    int rc = k3_model_open(&m, fz_tmpdir(), &o, &e);
    if (rc == K3_OK)
        rc = k3_state_new(&s, m, &e);
    if (rc == K3_OK) {
        uint32_t V = k3_model_vocab(m), ids[3] = { 1 % V, 7 % V, (V - 1) % V };
        float *logits = malloc(3 * (size_t)V * sizeof *logits);
        FZ_ASSERT(logits, "harness out of memory");
        rc = k3_forward(m, s, ids, 3, logits, 1, &e);
        for (size_t i = 0; rc == K3_OK && i < 3 * (size_t)V; i++)
            FZ_ASSERT(isfinite(logits[i]), "logit %zu is not finite", i);
        free(logits);
    }
    if (rc != K3_OK)
        fz_check_refusal(&e, rc);
    k3_state_free(s);
    k3_model_close(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    k3_config cfg;
    k3_err e = { 0, "" };
    int rc = k3_config_parse(&cfg, (const char *)data, size, "config.json", &e);
    if (rc != K3_OK) {
        fz_check_input_refusal(&e, rc);
        FZ_ASSERT(cfg.layer_kind == NULL, "refused config keeps memory");
        return 0;
    }
    check_config(&cfg);
    int fresh = new_shape(&cfg);
    k3_config_free(&cfg);

    fz_write("config.json", data, size);
    k3_model_opts o;
    k3_model_opts_default(&o);
    o.plan_only = 1;
    o.no_mem_check = 1;
    k3_model *m = NULL;
    k3_err me = { 0, "" };
    rc = k3_model_open(&m, fz_tmpdir(), &o, &me);
    if (rc != K3_OK)
        fz_check_input_refusal(&me, rc);
    k3_model_close(m);
    if (rc == K3_OK && fresh)
        forward_step();
    return 0;
}
