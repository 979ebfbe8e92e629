/* test_parsers.c - the strict JSON reader and the config reader. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/config.h"
#include "model/model.h"
#include "util/ckd.h"
#include "util/json.h"

static int parses(const char *s)
{
    char err[256];
    k3_json_doc *d = k3_json_parse(s, strlen(s), err, sizeof err);
    k3_json_free(d);
    return d != NULL;
}

static void test_json(void)
{
    char err[256];
    const char *ok[] = { "{}", "[]", "0", "-0.5e+3", "\"\\u00e9\\ud83d\\ude00\"",
                         "[true,false,null]", "{\"a\":{\"b\":[1,2,{\"c\":\"d\"}]}}", " \t\r\n1 " };
    const char *bad[] = { "", "{", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "NaN", "\"\\x\"",
                          "\"\\ud800\"", "\"\\udc00\"", "{\"a\":1,\"a\":2}", "[1] 2", "'a'",
                          "\"\x01\"", "\"\xc3\x28\"", "\"\xed\xa0\x80\"", "1e999", "{1:2}", "tru" };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        CHECK(parses(ok[i]), "should parse: %s", ok[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(!parses(bad[i]), "should be refused: %s", bad[i]);

    /* Exact integers beyond 2^53 and escapes decode correctly. */
    const char *s = "{\"n\":9007199254740993,\"s\":\"a\\u0000b\\n\",\"f\":1.5}";
    k3_json_doc *d = k3_json_parse(s, strlen(s), err, sizeof err);
    CHECK(d != NULL, "%s", err);
    if (d) {
        const k3_json *r = k3_json_root(d);
        const k3_json *n = k3_json_get(r, "n"), *str = k3_json_get(r, "s"),
                      *f = k3_json_get(r, "f");
        CHECK(n && n->is_int && n->integer == 9007199254740993LL, "big integer");
        CHECK(str && str->len == 4 && !memcmp(str->str, "a\0b\n", 4), "escapes");
        CHECK(f && !f->is_int && f->number == 1.5, "float");
        k3_json_free(d);
    }

    /* Escaped quotes and runs of backslashes end (or do not end) a string
     * where RFC 8259 says; numbers decode to the double strtod gives. */
    const char *q = "[\"a\\\"b\",\"c\\\\\",\"\\\\\\\"\",-12345678901234567,18446744073709551615]";
    d = k3_json_parse(q, strlen(q), err, sizeof err);
    CHECK(d != NULL, "%s", err);
    if (d) {
        const k3_json *r = k3_json_root(d);
        CHECK(r->count == 5 && !strcmp(r->items[0].str, "a\"b") &&
                  !strcmp(r->items[1].str, "c\\") && !strcmp(r->items[2].str, "\\\""),
              "escaped quotes");
        CHECK(r->items[3].is_int && r->items[3].integer == -12345678901234567LL &&
                  r->items[3].number == strtod("-12345678901234567", NULL), "negative integer");
        CHECK(!r->items[4].is_int && r->items[4].number == strtod("18446744073709551615", NULL),
              "integer beyond int64");
        k3_json_free(d);
    }
    CHECK(!parses("[\"a\\\"]"), "an escaped quote does not close a string");

    /* Error messages name the byte offset. */
    CHECK(!k3_json_parse("[1,2,x]", 7, err, sizeof err) && strstr(err, "byte 5"), "offset: %s",
          err);

    /* Deep nesting is refused, not a stack overflow. */
    size_t depth = 100000;
    char *deep = malloc(depth + 1);
    memset(deep, '[', depth);
    deep[depth] = 0;
    CHECK(!k3_json_parse(deep, depth, err, sizeof err) && strstr(err, "nesting"), "deep: %s", err);
    free(deep);

    /* Duplicate keys in a large object (the sorted path). */
    char big[4096] = "{";
    for (int i = 0; i < 100; i++)
        sprintf(big + strlen(big), "\"k%d\":%d,", i % 99, i);
    big[strlen(big) - 1] = '}';
    CHECK(!parses(big), "duplicate key in a large object");
}

static const char *GOOD =
    "{\"text_config\":{\"vocab_size\":512,\"hidden_size\":64,\"intermediate_size\":96,"
    "\"num_hidden_layers\":3,\"num_attention_heads\":2,\"q_lora_rank\":32,\"kv_lora_rank\":32,"
    "\"qk_nope_head_dim\":16,\"qk_rope_head_dim\":8,\"v_head_dim\":16,\"mla_use_nope\":true,"
    "\"mla_use_output_gate\":true,\"hidden_act\":\"situ\",\"activation_situ_beta\":4.0,"
    "\"activation_situ_linear_beta\":25.0,\"rms_norm_eps\":1e-5,\"attn_res_block_size\":2,"
    "\"first_k_dense_replace\":1,\"moe_layer_freq\":1,\"num_experts\":8,"
    "\"num_experts_per_token\":2,"
    "\"num_shared_experts\":1,\"moe_intermediate_size\":32,\"routed_expert_hidden_size\":64,"
    "\"latent_moe_use_norm\":true,\"moe_renormalize\":true,"
    "\"moe_router_activation_func\":\"sigmoid\","
    "\"routed_scaling_factor\":1.0,\"num_expert_group\":1,\"topk_group\":1,"
    "\"tie_word_embeddings\":false,"
    "\"bos_token_id\":256,\"eos_token_id\":258,\"pad_token_id\":511,"
    "\"linear_attn_config\":{\"head_dim\":16,\"num_heads\":2,\"short_conv_kernel_size\":4,"
    "\"gate_lower_bound\":-5.0,\"use_full_rank_gate\":true,\"kda_layers\":[1,2],"
    "\"full_attn_layers\":[3]},"
    "\"quantization_config\":{\"format\":\"mxfp4-pack-quantized\",\"config_groups\":{\"group_0\":"
    "{\"weights\":{\"group_size\":32,\"num_bits\":4}}}}}}";

/* GOOD with the first occurrence of `from` replaced by `to`. */
static int parse_edited(const char *from, const char *to, k3_err *e)
{
    char buf[4096];
    const char *p = strstr(GOOD, from);
    if (!p)
        return -1;
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - GOOD), GOOD, to, p + strlen(from));
    k3_config c;
    memset(e, 0, sizeof *e);
    int rc = k3_config_parse(&c, buf, strlen(buf), "config.json", e);
    if (rc == K3_OK)
        k3_config_free(&c);
    return rc;
}

static void test_config(void)
{
    k3_err e;
    CHECK(parse_edited("{", "{", &e) == K3_OK, "good config: %s", e.msg);
    k3_config c;
    memset(&e, 0, sizeof e);
    if (k3_config_parse(&c, GOOD, strlen(GOOD), "config.json", &e) == K3_OK) {
        CHECK(c.layer_kind[0] == K3_LAYER_KDA && c.layer_kind[2] == K3_LAYER_MLA,
              "one-based layer lists");
        CHECK(c.n_eos == 1 && c.eos_ids[0] == 258, "eos");
        k3_config_free(&c);
    }
    /* Every missing field is named at once. */
    CHECK(parse_edited("\"vocab_size\":512,\"hidden_size\":64,", "", &e) == K3_EINPUT &&
              strstr(e.msg, "vocab_size") && strstr(e.msg, "hidden_size"),
          "two missing fields: %s", e.msg);
    CHECK(parse_edited("\"hidden_size\":64", "\"hidden_size\":\"64\"", &e) == K3_EINPUT &&
              strstr(e.msg, "hidden_size"), "wrong type: %s", e.msg);
    CHECK(parse_edited("\"kda_layers\":[1,2]", "\"kda_layers\":[1,7]", &e) == K3_EINPUT &&
              strstr(e.msg, "kda_layers"), "layer out of range: %s", e.msg);
    CHECK(parse_edited("\"kda_layers\":[1,2]", "\"kda_layers\":[1,3]", &e) == K3_EINPUT,
          "layer in both lists: %s", e.msg);
    CHECK(parse_edited("\"kda_layers\":[1,2]", "\"kda_layers\":[1]", &e) == K3_EINPUT,
          "layer in neither list: %s", e.msg);
    CHECK(parse_edited("\"num_experts_per_token\":2", "\"num_experts_per_token\":9", &e) ==
                  K3_EINPUT &&
              strstr(e.msg, "num_experts_per_token"),
          "top-k > experts: %s", e.msg);
    CHECK(parse_edited("\"moe_intermediate_size\":32", "\"moe_intermediate_size\":40", &e) ==
                  K3_EINPUT &&
              strstr(e.msg, "32"),
          "MXFP4 width: %s", e.msg);
    CHECK(parse_edited("\"sigmoid\"", "\"softmax\"", &e) == K3_EINPUT &&
              strstr(e.msg, "moe_router_activation_func"), "router activation: %s", e.msg);
    CHECK(parse_edited("\"quantization_config\"", "\"quantization_confi\"", &e) == K3_EINPUT &&
              strstr(e.msg, "quantization_config"), "no quantization_config: %s", e.msg);
    /* Reals the engine uses as floats must be floats: 1e-300 is positive as a
     * double but 0 as a float; 1e300 is finite as a double only. */
    CHECK(parse_edited("\"rms_norm_eps\":1e-5", "\"rms_norm_eps\":1e-300", &e) == K3_EINPUT &&
              strstr(e.msg, "rms_norm_eps"), "eps underflows a float: %s", e.msg);
    CHECK(parse_edited("\"activation_situ_linear_beta\":25.0",
                       "\"activation_situ_linear_beta\":1e300", &e) == K3_EINPUT &&
              strstr(e.msg, "activation_situ"),
          "beta overflows: %s", e.msg);
    CHECK(parse_edited("\"routed_scaling_factor\":1.0", "\"routed_scaling_factor\":1e39", &e) ==
                  K3_EINPUT &&
              strstr(e.msg, "routed_scaling_factor"),
          "scaling overflows: %s", e.msg);
    CHECK(parse_edited("\"gate_lower_bound\":-5.0", "\"gate_lower_bound\":-1e39", &e) ==
                  K3_EINPUT &&
              strstr(e.msg, "gate_lower_bound"),
          "gate bound overflows: %s", e.msg);
    /* Flat configs are accepted. */
    char flat[4096];
    const char *inner = strchr(GOOD + 1, '{');
    snprintf(flat, sizeof flat, "%.*s", (int)(strlen(inner) - 1), inner);
    memset(&e, 0, sizeof e);
    CHECK(k3_config_parse(&c, flat, strlen(flat), "config.json", &e) == K3_OK, "flat: %s", e.msg);
    if (!e.code)
        k3_config_free(&c);
}

/* The saturating helpers and the derived sizes: exact, or UINT64_MAX, never
 * a wrapped small number, whatever the fields hold. */

/* Bytes of buffers laid out one after another, each starting on a 64-byte
 * boundary (model/scratch.h). */
static uint64_t laid(const uint64_t *bytes, size_t n)
{
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++)
        at = (at + 63) / 64 * 64 + bytes[i];
    return at;
}

static void test_sizes(void)
{
    CHECK(k3_sat_mul((uint64_t)1 << 31, (uint64_t)1 << 32) == (uint64_t)1 << 63, "2^63");
    CHECK(k3_sat_mul((uint64_t)1 << 32, (uint64_t)1 << 32) == UINT64_MAX, "2^64 saturates");
    CHECK(k3_sat_mul(UINT64_MAX, 0) == 0 && k3_sat_mul(0, UINT64_MAX) == 0, "times 0");
    CHECK(k3_sat_mul(3, 6148914691236517205u) == UINT64_MAX, "3 x (2^64-1)/3 exactly");
    CHECK(k3_sat_mul(3, 6148914691236517206u) == UINT64_MAX, "one more saturates");
    CHECK(k3_sat_add(UINT64_MAX - 1, 1) == UINT64_MAX && k3_sat_add(UINT64_MAX, 1) == UINT64_MAX,
          "add saturates");
    CHECK(k3_sat_add(1, 2) == 3, "add");
    k3_config c;
    k3_err e = { 0, "" };
    if (k3_config_parse(&c, GOOD, strlen(GOOD), "config.json", &e) != K3_OK)
        return;
    /* GOOD by hand, from the buffer lists of forward.c, kda.c, mla.c and
     * moe.c (each buffer 64-byte aligned; moe.c's own and pos: a token's
     * picks under a k3_moe_part; its views and order: E each): layers 0, 1 KDA and 2 MLA, layer
     * 0 dense and 1, 2 MoE; H 64, V 512, bank 3 rows (2 blocks + 1). */
    uint64_t T = 100, end = 1000;
    uint64_t k1[] = { T * 32 * 4, T * 32 * 4, T * 32 * 4, T * 32 * 4, T * 32 * 4, T * 32 * 4,
                      T * 16 * 4, T * 2 * 4, (3 * 32 + 2 * 16) * 4 };
    uint64_t m1[] = { T * 32 * 4, T * 2 * 24 * 4, T * 40 * 4, T * 32 * 4, T * 32 * 4,
                      (2 * 32 + end) * 4 };
    uint64_t e1[] = { T * 8 * 4, 8 * 4, T * 2 * 4, T * 64 * 4, T * 64 * 4, 2 * T * 32 * 4,
                      T * 64 * 4, T * 64 * 4, T * 64 * 4, T * 2 * 4, 8 * 4, 2 * 4, 2 * 8, T * 8,
                      T * 8, 8 * 8, 8 * 8 };
    uint64_t dense = 2 * T * 96 * 4;
    uint64_t nk = laid(k1, 9), nm = laid(m1, 6), ne = laid(e1, 17);
    uint64_t block = nk > nm ? nk : nm;
    block = block > ne ? block : ne;
    block = block > dense ? block : dense;
    /* hin, prefix, h, x, a; bank; tmp, score, src; head (8 rows), raw; matmul, block */
    uint64_t f1[] = { T * 64 * 4,     T * 64 * 4, T * 64 * 4, T * 64 * 4, T * 64 * 4,
                      T * 3 * 64 * 4, 64 * 4,     4 * 4,      4 * 8,      8 * 512 * 4,
                      64 * 2,         k3_mm_ws_bytes(2, 96, T),           block };
    CHECK(k3_kda_scratch(&c, T) == nk, "KDA scratch %llu, by hand %llu",
          (unsigned long long)k3_kda_scratch(&c, T), (unsigned long long)nk);
    CHECK(k3_mla_scratch(&c, T, end) == nm, "MLA scratch %llu, by hand %llu",
          (unsigned long long)k3_mla_scratch(&c, T, end), (unsigned long long)nm);
    CHECK(k3_moe_scratch(&c, T) == ne, "MoE scratch %llu, by hand %llu",
          (unsigned long long)k3_moe_scratch(&c, T), (unsigned long long)ne);
    CHECK(k3_dense_mlp_scratch(&c, T) == dense, "dense scratch");
    CHECK(k3_forward_scratch(&c, 3, T, end, 2) == laid(f1, 13),
          "forward scratch %llu, by hand %llu",
          (unsigned long long)k3_forward_scratch(&c, 3, T, end, 2),
          (unsigned long long)laid(f1, 13));
    /* One more attended position is one more float of MLA scores, when
     * MLA's is the largest block scratch (here with 10^6 positions). */
    CHECK(k3_forward_scratch(&c, 3, 2, 1000001, 0) - k3_forward_scratch(&c, 3, 2, 1000000, 0) == 4,
          "one position");
    uint64_t one = k3_forward_scratch(&c, 3, 1, 0, 0);
    k3_config_sizes z;
    k3_config_sizes_of(&c, &z);
    CHECK(z.token_floats == (one + 3) / 4, "token floats %llu",
          (unsigned long long)z.token_floats);
    CHECK(z.position_floats == 3 * 40, "position floats %llu",
          (unsigned long long)z.position_floats);
    /* Fields far past their limits (as a caller that skipped the parser
     * might set them): every size saturates instead of wrapping. */
    k3_config big = c;
    big.num_attention_heads = ((int64_t)1 << 61) + 4;
    big.num_shared_experts = (int64_t)1 << 62;
    big.kda_head_dim = (int64_t)1 << 40;
    k3_config_sizes_of(&big, &z);
    CHECK(z.token_floats == UINT64_MAX && z.model_bytes == UINT64_MAX &&
              z.state_bytes == UINT64_MAX, "saturated sizes");
    CHECK(k3_forward_scratch(&big, 3, 1, 0, 0) == UINT64_MAX, "saturated call");
    CHECK(k3_forward_scratch(&c, 3, UINT64_MAX / 2, 0, 0) == UINT64_MAX, "saturated tokens");
    big = c;
    big.attn_res_block_size = INT64_MAX; /* one block: a bank of 2 rows */
    f1[5] = 1 * 2 * 64 * 4, f1[7] = 3 * 4, f1[8] = 3 * 8, f1[9] = 512 * 4; /* head: 1 row */
    for (size_t i = 0; i < 5; i++)
        f1[i] = 64 * 4;
    uint64_t k0[] = { 32 * 4, 32 * 4, 32 * 4, 32 * 4, 32 * 4, 32 * 4, 16 * 4, 2 * 4,
                      (3 * 32 + 2 * 16) * 4 };
    uint64_t e0[] = { 8 * 4, 8 * 4, 2 * 4, 64 * 4, 64 * 4, 2 * 32 * 4, 64 * 4, 64 * 4,
                      2 * (64 + 2 * 32) * 4, 2 * 4, 8 * 4, 2 * 4, 2 * 8, 8, 8, 8 * 8, 8 * 8 };
    uint64_t m0[] = { 32 * 4, 2 * 24 * 4, 40 * 4, 32 * 4, 32 * 4, 2 * 32 * 4 };
    block = laid(k0, 9) > laid(e0, 17) ? laid(k0, 9) : laid(e0, 17);
    block = block > laid(m0, 6) ? block : laid(m0, 6);
    f1[11] = 0, f1[12] = block > 2 * 96 * 4 ? block : 2 * 96 * 4;
    CHECK(k3_forward_scratch(&big, 3, 1, 0, 0) == laid(f1, 13), "one block: %llu, by hand %llu",
          (unsigned long long)k3_forward_scratch(&big, 3, 1, 0, 0),
          (unsigned long long)laid(f1, 13));
    k3_config_free(&c);
}

int main(void)
{
    test_json();
    test_config();
    test_sizes();
    return check_report("test_parsers");
}
