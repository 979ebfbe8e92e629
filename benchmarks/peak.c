/* peak.c - the machine's ceilings, for benchmarks/bench.sh:
 *   read  memory read bandwidth: every thread streams its share of a buffer
 *         far larger than any cache (XOR into vector registers, so only the
 *         loads cost), median of runs; also one thread alone, timed in its
 *         CPU seconds (read_core_gbps);
 *   fma   fp32 FMA peak per kernel table the CPU runs: every thread keeps
 *         independent FMA chains in registers (enough to cover the FMA
 *         latency on every port), median of runs; also one thread in its
 *         CPU seconds (fma_core_gflops_*), the yardstick of kernels.c.
 * Output: one "key value" line per result (GB/s = 1e9 bytes/s, GFLOP/s with
 * an FMA counted as 2 flops), and the kernel table the engine picks here.
 *
 *   peak [--mib N] [--runs R]      (defaults: 1024 MiB, 7 runs)  */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/kernels_isa.h"

#if defined(K3_HAVE_X86_TABLES)
#include <immintrin.h>
#endif
#if defined(K3_HAVE_NEON_TABLE)
#include <arm_neon.h>
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of the calling thread: time the OS gave to other programs
 * does not count. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* --- Read bandwidth --------------------------------------------------------
 * XOR of all 64-bit words of [p, p + n) (n a multiple of 64 bytes); four
 * independent accumulators so the loads, not the XORs, set the pace. */
typedef uint64_t (*read_fn)(const uint64_t *p, size_t n);

static uint64_t read_plain(const uint64_t *p, size_t n)
{
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n / 8; i += 4) {
        a ^= p[i];
        b ^= p[i + 1];
        c ^= p[i + 2];
        d ^= p[i + 3];
    }
    return a ^ b ^ c ^ d;
}

#if defined(K3_HAVE_X86_TABLES)
__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint64_t *p, size_t n)
{
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t i = 0; i < n / 8; i += 32) {
        a = _mm512_xor_si512(a, _mm512_load_si512((const void *)(p + i)));
        b = _mm512_xor_si512(b, _mm512_load_si512((const void *)(p + i + 8)));
        c = _mm512_xor_si512(c, _mm512_load_si512((const void *)(p + i + 16)));
        d = _mm512_xor_si512(d, _mm512_load_si512((const void *)(p + i + 24)));
    }
    uint64_t out[8];
    _mm512_storeu_si512((void *)out, _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d)));
    return out[0] ^ out[1] ^ out[2] ^ out[3] ^ out[4] ^ out[5] ^ out[6] ^ out[7];
}

__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t n)
{
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i < n / 8; i += 16) {
        a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i *)(const void *)(p + i)));
        b = _mm256_xor_si256(b, _mm256_load_si256((const __m256i *)(const void *)(p + i + 4)));
        c = _mm256_xor_si256(c, _mm256_load_si256((const __m256i *)(const void *)(p + i + 8)));
        d = _mm256_xor_si256(d, _mm256_load_si256((const __m256i *)(const void *)(p + i + 12)));
    }
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)(void *)out,
                        _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d)));
    return out[0] ^ out[1] ^ out[2] ^ out[3];
}
#endif

static read_fn best_read(void)
{
#if defined(K3_HAVE_X86_TABLES)
    if (k3_isa_find("avx512"))
        return read_avx512;
    if (k3_isa_find("avx2"))
        return read_avx2;
#endif
    return read_plain;
}

static volatile uint64_t sink;

/* GB/s of every thread reading its share at once (wall time), or, with
 * one_core, of one thread reading the whole buffer (its own CPU time). */
static double read_gbps(size_t bytes, int runs, int one_core)
{
    void *mem = NULL;
    if (posix_memalign(&mem, 4096, bytes) != 0) {
        fprintf(stderr, "peak: cannot allocate %zu bytes\n", bytes);
        exit(1);
    }
    uint64_t *buf = mem;
    int nt = one_core ? 1 : omp_get_max_threads();
    size_t share = bytes / (size_t)nt / 4096 * 4096; /* whole pages per thread */
    read_fn f = best_read();
    /* Each thread touches its own share first (first-touch placement). */
#pragma omp parallel num_threads(nt)
    memset((char *)buf + (size_t)omp_get_thread_num() * share, 1, share);
    double *gbps = malloc((size_t)runs * sizeof *gbps);
    for (int r = 0; r < runs; r++) {
        uint64_t x = 0;
        double t0 = one_core ? cpu_now() : now();
#pragma omp parallel num_threads(nt) reduction(^ : x)
        x ^= f(buf + (size_t)omp_get_thread_num() * share / 8, share);
        double dt = (one_core ? cpu_now() : now()) - t0;
        sink ^= x;
        gbps[r] = (double)share * (double)nt / dt * 1e-9;
    }
    double m = median(gbps, runs);
    free(gbps);
    free(mem);
    return m;
}

/* --- FMA peak ---------------------------------------------------------------
 * CHAINS independent accumulators, each acc = acc * m + c per step: m < 1
 * and c > 0 keep every value finite and normal (no slow subnormals). */
#define CHAINS 16
typedef double (*fma_fn)(long iters); /* returns flops done */

static double fma_scalar(long iters)
{
    float acc[CHAINS];
    for (int c = 0; c < CHAINS; c++)
        acc[c] = (float)c;
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++)
            acc[c] = fmaf(acc[c], 0.999999f, 1e-6f);
    float s = 0;
    for (int c = 0; c < CHAINS; c++)
        s += acc[c];
    sink ^= (uint64_t)s;
    return 2.0 * CHAINS * (double)iters;
}

#if defined(K3_HAVE_X86_TABLES)
__attribute__((target("avx512f"))) static double fma_avx512(long iters)
{
    __m512 acc[CHAINS], m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-6f);
#pragma GCC unroll 16
    for (int c = 0; c < CHAINS; c++)
        acc[c] = _mm512_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm512_fmadd_ps(acc[c], m, a);
    __m512 s = acc[0];
#pragma GCC unroll 16
    for (int c = 1; c < CHAINS; c++)
        s = _mm512_add_ps(s, acc[c]);
    sink ^= (uint64_t)_mm512_reduce_add_ps(s);
    return 2.0 * 16 * CHAINS * (double)iters;
}

__attribute__((target("avx2,fma"))) static double fma_avx2(long iters)
{
    __m256 acc[CHAINS], m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-6f);
#pragma GCC unroll 16
    for (int c = 0; c < CHAINS; c++)
        acc[c] = _mm256_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int c = 0; c < CHAINS; c++)
            acc[c] = _mm256_fmadd_ps(acc[c], m, a);
    float out[8];
    __m256 s = acc[0];
#pragma GCC unroll 16
    for (int c = 1; c < CHAINS; c++)
        s = _mm256_add_ps(s, acc[c]);
    _mm256_storeu_ps(out, s);
    sink ^= (uint64_t)out[0];
    return 2.0 * 8 * CHAINS * (double)iters;
}
#endif

#if defined(K3_HAVE_NEON_TABLE)
static double fma_neon(long iters)
{
    float32x4_t acc[CHAINS], m = vdupq_n_f32(0.999999f), a = vdupq_n_f32(1e-6f);
    for (int c = 0; c < CHAINS; c++)
        acc[c] = vdupq_n_f32((float)c);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int c = 0; c < CHAINS; c++)
            acc[c] = vfmaq_f32(a, acc[c], m);
    float32x4_t s = acc[0];
    for (int c = 1; c < CHAINS; c++)
        s = vaddq_f32(s, acc[c]);
    sink ^= (uint64_t)vgetq_lane_f32(s, 0);
    return 2.0 * 4 * CHAINS * (double)iters;
}
#endif

/* GFLOP/s of all threads at once (wall time), or, with one_core, of one
 * thread (its own CPU time). */
static double fma_gflops(fma_fn f, int runs, int one_core)
{
    long iters = 1000;
    /* Grow the work until one run takes ~0.2 s. */
    for (;;) {
        double t0 = now();
        f(iters);
        if (now() - t0 > 0.05 || iters > (1L << 40))
            break;
        iters *= 2;
    }
    iters *= 4;
    double *g = malloc((size_t)runs * sizeof *g);
    for (int r = 0; r < runs; r++) {
        if (one_core) {
            double t0 = cpu_now(), flops = f(iters);
            g[r] = flops / (cpu_now() - t0) * 1e-9;
            continue;
        }
        double flops = 0, t0 = now();
#pragma omp parallel reduction(+ : flops)
        flops += f(iters);
        g[r] = flops / (now() - t0) * 1e-9;
    }
    double m = median(g, runs);
    free(g);
    return m;
}

/* One "fma_gflops_TABLE" line (all threads, wall) and one
 * "fma_core_gflops_TABLE" line (one thread, CPU time). */
static void report_fma(const char *table, fma_fn f, int runs)
{
    printf("fma_gflops_%s %.2f\n", table, fma_gflops(f, runs, 0));
    printf("fma_core_gflops_%s %.2f\n", table, fma_gflops(f, runs, 1));
}

int main(int argc, char **argv)
{
    long mib = 1024, runs = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mib"))
            mib = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs"))
            runs = atol(argv[i + 1]);
    }
    if (mib < 64 || runs < 1) {
        fprintf(stderr, "usage: peak [--mib N>=64] [--runs R>=1]\n");
        return 2;
    }
    printf("threads %d\n", omp_get_max_threads());
    printf("kernels_default %s\n", k3_isa_active()->name);
    printf("runs %ld\n", runs);
    printf("read_buffer_mib %ld\n", mib);
    printf("read_gbps %.2f\n", read_gbps((size_t)mib << 20, (int)runs, 0));
    printf("read_core_gbps %.2f\n", read_gbps((size_t)mib << 20, (int)runs, 1));
    report_fma("scalar", fma_scalar, (int)runs);
#if defined(K3_HAVE_X86_TABLES)
    if (k3_isa_find("avx2"))
        report_fma("avx2", fma_avx2, (int)runs);
    if (k3_isa_find("avx512"))
        report_fma("avx512", fma_avx512, (int)runs);
#endif
#if defined(K3_HAVE_NEON_TABLE)
    report_fma("neon", fma_neon, (int)runs);
#endif
    return 0;
}
