/* main.c - k3-mpi: the k3 command over MPI ranks (docs/SCALE.md).
 *
 *   mpirun -np N k3-mpi MODEL_DIR [k3 options]
 *
 * Every rank runs the k3 command (src/cli/main.c, compiled for this build
 * with its main renamed k3_cli_main) on the same argv: each loads the model
 * and runs the same forward passes, with every large matrix product split
 * by output rows over the ranks (src/mpi/part.h), so every rank holds the
 * same activations and the same logits, bit for bit those of one process.
 * Sampling is computed on every rank from those identical logits with the
 * same seed, so every rank picks the same ids; speculation's draft count,
 * which the cost gate takes from each process's own timings, is rank 0's
 * (src/mpi/spec.c). Rank 0 is the front end (src/mpi/front.h).
 *
 * Ending: when the command succeeds on every rank, each finalizes and the
 * job exits 0. When it fails on a rank, that rank ends the whole job with
 * MPI_Abort(its exit code) after its message (a follower first waits
 * FOLLOWER_GRACE_S so that a failure every rank shares, bad options say, is
 * reported once, by rank 0). A rank that dies ends the job through
 * mpirun; one that hangs, through the collectives' timeout (part.h).
 * `serve`: rank 0 serves HTTP, the other ranks run its model operations
 * (src/mpi/serve.h). `pack-trunk` is refused (exit 2): run bin/k3
 * pack-trunk (--rank-of R/N for one rank's share). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/trunk_format.h"
#include "k3/error.h"
#include "mpi/cli_main.h"
#include "mpi/front.h"
#include "mpi/part.h"
#include "mpi/serve.h"

#define FOLLOWER_GRACE_S 2

/* With K3_MPI_STATS=1, rank 0 prints every rank's partition counters. */
static void print_stats(const k3_mpi_part *p)
{
    const char *s = getenv("K3_MPI_STATS");
    if (!s || strcmp(s, "1"))
        return;
    enum { NF = 10 };
    double mine[NF] = { (double)p->st.products,       (double)p->st.split,
                        (double)p->st.tokens,         (double)p->st.bytes_own,
                        (double)p->st.bytes_in,       p->st.wait_s,
                        (double)p->st.expert_gathers, (double)p->st.experts_here,
                        4.0 * (double)p->st.expert_floats_in, (double)p->st.expert_rows };
    double *all = p->rank == 0 ? calloc((size_t)p->size * NF, sizeof *all) : NULL;
    MPI_Request rq;
    MPI_Igather(mine, NF, MPI_DOUBLE, all, NF, MPI_DOUBLE, 0, p->comm, &rq);
    k3_mpi_wait(p, &rq, "the statistics' gather");
    if (p->rank != 0 || !all)
        return;
    fprintf(stderr, "k3-mpi: ranks %d, split threshold %lld elements\n", p->size,
            (long long)p->split_min);
    fprintf(stderr, "k3-mpi: rank products split tokens bytes_own bytes_in wait_s "
            "expert_gathers experts_here expert_bytes_in expert_rows\n");
    for (int r = 0; r < p->size; r++) {
        const double *v = all + (size_t)r * NF;
        fprintf(stderr, "k3-mpi: %d %.0f %.0f %.0f %.0f %.0f %.3f %.0f %.0f %.0f %.0f\n", r,
                v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]);
    }
    free(all);
}

/* The "  total  X GB" line of a printed plan (model/plan.c), or -1. */
static double plan_total_gb(const char *text)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        double gb;
        if (sscanf(l, " total %lf GB", &gb) == 1)
            return gb;
    }
    return -1;
}

/* k3-mpi --plan: every rank planned its own share, its stdout kept
 * (front.h); rank 0 prints every rank's plan in rank order, then the total
 * over ranks, on the job's stdout. */
static void print_plans(const k3_mpi_part *p)
{
    enum { MAX_PLAN = 1 << 16 };
    size_t n = 0;
    char *mine = k3_mpi_front_kept_stdout(MAX_PLAN, &n);
    int len = (int)n, *lens = NULL, *offs = NULL;
    char *all = NULL;
    if (p->rank == 0) {
        lens = calloc((size_t)p->size, sizeof *lens);
        offs = calloc((size_t)p->size, sizeof *offs);
    }
    MPI_Request rq;
    MPI_Igather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, p->comm, &rq);
    k3_mpi_wait(p, &rq, "the plans' gather");
    size_t total = 0;
    for (int r = 0; p->rank == 0 && lens && offs && r < p->size; r++) {
        offs[r] = (int)total;
        total += (size_t)lens[r];
    }
    if (p->rank == 0)
        all = malloc(total + 1);
    MPI_Igatherv(mine ? mine : "", len, MPI_CHAR, all, lens, offs, MPI_CHAR, 0, p->comm, &rq);
    k3_mpi_wait(p, &rq, "the plans' gather");
    free(mine);
    FILE *out = p->rank == 0 ? k3_mpi_front_real_stdout() : NULL;
    if (out && all && lens && offs) {
        double sum = 0;
        int known = 1;
        for (int r = 0; r < p->size; r++) {
            char *t = all + offs[r];
            fprintf(out, "--- rank %d of %d ---\n%.*s", r, p->size, lens[r], t);
            char save = t[lens[r]];
            t[lens[r]] = 0; /* the next rank's text resumes after: restored below */
            double gb = plan_total_gb(t);
            t[lens[r]] = save;
            known = known && gb >= 0;
            sum += gb;
        }
        if (known)
            fprintf(out, "all %d ranks: total %.3f GB (each rank's plan above is its own "
                    "memory)\n", p->size, sum);
        fflush(out);
    }
    free(all);
    free(lens);
    free(offs);
}

/* path with every "{rank}" replaced by rank (malloc'd, never freed: it
 * lives in argv), or path itself when it has none: each rank's own trunk
 * on a shared file system (--trunk /trunks/r{rank}). */
static char *rank_path(char *path, int rank)
{
    const char *key = "{rank}";
    size_t n = 0, klen = strlen(key);
    for (const char *p = strstr(path, key); p; p = strstr(p + klen, key))
        n++;
    if (!n)
        return path;
    char *out = malloc(strlen(path) + n * 12 + 1), *o = out;
    if (!out)
        MPI_Abort(MPI_COMM_WORLD, K3_ERUNTIME);
    for (const char *p = path, *q; *p; p = q + klen) {
        q = strstr(p, key);
        if (!q) {
            strcpy(o, p);
            break;
        }
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        o += sprintf(o, "%d", rank);
        *o = 0;
    }
    return out;
}

/* Whether dir holds a per-rank trunk (k3 pack-trunk --rank-of): then the
 * weights bind this rank's rows and read them from it; a whole trunk (or
 * one that cannot be read: the open reports why) is read whole. */
static int per_rank_trunk(const char *dir)
{
    k3_trunk_manifest m;
    k3_err e = { 0, "" };
    if (k3_trunk_manifest_read(&m, dir, &e) != K3_OK)
        return 0;
    int split = m.ranks > 0;
    k3_trunk_manifest_free(&m);
    return split;
}

int main(int argc, char **argv)
{
    /* The command would re-exec itself to set this (main.c); after
     * MPI_Init it must not, so it is set here first. Passive waiting also
     * suits ranks that share cores. */
    if (!getenv("OMP_WAIT_POLICY"))
        setenv("OMP_WAIT_POLICY", "passive", 1);
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "k3-mpi: error: MPI_Init_thread failed\n");
        return K3_ERUNTIME;
    }
    k3_mpi_part part;
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "k3-mpi: error: the MPI library gives no MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, K3_ERUNTIME);
    }
    if (k3_mpi_part_init(&part, MPI_COMM_WORLD) != 0)
        MPI_Abort(MPI_COMM_WORLD, K3_ERUNTIME);
    if (argc > 1 && !strcmp(argv[1], "pack-trunk")) {
        if (part.rank == 0)
            fprintf(stderr, "k3-mpi: error: 'pack-trunk' is not available over MPI; run "
                    "bin/k3 pack-trunk (with --rank-of R/N for each rank's own trunk)\n");
        MPI_Finalize();
        return K3_EINPUT;
    }
    /* serve: rank 0 serves, the others follow its op stream (serve.h). */
    int serving = argc > 1 && !strcmp(argv[1], "serve");
    k3_mpi_serve srv;
    if (serving && k3_mpi_serve_begin(&srv, &part) != 0)
        MPI_Abort(MPI_COMM_WORLD, K3_ERUNTIME);
    /* Each rank holds only its rows of the trunk's split matrices (the
     * weights bind them as shares), unless a whole packed trunk is read
     * (its runs are whole matrices: every rank holds all of them) or
     * K3_MPI_WHOLE=1 asks for whole matrices everywhere. A per-rank trunk
     * (pack-trunk --rank-of) holds the rank's rows: shares are kept. In a
     * --trunk path "{rank}" is this rank's number. */
    const char *whole = getenv("K3_MPI_WHOLE");
    part.hook.keep_shares = !(whole && !strcmp(whole, "1"));
    for (int i = 1; i < argc; i++) {
        const char *dir = NULL;
        if (!strcmp(argv[i], "--trunk") && i + 1 < argc)
            dir = argv[i + 1] = rank_path(argv[i + 1], part.rank);
        else if (!strncmp(argv[i], "--trunk=", 8))
            dir = (argv[i] = rank_path(argv[i], part.rank)) + 8;
        if (dir)
            part.hook.keep_shares = per_rank_trunk(dir);
    }
    int plan = 0;
    const char *draft = NULL;
    for (int i = 1; i < argc; i++) {
        plan = plan || !strcmp(argv[i], "--plan");
        if (!strcmp(argv[i], "--draft"))
            draft = i + 1 < argc ? argv[i + 1] : "";
        else if (!strncmp(argv[i], "--draft=", 8))
            draft = argv[i] + 8;
    }
    /* serve: the followers replay the leader's model operations, and a
     * self drafter's passes run on a state of the leader's own, outside
     * them (server/engine.h): the other ranks would not enter their
     * collectives. */
    if (serving && draft && !strcmp(draft, "self")) {
        if (part.rank == 0)
            fprintf(stderr, "k3-mpi: error: serve --draft self is not available over MPI (its "
                    "drafting passes would run on rank 0 alone); use --draft ngram\n");
        MPI_Finalize();
        return K3_EINPUT;
    }
    char **av = argv;
    if (k3_mpi_front_begin(MPI_COMM_WORLD, argc, argv, plan, &av) != 0)
        MPI_Abort(MPI_COMM_WORLD, K3_ERUNTIME);
    k3_mm_set_part(&part.hook);
    /* One token's routed experts split by expert (K3_MPI_EXPERTS=0: every
     * rank computes all of them, as before). */
    const char *ex = getenv("K3_MPI_EXPERTS");
    k3_mpi_experts_init(&part);
    if (part.size > 1 && !(ex && !strcmp(ex, "0")))
        k3_moe_set_part(&part.moe_hook);
    /* Speculation: every rank runs the decode loop, rank 0's cost gate
     * decides each step's drafts (spec.c). Serving, the followers run no
     * loop: the op stream carries the leader's steps (server/engine.h). */
    k3_mpi_spec_init(&part);
    if (!serving)
        k3_spec_set_agree(&part.spec_hook);
    int rc = k3_cli_main(argc, av);
    fflush(stdout);
    k3_spec_set_agree(NULL);
    k3_moe_set_part(NULL);
    k3_mm_set_part(NULL);
    if (serving)
        k3_mpi_serve_end(&srv);
    if (rc != 0) {
        if (part.rank != 0)
            sleep(FOLLOWER_GRACE_S);
        k3_mpi_front_end(rc);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, rc);
        return rc;
    }
    if (plan)
        print_plans(&part);
    k3_mpi_front_end(0);
    print_stats(&part);
    k3_mpi_part_free(&part);
    MPI_Finalize();
    return 0;
}
