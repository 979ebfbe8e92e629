/* constraint_check - the turn driver's side of constrained decoding
 * (gen/constraint.h, chat/turn.h), apart from any grammar engine: a toy
 * constraint whose next allowed ids depend on the last accepted id
 * (id % 5 == (last + 1) % 5; it may end after 3 ids at a last id % 5 == 4)
 * drives k3_turn_generate on a model (ids only).
 *
 *   constraint_check MODEL_DIR
 *
 * For greedy and sampled draws (temperature, top_k, top_p, min_p, negative
 * penalties so the model repeats and drafts are proposed):
 *  - every reported id is one the constraint allowed at its place (the
 *    toy's own log, independent of the turn's bookkeeping), and an end id
 *    only where it may end;
 *  - speculative decoding (the ngram drafter, K3_SPEC_ALWAYS=1 so every
 *    step drafts; spec 1 and 4) reports the ids of --spec 0 exactly, some
 *    drafts are cut by the constraint before verification, some kept; the
 *    constraint ends with exactly the reported ids accepted (rolled back
 *    after every cut);
 *  - the sampler draws the same id for an unmasked row as before (the -inf
 *    tail dropped from the candidates changes nothing else).
 *
 * Exit: 0 all checks held; 9 a check failed ("CHECK FAILED: ..."); 1 the
 * model did not open or run. Run by tests/gates/53-structured-cli.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/turn.h"
#include "gen/draft.h"
#include "k3/k3.h"

#define GEN 32
#define MAXACC 4096

static int failed;

static void check(int ok, const char *what, const char *how)
{
    if (!ok) {
        fprintf(stderr, "CHECK FAILED: %s (%s)\n", what, how);
        failed = 1;
    }
}

/* The toy constraint: its accepted ids. */
typedef struct {
    uint32_t acc[MAXACC];
    size_t n;
} toy;

static int allowed(const toy *t, uint32_t id)
{
    uint32_t last = t->n ? t->acc[t->n - 1] : 0;
    return id % 5 == (last + 1) % 5;
}

static int toy_mask(void *ctx, float *row, size_t vocab, size_t left, k3_err *e)
{
    (void)left, (void)e;
    for (size_t id = 0; id < vocab; id++)
        if (!allowed(ctx, (uint32_t)id))
            row[id] = -INFINITY;
    return K3_OK;
}

static int toy_can_end(void *ctx)
{
    const toy *t = ctx;
    return t->n >= 3 && t->acc[t->n - 1] % 5 == 4;
}

static int toy_accept(void *ctx, uint32_t id, int *ok, k3_err *e)
{
    toy *t = ctx;
    *ok = allowed(t, id) && t->n < MAXACC;
    if (*ok)
        t->acc[t->n++] = id;
    (void)e;
    return K3_OK;
}

static int toy_rollback(void *ctx, size_t n, k3_err *e)
{
    toy *t = ctx;
    if (n > t->n)
        return k3_fail(e, K3_ERUNTIME, "rollback past the start");
    t->n -= n;
    return K3_OK;
}

/* What the sink saw. */
typedef struct {
    uint32_t ids[GEN + 1];
    size_t n;
    int ended;
} seen;

static int on_token(void *ctx, uint32_t id, const float *logits, int is_end, int *stop, k3_err *e)
{
    seen *s = ctx;
    (void)logits, (void)stop, (void)e;
    if (s->n <= GEN)
        s->ids[s->n++] = id;
    s->ended = is_end;
    return K3_OK;
}

/* One constrained turn from prompt[0..np) with spec drafts (0: off). */
static int run(k3_model *m, const uint32_t *prompt, size_t np, const k3_sampler *proto,
               size_t spec, seen *out, toy *t, k3_turn_result *res, k3_err *e)
{
    k3_state *st = NULL;
    k3_sampler smp;
    k3_drafter dr;
    memset(&dr, 0, sizeof dr);
    memset(out, 0, sizeof *out);
    memset(t, 0, sizeof *t);
    if (k3_sampler_init(&smp, k3_model_vocab(m), e))
        return e->code;
    smp.temperature = proto->temperature;
    smp.top_k = proto->top_k;
    smp.top_p = proto->top_p;
    smp.min_p = proto->min_p;
    smp.frequency_penalty = proto->frequency_penalty;
    smp.presence_penalty = proto->presence_penalty;
    smp.seed = proto->seed;
    k3_constraint c = { t, toy_mask, toy_can_end, toy_accept, toy_rollback };
    k3_turn_params p;
    memset(&p, 0, sizeof p);
    p.gen.max_tokens = GEN;
    p.gen.repeat_last_n = 64;
    p.constraint = &c;
    k3_turn_sink sink = { out, NULL, NULL, on_token, NULL };
    if (spec) {
        p.spec = spec;
        p.drafter = &dr;
    }
    if (k3_state_new(&st, m, e) == K3_OK &&
        (!spec || k3_drafter_make(&dr, NULL, m, -1, spec, NULL, e) == K3_OK) &&
        k3_forward(m, st, prompt, np, NULL, 0, e) == K3_OK)
        k3_turn_generate(m, st, &smp, &p, &sink, res, e);
    k3_drafter_free(&dr);
    k3_state_free(st);
    k3_sampler_free(&smp);
    return e->code;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: constraint_check MODEL_DIR\n");
        return 2;
    }
    k3_err e = { 0, "" };
    k3_model *m = NULL;
    k3_model_opts o;
    k3_model_opts_default(&o);
    o.no_mem_check = 1;
    o.max_batch = 32;
    if (k3_model_open(&m, argv[1], &o, &e)) {
        fprintf(stderr, "constraint_check: %s\n", e.msg);
        return 1;
    }
    setenv("K3_SPEC_ALWAYS", "1", 1);
    size_t V = k3_model_vocab(m), cut = 0, kept = 0;
    uint32_t prompt[12];
    static const struct {
        const char *name;
        float temperature, top_p, min_p;
        int top_k;
        uint64_t seed;
        int eos; /* the prompt holds an end id, which the penalties then favour */
    } how[] = {
        { "greedy", 0, 1, 0, 0, 0, 0 },
        { "sampled", 0.9f, 1, 0, 0, 7, 0 },
        { "top_k 20 top_p 0.9 min_p 0.01", 1.1f, 0.9f, 0.01f, 20, 3, 0 },
        { "greedy, an end id favoured", 0, 1, 0, 0, 0, 1 },
    };
    static const size_t specs[] = { 1, 4 };
    static seen plain, spec_run;
    static toy t0, t1;
    for (size_t h = 0; h < sizeof how / sizeof how[0]; h++) {
        k3_sampler proto;
        memset(&proto, 0, sizeof proto);
        proto.temperature = how[h].temperature;
        proto.top_p = how[h].top_p;
        proto.min_p = how[h].min_p;
        proto.top_k = how[h].top_k;
        proto.seed = how[h].seed;
        proto.frequency_penalty = -1;
        proto.presence_penalty = -1;
        k3_turn_result r0, r1;
        uint32_t eos = 0;
        while (eos < V && !k3_model_is_eos(m, eos))
            eos++;
        for (size_t i = 0; i < 12; i++)
            prompt[i] = how[h].eos && i % 2 && eos < V ? eos : (uint32_t)((i % 3) * 17 + 5) % V;
        if (run(m, prompt, 12, &proto, 0, &plain, &t0, &r0, &e)) {
            fprintf(stderr, "constraint_check: %s: %s\n", how[h].name, e.msg);
            return 1;
        }
        /* Each id allowed after the one before (replayed on a fresh toy). */
        toy replay;
        memset(&replay, 0, sizeof replay);
        for (size_t i = 0; i < plain.n; i++) {
            int ok = 0, end = plain.ended && i + 1 == plain.n;
            if (end) {
                check(toy_can_end(&replay), "an end id where the constraint may not end",
                      how[h].name);
                break;
            }
            toy_accept(&replay, plain.ids[i], &ok, &e);
            check(ok, "a reported id the constraint refuses", how[h].name);
        }
        check(t0.n == plain.n - (size_t)plain.ended, "the constraint accepted other ids",
              how[h].name);
        if (how[h].eos)
            check(plain.ended && plain.n > 3, "the favoured end id did not end the turn where "
                  "the constraint allows it: the end path is not exercised", how[h].name);
        for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
            if (run(m, prompt, 12, &proto, specs[k], &spec_run, &t1, &r1, &e)) {
                fprintf(stderr, "constraint_check: %s spec %zu: %s\n", how[h].name, specs[k],
                        e.msg);
                return 1;
            }
            char what[96];
            snprintf(what, sizeof what, "%s, spec %zu", how[h].name, specs[k]);
            check(spec_run.n == plain.n &&
                      !memcmp(spec_run.ids, plain.ids, plain.n * sizeof *plain.ids),
                  "speculative ids differ from spec 0's", what);
            check(t1.n == t0.n && !memcmp(t1.acc, t0.acc, t0.n * sizeof *t0.acc),
                  "the constraint's state after a speculative run differs", what);
            cut += r1.cut;
            kept += r1.accepted;
            printf("%s: %zu ids; drafted %zu, kept %zu, cut by the constraint %zu\n", what,
                   spec_run.n, r1.drafted, r1.accepted, r1.cut);
        }
    }
    check(cut > 0, "no draft was cut by the constraint: the cut is not exercised", "all");
    check(kept > 0, "no draft was kept: verification under a constraint is not exercised",
          "all");
    k3_model_close(m);
    if (failed)
        return 9;
    printf("ok: constrained turns: every id allowed; spec 1, 4 = spec 0 (greedy and "
           "sampled); %zu drafts cut, %zu kept\n", cut, kept);
    return 0;
}
