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

/* What one generation step cost. */
typedef struct {
    double seconds;
    uint64_t bytes_read, requests, hits;
} step_cost;

static int write_report(const k3_options *o, const k3_model *m, const uint32_t *seq, size_t np,
                        size_t ng, const step_cost *steps, double prefill_s, double wall_s,
                        const k3_io_counters *io, k3_err *e)
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
        fprintf(f, "%s%.6f", i ? ", " : "", steps[i].seconds);
    fprintf(f, "],\n  \"steps\": [");
    for (size_t i = 0; i < ng; i++)
        fprintf(f, "%s\n    {\"step\": %zu, \"token\": %u, \"seconds\": %.6f, \"bytes_read\": %llu, "
                   "\"expert_requests\": %llu, \"expert_hits\": %llu}",
                i ? "," : "", i, seq[np + i], steps[i].seconds,
                (unsigned long long)steps[i].bytes_read, (unsigned long long)steps[i].requests,
                (unsigned long long)steps[i].hits);
    fprintf(f, "\n  ],\n  \"prefill_seconds\": %.6f,\n", prefill_s);
    fprintf(f, "  \"wall_seconds\": %.6f,\n", wall_s);
    fprintf(f, "  \"io_wait_seconds\": %.6f,\n", io->io_wait_seconds);
    fprintf(f, "  \"io_share\": %.4f,\n", wall_s > 0 ? io->io_wait_seconds / wall_s : 0.0);
    fprintf(f, "  \"mode\": \"%s\",\n", o->recompute ? "recompute" : "incremental");
    fprintf(f, "  \"layers\": %d,\n", k3_model_n_layers(m));
    k3_model_print_json(m, f, "  ");
    fprintf(f, ",\n  \"peak_rss_bytes\": %lld\n}\n", peak_rss_bytes());
    if (fclose(f) != 0)
        return k3_fail(e, K3_ERUNTIME, "%s: write failed", o->out_json);
    return K3_OK;
}

/* Writes one generated token's bytes, holding back an incomplete UTF-8
 * character until the token that completes it. */
static void emit_text(const k3_tokenizer *tok, k3_utf8_stream *us, uint32_t id)
{
    const unsigned char *bytes;
    size_t len;
    k3_err ignore = { 0, "" };
    if (k3_tok_piece(tok, id, &bytes, &len, &ignore) != K3_OK)
        return;
    unsigned char *out = malloc(len + 4);
    if (!out)
        return;
    size_t n = k3_utf8_stream_push(us, bytes, len, out);
    fwrite(out, 1, n, stdout);
    fflush(stdout);
    free(out);
}

int k3_run_generate(k3_model *m, const k3_options *o, const uint32_t *prompt, size_t np,
                    const k3_tokenizer *tok, k3_err *e)
{
    k3_utf8_stream us = { { 0 }, 0 };
    size_t V = k3_model_vocab(m), ng = 0, cap = np + (size_t)o->gen;
    uint32_t *seq = k3_malloc(e, cap * sizeof *seq, "token sequence");
    float *logits = k3_malloc(e, V * np * sizeof *logits, "logits");
    step_cost *steps = k3_calloc(e, (size_t)o->gen + 1, sizeof *steps, "timings");
    FILE *dump = NULL;
    k3_state *st = NULL;
    double prefill_s = 0;
    k3_io_counters before, after;
    double wall0 = now_seconds();
    if (!seq || !logits || !steps || k3_state_new(&st, m, e) != K3_OK)
        goto done;
    memcpy(seq, prompt, np * sizeof *seq);
    if (o->dump_logits && !(dump = open_out(o->dump_logits, e)))
        goto done;
    if (!o->quiet)
        fprintf(stderr, "%6s %8s %10s %7s %9s %8s\n", "step", "token", "seconds", "hit%",
                "GB read", "tok/s");
    for (size_t step = 0; step < (size_t)o->gen; step++) {
        double t0 = now_seconds();
        k3_model_io(m, &before);
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
        k3_model_io(m, &after);
        step_cost *sc = &steps[step];
        sc->seconds = now_seconds() - t0;
        sc->bytes_read = after.trunk_bytes + after.expert_bytes - before.trunk_bytes -
                         before.expert_bytes;
        sc->requests = after.expert_requests - before.expert_requests;
        sc->hits = after.expert_hits - before.expert_hits;
        if (step == 0)
            prefill_s = sc->seconds;
        if (!o->quiet)
            fprintf(stderr, "%6zu %8u %10.4f %6.1f%% %9.4f %8.2f\n", step, next, sc->seconds,
                    sc->requests ? 100.0 * (double)sc->hits / (double)sc->requests : 100.0,
                    (double)sc->bytes_read / 1e9, sc->seconds > 0 ? 1.0 / sc->seconds : 0.0);
        int stop = !o->ignore_eos && k3_model_is_eos(m, next);
        if (tok && !stop)
            emit_text(tok, &us, next);
        if (stop)
            break;
    }
    if (tok) {
        unsigned char tail[8];
        fwrite(tail, 1, k3_utf8_stream_flush(&us, tail), stdout);
    } else {
        write_id_list(stdout, seq + np, ng);
    }
    fputc('\n', stdout);
    double wall = now_seconds() - wall0;
    k3_model_io(m, &after);
    if (!o->quiet) {
        k3_model_print_io(m, stderr);
        fprintf(stderr, "time: %.3f s wall, %.3f s waiting for reads (%.1f%% I/O); "
                        "peak RSS %.3f GB (quote this, not the plan)\n",
                wall, after.io_wait_seconds, wall > 0 ? 100.0 * after.io_wait_seconds / wall : 0.0,
                (double)peak_rss_bytes() / (1024.0 * 1024.0 * 1024.0));
    }
    if (o->out_json)
        write_report(o, m, seq, np, ng, steps, prefill_s, wall, &after, e);
done:
    if (dump && fclose(dump) != 0)
        k3_fail(e, K3_ERUNTIME, "%s: write failed", o->dump_logits);
    k3_state_free(st);
    free(seq);
    free(logits);
    free(steps);
    return e->code;
}
