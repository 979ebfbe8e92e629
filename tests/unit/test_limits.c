/* test_limits.c - the size limits of the file parsers (docs/SECURITY.md):
 * each lying size is refused with K3_EINPUT and a message naming it,
 * before anything is allocated from it.
 *
 *   safetensors: a header length over K3_ST_MAX_HEADER; a shape whose
 *     element count, or byte count, overflows 64 bits; data_offsets past
 *     the end of the file, or not an int64; a negative shape entry; many
 *     small tensors (the sorted duplicate and overlap checks) accepted
 *   config: every integer field over its limit (and at 2^31, 2^32, 2^62,
 *     2^63 - 1, where products wrap), and fields within their limits whose
 *     derived sizes are too large together, refused naming the field
 *   JSON: nesting over 512 levels (test_parsers) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "io/safetensors.h"
#include "model/config.h"

static char dir[64];

/* Writes DIR/model.safetensors: an 8-byte length (hlen, or the header's
 * own length when hlen is 0), the header text and data_bytes zero bytes. */
static void write_shard(uint64_t hlen, const char *header, size_t data_bytes)
{
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    uint64_t n = hlen ? hlen : strlen(header);
    for (int i = 0; i < 8; i++)
        fputc((int)(n >> (8 * i)) & 0xFF, f);
    fputs(header, f);
    for (size_t i = 0; i < data_bytes; i++)
        fputc(0, f);
    fclose(f);
}

/* k3_st_open on the shard; the code, with the message in e. */
static int open_shard(k3_err *e)
{
    k3_st_index *ix = NULL;
    memset(e, 0, sizeof *e);
    int rc = k3_st_open(&ix, dir, e);
    k3_st_close(ix);
    return rc;
}

static void test_safetensors(void)
{
    k3_err e;
    write_shard((uint64_t)K3_ST_MAX_HEADER + 1, "", 0);
    CHECK(open_shard(&e) == K3_EINPUT && strstr(e.msg, "exceeds the 100000000-byte limit"),
          "header over the limit: %s", e.msg);
    write_shard(UINT64_MAX, "", 0);
    CHECK(open_shard(&e) == K3_EINPUT && strstr(e.msg, "exceeds"), "2^64-1 header: %s", e.msg);
    write_shard((uint64_t)K3_ST_MAX_HEADER, "{}", 0);
    CHECK(open_shard(&e) == K3_EINPUT && strstr(e.msg, "truncated"),
          "header at the limit but past the file: %s", e.msg);

    write_shard(0, "{\"t\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
                   "\"data_offsets\":[0,0]}}", 0);
    CHECK(open_shard(&e) == K3_EINPUT && strstr(e.msg, "shape overflows"),
          "element count over 2^64: %s", e.msg);
    write_shard(0, "{\"t\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                   "\"data_offsets\":[0,0]}}", 0);
    CHECK(open_shard(&e) == K3_EINPUT && strstr(e.msg, "tensor t: data_offsets span"),
          "byte count over 2^64: %s", e.msg);
    write_shard(0, "{\"t\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0);
    CHECK(open_shard(&e) == K3_EINPUT && strstr(e.msg, "non-negative"), "negative: %s", e.msg);

    write_shard(0, "{\"t\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]}}", 8);
    CHECK(open_shard(&e) == K3_EINPUT && strstr(e.msg, "ends at data byte 16") &&
              strstr(e.msg, "has 8 bytes"),
          "offsets past the file: %s", e.msg);
    write_shard(0, "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],"
                   "\"data_offsets\":[18446744073709551615,18446744073709551616]}}", 8);
    CHECK(open_shard(&e) == K3_EINPUT && strstr(e.msg, "data_offsets must be"),
          "offsets beyond int64: %s", e.msg);

    /* 5000 one-byte tensors: the sorted checks take them all. */
    size_t n = 5000, cap = n * 80 + 16, at = 0;
    char *h = malloc(cap);
    if (!h)
        return;
    at += (size_t)snprintf(h + at, cap - at, "{");
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(
            h + at, cap - at,
            "%s\"w%zu\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}", i ? "," : "",
            i, i, i + 1);
    snprintf(h + at, cap - at, "}");
    write_shard(0, h, n);
    k3_st_index *ix = NULL;
    memset(&e, 0, sizeof e);
    CHECK(k3_st_open(&ix, dir, &e) == K3_OK && k3_st_count(ix) == n, "5000 tensors: %s", e.msg);
    k3_st_close(ix);
    free(h);
}

/* test_parsers.c's GOOD config with `from` replaced by `to`, parsed. */
static int config_edited(const char *from, const char *to, k3_err *e)
{
    static const char *good =
        "{\"vocab_size\":512,\"hidden_size\":64,\"intermediate_size\":96,"
        "\"num_hidden_layers\":3,\"num_attention_heads\":2,\"q_lora_rank\":32,\"kv_lora_rank\":32,"
        "\"qk_nope_head_dim\":16,\"qk_rope_head_dim\":8,\"v_head_dim\":16,\"mla_use_nope\":true,"
        "\"mla_use_output_gate\":true,\"hidden_act\":\"situ\",\"activation_situ_beta\":4.0,"
        "\"activation_situ_linear_beta\":25.0,\"rms_norm_eps\":1e-5,\"attn_res_block_size\":2,"
        "\"first_k_dense_replace\":1,\"moe_layer_freq\":1,\"num_experts\":8,"
        "\"num_experts_per_token\":2,\"num_shared_experts\":1,\"moe_intermediate_size\":32,"
        "\"routed_expert_hidden_size\":64,\"latent_moe_use_norm\":true,\"moe_renormalize\":true,"
        "\"moe_router_activation_func\":\"sigmoid\",\"routed_scaling_factor\":1.0,"
        "\"num_expert_group\":1,\"topk_group\":1,\"tie_word_embeddings\":false,"
        "\"bos_token_id\":256,\"eos_token_id\":258,\"pad_token_id\":511,"
        "\"linear_attn_config\":{\"head_dim\":16,\"num_heads\":2,\"short_conv_kernel_size\":4,"
        "\"gate_lower_bound\":-5.0,\"use_full_rank_gate\":true,\"kda_layers\":[1,2],"
        "\"full_attn_layers\":[3]},\"quantization_config\":{\"format\":\"mxfp4-pack-quantized\","
        "\"config_groups\":{\"group_0\":{\"weights\":{\"group_size\":32,\"num_bits\":4}}}}}";
    char buf[4096];
    const char *p = strstr(good, from);
    if (!p)
        return -1;
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good), good, to, p + strlen(from));
    k3_config c;
    memset(e, 0, sizeof *e);
    int rc = k3_config_parse(&c, buf, strlen(buf), "config.json", e);
    if (rc == K3_OK)
        k3_config_free(&c);
    return rc;
}

/* The config with field `key` (its first occurrence, as "key":old) set to
 * the decimal text `value`. */
static int config_with(const char *key, const char *value, k3_err *e)
{
    static const char *const olds[] = { "512", "64", "96", "3", "2", "32", "16", "8", "4",
                                        "1", "256", "511", "258" };
    char from[96], to[96];
    for (size_t i = 0; i < sizeof olds / sizeof *olds; i++) {
        snprintf(from, sizeof from, "\"%s\":%s,", key, olds[i]);
        snprintf(to, sizeof to, "\"%s\":%s,", key, value);
        int rc = config_edited(from, to, e);
        if (rc != -1)
            return rc;
    }
    return -1;
}

/* Every integer field of the config with its limit (config.c's LIMITS). */
static const struct {
    const char *key;
    long long max;
} FIELDS[] = {
    { "vocab_size", 1LL << 24 },          { "hidden_size", 1LL << 16 },
    { "intermediate_size", 1LL << 19 },   { "num_hidden_layers", 4096 },
    { "num_attention_heads", 1LL << 12 }, { "q_lora_rank", 1LL << 16 },
    { "kv_lora_rank", 1LL << 14 },        { "qk_nope_head_dim", 1LL << 12 },
    { "qk_rope_head_dim", 1LL << 12 },    { "v_head_dim", 1LL << 12 },
    { "head_dim", 1LL << 12 },            { "num_heads", 1LL << 12 },
    { "short_conv_kernel_size", 64 },     { "first_k_dense_replace", 4096 },
    { "num_experts", 1LL << 16 },         { "num_experts_per_token", 256 },
    { "num_shared_experts", 64 },         { "moe_intermediate_size", 1LL << 16 },
    { "routed_expert_hidden_size", 1LL << 16 }, { "attn_res_block_size", 4096 },
    { "bos_token_id", (1LL << 24) - 1 },  { "pad_token_id", (1LL << 24) - 1 },
};

static void test_config(void)
{
    k3_err e;
    char v[32], want[96];
    CHECK(config_edited("{", "{", &e) == K3_OK, "good config: %s", e.msg);
    /* The red team's four: products that wrap to tiny shapes, or the bank
     * count's (L + block - 1). */
    static const struct { const char *key, *value; } wraps[] = {
        { "num_attention_heads", "2305843009213693956" }, /* 2^61 + 4 */
        { "v_head_dim", "4611686018427387920" },          /* 2^62 + 16 */
        { "num_shared_experts", "4611686018427387904" },  /* 2^62 */
        { "attn_res_block_size", "9223372036854775807" }, /* 2^63 - 1 */
    };
    for (size_t i = 0; i < sizeof wraps / sizeof *wraps; i++) {
        snprintf(want, sizeof want, "%s (%s is over the limit", wraps[i].key, wraps[i].value);
        CHECK(config_with(wraps[i].key, wraps[i].value, &e) == K3_EINPUT && strstr(e.msg, want),
              "%s = %s: %s", wraps[i].key, wraps[i].value, e.msg);
    }
    /* Every field one past its limit, and at 2^31, 2^32, 2^62, 2^63 - 1. */
    static const char *const powers[] = { "2147483648", "4294967296", "4611686018427387904",
                                          "9223372036854775807" };
    for (size_t i = 0; i < sizeof FIELDS / sizeof *FIELDS; i++) {
        snprintf(v, sizeof v, "%lld", FIELDS[i].max + 1);
        snprintf(want, sizeof want, "%s (%s is over the limit %lld)", FIELDS[i].key, v,
                 FIELDS[i].max);
        CHECK(config_with(FIELDS[i].key, v, &e) == K3_EINPUT && strstr(e.msg, want),
              "%s = limit + 1: %s", FIELDS[i].key, e.msg);
        for (size_t j = 0; j < sizeof powers / sizeof *powers; j++) {
            snprintf(want, sizeof want, "%s (%s is over the limit", FIELDS[i].key, powers[j]);
            CHECK(config_with(FIELDS[i].key, powers[j], &e) == K3_EINPUT && strstr(e.msg, want),
                  "%s = %s: %s", FIELDS[i].key, powers[j], e.msg);
        }
    }
    /* At their limits, fields the others do not constrain are accepted. */
    static const char *const at_limit[] = { "vocab_size", "hidden_size", "intermediate_size",
                                            "num_attention_heads", "q_lora_rank",
                                            "kv_lora_rank", "v_head_dim", "num_shared_experts",
                                            "attn_res_block_size" };
    for (size_t i = 0; i < sizeof at_limit / sizeof *at_limit; i++)
        for (size_t j = 0; j < sizeof FIELDS / sizeof *FIELDS; j++)
            if (!strcmp(FIELDS[j].key, at_limit[i])) {
                snprintf(v, sizeof v, "%lld", FIELDS[j].max);
                CHECK(config_with(at_limit[i], v, &e) == K3_OK, "%s at its limit: %s",
                      at_limit[i], e.msg);
            }
    /* Every field within its limit, but together too large: the derived sizes. */
    CHECK(config_edited("\"moe_intermediate_size\":32,\"routed_expert_hidden_size\":64",
                        "\"moe_intermediate_size\":65536,\"routed_expert_hidden_size\":65536",
                        &e) == K3_OK, "wide experts: %s", e.msg);
    CHECK(config_edited("\"num_experts\":8,", "\"num_experts\":65536,", &e) == K3_OK,
          "many experts: %s", e.msg);
    CHECK(config_edited("\"num_experts\":8,\"num_experts_per_token\":2,\"num_shared_experts\":1,"
                        "\"moe_intermediate_size\":32,\"routed_expert_hidden_size\":64",
                        "\"num_experts\":65536,\"num_experts_per_token\":2,"
                        "\"num_shared_experts\":1,"
                        "\"moe_intermediate_size\":65536,\"routed_expert_hidden_size\":65536",
                        &e) == K3_EINPUT &&
              strstr(e.msg, "the dimensions (the weights would take over 1125899906842624 bytes)"),
          "many wide experts: %s", e.msg);
    CHECK(config_edited("\"head_dim\":16,\"num_heads\":2", "\"head_dim\":4096,\"num_heads\":4096",
                        &e) == K3_OK, "the largest KDA state: %s", e.msg);
    CHECK(config_edited("\"num_hidden_layers\":3", "\"num_hidden_layers\":100000000", &e) ==
              K3_EINPUT && strstr(e.msg, "num_hidden_layers (100000000 is over the limit 4096)"),
          "10^8 layers, before the layer map is allocated: %s", e.msg);
    CHECK(config_with("bos_token_id", "512", &e) == K3_EINPUT &&
              strstr(e.msg, "bos_token_id (outside the vocabulary)"), "bos: %s", e.msg);
    CHECK(config_with("pad_token_id", "512", &e) == K3_EINPUT &&
              strstr(e.msg, "pad_token_id (outside the vocabulary)"), "pad: %s", e.msg);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/k3-test-limits-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_safetensors();
    test_config();
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
    return check_report("test_limits");
}
