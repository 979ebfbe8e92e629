/* dspark_check - the DSpark drafter's block (model/dspark.h) on a target.
 *
 *   dspark_check TARGET_DIR DRAFT_DIR IDS DUMP [TAPS]
 *
 * IDS: comma-separated, at least 4. Feeds IDS minus the last to the target
 * with the drafter's taps kept (taken by the target's own forward), drafts
 * the block after IDS (greedy picks: argmax of each row with its Markov
 * bias, ties to the lower id), prints the picked ids on one line and writes
 * the rows (block x vocab float32, bias included) to DUMP, for
 * tools/dspark_ref.py to check (tests/gates/68-dspark.sh); TAPS gets the
 * taps the block read (context positions x taps x hidden float32: the
 * target's layer outputs, so the reference can take the drafter's input
 * as the engine computed it). And checks,
 * bit for bit against that block:
 *  - a drafter cache filled by an earlier, shorter pass (context rows
 *    reused, the rest computed from the new taps);
 *  - a cache that saw other ids at a position (the target reset and fed
 *    another sequence, then this one again): its rows are recomputed.
 *
 * Exit: 0 all checks held; 9 a check failed ("CHECK FAILED: ..."); 1 the
 * model or drafter did not open or run; 2 bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k3/k3.h"
#include "model/dspark.h"
#include "model/model.h"

#define MAXN 256

static int failed;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "CHECK FAILED: %s\n", what);
        failed = 1;
    }
}

/* The target fed seq[0..n-1) from empty (taps kept), then the block:
 * rows [B][V] with the Markov bias of the greedy picks, ids [B]. */
static int draft(k3_model *m, k3_state *s, k3_dspark *d, k3_dspark_seq *q, const uint32_t *seq,
                 size_t n, float *rows, uint32_t *ids, k3_err *e)
{
    size_t V = k3_model_vocab(m), B = k3_dspark_block(d);
    k3_state_reset(s);
    if (k3_forward(m, s, seq, n - 1, NULL, 0, e) || k3_dspark_forward(d, q, s, seq, n, rows, e))
        return 1;
    uint32_t prev = seq[n - 1];
    for (size_t k = 0; k < B; k++) {
        float *row = rows + k * V;
        k3_dspark_markov(d, prev, row);
        size_t best = 0;
        for (size_t v = 1; v < V; v++)
            if (row[v] > row[best])
                best = v;
        ids[k] = prev = (uint32_t)best;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: dspark_check TARGET_DIR DRAFT_DIR IDS DUMP [TAPS]\n");
        return 2;
    }
    uint32_t seq[MAXN], other[MAXN];
    size_t n = 0;
    for (char *p = argv[3]; *p && n < MAXN; n++) {
        seq[n] = (uint32_t)strtoul(p, &p, 10);
        if (*p == ',')
            p++;
    }
    if (n < 4) {
        fprintf(stderr, "dspark_check: want at least 4 ids\n");
        return 2;
    }
    k3_err e = { 0 };
    k3_model *m = NULL;
    k3_state *s = NULL;
    k3_dspark *d = NULL;
    k3_dspark_seq *q = NULL, *q2 = NULL, *q3 = NULL;
    k3_model_opts o;
    k3_model_opts_default(&o);
    const int *taps;
    if (k3_model_open(&m, argv[1], &o, &e) || k3_state_new(&s, m, &e) ||
        k3_dspark_open(&d, argv[2], m, &e) || k3_dspark_seq_new(&q, d, &e) ||
        k3_dspark_seq_new(&q2, d, &e) || k3_dspark_seq_new(&q3, d, &e)) {
        fprintf(stderr, "dspark_check: %s\n", e.msg);
        return 1;
    }
    int ntaps = k3_dspark_taps(d, &taps);
    size_t V = k3_model_vocab(m), B = k3_dspark_block(d);
    float *rows = malloc(B * V * sizeof *rows), *again = malloc(B * V * sizeof *again);
    float *fresh = malloc(B * V * sizeof *fresh);
    uint32_t ids[64], ids2[64];
    int rc = !rows || !again || !fresh || B > 64 || k3_state_set_taps(s, taps, ntaps, &e) ||
             draft(m, s, d, q, seq, n, rows, ids, &e);
    if (!rc) {
        for (size_t k = 0; k < B; k++)
            printf("%s%u", k ? " " : "", ids[k]);
        printf("\n");
        FILE *f = fopen(argv[4], "wb");
        check(f && fwrite(rows, sizeof *rows, B * V, f) == B * V && fclose(f) == 0,
              "the dump was written");
        size_t nt = (n - 1) * (size_t)ntaps * (size_t)m->cfg.hidden_size;
        FILE *t = argc == 6 ? fopen(argv[5], "wb") : NULL;
        check(argc == 5 || (t && fwrite(s->taps, sizeof(float), nt, t) == nt && fclose(t) == 0),
              "the taps were written");
        /* a cache filled by a shorter pass */
        rc = draft(m, s, d, q2, seq, n - 3, again, ids2, &e) ||
             draft(m, s, d, q2, seq, n, again, ids2, &e);
        check(!rc && !memcmp(rows, again, B * V * sizeof *rows),
              "a cache extended from a shorter pass gives the same bits");
        /* a cache that saw other ids at position 1: the same bits as a
         * fresh cache on those ids, and back */
        memcpy(other, seq, n * sizeof *seq);
        other[1] = (seq[1] + 1) % (uint32_t)V;
        rc = rc || draft(m, s, d, q2, other, n, again, ids2, &e) ||
             draft(m, s, d, q3, other, n, fresh, ids2, &e);
        check(!rc && !memcmp(fresh, again, B * V * sizeof *rows),
              "a cache that saw other ids is recomputed (as a fresh one)");
        check(!rc && memcmp(rows, again, B * V * sizeof *rows) != 0,
              "another id at position 1 changes the block");
        rc = rc || draft(m, s, d, q2, seq, n, again, ids2, &e);
        check(!rc && !memcmp(rows, again, B * V * sizeof *rows),
              "a cache that saw other ids is recomputed to the same bits");
    }
    if (rc)
        fprintf(stderr, "dspark_check: %s\n", e.msg);
    free(rows);
    free(again);
    free(fresh);
    k3_dspark_seq_free(q);
    k3_dspark_seq_free(q3);
    k3_dspark_seq_free(q2);
    k3_dspark_close(d);
    k3_state_free(s);
    k3_model_close(m);
    return rc ? 1 : failed ? 9 : 0;
}
