/* forward_pieces - k3_forward's pieces and arena against one-piece calls.
 *
 *   forward_pieces MODEL_DIR
 *
 * Feeds the same N ids (every position's logits) to the model opened four
 * ways and compares the logits bit for bit with one call on the default
 * open: max_batch 3 (the call runs as pieces of 3, 3, 3, 2; the plan's
 * scratch is that of 3 tokens), max_batch 1, and max_context 4 (the arena
 * is planned for 4 positions and grows when the sequence passes them).
 * Then the same ids one call at a time (the last logits), and through
 * k3_state_sync (no logits buffer: the state keeps the last row). Every
 * open with max_batch B must plan the scratch k3_forward_scratch names for
 * B tokens (the arena the model allocates).
 *
 * Exit: 0 all checks held; 9 a check failed ("CHECK FAILED: ..."); 1 the
 * model did not open or run. Run by tests/gates/33-rss-vs-plan.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k3/k3.h"
#include "model/model.h"

#define N 11

static int failed;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "CHECK FAILED: %s\n", what);
        failed = 1;
    }
}

/* Opens dir with max_batch and max_context, feeds ids[0..N) as calls of
 * `call` ids (all positions' logits into out [N][V]). */
static int feed(const char *dir, int max_batch, int64_t max_context, size_t call,
                const uint32_t *ids, float *out, uint64_t *scratch, k3_err *e)
{
    k3_model_opts o;
    k3_model_opts_default(&o);
    o.max_batch = max_batch;
    o.max_context = max_context;
    o.no_mem_check = 1;
    k3_model *m = NULL;
    k3_state *s = NULL;
    if (k3_model_open(&m, dir, &o, e) != K3_OK || k3_state_new(&s, m, e) != K3_OK) {
        k3_model_close(m);
        return e->code;
    }
    size_t V = k3_model_vocab(m);
    *scratch = m->plan.scratch;
    check(m->plan.scratch == k3_forward_scratch(&m->cfg, m->w.n_layers,
                                                (uint64_t)m->plan.max_batch,
                                                (uint64_t)m->plan.context, m->plan.threads),
          "the plan's scratch is k3_forward_scratch at max_batch");
    check(m->plan.max_batch == (max_batch > 0 ? max_batch : K3_PREFILL_CHUNK),
          "max_batch <= 0 plans K3_PREFILL_CHUNK");
    for (size_t t0 = 0; t0 < N && !e->code; t0 += call) {
        size_t n = N - t0 < call ? N - t0 : call;
        k3_forward(m, s, ids + t0, n, out + t0 * V, 1, e);
    }
    k3_state_free(s);
    k3_model_close(m);
    return e->code;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: forward_pieces MODEL_DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    k3_err e = { 0, "" };
    k3_model_opts o;
    k3_model_opts_default(&o);
    o.plan_only = 1;
    o.no_mem_check = 1;
    k3_model *pm = NULL;
    if (k3_model_open(&pm, dir, &o, &e) != K3_OK) {
        fprintf(stderr, "forward_pieces: %s\n", e.msg);
        return 1;
    }
    size_t V = k3_model_vocab(pm);
    uint32_t ids[N];
    for (size_t i = 0; i < N; i++)
        ids[i] = (uint32_t)((i * 7919 + 13) % (V > 256 ? V - 256 : V));
    check(k3_forward(pm, NULL, ids, 1, NULL, 0, &e) == K3_EINPUT, "a plan-only model cannot run");
    k3_model_close(pm);
    e.code = 0;

    float *one = malloc(N * V * sizeof *one), *got = malloc(N * V * sizeof *got);
    uint64_t s_one = 0, s3 = 0, s1 = 0, s_ctx = 0;
    if (!one || !got || feed(dir, 0, 0, N, ids, one, &s_one, &e) != K3_OK) {
        fprintf(stderr, "forward_pieces: %s\n", e.code ? e.msg : "out of memory");
        return 1;
    }
    struct {
        int max_batch;
        int64_t max_context;
        size_t call;
        uint64_t *scratch;
        const char *what;
    } runs[] = {
        { 3, 0, N, &s3, "one call in pieces of 3 == one piece" },
        { 1, 0, N, &s1, "one call in pieces of 1 == one piece" },
        { 0, 4, N, &s_ctx, "past the planned context (the arena grows) == one piece" },
        { 0, 0, 1, &s_ctx, "one id a call: the same logits" },
    };
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        memset(got, 0xFF, N * V * sizeof *got);
        if (feed(dir, runs[r].max_batch, runs[r].max_context, runs[r].call, ids, got,
                 runs[r].scratch, &e) != K3_OK) {
            fprintf(stderr, "forward_pieces: %s: %s\n", runs[r].what, e.msg);
            return 1;
        }
        check(!memcmp(one, got, N * V * sizeof *got), runs[r].what);
    }
    check(s1 <= s3 && s3 < s_one, "the planned scratch grows with max_batch");

    /* k3_state_sync takes no logits buffer: the state's last row. */
    k3_model *m = NULL;
    k3_state *s = NULL;
    size_t reused = 0;
    o.plan_only = 0;
    o.max_batch = 2;
    if (k3_model_open(&m, dir, &o, &e) != K3_OK || k3_state_new(&s, m, &e) != K3_OK ||
        k3_state_sync(m, s, NULL, ids, N, &reused, &e) != K3_OK) {
        fprintf(stderr, "forward_pieces: sync: %s\n", e.msg);
        return 1;
    }
    check(k3_state_pos(s) == N && !memcmp(k3_state_logits(s), one + (N - 1) * V, V * sizeof *one),
          "k3_state_sync: the last logits of one piece");
    k3_state_free(s);
    k3_model_close(m);
    free(one), free(got);
    if (!failed)
        printf("forward_pieces: pieces of 3 and 1, past the planned context, one id a call and "
               "k3_state_sync all give the bits of one call; scratch %llu (1), %llu (3), "
               "%llu (512) bytes\n",
               (unsigned long long)s1, (unsigned long long)s3, (unsigned long long)s_one);
    return failed ? 9 : 0;
}
