/* config_sizes.c - the sizes derived from a config (config.h, "the size
 * contract"), in saturating arithmetic: every result is exact or UINT64_MAX,
 * whatever the fields hold, so the limits config.c compares them against
 * are complete overflow checks. */
#include "model/config.h"

#include "model/model.h"
#include "util/ckd.h"

static uint64_t u(int64_t v) { return v > 0 ? (uint64_t)v : 0; }
static uint64_t max2(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t mul(uint64_t a, uint64_t b) { return k3_sat_mul(a, b); }
static uint64_t mul3(uint64_t a, uint64_t b, uint64_t c) { return mul(mul(a, b), c); }

static uint64_t sum(const uint64_t *v, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s = k3_sat_add(s, v[i]);
    return s;
}

#define SUM(...) sum((const uint64_t[]){ __VA_ARGS__ }, \
                     sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t))

/* Elements of one layer's tensors, whichever attention and MLP it has. */
static uint64_t layer_elems(const k3_config *c)
{
    uint64_t H = u(c->hidden_size), D = u(c->kda_head_dim), NH = u(c->kda_num_heads);
    uint64_t C = mul(NH, D), K = u(c->short_conv_kernel_size);
    uint64_t QL = u(c->q_lora_rank), R = u(c->kv_lora_rank), MH = u(c->num_attention_heads);
    uint64_t DN = u(c->qk_nope_head_dim), DR = u(c->qk_rope_head_dim);
    uint64_t DV = u(c->v_head_dim), DQ = k3_sat_add(DN, DR);
    uint64_t E = u(c->num_experts), Z = u(c->routed_expert_hidden_size);
    uint64_t F = u(c->moe_intermediate_size), S = mul(F, u(c->num_shared_experts));
    uint64_t I = u(c->intermediate_size);
    uint64_t norms = mul(6, H);
    uint64_t kda = SUM(mul3(5, C, H), mul(D, H), mul(C, D), mul(NH, H), mul3(3, C, K),
                       mul(2, D), C);
    uint64_t mla = SUM(mul(QL, H), QL, mul3(MH, DQ, QL), mul(k3_sat_add(R, DR), H), R,
                       mul3(MH, k3_sat_add(DN, DV), R), mul3(2, mul(MH, DV), H));
    /* routed experts: w1, w3 [F, Z] and w2 [Z, F], packed and scales */
    uint64_t experts = mul(E, mul3(3, F, Z));
    uint64_t moe = SUM(mul(E, H), E, mul3(2, Z, H), Z, mul3(3, S, H), experts);
    uint64_t dense = mul3(3, I, H);
    return SUM(norms, max2(kda, mla), max2(moe, dense));
}

void k3_config_sizes_of(const k3_config *c, k3_config_sizes *s)
{
    uint64_t L = u(c->num_hidden_layers), H = u(c->hidden_size), V = u(c->vocab_size);
    uint64_t D = u(c->kda_head_dim), NH = u(c->kda_num_heads), C = mul(NH, D);
    uint64_t K = u(c->short_conv_kernel_size);
    /* k3_forward's arena for one token, no context, no matmul workspace */
    uint64_t one = k3_forward_scratch(c, c->num_hidden_layers, 1, 0, 0);
    s->token_floats = one == UINT64_MAX ? UINT64_MAX : one / 4 + (one % 4 != 0);
    s->position_floats = mul(L, k3_sat_add(u(c->kv_lora_rank), u(c->qk_rope_head_dim)));
    /* embedding, lm_head, final and output AttnRes vectors, the layers */
    uint64_t elems = SUM(mul3(2, V, H), mul(3, H), mul(L, layer_elems(c)));
    s->model_bytes = mul(elems, 4);
    /* state.c: per KDA layer 3 (K-1) C conv floats and NH D^2 recurrent */
    uint64_t kda = k3_sat_add(mul3(3, K > 0 ? K - 1 : 0, C), mul3(NH, D, D));
    s->state_bytes = mul(k3_sat_add(mul(L, kda), V), 4);
}
