/* expert_order.c - ready-order expert compute (model/moe.c) against the
 * batch order (a fetch's misses all read, then computed: what
 * K3_EXPERT_ORDER=batch selects), in one process, so that the trunk is
 * loaded once and both orders run on the same model, alternately. Not a
 * test.
 *
 *   expert_order MODEL_DIR SLOTS ROUNDS STEPS [THREADS]
 *
 * Opens MODEL_DIR with the trunk resident and an expert cache of SLOTS
 * experts, decodes one token to warm up, then ROUNDS times STEPS one-token
 * steps in the batch order and STEPS in the ready order. Per round and
 * order it prints, from the expert cache's counters (resid/expert_cache.h):
 *   s/token     the steps' wall seconds per token
 *   read        the fetches' read seconds (the batch reads' wall), per fetch
 *   wall        each fetch's seconds from its start (before the shared
 *               experts) to its last expert computed, per fetch
 *   compute     wall less the forward thread's waits for bytes, per fetch
 *               (exact in the batch order, where the team idles while it
 *               waits; a lower bound in the ready order)
 *   early       experts computed while their fetch's reads still ran
 * then the medians, the share of the read time hidden,
 * (read + compute - wall) / read, and wall / max(read, compute), with the
 * batch order's median compute as the compute of both (the same work).
 * A fetch is one layer's picks at one step. Expert reads are O_DIRECT
 * (io/direct.h): real disk reads, never the page cache's. Exit 1 if the
 * model fails, 2 on bad usage. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k3/k3.h"
#include "model/model.h"
#include "util/clock.h"

typedef struct {
    double spt, read, wall, compute, early;
} row;

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: expert_order MODEL_DIR SLOTS ROUNDS STEPS [THREADS]\n");
        return 2;
    }
    int slots = atoi(argv[2]), rounds = atoi(argv[3]), steps = atoi(argv[4]);
    int threads = argc > 5 ? atoi(argv[5]) : 0;
    if (slots < 1 || rounds < 1 || rounds > 64 || steps < 1 || threads < 0) {
        fprintf(stderr, "expert_order: bad SLOTS, ROUNDS (1..64), STEPS or THREADS\n");
        return 2;
    }
    if (threads)
        omp_set_num_threads(threads);
    k3_err e = { 0, "" };
    k3_model_opts o;
    k3_model_opts_default(&o);
    o.cache_experts = slots;
    k3_model *m = NULL;
    k3_state *s = NULL;
    float *logits = NULL;
    row *rows = calloc((size_t)rounds * 2, sizeof *rows);
    if (!rows || k3_model_open(&m, argv[1], &o, &e) != K3_OK || !m->experts ||
        k3_state_new(&s, m, &e) != K3_OK ||
        !(logits = malloc(k3_model_vocab(m) * sizeof *logits))) {
        fprintf(stderr, "expert_order: %s\n", e.code ? e.msg : "no memory, or no expert cache");
        return 1;
    }
    uint32_t V = k3_model_vocab(m) > 512 ? k3_model_vocab(m) - 256 : k3_model_vocab(m);
    uint32_t id = 100;
    if (k3_forward(m, s, &id, 1, logits, 0, &e) != K3_OK) {
        fprintf(stderr, "expert_order: %s\n", e.msg);
        return 1;
    }
    printf("slots %d, threads %d, %d steps a run; per fetch (one layer's picks):\n", slots,
           omp_get_max_threads(), steps);
    printf("order  round  s/token   read    wall  compute  early\n");
    for (int r = 0; r < rounds; r++)
        for (int batch = 1; batch >= 0; batch--) {
            k3_moe_set_order(batch);
            k3_ec_stats a, b;
            k3_ec_stats_get(m->experts, &a);
            double t0 = k3_seconds();
            for (int t = 0; t < steps; t++) {
                id = (uint32_t)(1 + ((unsigned)(r * steps + t) * 7919u) % (V - 1));
                if (k3_forward(m, s, &id, 1, logits, 0, &e) != K3_OK) {
                    fprintf(stderr, "expert_order: %s\n", e.msg);
                    return 1;
                }
            }
            double t1 = k3_seconds();
            k3_ec_stats_get(m->experts, &b);
            double n = (double)(b.noted - a.noted);
            row *w = &rows[2 * r + batch];
            w->spt = (t1 - t0) / steps;
            w->read = (b.read_seconds - a.read_seconds) / n;
            w->wall = (b.wall_seconds - a.wall_seconds) / n;
            w->compute = w->wall - (b.wait_seconds - a.wait_seconds) / n;
            w->early = (double)(b.early - a.early);
            printf("%-6s %5d  %7.3f  %6.3f  %6.3f  %7.3f  %5.0f\n", batch ? "batch" : "ready",
                   r + 1, w->spt, w->read, w->wall, w->compute, w->early);
            fflush(stdout);
        }
    double v[64];
    double compute = 0;
    printf("medians  s/token   read    wall  compute  hidden  wall/max(read,compute)\n");
    for (int batch = 1; batch >= 0; batch--) {
        double med[4];
        for (int f = 0; f < 4; f++) {
            for (int r = 0; r < rounds; r++) {
                const row *w = &rows[2 * r + batch];
                v[r] = f == 0 ? w->spt : f == 1 ? w->read : f == 2 ? w->wall : w->compute;
            }
            med[f] = median(v, rounds);
        }
        if (batch)
            compute = med[3];
        double mx = med[1] > compute ? med[1] : compute;
        printf("%-7s  %7.3f  %6.3f  %6.3f  %7.3f  %6.2f  %6.2f\n", batch ? "batch" : "ready",
               med[0], med[1], med[2], med[3], (med[1] + compute - med[2]) / med[1],
               med[2] / mx);
    }
    free(logits);
    free(rows);
    k3_state_free(s);
    k3_model_close(m);
    return 0;
}
