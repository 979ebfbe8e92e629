/* kernels.c - the kernel tables alone, for benchmarks/bench.sh: k3_matvec
 * and k3_matmul on the release's matrix shapes, one thread, timed in CPU
 * seconds of this process (so that time the OS gives to other programs
 * does not count: on a shared machine this is the clean signal), minimum
 * over runs. Weights: BF16 of small normal values, MXFP4 random nibbles
 * with mid-range scales (no subnormals anywhere).
 * Output: one line per case, "kernel TABLE KIND ROWSxCOLS T GB/s GFLOP/s"
 * (GB/s of weight bytes read, GFLOP/s with a multiply-add as 2).
 *
 *   kernels [--runs R]      (default 5; the scalar table runs 1 token only) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/kernels.h"
#include "core/kernels_isa.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    k3_mat_kind kind;
    int64_t rows, cols;
    size_t T;
} shape;

/* Decode rows (BF16 q/k/v/g projections, an expert's gate), and prompts. */
static const shape cases[] = {
    { K3_MAT_BF16, 12288, 7168, 1 },  { K3_MAT_MXFP4, 3072, 3584, 1 },
    { K3_MAT_BF16, 3072, 7168, 6 },   { K3_MAT_MXFP4, 3072, 3584, 6 },
    { K3_MAT_BF16, 3072, 7168, 64 },  { K3_MAT_MXFP4, 3072, 3584, 64 },
    { K3_MAT_BF16, 1536, 7168, 512 },
};

static uint32_t rng = 2463534242u;
static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

static void run(const char *table, const shape *c, int runs, const k3_mm_ws *ws)
{
    size_t n = (size_t)c->rows * (size_t)c->cols;
    size_t bytes = c->kind == K3_MAT_BF16 ? 2 * n : n / 2 + n / 32;
    uint8_t *w = malloc(bytes);
    float *x = malloc(c->T * (size_t)c->cols * sizeof *x);
    float *y = malloc(c->T * (size_t)c->rows * sizeof *y);
    if (!w || !x || !y) {
        fprintf(stderr, "kernels: out of memory\n");
        exit(1);
    }
    k3_mat m = { c->kind, c->rows, c->cols, w, NULL, 0, 0, 0 };
    if (c->kind == K3_MAT_BF16) {
        uint16_t *b = (uint16_t *)(void *)w;
        for (size_t i = 0; i < n; i++) /* |value| in [2^-8, 2^-7), both signs */
            b[i] = (uint16_t)(0x3B80u | (next() & 0x807Fu));
    } else {
        for (size_t i = 0; i < n / 2; i++)
            w[i] = (uint8_t)next();
        memset(w + n / 2, 120, n / 32);
        m.scales = w + n / 2;
    }
    for (size_t i = 0; i < c->T * (size_t)c->cols; i++)
        x[i] = (float)(next() % 1000 + 1) * 1e-3f;
    double best = 1e30;
    for (int r = 0; r <= runs; r++) { /* run 0 warms caches and pages */
        double t0 = cpu_now();
        k3_matmul(&m, x, c->T, y, ws);
        double dt = cpu_now() - t0;
        if (r > 0 && dt < best)
            best = dt;
    }
    printf("kernel %s %s %lldx%lld %zu %.2f %.2f\n", table,
           c->kind == K3_MAT_BF16 ? "bf16" : "mxfp4", (long long)c->rows, (long long)c->cols,
           c->T, (double)bytes / best * 1e-9, 2.0 * (double)n * (double)c->T / best * 1e-9);
    fflush(stdout);
    free(w), free(x), free(y);
}

int main(int argc, char **argv)
{
    int runs = argc == 3 && !strcmp(argv[1], "--runs") ? atoi(argv[2]) : 5;
    if (runs < 1 || (argc != 1 && argc != 3)) {
        fprintf(stderr, "usage: kernels [--runs R>=1]\n");
        return 2;
    }
    omp_set_num_threads(1);
    void *buf = NULL;
    if (posix_memalign(&buf, 64, k3_mm_ws_bytes(1, SIZE_MAX, SIZE_MAX)) != 0) {
        fprintf(stderr, "kernels: out of memory\n");
        return 1;
    }
    k3_mm_ws ws = { buf, 1, SIZE_MAX, SIZE_MAX };
    for (size_t i = 0; k3_isa_names[i]; i++) {
        const char *name = k3_isa_names[i];
        if (k3_isa_select(name) != 0)
            continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            if (strcmp(name, "scalar") || cases[c].T == 1)
                run(name, &cases[c], strcmp(name, "scalar") ? runs : 1, &ws);
    }
    free(buf);
    return 0;
}
