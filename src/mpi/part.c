/* part.c - see part.h. */
#include "mpi/part.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/row_split.h"
#include "k3/error.h"

static int64_t env_int(const char *name, int64_t dflt, int64_t lo, int64_t hi)
{
    const char *s = getenv(name);
    char *end;
    if (!s || !*s)
        return dflt;
    long long v = strtoll(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "k3-mpi: warning: %s=%s is not an integer in [%lld, %lld]; using %lld\n",
                name, s, (long long)lo, (long long)hi, (long long)dflt);
        return dflt;
    }
    return (int64_t)v;
}

void k3_mpi_rows_of(int64_t rows, int r, int n, int64_t *lo, int64_t *hi)
{
    k3_rows_of(rows, r, n, lo, hi);
}

void k3_mpi_wait(const k3_mpi_part *p, MPI_Request *rq, const char *what)
{
    double t0 = MPI_Wtime();
    for (unsigned long spin = 0;; spin++) {
        int done = 0;
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        /* Spin briefly (a peer usually answers within microseconds), then
         * give the core away between polls: ranks may share cores. */
        if (spin < 1000)
            continue;
        sched_yield();
        if (spin % 1024 == 0 && MPI_Wtime() - t0 > p->timeout_s) {
            fprintf(stderr,
                    "k3-mpi: rank %d: error: %s: no answer from the other ranks for %.0f s "
                    "(a rank hung or died; K3_MPI_TIMEOUT sets the limit)\n",
                    p->rank, what, p->timeout_s);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, K3_ERUNTIME);
        }
    }
}

static void die_oom(const k3_mpi_part *p, size_t floats)
{
    fprintf(stderr, "k3-mpi: rank %d: error: out of memory for a %zu-float gather buffer\n",
            p->rank, floats);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, K3_ERUNTIME);
}

/* k3_mm_part.share: whether a rows x cols product is split, and this
 * rank's rows of it. The shape alone decides, so every rank and every T
 * gets the same answer; k3_matmul keeps rows x T within an int (token
 * chunks), and a matrix of more than INT_MAX rows stays whole. */
static int part_share(void *ctx, int64_t rows, int64_t cols, int64_t *lo, int64_t *hi)
{
    k3_mpi_part *p = ctx;
    return k3_row_split(rows, cols, p->rank, p->size, p->split_min, lo, hi);
}

/* k3_mm_part.begin: this rank's rows, or NULL for "all rows here". */
static float *part_begin(void *ctx, int64_t rows, int64_t cols, size_t T, float *Y, int64_t *lo,
                         int64_t *hi)
{
    k3_mpi_part *p = ctx;
    p->st.products++;
    int64_t a0, b0;
    if (T == 0 || (uint64_t)rows * T > (uint64_t)INT_MAX || !part_share(p, rows, cols, &a0, &b0))
        return NULL;
    for (int r = 0; r < p->size; r++) {
        int64_t a, b;
        k3_mpi_rows_of(rows, r, p->size, &a, &b);
        p->counts[r] = (int)((b - a) * (int64_t)T);
        p->displs[r] = (int)(a * (int64_t)T);
    }
    k3_mpi_rows_of(rows, p->rank, p->size, &p->lo, &p->hi);
    *lo = p->lo;
    *hi = p->hi;
    if (T == 1) /* one token: the slices are contiguous in Y itself */
        return Y + p->lo;
    size_t need = (size_t)rows * T;
    if (need > p->buf_floats) {
        float *nb = realloc(p->buf, need * sizeof *nb);
        if (!nb)
            die_oom(p, need);
        p->buf = nb;
        p->buf_floats = need;
    }
    return p->buf + (size_t)p->lo * T;
}

/* k3_mm_part.end: every rank's slices into Y [T][rows]. */
static void part_end(void *ctx, float *Y, int64_t rows, size_t T)
{
    k3_mpi_part *p = ctx;
    float *all = T == 1 ? Y : p->buf;
    MPI_Request rq;
    double t0 = MPI_Wtime();
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, p->counts, p->displs, MPI_FLOAT,
                    p->comm, &rq);
    k3_mpi_wait(p, &rq, "a matrix product's gather");
    p->st.wait_s += MPI_Wtime() - t0;
    p->st.split++;
    p->st.tokens += T;
    uint64_t own = (uint64_t)(p->hi - p->lo) * T * sizeof(float);
    p->st.bytes_own += own;
    p->st.bytes_in += (uint64_t)rows * T * sizeof(float) - own;
    if (T == 1)
        return;
    /* Rank r's block is [T][n_r] at displs[r]: row lo_r of token t goes to
     * Y[t * rows + lo_r]. */
    for (int r = 0; r < p->size; r++) {
        size_t n = (size_t)p->counts[r] / T, lo = (size_t)p->displs[r] / T;
        for (size_t t = 0; t < T && n; t++)
            memcpy(Y + t * (size_t)rows + lo, all + (size_t)p->displs[r] + t * n, n * sizeof *Y);
    }
}

int k3_mpi_part_init(k3_mpi_part *p, MPI_Comm comm)
{
    memset(p, 0, sizeof *p);
    p->comm = comm;
    MPI_Comm_rank(comm, &p->rank);
    MPI_Comm_size(comm, &p->size);
    p->split_min = env_int("K3_MPI_SPLIT_MIN", K3_MPI_SPLIT_MIN, 0, INT64_MAX / 2);
    p->timeout_s = (double)env_int("K3_MPI_TIMEOUT", K3_MPI_TIMEOUT_S, 1, 1000000000);
    p->counts = calloc((size_t)p->size, sizeof *p->counts);
    p->displs = calloc((size_t)p->size, sizeof *p->displs);
    if (!p->counts || !p->displs) {
        fprintf(stderr, "k3-mpi: rank %d: error: out of memory\n", p->rank);
        k3_mpi_part_free(p);
        return K3_ERUNTIME;
    }
    p->hook.begin = part_begin;
    p->hook.end = part_end;
    p->hook.share = part_share;
    p->hook.rank = p->rank;
    p->hook.size = p->size;
    p->hook.ctx = p;
    return 0;
}

void k3_mpi_part_free(k3_mpi_part *p)
{
    free(p->counts);
    free(p->displs);
    free(p->buf);
    free(p->ebuf);
    p->counts = p->displs = NULL;
    p->buf = p->ebuf = NULL;
}
