/* plan.c - see plan.h. GB in options and messages means GiB (2^30 bytes),
 * the unit machines report memory in.
 *
 * Sizes that depend only on the config fit by its size contract
 * (model/config.h); those that also depend on options (the context, the
 * largest call, slot counts) are computed with saturating arithmetic
 * (util/ckd.h): exact, or UINT64_MAX, which no budget or machine allows. */
#include "model/plan.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/moe_part.h"
#include "resid/expert_cache.h"
#include "resid/trunk.h"
#include "util/ckd.h"
#include "util/error.h"
#include "util/os.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static const struct { const char *name; double gb; } PRESETS[] = {
    { "ultra", 8 }, { "laptop", 16 }, { "desktop", 32 }, { "workstation", 64 },
    { "server", 256 }, { "max", -1 },
};

int k3_preset_budget(const char *name, double *gb)
{
    for (size_t i = 0; i < sizeof PRESETS / sizeof *PRESETS; i++)
        if (!strcmp(name, PRESETS[i].name)) {
            *gb = PRESETS[i].gb;
            return 0;
        }
    if (!strcmp(name, "auto")) {
        *gb = (double)k3_mem_available(NULL, NULL) / GIB;
        return 0;
    }
    return -1;
}

void k3_print_presets(FILE *f)
{
    fprintf(f, "preset        budget   for\n");
    for (size_t i = 0; i < sizeof PRESETS / sizeof *PRESETS; i++) {
        if (PRESETS[i].gb < 0)
            fprintf(f, "%-12s  %6s   everything resident (about 1.6 TB for the release)\n",
                    PRESETS[i].name, "all");
        else
            fprintf(f, "%-12s  %4.0f GB   a machine with about that much free memory\n",
                    PRESETS[i].name, PRESETS[i].gb);
    }
    fprintf(f, "%-12s  %4.0f GB   what this machine has available now (MemAvailable / cgroup)\n",
            "auto", (double)k3_mem_available(NULL, NULL) / GIB);
}

uint64_t k3_mem_available(uint64_t *mem_available, uint64_t *cgroup_limit)
{
    return k3_os_mem_available(mem_available, cgroup_limit); /* the query: util/os.h */
}

/* Expected bytes read from disk per decode token under a plan (the
 * planner's yardstick, not a promise):
 *  - streamed runs (layers, and lm_head when it streams) are read every
 *    token, unless they all fit the ring's slots at once: then the ring
 *    keeps them from token to token and nothing is re-read; a run of a
 *    compressed trunk counts its stored bytes (what the disk delivers;
 *    decoding runs beside the read, resid/trunk.h). Memory always counts
 *    decoded bytes: slots and pinned runs hold images, so pinning a
 *    compressed run keeps it decoded (the rule: decoding a pinned run at
 *    every use would spend a core's time to save memory that pinning is
 *    meant to spend);
 *  - a token asks for R = top-k x MoE layers experts. An LRU cache of S
 *    slots holds none of them by the time they are asked for again when
 *    S < R, and about S / (all experts) of them otherwise (uniform routing;
 *    measured: docs/PERFORMANCE.md, "hit rate against capacity"). */
static double read_per_token(const k3_plan *p, const k3_weights *w, const k3_config *c)
{
    double streamed = 0;
    int nstreamed = 0;
    for (size_t i = 0; i < w->nruns; i++)
        if (!p->pinned[i]) {
            streamed += (double)(w->runs[i].stored ? w->runs[i].stored : w->runs[i].bytes);
            nstreamed++;
        }
    if (nstreamed <= p->ring_slots)
        streamed = 0;
    double R = (double)c->num_experts_per_token *
               (double)(p->experts_total / (uint64_t)(c->num_experts > 0 ? c->num_experts : 1));
    if (p->experts_total)
        R = R * (double)p->experts_here / (double)p->experts_total; /* this rank's share */
    double S = (double)p->expert_slots, all = (double)p->experts_here;
    double hit = all > 0 && S >= R ? S / all : 0;
    return streamed + R * (1 - hit) * (double)p->expert_slot_bytes;
}

static int plan_layout(k3_plan *p, const k3_config *c, const k3_weights *w,
                       const k3_model_opts *o, k3_err *e);

/* Turns a total budget into a number of pinned layers and expert slots
 * (see plan.h). Every prefix of pinned layers is tried, from all of them
 * down to none, with three choices for embedding and lm_head (below); each
 * gets the expert slots that fit beside it (at least one layer's top-k, so
 * a layer's experts are fetched in one batch), and the one that reads the
 * fewest bytes per token wins (ties: more pinned, fewer streamed). The
 * ring is part of each candidate's cost, sized for that candidate's
 * largest streamed run, so pinning a large layer can also shrink the ring.
 * Fails with K3_EBUDGET naming the smallest plan when none fits. */
static int split_budget(k3_model_opts *o, double budget_gb, const k3_config *c,
                        const k3_weights *w, k3_err *e)
{
    const double margin = 0.9; /* the C library, the OS page tables, fragmentation */
    double budget = budget_gb * margin * GIB;
    int best_n = -1, best_ends = 0;
    uint64_t best_slots = 0;
    double best_read = 0, smallest = -1;
    /* ends: 0 embedding and lm_head resident (unless asked to stream),
     * 1 the embedding streamed (a row read per token: nearly free), 2 both
     * streamed (lm_head then re-read every token). Earlier candidates win
     * ties, so nothing streams that need not. */
    for (int ends = 0; ends < 3; ends++) {
        for (int n = w->n_layers; n >= 0; n--) {
            k3_model_opts probe = *o;
            probe.stream_embed = o->stream_embed || ends >= 1;
            probe.stream_lm_head = o->stream_lm_head || ends >= 2;
            probe.trunk_gb = -1;
            probe.trunk_layers = n;
            probe.cache_gb = -1;
            probe.cache_experts = 0;
            k3_plan plan;
            if (plan_layout(&plan, c, w, &probe, e) != K3_OK)
                return e->code;
            double fixed = (double)(plan.total - plan.expert_cache);
            double min_slots = plan.experts_total ? (double)c->num_experts_per_token : 0;
            if (min_slots > (double)plan.experts_here)
                min_slots = plan.experts_here ? (double)plan.experts_here : 1;
            double need = fixed + min_slots * (double)plan.expert_slot_bytes;
            if (smallest < 0 || need < smallest)
                smallest = need;
            if (need <= budget) {
                double room = (budget - fixed) / (double)plan.expert_slot_bytes;
                plan.expert_slots = room < (double)plan.experts_here ? (uint64_t)room
                                                                      : plan.experts_here;
                double rd = read_per_token(&plan, w, c);
                if (best_n < 0 || rd < best_read) {
                    best_n = n;
                    best_ends = ends;
                    best_slots = plan.expert_slots;
                    best_read = rd;
                }
            }
            k3_plan_free(&plan);
        }
    }
    if (best_n < 0)
        return k3_fail(e, K3_EBUDGET,
                       "a %.3g GB budget does not fit this model: its smallest plan needs "
                       "%.3g GB (with %.0f%% kept free for the system, a budget of %.3g GB)",
                       budget_gb, smallest / GIB, (1 - margin) * 100, smallest / margin / GIB);
    o->stream_embed = o->stream_embed || best_ends >= 1;
    o->stream_lm_head = o->stream_lm_head || best_ends >= 2;
    o->trunk_layers = best_n;
    o->cache_experts = best_slots > 0 ? (int64_t)best_slots : 0;
    return K3_OK;
}

/* The plan of explicit options (no budget to split, no machine check): what
 * is pinned, streamed and cached, and the bytes of each part. */
static int plan_layout(k3_plan *p, const k3_config *c, const k3_weights *w,
                       const k3_model_opts *o, k3_err *e)
{
    memset(p, 0, sizeof *p);
    int L = w->n_layers;
    p->pinned = k3_calloc(e, w->nruns, 1, "plan");
    if (!p->pinned)
        return e->code;
    /* Layers pinned in order (all of a layer's runs) while they fit the
     * trunk budget. */
    uint64_t budget = o->trunk_gb < 0 ? UINT64_MAX : (uint64_t)(o->trunk_gb * GIB);
    uint64_t used = 0;
    for (int i = 0; i < L; i++) {
        uint64_t bytes = 0;
        for (size_t r = w->layer_run[i]; r < w->layer_run[i + 1]; r++)
            bytes += w->runs[r].bytes;
        p->trunk_total += bytes;
        int pin = o->trunk_layers >= 0
                      ? i < o->trunk_layers
                      : p->streamed_layers == 0 && used + bytes <= budget;
        for (size_t r = w->layer_run[i]; r < w->layer_run[i + 1]; r++)
            p->pinned[r] = (uint8_t)pin;
        if (pin) {
            used += bytes;
            p->pinned_layers++;
        } else {
            p->streamed_layers++;
        }
    }
    p->lm_head_streamed = o->stream_lm_head;
    p->embed_streamed = o->stream_embed;
    uint64_t head = 0;
    for (size_t r = w->layer_run[L]; r < w->nruns; r++) {
        p->pinned[r] = !o->stream_lm_head;
        head += w->runs[r].bytes;
    }
    p->ring_slots = p->streamed_layers || p->lm_head_streamed
                        ? (o->trunk_ring > 0 ? o->trunk_ring : 2)
                        : 0;
    uint64_t with_ring = k3_trunk_plan_bytes(w->runs, w->nruns, p->pinned, (size_t)p->ring_slots);
    for (size_t i = 0; i < w->nruns; i++) {
        if (!p->pinned[i] && w->runs[i].codec) {
            p->stream_stored += w->runs[i].stored;
            p->stream_image += w->runs[i].bytes;
        }
        if (!p->pinned[i] && w->runs[i].bytes > p->slot_bytes) { /* k3_trunk's slot size */
            p->slot_bytes = w->runs[i].bytes;
            p->slot_run = w->runs[i].name;
        }
    }
    p->lm_head = p->lm_head_streamed ? 0 : head;
    p->pinned_trunk = used;
    p->ring = with_ring - used - p->lm_head;
    p->embed = p->embed_streamed ? 0 : (uint64_t)c->vocab_size * (uint64_t)c->hidden_size * 2;
    p->small = w->small_bytes;

    /* Experts: one slot per expert up to the budget, never fewer than one. */
    int moe_layers = L > c->first_k_dense_replace ? L - (int)c->first_k_dense_replace : 0;
    p->experts_total = (uint64_t)moe_layers * (uint64_t)c->num_experts;
    /* Under a split of one token's experts by id (model/moe_part.h) this
     * process is asked, at decode, only for its own: the cache needs no
     * more slots than those (prompts still touch any expert, through the
     * cache). */
    const k3_moe_part *mp = k3_moe_get_part();
    uint64_t E = c->num_experts > 0 ? (uint64_t)c->num_experts : 0;
    uint64_t own = mp ? E / (uint64_t)mp->size + ((uint64_t)mp->rank < E % (uint64_t)mp->size) : E;
    p->experts_here = (uint64_t)moe_layers * own;
    p->expert_dims.first_moe = (int)c->first_k_dense_replace;
    p->expert_dims.n_layers = L;
    p->expert_dims.experts = c->num_experts;
    p->expert_dims.inter = c->moe_intermediate_size;
    p->expert_dims.latent = c->routed_expert_hidden_size;
    p->expert_slot_bytes = k3_ec_slot_bytes(&p->expert_dims);
    if (o->cache_experts > 0)
        p->expert_slots = (uint64_t)o->cache_experts;
    else if (o->cache_gb < 0)
        p->expert_slots = p->experts_here;
    else
        p->expert_slots = (uint64_t)(o->cache_gb * GIB) / p->expert_slot_bytes;
    if (p->expert_slots > p->experts_here)
        p->expert_slots = p->experts_here;
    if (p->expert_slots == 0 && p->experts_total)
        p->expert_slots = 1;
    p->expert_cache = k3_sat_mul(p->expert_slots, p->expert_slot_bytes);

    /* Per-sequence state and scratch. */
    p->context = o->max_context > 0 ? o->max_context : K3_DEFAULT_MAX_CONTEXT;
    uint64_t D = (uint64_t)c->kda_head_dim, C = (uint64_t)c->kda_num_heads * D;
    uint64_t K = (uint64_t)c->short_conv_kernel_size;
    uint64_t kv_row = k3_sat_mul((uint64_t)p->context,
                                 (uint64_t)(c->kv_lora_rank + c->qk_rope_head_dim) * 4);
    for (int i = 0; i < L; i++) {
        if (c->layer_kind[i] == K3_LAYER_KDA)
            p->kda_state += (3 * (K - 1) * C + (uint64_t)c->kda_num_heads * D * D) * 4;
        else
            p->kv_cache = k3_sat_add(p->kv_cache, kv_row);
    }
    /* k3_forward's arena: one call of max_batch tokens at the planned
     * context, its matrix products on this process's threads. */
    p->max_batch = o->max_batch > 0 ? o->max_batch : K3_PREFILL_CHUNK;
    p->threads = omp_get_max_threads();
    p->scratch = k3_forward_scratch(c, L, (uint64_t)p->max_batch, (uint64_t)p->context,
                                    p->threads);
    /* A speculative step (k3_state_spec_begin): a copy of the KDA states,
     * the journal of spec + 1 tokens in each KDA layer, and the turn's
     * spec + 1 rows of logits. Every sequence speculates on its own (a
     * --batch-file line, a server slot), so each has its own. */
    p->spec_drafts = o->spec > 0 ? o->spec : 0;
    if (p->spec_drafts) {
        uint64_t rows = (uint64_t)p->spec_drafts + 1, nkda = 0;
        for (int i = 0; i < L; i++)
            nkda += c->layer_kind[i] == K3_LAYER_KDA;
        uint64_t rec = 4 * C + (uint64_t)c->kda_num_heads;
        p->spec = k3_sat_add(p->kda_state,
                             k3_sat_add(k3_sat_mul(k3_sat_mul(rows, rec), nkda * 4),
                                        k3_sat_mul(rows, (uint64_t)c->vocab_size * 4)));
    }
    /* The self drafter (gen/draft_self.c): a second state (KDA states, MLA
     * cache) with a speculative step of its own. */
    p->draft = o->self_draft && p->spec_drafts
                   ? k3_sat_add(k3_sat_add(p->kda_state, p->kv_cache), p->spec)
                   : 0;
    /* The draft trunk (model/draft_trunk.h): the whole file, resident. */
    p->draft_trunk = o->draft_trunk ? k3_draft_trunk_bytes(o->draft_trunk, w) : 0;
    /* Marks a sequence keeps beside its state (k3_state_mark_take: a copy
     * of the KDA states and one logits row each; a server slot keeps two,
     * at the end of its last prompt and where that prompt departed). */
    p->marks = o->marks > 0 ? o->marks : 0;
    p->mark = k3_sat_mul((uint64_t)p->marks,
                         k3_sat_add(p->kda_state, (uint64_t)c->vocab_size * 4));
    /* Every sequence run together has its own state (a --batch-file line,
     * a server slot): its KDA state, MLA cache, speculative step and marks
     * count once per sequence; sequence_bytes is one sequence's sum. */
    p->held = o->held_bytes;
    p->sequences = o->sequences > 0 ? o->sequences : 1;
    p->sequence_bytes = k3_sat_add(k3_sat_add(p->kda_state, p->kv_cache),
                                   k3_sat_add(p->spec, p->mark));
    p->kda_state = k3_sat_mul(p->kda_state, (uint64_t)p->sequences);
    p->kv_cache = k3_sat_mul(p->kv_cache, (uint64_t)p->sequences);
    p->spec = k3_sat_mul(p->spec, (uint64_t)p->sequences);
    p->mark = k3_sat_mul(p->mark, (uint64_t)p->sequences);
    const uint64_t parts[] = { p->pinned_trunk, p->ring, p->lm_head, p->embed, p->small,
                               p->expert_cache, p->kda_state, p->kv_cache, p->scratch, p->spec,
                               p->mark, p->draft, p->draft_trunk, p->held };
    p->total = 0;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        p->total = k3_sat_add(p->total, parts[i]);
    return K3_OK;
}

int k3_plan_make(k3_plan *p, const k3_config *c, const k3_weights *w,
                 const k3_model_opts *opts, k3_err *e)
{
    memset(p, 0, sizeof *p);
    k3_model_opts o = *opts;
    double budget = o.budget_gb >= 0 && o.trunk_layers < 0 && o.cache_experts <= 0
                        ? o.budget_gb
                        : -1;
    if (budget >= 0 && split_budget(&o, o.budget_gb, c, w, e) != K3_OK)
        return e->code;
    if (plan_layout(p, c, w, &o, e) != K3_OK) /* (it clears *p) */
        return e->code;
    p->budget_gb = budget;
    uint64_t room = k3_mem_available(&p->mem_available, &p->cgroup_limit);
    if (!o.no_mem_check && room && p->total > room)
        return k3_fail(e, K3_EBUDGET,
                       "the memory plan needs %.2f GB but this machine allows %.2f GB%s "
                       "(short by %.2f GB): lower --trunk-gb or --cache-gb, or pick a smaller "
                       "--preset (see k3 --list-presets); --no-mem-check plans it anyway",
                       p->total / GIB, room / GIB,
                       p->cgroup_limit ? " (the cgroup memory limit)" : " (MemAvailable)",
                       (p->total - room) / GIB);
    return K3_OK;
}

void k3_plan_free(k3_plan *p)
{
    free(p->pinned);
    p->pinned = NULL;
}

void k3_plan_print(const k3_plan *p, FILE *f)
{
    const k3_mm_part *mp = k3_mm_get_part(); /* src/mpi: this rank's plan */
    if (mp && mp->size > 1)
        fprintf(f, "memory plan of rank %d of %d (GB = 2^30 bytes; %s):\n", mp->rank, mp->size,
                mp->keep_shares ? "the trunk's split matrices: this rank's rows only"
                                : "every rank holds the whole trunk");
    else
        fprintf(f, "memory plan (GB = 2^30 bytes):\n");
    fprintf(f, "  trunk pinned     %9.3f GB  %d layers\n", p->pinned_trunk / GIB, p->pinned_layers);
    fprintf(f, "  trunk ring       %9.3f GB  %d slots for %d streamed layers%s", p->ring / GIB,
            p->ring_slots, p->streamed_layers, p->lm_head_streamed ? " and lm_head" : "");
    if (p->ring_slots)
        fprintf(f, ", %.3f GB each (the largest streamed run: %s)", p->slot_bytes / GIB,
                p->slot_run);
    fprintf(f, "\n");
    if (p->stream_image)
        fprintf(f, "  trunk streamed   %9.3f GB  read per pass: compressed runs, %.3f GB decoded "
                   "(%.1f%%; the ring holds decoded runs)\n",
                p->stream_stored / GIB, p->stream_image / GIB,
                100.0 * (double)p->stream_stored / (double)p->stream_image);
    fprintf(f, "  lm_head          %9.3f GB  %s\n", p->lm_head / GIB,
            p->lm_head_streamed ? "streamed" : "resident");
    fprintf(f, "  embedding        %9.3f GB  %s\n", p->embed / GIB,
            p->embed_streamed ? "streamed (row reads)" : "resident");
    fprintf(f, "  norms, biases    %9.3f GB\n", p->small / GIB);
    if (p->experts_here != p->experts_total)
        fprintf(f, "  expert cache     %9.3f GB  %llu of this rank's %llu experts (of %llu), "
                   "%.1f MB each\n", p->expert_cache / GIB, (unsigned long long)p->expert_slots,
                (unsigned long long)p->experts_here, (unsigned long long)p->experts_total,
                p->expert_slot_bytes / 1e6);
    else
        fprintf(f, "  expert cache     %9.3f GB  %llu of %llu experts, %.1f MB each\n",
                p->expert_cache / GIB, (unsigned long long)p->expert_slots,
                (unsigned long long)p->experts_total, p->expert_slot_bytes / 1e6);
    fprintf(f, "  KDA state        %9.3f GB\n", p->kda_state / GIB);
    fprintf(f, "  MLA KV cache     %9.3f GB  %lld positions\n", p->kv_cache / GIB,
            (long long)p->context);
    fprintf(f, "  per sequence     %9.3f GB  KDA state + MLA cache for %lld positions%s%s; "
               "%d planned\n", p->sequence_bytes / GIB, (long long)p->context,
            p->spec_drafts ? " + speculation" : "", p->marks ? " + marks" : "", p->sequences);
    if (p->spec_drafts)
        fprintf(f, "  speculation      %9.3f GB  KDA copy + journal for %d drafts a step, each "
                   "of %d sequences\n", p->spec / GIB, p->spec_drafts, p->sequences);
    if (p->marks)
        fprintf(f, "  marks            %9.3f GB  %d KDA copies + logits rows, each of %d "
                   "sequences\n", p->mark / GIB, p->marks, p->sequences);
    if (p->draft)
        fprintf(f, "  self drafter     %9.3f GB  its own state, cache and journal\n",
                p->draft / GIB);
    if (p->draft_trunk)
        fprintf(f, "  draft trunk      %9.3f GB  quantized copy of the trunk for the self "
                   "drafter, resident\n", p->draft_trunk / GIB);
    fprintf(f, "  scratch          %9.3f GB  %d tokens a call, %d threads\n", p->scratch / GIB,
            p->max_batch, p->threads);
    if (p->held)
        fprintf(f, "  image rows       %9.3f GB  held for the prompt\n", p->held / GIB);
    double machine = (p->cgroup_limit && p->cgroup_limit < p->mem_available ? p->cgroup_limit
                                                                              : p->mem_available) /
                     GIB;
    if (p->budget_gb >= 0)
        fprintf(f, "  total            %9.3f GB  within a %.3f GB budget; this machine allowed "
                   "%.3f GB%s\n",
                p->total / GIB, p->budget_gb, machine,
                p->cgroup_limit ? " (cgroup limit set)" : " (MemAvailable)");
    else
        fprintf(f, "  total            %9.3f GB  of %.3f GB allowed%s\n", p->total / GIB, machine,
                p->cgroup_limit ? " (cgroup limit set)" : " (MemAvailable)");
}

void k3_plan_print_json(const k3_plan *p, FILE *f, const char *in)
{
    fprintf(f, "%s\"pinned_layers\": %d,\n%s\"streamed_layers\": %d,\n%s\"ring_slots\": %d,\n", in,
            p->pinned_layers, in, p->streamed_layers, in, p->ring_slots);
    fprintf(f, "%s\"ring_slot_bytes\": %llu,\n", in,
            (unsigned long long)(p->ring_slots ? p->slot_bytes : 0));
    fprintf(f, "%s\"expert_slots\": %llu,\n%s\"experts_total\": %llu,\n", in,
            (unsigned long long)p->expert_slots, in, (unsigned long long)p->experts_total);
    if (p->experts_here != p->experts_total)
        fprintf(f, "%s\"experts_here\": %llu,\n", in, (unsigned long long)p->experts_here);
    fprintf(f, "%s\"bytes\": {\"pinned_trunk\": %llu, \"ring\": %llu, \"lm_head\": %llu, "
               "\"embedding\": %llu, \"small\": %llu, \"expert_cache\": %llu, \"kda_state\": %llu, "
               "\"kv_cache\": %llu, \"scratch\": %llu, \"speculation\": %llu, \"marks\": %llu, "
               "\"self_drafter\": %llu, \"draft_trunk\": %llu, \"total\": %llu},\n",
            in, (unsigned long long)p->pinned_trunk, (unsigned long long)p->ring,
            (unsigned long long)p->lm_head, (unsigned long long)p->embed,
            (unsigned long long)p->small, (unsigned long long)p->expert_cache,
            (unsigned long long)p->kda_state, (unsigned long long)p->kv_cache,
            (unsigned long long)p->scratch, (unsigned long long)p->spec,
            (unsigned long long)p->mark, (unsigned long long)p->draft,
            (unsigned long long)p->draft_trunk, (unsigned long long)p->total);
    fprintf(f, "%s\"sequences\": %d,\n%s\"sequence_bytes\": %llu,\n", in, p->sequences, in,
            (unsigned long long)p->sequence_bytes);
    const k3_mm_part *mp = k3_mm_get_part();
    if (mp && mp->size > 1)
        fprintf(f, "%s\"rank\": %d,\n%s\"ranks\": %d,\n%s\"trunk_shares\": %s,\n", in,
                mp->rank, in, mp->size, in, mp->keep_shares ? "true" : "false");
    fprintf(f, "%s\"mem_available\": %llu,\n%s\"cgroup_limit\": %llu", in,
            (unsigned long long)p->mem_available, in, (unsigned long long)p->cgroup_limit);
}
