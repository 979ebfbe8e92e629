/* generate.c - see generate.h.
 *
 * Incremental mode feeds the prompt once, then one token per step through
 * the caches. --recompute resets the state and feeds the whole sequence
 * again every step: slow, but it exercises a different schedule (T-token
 * calls instead of 1-token calls), so agreement between the two modes is a
 * check on the caches. */
#include "cli/generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/kernels.h"
#include "util/error.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Peak resident set size of this process, in bytes. */
static long long peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
#if defined(__APPLE__)
    return (long long)ru.ru_maxrss;
#else
    return (long long)ru.ru_maxrss * 1024;
#endif
}

static int write_floats(FILE *f, const float *x, size_t n, const char *path, k3_err *e)
{
    /* Little-endian on disk; every supported target is little-endian. */
    if (fwrite(x, sizeof *x, n, f) != n)
        return k3_fail(e, K3_ERUNTIME, "%s: write failed", path);
    return K3_OK;
}

static FILE *open_out(const char *path, k3_err *e)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        k3_fail(e, K3_EINPUT, "%s: cannot create", path);
    return f;
}

static void write_id_list(FILE *f, const uint32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%u", i ? "," : "", ids[i]);
}

static int write_report(const k3_options *o, const k3_model *m, const uint32_t *seq, size_t np,
                        size_t ng, const double *step_s, double prefill_s, k3_err *e)
{
    FILE *f = open_out(o->out_json, e);
    if (!f)
        return e->code;
    fprintf(f, "{\n  \"prompt_ids\": [");
    write_id_list(f, seq, np);
    fprintf(f, "],\n  \"generated_ids\": [");
    write_id_list(f, seq + np, ng);
    fprintf(f, "],\n  \"step_seconds\": [");
    for (size_t i = 0; i < ng; i++)
        fprintf(f, "%s%.6f", i ? ", " : "", step_s[i]);
    fprintf(f, "],\n  \"prefill_seconds\": %.6f,\n", prefill_s);
    fprintf(f, "  \"mode\": \"%s\",\n", o->recompute ? "recompute" : "incremental");
    fprintf(f, "  \"layers\": %d,\n", k3_model_n_layers(m));
    fprintf(f, "  \"weight_bytes\": %llu,\n", (unsigned long long)k3_model_weight_bytes(m));
    fprintf(f, "  \"peak_rss_bytes\": %lld\n}\n", peak_rss_bytes());
    if (fclose(f) != 0)
        return k3_fail(e, K3_ERUNTIME, "%s: write failed", o->out_json);
    return K3_OK;
}

int k3_run_generate(k3_model *m, const k3_options *o, const uint32_t *prompt, size_t np,
                    k3_err *e)
{
    size_t V = k3_model_vocab(m), ng = 0, cap = np + (size_t)o->gen;
    uint32_t *seq = k3_malloc(e, cap * sizeof *seq, "token sequence");
    float *logits = k3_malloc(e, V * np * sizeof *logits, "logits");
    double *step_s = k3_malloc(e, ((size_t)o->gen + 1) * sizeof *step_s, "timings");
    FILE *dump = NULL;
    k3_state *st = NULL;
    double prefill_s = 0;
    if (!seq || !logits || !step_s || k3_state_new(&st, m, e) != K3_OK)
        goto done;
    memcpy(seq, prompt, np * sizeof *seq);
    if (o->dump_logits && !(dump = open_out(o->dump_logits, e)))
        goto done;
    for (size_t step = 0; step < (size_t)o->gen; step++) {
        double t0 = now_seconds();
        int want_all = step == 0 && o->dump_prompt_logits;
        size_t len = np + ng;
        int rc;
        if (o->recompute || step == 0) {
            k3_state_reset(st);
            rc = k3_forward(m, st, seq, len, logits, want_all, e);
        } else {
            rc = k3_forward(m, st, seq + len - 1, 1, logits, 0, e);
        }
        if (rc != K3_OK)
            goto done;
        float *last = want_all ? logits + (np - 1) * V : logits;
        if (want_all) {
            FILE *pf = open_out(o->dump_prompt_logits, e);
            if (!pf)
                goto done;
            rc = write_floats(pf, logits, np * V, o->dump_prompt_logits, e);
            fclose(pf);
            if (rc)
                goto done;
        }
        if (dump && write_floats(dump, last, V, o->dump_logits, e))
            goto done;
        uint32_t next = (uint32_t)k3_argmax(last, V);
        seq[np + ng++] = next;
        step_s[step] = now_seconds() - t0;
        if (step == 0)
            prefill_s = step_s[0];
        if (!o->ignore_eos && k3_model_is_eos(m, next))
            break;
    }
    write_id_list(stdout, seq + np, ng);
    fputc('\n', stdout);
    if (o->out_json)
        write_report(o, m, seq, np, ng, step_s, prefill_s, e);
done:
    if (dump && fclose(dump) != 0)
        k3_fail(e, K3_ERUNTIME, "%s: write failed", o->dump_logits);
    k3_state_free(st);
    free(seq);
    free(logits);
    free(step_s);
    return e->code;
}
