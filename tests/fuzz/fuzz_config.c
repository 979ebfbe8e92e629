/* fuzz_config.c - the config reader (k3_config_parse) on arbitrary text,
 * and, for text it accepts, what the engine does with the numbers:
 * binding a checkpoint's tensors against them and planning memory
 * (k3_model_open with plan_only over the tiny-a shards of $K3_FUZZ_DATA/model,
 * with the input as config.json). A config is the first file of a download
 * the engine believes; its integers size every allocation.
 *
 * Promises checked on an accepted config: every layer has a kind, 1..4 eos
 * ids inside the vocabulary, top-k within the experts, the ranges
 * check_ranges documents; and model opening either succeeds or refuses
 * with a code and a message. */
#include <stdio.h>

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
    return 0;
}
