/* test_simd.c - every kernel table this CPU runs against the plain scalar
 * table, bit for bit: each inner loop on random data over many lengths
 * (tails included), then the drivers (k3_dot, k3_matvec, k3_matmul,
 * k3_matvec_t, k3_axpy) with the table selected, for F32, BF16 and MXFP4,
 * several token counts and 1 and 2 threads. Tables the build or CPU cannot
 * run are reported as skipped. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/kernels.h"
#include "core/kernels_isa.h"
#include "util/os.h"

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Finite floats over a wide exponent range, some zeros of both signs. */
static float rnd(void)
{
    uint32_t u = next32();
    if ((u & 63) == 0)
        return (u & 64) ? -0.0f : 0.0f;
    float m = (float)(int32_t)(next32() >> 8) / (float)(1 << 23) - 1.0f;
    return ldexpf(m, (int)(u % 24) - 12);
}

static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rnd();
}

/* Finite BF16 (the upper half of rnd()), or any bit pattern (inf, NaN,
 * subnormals) when raw. */
static void fill_bf16(uint16_t *w, size_t n, int raw)
{
    for (size_t i = 0; i < n; i++) {
        float f = rnd();
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        w[i] = raw ? (uint16_t)next32() : (uint16_t)(u >> 16);
    }
}

/* Random nibbles; scales in [lo, hi] (hi <= 254: 255 is E8M0's NaN). */
static void fill_mxfp4(uint8_t *packed, uint8_t *scales, size_t rows, size_t n, int lo, int hi)
{
    for (size_t i = 0; i < rows * n / 2; i++)
        packed[i] = (uint8_t)next32();
    for (size_t i = 0; i < rows * n / 32; i++)
        scales[i] = (uint8_t)(lo + (int)(next32() % (uint32_t)(hi - lo + 1)));
}

/* Two output buffers with the same random contents, so that entries a
 * kernel must not write compare equal too. */
static void twin(float *a, float *b, size_t n)
{
    fill(a, n);
    memcpy(b, a, n * sizeof *a);
}

/* Bitwise equal; with nan_ok, any two NaNs also count as equal (a NaN's
 * payload is not part of the contract). */
static int same(const float *a, const float *b, size_t n, int nan_ok)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i]) && !(nan_ok && isnan(a[i]) && isnan(b[i])))
            return 0;
    return 1;
}

enum { NMAX = 320, RMAX = 8, TMAX = 8 };

/* Row dots of 1 and 5 rows (a whole block plus one) for every token count
 * the table takes; y is [nt][ldy] with ldy > rows. */
static void test_row_dots(const k3_isa *isa)
{
    enum { TOK = 8, LDY = 7 };
    static float w[5 * NMAX], x[TOK * NMAX], y1[TOK * LDY], y2[TOK * LDY];
    static uint16_t wb[5 * NMAX];
    static uint8_t packed[5 * NMAX / 2], scales[5 * NMAX / 32];
    const k3_isa *ref = &k3_isa_scalar;
    for (size_t n = 0; n <= 300; n++)
        for (size_t nt = 1; nt <= isa->nr; nt++) {
            fill(x, nt * n);
            fill(w, 5 * n);
            for (size_t rows = 1; rows <= 5; rows += 4) {
                twin(y1, y2, TOK * LDY);
                ref->rows_f32(w, n, rows, x, nt, y1, LDY);
                isa->rows_f32(w, n, rows, x, nt, y2, LDY);
                CHECK(same(y1, y2, TOK * LDY, 0), "%s rows_f32 n=%zu rows=%zu nt=%zu", isa->name,
                      n, rows, nt);
                for (int raw = 0; raw < 2; raw++) {
                    fill_bf16(wb, 5 * n, raw);
                    twin(y1, y2, TOK * LDY);
                    ref->rows_bf16(wb, n, rows, x, nt, y1, LDY);
                    isa->rows_bf16(wb, n, rows, x, nt, y2, LDY);
                    CHECK(same(y1, y2, TOK * LDY, raw), "%s rows_bf16 n=%zu rows=%zu nt=%zu raw=%d",
                          isa->name, n, rows, nt, raw);
                }
            }
            /* Unaligned starts: rows and x one float off a vector boundary. */
            size_t m = n > 0 ? n - 1 : 0;
            twin(y1, y2, TOK * LDY);
            ref->rows_f32(w + 1, m, 3, x + 1, nt, y1, LDY);
            isa->rows_f32(w + 1, m, 3, x + 1, nt, y2, LDY);
            CHECK(same(y1, y2, TOK * LDY, 0), "%s rows_f32 unaligned n=%zu nt=%zu", isa->name, m,
                  nt);
        }
    for (size_t n = 32; n <= NMAX; n += 32) {
        /* Moderate scales (finite), then the whole valid range 0..254
         * (subnormal and infinite products, NaN from inf - inf). */
        static const int lo[2] = { 110, 0 }, hi[2] = { 140, 254 };
        for (size_t nt = 1; nt <= isa->nr; nt++) {
            fill(x, nt * n);
            for (int s = 0; s < 2; s++)
                for (size_t rows = 1; rows <= 5; rows += 4) {
                    fill_mxfp4(packed, scales, rows, n, lo[s], hi[s]);
                    twin(y1, y2, TOK * LDY);
                    ref->rows_mxfp4(packed, scales, n, rows, x, nt, y1, LDY);
                    isa->rows_mxfp4(packed, scales, n, rows, x, nt, y2, LDY);
                    CHECK(same(y1, y2, TOK * LDY, s),
                          "%s rows_mxfp4 n=%zu rows=%zu nt=%zu scales %d..%d", isa->name, n, rows,
                          nt, lo[s], hi[s]);
                }
        }
    }
}

static void test_decode_axpy_tile(const k3_isa *isa)
{
    static float d1[NMAX], d2[NMAX], x[TMAX * NMAX], w[RMAX * NMAX];
    static float acc1[RMAX * TMAX * 16], acc2[RMAX * TMAX * 16];
    static uint16_t wb[NMAX];
    static uint8_t packed[NMAX / 2], scales[NMAX / 32];
    const k3_isa *ref = &k3_isa_scalar;
    for (size_t n = 0; n <= 300; n++) {
        fill_bf16(wb, n, 1);
        ref->decode_bf16(wb, n, d1);
        isa->decode_bf16(wb, n, d2);
        CHECK(!memcmp(d1, d2, n * sizeof *d1), "%s decode_bf16 n=%zu", isa->name, n);
        fill(x, n);
        twin(d1, d2, n);
        float a = rnd();
        ref->axpy(d1, a, x, n);
        isa->axpy(d2, a, x, n);
        CHECK(same(d1, d2, n, 0), "%s axpy n=%zu", isa->name, n);
    }
    for (size_t n = 32; n <= NMAX; n += 32) {
        fill_mxfp4(packed, scales, 1, n, 0, 254);
        ref->decode_mxfp4(packed, scales, n, d1);
        isa->decode_mxfp4(packed, scales, n, d2);
        CHECK(!memcmp(d1, d2, n * sizeof *d1), "%s decode_mxfp4 n=%zu", isa->name, n);
    }
    /* Tiles of every shape up to the table's block, over many lengths,
     * resuming from nonzero lanes; the lanes of a tile are lda apart. */
    size_t lda = 8;
    for (size_t k = 0; k <= 300; k += 1 + k / 8) {
        fill(w, 8 * NMAX);
        fill(x, 8 * NMAX);
        for (size_t mr = 1; mr <= isa->mr; mr++)
            for (size_t nr = 1; nr <= isa->nr; nr++) {
                twin(acc1, acc2, 8 * lda * 16);
                ref->tile(w + 3, NMAX, mr, x + 1, NMAX + 5, nr, k, acc1, lda);
                isa->tile(w + 3, NMAX, mr, x + 1, NMAX + 5, nr, k, acc2, lda);
                CHECK(same(acc1, acc2, 8 * lda * 16, 0), "%s tile %zux%zu k=%zu", isa->name, mr,
                      nr, k);
            }
    }
}

/* k3_matmul (T tokens for each T in Ts, then k3_matvec) on one R x C
 * matrix of `kind` with the table `name` selected, against per-token row
 * dots of the scalar table; 1 and 2 threads. */
static void check_matmul(const char *name, int kind, size_t R, size_t C, const size_t *Ts,
                         size_t nT)
{
    size_t Tmax = 0;
    for (size_t i = 0; i < nT; i++)
        Tmax = Ts[i] > Tmax ? Ts[i] : Tmax;
    float *w = malloc(R * C * sizeof *w), *X = malloc(Tmax * C * sizeof *X);
    float *ref = malloc(Tmax * R * sizeof *ref), *got = malloc(Tmax * R * sizeof *got);
    uint16_t *wb = malloc(R * C * sizeof *wb);
    uint8_t *packed = malloc(R * C / 2 + 1), *scales = malloc(R * C / 32 + 1);
    k3_mat m = { (k3_mat_kind)kind, (int64_t)R, (int64_t)C, NULL, scales, 0, 0, 0 };
    fill(w, R * C);
    fill_bf16(wb, R * C, 0);
    if (kind == K3_MAT_MXFP4)
        fill_mxfp4(packed, scales, R, C, 100, 150);
    m.w = kind == K3_MAT_F32 ? (const void *)w
          : kind == K3_MAT_BF16 ? (const void *)wb : (const void *)packed;
    fill(X, Tmax * C);
    const k3_isa *scalar = &k3_isa_scalar;
    for (size_t t = 0; t < Tmax; t++) {
        if (kind == K3_MAT_F32)
            scalar->rows_f32(w, C, R, X + t * C, 1, ref + t * R, R);
        else if (kind == K3_MAT_BF16)
            scalar->rows_bf16(wb, C, R, X + t * C, 1, ref + t * R, R);
        else
            scalar->rows_mxfp4(packed, scales, C, R, X + t * C, 1, ref + t * R, R);
    }
    CHECK(k3_isa_select(name) == 0, "select %s", name);
    /* A workspace for the whole matrix and call, the largest one, and one
     * of 32 columns and 2 tokens (more column chunks and token blocks). */
    void *buf = NULL;
    CHECK((buf = k3_os_aligned_alloc(64, k3_mm_ws_bytes(2, SIZE_MAX, SIZE_MAX))) != NULL,
          "matmul workspace");
    const k3_mm_ws wss[3] = { { buf, 2, C, Tmax }, { buf, 2, SIZE_MAX, SIZE_MAX },
                              { buf, 2, 32, 2 } };
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (size_t i = 0; i < nT; i++)
            for (int k = 0; k < 3; k++) {
                memset(got, 0xFF, Ts[i] * R * sizeof *got);
                k3_matmul(&m, X, Ts[i], got, &wss[k]);
                CHECK(same(ref, got, Ts[i] * R, 0),
                      "%s matmul kind %d %zux%zu T=%zu threads %d workspace %d", name, kind, R, C,
                      Ts[i], threads, k);
            }
        k3_matvec(&m, X + C, got);
        CHECK(same(ref + R, got, R, 0), "%s matvec kind %d %zux%zu threads %d", name, kind, R, C,
              threads);
    }
    free(w), free(X), free(ref), free(got), free(wb), free(packed), free(scales);
    k3_os_aligned_free(buf);
}

static void test_drivers(const char *name)
{
    static const size_t rows_list[] = { 1, 5, 17, 24, 97 };
    static const size_t cols_list[] = { 1, 15, 16, 33, 64, 100, 255, 256, 288, 300 };
    static const size_t Ts[] = { 1, 2, 3, 5, 6, 7, 16, 40 };
    for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++)
        for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++)
            for (int kind = 0; kind < 3; kind++) {
                size_t C = cols_list[ci];
                if (kind == K3_MAT_MXFP4)
                    C = (C + 31) / 32 * 32;
                check_matmul(name, kind, rows_list[ri], C, Ts, sizeof Ts / sizeof *Ts);
            }
    /* Past every block of k3_matmul (24 rows, 96 tokens, 4096 columns), so
     * lanes are parked and resumed between column chunks. */
    static const size_t Tbig[] = { 7, 100 };
    for (int kind = 0; kind < 3; kind++)
        check_matmul(name, kind, 30, kind == K3_MAT_MXFP4 ? 4160 : 4136, Tbig, 2);

    /* k3_dot, k3_axpy and k3_matvec_t through the drivers. */
    static float w[NMAX * NMAX], x[NMAX], ref[NMAX], got[NMAX];
    static uint16_t wb[NMAX * NMAX];
    static uint8_t packed[NMAX * NMAX / 2], scales[NMAX * NMAX / 32];
    fill(w, NMAX);
    fill(x, NMAX);
    for (size_t n = 0; n <= 300; n += 7) {
        float a, b;
        CHECK(k3_isa_select("scalar") == 0, "select scalar");
        a = k3_dot(w, x, n);
        CHECK(k3_isa_select(name) == 0, "select %s", name);
        b = k3_dot(w, x, n);
        CHECK(same(&a, &b, 1, 0), "%s k3_dot n=%zu", name, n);
    }
    for (int kind = 0; kind < 3; kind++) {
        size_t R = 37, C = 288;
        k3_mat m = { (k3_mat_kind)kind, (int64_t)R, (int64_t)C,
                     kind == K3_MAT_F32 ? (const void *)w
                     : kind == K3_MAT_BF16 ? (const void *)wb : (const void *)packed,
                     scales, 0, 0, 0 };
        fill(w, R * C);
        fill_bf16(wb, R * C, 0);
        fill_mxfp4(packed, scales, R, C, 100, 150);
        fill(x, R);
        CHECK(k3_isa_select("scalar") == 0, "select scalar");
        k3_matvec_t(&m, x, ref);
        CHECK(k3_isa_select(name) == 0, "select %s", name);
        k3_matvec_t(&m, x, got);
        CHECK(same(ref, got, C, 0), "%s matvec_t kind %d", name, kind);
    }
}

int main(void)
{
    /* The E8M0 decoding every table shares, against ldexpf. */
    for (int e = 0; e < 255; e++)
        CHECK(k3_e8m0((uint8_t)e) == ldexpf(1.0f, e - 127), "e8m0(%d)", e);
    CHECK(k3_isa_find("scalar") == &k3_isa_scalar, "scalar always runs");
    CHECK(k3_isa_find("no-such-isa") == NULL && k3_isa_select("no-such-isa") == -1,
          "unknown names are refused");
    int ran = 0;
    for (size_t i = 0; k3_isa_names[i]; i++) {
        const char *name = k3_isa_names[i];
        const k3_isa *isa = k3_isa_find(name);
        if (!isa) {
            printf("test_simd: %s not available on this build/CPU: skipped\n", name);
            continue;
        }
        printf("test_simd: %s (tile %zux%zu)\n", name, isa->mr, isa->nr);
        test_row_dots(isa);
        test_decode_axpy_tile(isa);
        test_drivers(name);
        ran++;
    }
    CHECK(ran >= 1, "at least the scalar table ran");
    return check_report("test_simd");
}
