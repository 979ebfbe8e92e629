/* generate.c - see generate.h.
 *
 * The prompt is fed once, then the decode loop (k3/generate.h) samples and
 * feeds one token per step through the caches; --recompute makes the loop
 * refeed the whole sequence every step instead (a check on the caches).
 * This file adds what the command line shows: the streamed text, one
 * summary line (or with --verbose the per-step table and the I/O report),
 * dumps and the JSON report. A step is one generated id: its seconds run
 * from the previous id (step 0: from the start, the prompt's feed
 * included, which the table and the rates leave out). */
#include "cli/generate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jtext.h"
#include "chat/turn.h"
#include "cli/constrain_opts.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/os.h"
#include "util/progress.h"

/* Peak resident set size of this process, in bytes. */
static long long peak_rss_bytes(void)
{
    return k3_os_peak_rss(); /* util/os.h */
}

static int write_floats(FILE *f, const float *x, size_t n, const char *path, k3_err *e)
{
    /* Little-endian on disk; every supported target is little-endian. */
    if (fwrite(x, sizeof *x, n, f) != n)
        return k3_fail(e, K3_ERUNTIME, "%s: write failed: %s", path, strerror(errno));
    return K3_OK;
}

void k3_cli_write_ids(FILE *f, const uint32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%u", i ? "," : "", ids[i]);
}

/* What one generation step cost. emitted: the ids the forward call that
 * produced this id appended, counted on the first of them (1 per step
 * without speculation; 0 on the later ids of a verification call). */
typedef struct {
    double seconds;
    uint64_t bytes_read, requests, hits;
    size_t emitted;
} step_cost;

/* The run's rates: the prompt's feed, and the generated ids after it. */
typedef struct {
    size_t prompt_tokens, generated;
    double prompt_s, decode_s;
} run_rates;

static double per_second(size_t n, double s)
{
    return s > 0 ? (double)n / s : 0.0;
}

/* The --out report into f (committed by the caller with the other outputs). */
static int write_report(FILE *f, const k3_options *o, const k3_model *m, const uint32_t *prompt,
                        size_t np, const uint32_t *gen, size_t ng, const step_cost *steps,
                        double wall_s, const k3_io_counters *io, const k3_turn_result *res,
                        const k3_buf *text, const run_rates *rt, k3_err *e)
{
    k3_turn_end end = res->end;
    k3_buf js = { 0 };
    if (text && k3_jtext_put(&js, text->data ? text->data : "", text->len, e))
        return e->code;
    fprintf(f, "{\n  \"prompt_ids\": [");
    k3_cli_write_ids(f, prompt, np);
    fprintf(f, "],\n  \"generated_ids\": [");
    k3_cli_write_ids(f, gen, ng);
    fprintf(f, "],\n  \"text\": %s", text ? js.data : "null");
    k3_buf_free(&js);
    fprintf(f, ",\n  \"end\": \"%s\",\n  \"finish_reason\": \"%s\"", k3_turn_end_name(end),
            k3_turn_finish_reason(end, 0));
    fprintf(f, ",\n  \"prompt_tokens_per_second\": %.6f,\n  \"generated_tokens_per_second\": "
               "%.6f,\n  \"seconds_per_token\": %.6f",
            per_second(rt->prompt_tokens, rt->prompt_s), per_second(rt->generated, rt->decode_s),
            rt->generated ? rt->decode_s / (double)rt->generated : 0.0);
    /* What the decode read per emitted id: the trunk once per forward call,
     * the experts each row routed to (step 0 is the prompt's: left out). */
    uint64_t trunk_pass, expert_each, requests = 0;
    k3_model_pass_bytes(m, &trunk_pass, &expert_each);
    for (size_t i = 1; i < ng; i++)
        requests += steps[i].requests;
    double per = ng > 1 ? 1.0 / (double)(ng - 1) : 0.0;
    fprintf(f, ",\n  \"spec\": {\"drafter\": \"%s\", \"max\": %ld, \"auto\": %s, "
               "\"forwards\": %zu, \"drafted\": %zu, \"accepted\": %zu, \"cut\": %zu, "
               "\"emitted\": %zu, "
               "\"trunk_bytes_per_token\": %.0f, \"expert_bytes_per_token\": %.0f}",
            o->spec ? o->draft ? o->draft : "ngram" : "none", o->spec,
            o->spec_auto ? "true" : "false", res->forwards, res->drafted, res->accepted,
            res->cut, res->generated, (double)trunk_pass * (double)res->forwards * per,
            (double)expert_each * (double)requests * per);
    fprintf(f, ",\n  \"step_seconds\": [");
    for (size_t i = 0; i < ng; i++)
        fprintf(f, "%s%.6f", i ? ", " : "", steps[i].seconds);
    fprintf(f, "],\n  \"steps\": [");
    for (size_t i = 0; i < ng; i++)
        fprintf(f,
                "%s\n    {\"step\": %zu, \"token\": %u, \"seconds\": %.6f, \"bytes_read\": %llu, "
                "\"expert_requests\": %llu, \"expert_hits\": %llu, \"emitted\": %zu}",
                i ? "," : "", i, gen[i], steps[i].seconds, (unsigned long long)steps[i].bytes_read,
                (unsigned long long)steps[i].requests, (unsigned long long)steps[i].hits,
                steps[i].emitted);
    fprintf(f, "\n  ],\n  \"prefill_seconds\": %.6f,\n", ng ? steps[0].seconds : 0.0);
    fprintf(f, "  \"prompt_seconds\": %.6f,\n", rt->prompt_s);
    fprintf(f, "  \"wall_seconds\": %.6f,\n", wall_s);
    fprintf(f, "  \"io_wait_seconds\": %.6f,\n", io->io_wait_seconds);
    fprintf(f, "  \"io_share\": %.4f,\n", wall_s > 0 ? io->io_wait_seconds / wall_s : 0.0);
    fprintf(f, "  \"mode\": \"%s\",\n", o->recompute ? "recompute" : "incremental");
    fprintf(f, "  \"layers\": %d,\n", k3_model_n_layers(m));
    k3_model_print_json(m, f, "  ");
    fprintf(f, ",\n  \"peak_rss_bytes\": %lld\n}\n", peak_rss_bytes());
    if (ferror(f))
        return k3_fail(e, K3_ERUNTIME, "%s: write failed: %s", o->output.out_json, strerror(errno));
    return K3_OK;
}

int k3_cli_sampler(k3_sampler *s, const k3_options *o, size_t vocab, k3_err *e)
{
    if (k3_sampler_init(s, vocab, e) != K3_OK)
        return e->code;
    s->temperature = (float)o->sampling.temperature;
    s->top_p = (float)o->sampling.top_p;
    s->min_p = (float)o->sampling.min_p;
    s->repeat_penalty = (float)o->sampling.repeat_penalty;
    s->frequency_penalty = (float)o->sampling.frequency_penalty;
    s->presence_penalty = (float)o->sampling.presence_penalty;
    s->top_k = (int)o->sampling.top_k;
    k3_sampler_seed(s, (uint64_t)o->sampling.seed);
    if (k3_sampler_check(s, e) != K3_OK)
        k3_sampler_free(s);
    return e->code;
}

void k3_cli_gen_params(k3_gen_params *p, const k3_options *o, size_t max_tokens)
{
    memset(p, 0, sizeof *p);
    p->max_tokens = max_tokens;
    p->max_context = o->memory.max_context;
    p->ignore_eos = o->ignore_eos;
    p->repeat_last_n = (size_t)o->sampling.repeat_last_n;
    p->recompute = o->recompute;
}

/* One run's bookkeeping, shared with the per-token callback. */
typedef struct run {
    const k3_options *o;
    k3_model *m;
    const k3_tokenizer *tok;
    uint32_t *gen;        /* the generated ids */
    size_t ngen;
    step_cost *steps;     /* [gen] */
    FILE *dump;           /* --dump-logits (a temporary file until the run succeeds) */
    FILE *dump_prompt;    /* --dump-prompt-logits (likewise) */
    double t_prev;        /* when the previous step ended */
    double prompt_s;      /* the prompt's feed (part of step 0) */
    k3_io_counters io_prev;
    size_t step_first;    /* the step whose forward call produced the latest id */
    int forwarded;        /* a forward call ran since the latest id */
    k3_buf text;          /* the text shown (--out) */
} run;

static void print_step_header(void)
{
    fprintf(stderr, "%6s %8s %10s %7s %9s %8s %7s\n", "step", "token", "seconds", "hit%",
            "GB read", "tok/s", "emitted");
}

/* Step 0's seconds without the prompt's feed (the rates leave it out). */
static double step_seconds(const run *r, size_t i)
{
    double s = r->steps[i].seconds - (i ? 0.0 : r->prompt_s);
    return s > 0 ? s : 0.0;
}

static void print_step(const run *r, size_t i)
{
    const step_cost *sc = &r->steps[i];
    double s = step_seconds(r, i);
    fprintf(stderr, "%6zu %8u %10.4f %6.1f%% %9.4f %8.2f %7zu\n", i, r->gen[i], s,
            sc->requests ? 100.0 * (double)sc->hits / (double)sc->requests : 100.0,
            (double)sc->bytes_read / 1e9, s > 0 ? 1.0 / s : 0.0, sc->emitted);
}

/* The turn's text sink: stdout, as the text becomes certain. */
static int on_text(void *ctx, int channel, const char *s, size_t n, k3_err *e)
{
    run *r = ctx;
    (void)channel;
    if ((n && fwrite(s, 1, n, stdout) != n) || fflush(stdout) != 0)
        return k3_fail(e, K3_ERUNTIME, "writing the generated text: %s", strerror(errno));
    return r->o->output.out_json ? k3_buf_put(&r->text, s, n, e) : K3_OK;
}

static void on_forward(void *ctx)
{
    ((run *)ctx)->forwarded = 1;
}

/* After each id: its cost, the logits dump, the table line. */
static int on_token(void *ctx, uint32_t id, const float *logits, int is_end, int *stop,
                    k3_err *e)
{
    run *r = ctx;
    const k3_options *o = r->o;
    k3_io_counters io;
    (void)is_end;
    (void)stop;
    k3_model_io(r->m, &io);
    step_cost *sc = &r->steps[r->ngen];
    sc->seconds = k3_seconds() - r->t_prev;
    sc->bytes_read = io.trunk_bytes + io.expert_bytes - r->io_prev.trunk_bytes -
                     r->io_prev.expert_bytes;
    sc->requests = io.expert_requests - r->io_prev.expert_requests;
    sc->hits = io.expert_hits - r->io_prev.expert_hits;
    if (r->ngen == 0 || r->forwarded)
        r->step_first = r->ngen;
    r->forwarded = 0;
    r->steps[r->step_first].emitted++;
    r->gen[r->ngen++] = id;
    if (r->dump && write_floats(r->dump, logits, k3_model_vocab(r->m), o->output.dump_logits, e))
        return e->code;
    r->io_prev = io;
    r->t_prev = k3_seconds();
    return K3_OK;
}

/* Feeds the prompt (dumping every position's logits when asked). */
static int prefill(run *r, k3_state *st, const uint32_t *prompt, const float *const *embeds,
                   size_t np, k3_err *e)
{
    const k3_options *o = r->o;
    size_t V = k3_model_vocab(r->m);
    if (np == 0)
        return o->output.dump_prompt_logits
                   ? k3_fail(e, K3_EINPUT, "--dump-prompt-logits needs a prompt")
                   : K3_OK;
    size_t rows = o->output.dump_prompt_logits ? np : 1;
    float *logits = k3_malloc(e, rows * V * sizeof *logits, "logits");
    k3_progress pr;
    k3_progress_start_count(&pr, !o->quiet && np > K3_PREFILL_CHUNK ? stderr : NULL, "prompt",
                            np, "tokens");
    for (size_t t0 = 0; logits && t0 < np; t0 += K3_PREFILL_CHUNK) {
        size_t n = np - t0 < K3_PREFILL_CHUNK ? np - t0 : K3_PREFILL_CHUNK;
        float *out = rows > 1 ? logits + t0 * V : logits;
        if (k3_forward_embeds(r->m, st, prompt + t0, embeds ? embeds + t0 : NULL, n, out,
                              rows > 1, e) != K3_OK)
            goto done;
        k3_progress_add(&pr, n);
    }
    k3_progress_end(&pr);
    r->prompt_s = k3_seconds() - r->t_prev;
    if (logits && r->dump_prompt)
        write_floats(r->dump_prompt, logits, np * V, o->output.dump_prompt_logits, e);
done:
    free(logits);
    return e->code;
}

int k3_cli_check_context(const k3_options *o, int64_t start, size_t np, k3_err *e)
{
    long long total = (long long)start + (long long)np + o->gen;
    if (total > o->memory.max_context)
        return k3_fail(e, K3_EINPUT, "%s%lld prompt tokens + --gen %ld = %lld tokens exceeds "
                                     "--max-context %ld%s", start ? "the loaded sequence and " : "",
                       (long long)start + (long long)np, o->gen, total, o->memory.max_context,
                       o->memory.max_context_given ? ""
                                                   : " (the default; --max-context N to raise it)");
    return K3_OK;
}

/* --save-state: the state then holds every id shown, the last one too. */
static int save_state(run *r, k3_state *st, k3_err *e)
{
    size_t V = k3_model_vocab(r->m);
    float *logits = r->ngen ? k3_malloc(e, V * sizeof *logits, "logits") : NULL;
    if (r->ngen && (!logits || k3_forward(r->m, st, &r->gen[r->ngen - 1], 1, logits, 0, e)))
        goto done;
    k3_state_save(st, r->o->save_state, e);
done:
    free(logits);
    return e->code;
}

int k3_run_generate(k3_model *m, const k3_options *o, const uint32_t *prompt, size_t np,
                    const k3_tokenizer *tok, k3_outputs *out, k3_err *e)
{
    return k3_run_generate_embeds(m, o, prompt, np, NULL, tok, out, e);
}

int k3_run_generate_embeds(k3_model *m, const k3_options *o, const uint32_t *prompt, size_t np,
                           const float *const *embeds, const k3_tokenizer *tok,
                           k3_outputs *out, k3_err *e)
{
    run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.m = m;
    r.tok = tok;
    k3_sampler smp;
    int have_sampler = 0;
    k3_state *st = NULL;
    k3_turn_params tp;
    k3_turn_result res;
    k3_drafter drafter;
    k3_constrain_vocab *gv = NULL;
    k3_constrain *cons = NULL;
    size_t gstart = 0;
    memset(&drafter, 0, sizeof drafter);
    double wall0 = k3_seconds();
    r.gen = k3_malloc(e, ((size_t)o->gen + 1) * sizeof *r.gen, "token sequence");
    r.steps = k3_calloc(e, (size_t)o->gen + 1, sizeof *r.steps, "timings");
    if (!r.gen || !r.steps || k3_state_new(&st, m, e) != K3_OK ||
        (o->load_state && k3_state_load(st, o->load_state, e) != K3_OK) ||
        k3_cli_check_context(o, k3_state_pos(st), np, e) != K3_OK ||
        k3_cli_sampler(&smp, o, k3_model_vocab(m), e) != K3_OK)
        goto done;
    have_sampler = 1;
    if (k3_cli_constrain(o, tok, k3_model_vocab(m), &gv, &cons, e) != K3_OK)
        goto done;
    if (np == 0 && k3_state_pos(st) == 0) {
        k3_fail(e, K3_EINPUT, "%s holds an empty sequence: give a prompt", o->load_state);
        goto done;
    }
    /* The drafter before the prompt: one that reads the model's hidden
     * states (dspark) makes the state keep them from its first position. */
    if (o->spec && (k3_drafter_make(&drafter, o->draft, m, (int)o->draft_topk, (size_t)o->spec,
                                    o->draft_model, e) ||
                    k3_drafter_attach(&drafter, st, e)))
        goto done;
    r.dump = out->logits.f;
    r.dump_prompt = out->prompt_logits.f;
    r.t_prev = wall0;
    k3_model_io(m, &r.io_prev);
    if (prefill(&r, st, prompt, embeds, np, e) != K3_OK ||
        k3_cli_constrain_resume(o, st, np, cons, &gstart, e) != K3_OK)
        goto done;
    memset(&tp, 0, sizeof tp);
    k3_cli_gen_params(&tp.gen, o, (size_t)o->gen);
    tp.tok = tok;
    tp.show_special = o->show_special;
    tp.spec = (size_t)o->spec;
    tp.drafter = o->spec ? &drafter : NULL;
    tp.stop = o->stop;
    tp.nstop = o->nstop;
    tp.constraint = cons ? k3_constrain_get(cons) : NULL;
    tp.open_ended = o->save_state != NULL; /* to be continued: need not close */
    k3_turn_sink sink = { &r, on_text, NULL, on_token, on_forward };
    if (k3_turn_generate(m, st, &smp, &tp, &sink, &res, e) != K3_OK)
        goto done;
    if (!tok)
        k3_cli_write_ids(stdout, r.gen, r.ngen);
    /* Flushed: stdout and stderr may be one pipe (2>&1), where stdout is
     * fully buffered and the text would land after the lines below. */
    fputc('\n', stdout);
    fflush(stdout);
    if (o->save_state && (save_state(&r, st, e) != K3_OK ||
                          k3_cli_constrain_save(o, gstart, e) != K3_OK))
        goto done;
    double wall = k3_seconds() - wall0;
    k3_io_counters io;
    k3_model_io(m, &io);
    run_rates rt = { np, r.ngen, r.prompt_s, 0.0 };
    for (size_t i = 0; i < r.ngen; i++)
        rt.decode_s += step_seconds(&r, i);
    if (o->verbose && !o->quiet) {
        /* After the text, so the two do not interleave on a terminal. */
        print_step_header();
        for (size_t i = 0; i < r.ngen; i++)
            print_step(&r, i);
        k3_model_print_io(m, stderr);
        if (o->spec)
            fprintf(stderr, "speculation: %zu tokens in %zu forward passes (%.2f a pass); "
                            "%zu drafted, %zu accepted\n",
                    res.generated, res.forwards,
                    res.forwards ? (double)res.generated / (double)res.forwards : 0.0,
                    res.drafted, res.accepted);
        fprintf(stderr, "time: %.3f s wall, %.3f s waiting for reads (%.1f%% I/O); "
                        "peak RSS %.3f GB (quote this, not the plan)\n",
                wall, io.io_wait_seconds, wall > 0 ? 100.0 * io.io_wait_seconds / wall : 0.0,
                (double)peak_rss_bytes() / (1024.0 * 1024.0 * 1024.0));
    }
    if (!o->quiet)
        fprintf(stderr, "k3: prompt %zu tokens at %.2f tok/s; generated %zu at %.2f tok/s "
                        "(%.4f s/token); peak RSS %.3f GB\n",
                np, per_second(np, rt.prompt_s), r.ngen, per_second(r.ngen, rt.decode_s),
                r.ngen ? rt.decode_s / (double)r.ngen : 0.0,
                (double)peak_rss_bytes() / (1024.0 * 1024.0 * 1024.0));
    if (out->report.f)
        write_report(out->report.f, o, m, prompt, np, r.gen, r.ngen, r.steps, wall, &io, &res,
                     tok ? &r.text : NULL, &rt, e);
done:
    if (have_sampler)
        k3_sampler_free(&smp);
    k3_drafter_free(&drafter);
    k3_constrain_free(cons);
    k3_constrain_vocab_free(gv);
    k3_state_free(st);
    free(r.gen);
    free(r.steps);
    k3_buf_free(&r.text);
    return e->code;
}
