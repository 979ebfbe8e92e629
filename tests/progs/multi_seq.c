/* multi_seq - k3_forward_multi against each sequence run alone.
 *
 *   multi_seq MODEL_DIR
 *
 * Four sequences of different prompt lengths (teacher-forced ids: a prompt,
 * then decode ids) are advanced together, S = 1..4 of them, in rounds: a
 * sequence still in its prompt feeds a chunk of its own size, one past it
 * feeds one id, so a call mixes prefill chunks and decodes; odd rounds list
 * the sequences in reverse. Each sequence takes its logits its own way
 * (every row; the last row; none, read back from k3_state_logits). Past
 * its prompt a sequence verifies drafts most rounds, as a speculating
 * turn does (k3_state_spec_begin, then k3_state_spec_end): 2 to 4 ids fed,
 * of which 1 to all are kept and the ids after the kept ones are wrong
 * drafts, beside other sequences' prompt chunks and plain one-id decodes
 * in the same call. Every kept row must be byte-identical (memcmp) to the
 * row of the same position in one k3_forward of that sequence's ids alone,
 * and so must the state's logits and position after the roll-back. The model is
 * opened three ways: resident; max_batch 5 (a call's rows split into
 * pieces, sequences cut across them); everything streamed (no pinned layer,
 * a one-slot ring, 2 cached experts, embedding and lm_head from disk). Then
 * the refusals: a shared state, an empty sequence, an id outside the
 * vocabulary, more ids than a speculative step journals (K3_EINPUT; no
 * state moved). Threads: OMP_NUM_THREADS.
 *
 * Exit: 0 all checks held; 9 a check failed ("CHECK FAILED: ..."); 1 the
 * model did not open or run. Run by tests/gates/49-multi-seq.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k3/k3.h"

#define NSEQ 4
#define GEN 12  /* decode ids after each prompt */
#define MAXSPEC 4 /* ids a speculative step feeds at most */
#define MAXLEN 40

static int failed;

static void check(int ok, const char *what, int mode, size_t S, size_t q)
{
    if (!ok) {
        fprintf(stderr, "CHECK FAILED: %s (open %d, S %zu, sequence %zu)\n", what, mode, S, q);
        failed = 1;
    }
}

static const size_t prompt_len[NSEQ] = { 9, 1, 17, 4 }; /* ids before the decodes */
static const size_t chunk_of[NSEQ] = { 4, 1, 4, 3 };    /* prefill ids per call */

/* Opens the model: 0 resident, 1 max_batch 5, 2 everything streamed. */
static int open_model(const char *dir, int mode, k3_model **m, k3_err *e)
{
    k3_model_opts o;
    k3_model_opts_default(&o);
    o.no_mem_check = 1;
    if (mode == 1)
        o.max_batch = 5;
    if (mode == 2) {
        o.trunk_layers = 0;
        o.trunk_ring = 1;
        o.cache_experts = 2;
        o.stream_embed = 1;
        o.stream_lm_head = 1;
    }
    return k3_model_open(m, dir, &o, e);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: multi_seq MODEL_DIR\n");
        return 2;
    }
    k3_err e = { 0, "" };
    uint32_t ids[NSEQ][MAXLEN];
    size_t len[NSEQ];
    float *ref[NSEQ] = { NULL }, *out[NSEQ] = { NULL };
    k3_state *st[NSEQ] = { NULL };
    size_t calls = 0, rows = 0, nspec = 0, ncut = 0, nmixed = 0;
    static uint32_t draft[NSEQ][MAXSPEC]; /* a step's ids: kept ones, then wrong drafts */
    for (int mode = 0; mode < 3; mode++) {
        k3_model *m = NULL;
        if (open_model(argv[1], mode, &m, &e) != K3_OK) {
            fprintf(stderr, "multi_seq: %s\n", e.msg);
            return 1;
        }
        size_t V = k3_model_vocab(m);
        for (size_t q = 0; q < NSEQ; q++) {
            len[q] = prompt_len[q] + GEN;
            for (size_t i = 0; i < len[q]; i++)
                ids[q][i] = (uint32_t)((i * 7919 + q * 104729 + 13) % (V > 256 ? V - 256 : V));
            if (!ref[q])
                ref[q] = malloc(MAXLEN * V * sizeof(float));
            if (!out[q])
                out[q] = malloc(MAXLEN * V * sizeof(float));
            if (!ref[q] || !out[q] || k3_state_new(&st[q], m, &e) != K3_OK ||
                k3_forward(m, st[q], ids[q], len[q], ref[q], 1, &e) != K3_OK) {
                fprintf(stderr, "multi_seq: alone: %s\n", e.code ? e.msg : "out of memory");
                return 1;
            }
        }
        for (size_t S = 1; S <= NSEQ; S++) {
            size_t at[NSEQ] = { 0 }, cut_here = 0, mixed_here = 0;
            for (size_t q = 0; q < S; q++)
                k3_state_reset(st[q]);
            for (int round = 0;; round++) {
                k3_seq seq[NSEQ];
                size_t ns = 0, who[NSEQ], want[NSEQ];
                int is_spec[NSEQ], kinds = 0; /* 1 a prompt chunk, 2 a decode, 4 a step */
                for (size_t r = 0; r < S; r++) {
                    size_t q = round % 2 ? S - 1 - r : r;
                    if (at[q] == len[q])
                        continue;
                    size_t n = 1, left = len[q] - at[q];
                    if (at[q] < prompt_len[q]) { /* a prefill chunk, the last one shorter */
                        n = chunk_of[q] < prompt_len[q] - at[q] ? chunk_of[q]
                                                                : prompt_len[q] - at[q];
                    } else { /* 1 (a plain decode) to MAXSPEC rows */
                        n = 1 + (size_t)(round + (int)q) % MAXSPEC;
                        n = n < left ? n : left;
                    }
                    int spec = at[q] >= prompt_len[q] && n > 1;
                    /* a step keeps 1..n of its ids; the ones after are wrong drafts */
                    want[ns] = spec ? 1 + (size_t)(round + 2 * (int)q) % n : n;
                    is_spec[ns] = spec;
                    kinds |= spec ? 4 : at[q] < prompt_len[q] ? 1 : 2;
                    const uint32_t *src = ids[q] + at[q];
                    if (spec) {
                        if (k3_state_spec_begin(st[q], n, &e) != K3_OK)
                            break;
                        for (size_t i = 0; i < n; i++)
                            draft[q][i] = i < want[ns] ? src[i] : (src[i] + 1) % (uint32_t)V;
                        src = draft[q];
                    }
                    int how = spec ? 0 : (int)(q % 3); /* 0 all rows, 1 last, 2 none */
                    float *lg = how == 0 ? out[q] + at[q] * V
                                : how == 1 ? out[q] + (at[q] + n - 1) * V : NULL;
                    k3_seq one = { st[q], src, n, lg, how == 0, NULL };
                    seq[ns] = one;
                    who[ns++] = q;
                }
                if (ns == 0 || e.code)
                    break;
                mixed_here += kinds == 7;
                if (k3_forward_multi(m, seq, ns, &e) != K3_OK) {
                    fprintf(stderr, "multi_seq: S %zu round %d: %s\n", S, round, e.msg);
                    return 1;
                }
                calls++;
                for (size_t k = 0; k < ns; k++) {
                    size_t q = who[k], n = want[k];
                    rows += seq[k].n;
                    if (is_spec[k]) {
                        if (k3_state_spec_end(st[q], n, out[q] + (at[q] + n - 1) * V, &e) !=
                            K3_OK) {
                            fprintf(stderr, "multi_seq: spec end: %s\n", e.msg);
                            return 1;
                        }
                        nspec++;
                        ncut += seq[k].n != n;
                        cut_here += seq[k].n != n;
                    }
                    const float *got = q % 3 == 2 && !is_spec[k] ? k3_state_logits(st[q])
                                                                 : out[q] + (at[q] + n - 1) * V;
                    if (q % 3 == 0 || is_spec[k])
                        check(!memcmp(out[q] + at[q] * V, ref[q] + at[q] * V, n * V * 4),
                              "every row equals the sequence alone", mode, S, q);
                    check(!memcmp(got, ref[q] + (at[q] + n - 1) * V, V * 4),
                          "the last row equals the sequence alone", mode, S, q);
                    check(!memcmp(k3_state_logits(st[q]), ref[q] + (at[q] + n - 1) * V, V * 4),
                          "the state's logits equal the sequence alone", mode, S, q);
                    at[q] += n;
                    check(k3_state_pos(st[q]) == (int64_t)at[q], "the position", mode, S, q);
                }
            }
            if (e.code) {
                fprintf(stderr, "multi_seq: %s\n", e.msg);
                return 1;
            }
            check(cut_here > 0, "speculative steps with cut drafts ran", mode, S, 0);
            check(S < 4 || mixed_here > 0,
                  "a call mixed a prompt chunk, a plain decode and verify rows", mode, S, 0);
            nmixed += mixed_here;
        }
        if (mode == 0) { /* refusals: nothing moves */
            k3_seq bad[3] = { { st[0], ids[0], 2, NULL, 0, NULL },
                              { st[1], ids[1], 1, NULL, 0, NULL },
                              { st[0], ids[2], 1, NULL, 0, NULL } };
            int64_t p0 = k3_state_pos(st[0]), p1 = k3_state_pos(st[1]);
            check(k3_forward_multi(m, bad, 3, &e) == K3_EINPUT && strstr(e.msg, "share"),
                  "a shared state is refused", mode, 3, 2);
            e.code = 0;
            bad[2].state = st[2];
            bad[2].n = 0;
            check(k3_forward_multi(m, bad, 3, &e) == K3_EINPUT && strstr(e.msg, "sequence 2"),
                  "an empty sequence is refused, named", mode, 3, 2);
            e.code = 0;
            uint32_t far = (uint32_t)V;
            bad[2].ids = &far;
            bad[2].n = 1;
            check(k3_forward_multi(m, bad, 3, &e) == K3_EINPUT && strstr(e.msg, "vocabulary"),
                  "an id outside the vocabulary is refused", mode, 3, 2);
            e.code = 0;
            bad[2].ids = ids[2];
            bad[2].n = MAXSPEC + 1; /* more than its speculative step journals (its
                                     * journal holds the most any step fed) */
            check(k3_state_spec_begin(st[2], 1, &e) == K3_OK &&
                      k3_forward_multi(m, bad, 3, &e) == K3_EINPUT && strstr(e.msg, "journals"),
                  "more ids than a speculative step journals are refused", mode, 3, 2);
            e.code = 0;
            check(k3_state_spec_end(st[2], 0, NULL, &e) == K3_OK, "the step ends", mode, 3, 2);
            check(k3_state_pos(st[0]) == p0 && k3_state_pos(st[1]) == p1,
                  "a refused call moves no state", mode, 3, 0);
        }
        for (size_t q = 0; q < NSEQ; q++) {
            k3_state_free(st[q]);
            st[q] = NULL;
        }
        k3_model_close(m);
    }
    for (size_t q = 0; q < NSEQ; q++)
        free(ref[q]), free(out[q]);
    if (!failed)
        printf("multi_seq: %zu calls, %zu rows of 1-4 sequences (prefill chunks, decodes, "
               "%zu speculative steps, %zu with cut drafts, %zu calls with all three), "
               "resident, max_batch 5 and streamed: every kept row's logits byte-identical "
               "to its sequence alone\n",
               calls, rows, nspec, ncut, nmixed);
    return failed ? 9 : 0;
}
