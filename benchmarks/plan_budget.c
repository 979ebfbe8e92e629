/* plan_budget.c - the engine's memory plan for one total budget, for
 * benchmarks/plots.sh. The k3 command line reaches a total budget only
 * through the presets (8, 16, 32 ... GB); this asks the engine's own planner
 * (k3_plan_make's split of a budget, exactly what a preset does) for any
 * budget, without loading anything, and prints the plan as the k3 options
 * that reproduce it exactly (--trunk-layers, --cache-experts, --stream-*),
 * so a run of bin/k3 with them uses the plan the budget would give.
 *
 *   plan_budget MODEL_DIR BUDGET_GB TOKENS
 *
 * BUDGET_GB is in GiB (2^30 bytes), as the presets; TOKENS is prompt plus
 * generated tokens of the run (the CLI sizes the KV cache and the scratch
 * by it). Output: one "key value" line per item (budget_gb, pinned_layers,
 * streamed_layers, ring_slots, expert_slots, experts_total, embed_streamed,
 * lm_head_streamed, the plan's bytes, total_bytes, fits, options).
 * Exit 0 when the plan fits the budget; 3 when it does not (the planner
 * itself only refuses a plan larger than the machine: a budget below the
 * smallest plan gets a plan larger than the budget, reported here as
 * "fits 0"), or the engine's exit code when the plan cannot be made. */
#include <stdio.h>
#include <stdlib.h>

#include "k3/k3.h"
#include "model/model.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: plan_budget MODEL_DIR BUDGET_GB TOKENS\n");
        return K3_EINPUT;
    }
    char *end;
    double gb = strtod(argv[2], &end);
    long tokens = strtol(argv[3], NULL, 10);
    if (*end || gb < 0 || tokens < 1) {
        fprintf(stderr, "plan_budget: BUDGET_GB >= 0 and TOKENS >= 1 expected\n");
        return K3_EINPUT;
    }
    k3_model_opts mo;
    k3_model_opts_default(&mo);
    mo.budget_gb = gb;
    mo.max_context = tokens; /* as src/cli/main.c does for a one-shot run */
    mo.max_batch = (int)tokens;
    mo.plan_only = 1;
    k3_err e = { 0 };
    k3_model *m = NULL;
    if (k3_model_open(&m, argv[1], &mo, &e) != K3_OK) {
        fprintf(stderr, "plan_budget: %s\n", e.msg);
        k3_model_close(m);
        return e.code;
    }
    const k3_plan *p = &m->plan;
    double gib = 1024.0 * 1024.0 * 1024.0;
    int fits = (double)p->total <= gb * gib;
    printf("budget_gb %g\n", gb);
    printf("pinned_layers %d\nstreamed_layers %d\nring_slots %d\n", p->pinned_layers,
           p->streamed_layers, p->ring_slots);
    printf("expert_slots %llu\nexperts_total %llu\n", (unsigned long long)p->expert_slots,
           (unsigned long long)p->experts_total);
    printf("embed_streamed %d\nlm_head_streamed %d\n", p->embed_streamed, p->lm_head_streamed);
    printf("pinned_trunk_bytes %llu\nring_bytes %llu\nexpert_cache_bytes %llu\n",
           (unsigned long long)p->pinned_trunk, (unsigned long long)p->ring,
           (unsigned long long)p->expert_cache);
    printf("total_bytes %llu\nfits %d\n", (unsigned long long)p->total, fits);
    printf("options --trunk-layers %d --cache-experts %llu%s%s\n", p->pinned_layers,
           (unsigned long long)p->expert_slots, p->embed_streamed ? " --stream-embed" : "",
           p->lm_head_streamed ? " --stream-lm-head" : "");
    k3_model_close(m);
    return fits ? K3_OK : K3_EBUDGET;
}
