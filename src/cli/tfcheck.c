/* tfcheck.c - see tfcheck.h. */
#include "cli/tfcheck.h"

#include <stdio.h>

#include "gen/draft.h"
#include "util/error.h"

/* How many of d[0..nd) equal ids[at..n) in a row. */
static size_t run_length(const uint32_t *d, size_t nd, const uint32_t *ids, size_t at, size_t n)
{
    size_t r = 0;
    while (r < nd && at + r < n && d[r] == ids[at + r])
        r++;
    return r;
}

int k3_run_tf_check(const k3_options *o, k3_model *m, const uint32_t *ids, size_t n,
                    k3_outputs *out, k3_err *e)
{
    size_t max = o->spec > 0 ? (size_t)o->spec : 4, proposed = 0, hits = 0, drafted = 0;
    size_t passes = 0, emitted = 0;
    uint32_t d[16];
    k3_drafter dr;
    if (n < 2)
        return k3_fail(e, K3_EINPUT, "--tf-check needs a sequence of at least 2 ids");
    if (k3_drafter_make(&dr, o->draft, m, (int)o->draft_topk, max, NULL, e))
        return e->code;
    for (size_t i = 1; i < n && !e->code; i++) {
        size_t nd = dr.propose(dr.ctx, ids, i, d, max, NULL, e);
        size_t run = run_length(d, nd, ids, i, n);
        if (dr.observe && nd)
            dr.observe(dr.ctx, nd, run);
        proposed += nd > 0;
        hits += run > 0;
        drafted += nd;
        if (nd)
            printf("%zu %u %u %s %zu\n", i, ids[i], d[0], run ? "hit" : "miss", run);
        else
            printf("%zu %u - miss 0\n", i, ids[i]);
    }
    /* The replay: each pass verifies the drafts after position i and emits
     * the matching run plus the model's own next id. */
    for (size_t i = 1; i < n && !e->code; passes++) {
        size_t nd = dr.propose(dr.ctx, ids, i, d, max, NULL, e);
        size_t step = run_length(d, nd, ids, i, n) + 1;
        if (dr.observe && nd)
            dr.observe(dr.ctx, nd, step - 1);
        emitted += step < n - i ? step : n - i;
        i += step;
    }
    const char *dr_name = dr.name;
    k3_drafter_free(&dr);
    if (e->code)
        return e->code;
    double per_pass = passes ? (double)emitted / (double)passes : 0.0;
    printf("tf-check: %zu positions, %zu with a proposal, %zu first-draft hits (%.1f%%); "
           "replay: %zu ids in %zu passes, %.2f a pass (--spec %zu, %s)\n",
           n - 1, proposed, hits, 100.0 * (double)hits / (double)(n - 1), emitted, passes,
           per_pass, max, dr_name);
    if (out->report.f) {
        fprintf(out->report.f,
                "{\"drafter\": \"%s\", \"max\": %zu, \"positions\": %zu, \"proposed\": %zu, "
                "\"drafted\": %zu, \"first_hits\": %zu, \"replay_passes\": %zu, "
                "\"replay_emitted\": %zu, \"tokens_per_pass\": %.4f}\n",
                dr_name, max, n - 1, proposed, drafted, hits, passes, emitted, per_pass);
        if (ferror(out->report.f))
            return k3_fail(e, K3_ERUNTIME, "%s: write failed", o->output.out_json);
    }
    return K3_OK;
}
