/* test_q8.c - the Q8 and Q4 matrices of a draft trunk (core/kernels.h):
 * the quantizers' rules, and k3_matmul / k3_matvec / k3_matvec_t /
 * k3_mat_rows of Q8 and Q4 matrices on every kernel table this CPU runs, 1
 * and 2 threads, against a plain reference written here from the contract
 * (decode each element as q * scale, 16 lanes of fmaf, the fixed tree),
 * bit for bit. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/kernels.h"
#include "core/kernels_isa.h"
#include "util/os.h"

static uint64_t rng = 0x2545F4914F6CDD1Du;
static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Finite BF16 over a wide exponent range, some zeros. */
static uint16_t rnd_bf16(void)
{
    uint32_t u = next32();
    if ((u & 31) == 0)
        return 0;
    float m = (float)(int32_t)(next32() >> 8) / (float)(1 << 23) - 1.0f;
    float f = ldexpf(m, (int)(u % 20) - 10);
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static float rnd(void) { return (float)(int32_t)next32() / 2147483648.0f; }

static float bf(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The reference: element i of row r decoded (q: one int per element, as
 * the quantizer chose it, for both kinds), then the contract's dot. */
static float ref_dot(const int8_t *q, const uint16_t *s, size_t n, const float *x)
{
    float acc[16] = { 0 };
    for (size_t i = 0; i < n; i++)
        acc[i % 16] = fmaf((float)q[i] * bf(s[i / 32]), x[i], acc[i % 16]);
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++)
            acc[j] = acc[j] + acc[j + w];
    return acc[0];
}

static int same(const float *a, const float *b, size_t n)
{
    return !memcmp(a, b, n * sizeof *a);
}

static void test_quantizer(void)
{
    uint16_t w[100], s[4];
    int8_t q[100];
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < 100; i++)
            w[i] = rnd_bf16();
        if (round == 0)
            memset(w, 0, sizeof w); /* all zero: scale 0, q 0 */
        k3_q8_quantize_row(w, 100, q, s);
        for (size_t b = 0; b < 4; b++) {
            size_t len = b < 3 ? 32 : 4;
            float amax = 0, sc = bf(s[b]);
            for (size_t i = 0; i < len; i++)
                amax = fmaxf(amax, fabsf(bf(w[32 * b + i])));
            CHECK(fabsf(sc - amax / 127) <= amax / 127 / 128, "scale %g for max %g", sc, amax);
            for (size_t i = 0; i < len; i++) {
                float v = bf(w[32 * b + i]), d = (float)q[32 * b + i] * sc;
                CHECK(q[32 * b + i] >= -127 && q[32 * b + i] <= 127, "q in range");
                /* at most half a step, plus the clamp where the scale rounded down */
                CHECK(fabsf(d - v) <= sc * 0.5f + amax / 127 / 64, "element %zu: %g -> %g", i, v,
                      d);
                float out;
                k3_q8_decode(q + 32 * b, s + b, i, 1, &out);
                CHECK(out == d, "decode is q * scale");
            }
        }
    }
    /* Decoding is exact: q * scale for the extreme q and a subnormal scale. */
    uint16_t tiny = 0x0001; /* the smallest BF16 subnormal, 2^-133 */
    int8_t big = 127;
    float out;
    k3_q8_decode(&big, &tiny, 0, 1, &out);
    CHECK(out == ldexpf(127.0f, -133), "subnormal scale decodes exactly");
}

/* Q4 nibbles back to the integers they hold (sign-magnitude). */
static void q4_ints(const uint8_t *packed, size_t n, int8_t *q)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t nib = (uint8_t)(i & 1 ? packed[i / 2] >> 4 : packed[i / 2] & 15);
        q[i] = (int8_t)(nib & 8 ? -(nib & 7) : nib & 7);
    }
}

static void test_q4_quantizer(void)
{
    uint16_t w[64], s8[2], s4[2];
    int8_t q8[64], q4[64];
    uint8_t packed[32];
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < 64; i++)
            w[i] = rnd_bf16();
        k3_q4_quantize_row(w, 64, packed, s4);
        k3_q8_quantize_row(w, 64, q8, s8);
        q4_ints(packed, 64, q4);
        for (size_t i = 0; i < 64; i++) {
            float v = bf(w[i]), sc = bf(s4[i / 32]);
            CHECK(q4[i] >= -7 && q4[i] <= 7, "q4 in range");
            CHECK(fabsf((float)q4[i] * sc - v) <= sc * 0.5f + sc / 16, "q4 element %zu", i);
            CHECK(k3_q4_value(packed, s4, (int64_t)i) == (float)q4[i] * sc ||
                      (q4[i] == 0 && k3_q4_value(packed, s4, (int64_t)i) == 0),
                  "q4 decode is q * scale");
        }
    }
}

/* An R x C matrix of `kind` (Q8, or Q4 when C % 32 == 0), T tokens, on
 * table `name` (1, 2 threads, three workspaces), against ref_dot; also
 * matvec, matvec_t and row slices. */
static void check_q8(const char *name, int kind, size_t R, size_t C, size_t T)
{
    size_t nb = (size_t)k3_q8_blocks((int64_t)C);
    uint16_t *w = malloc(R * C * sizeof *w), *s = malloc(R * nb * sizeof *s);
    int8_t *q = malloc(R * C);
    uint8_t *packed = malloc(R * C / 2 + 1);
    float *X = malloc(T * C * sizeof *X), *ref = malloc(T * R * sizeof *ref);
    float *got = malloc(T * R * sizeof *got), *xt = malloc(R * sizeof *xt);
    float *reft = malloc(C * sizeof *reft), *gott = malloc(C * sizeof *gott);
    for (size_t i = 0; i < R * C; i++)
        w[i] = rnd_bf16();
    for (size_t r = 0; r < R; r++) {
        if (kind == K3_MAT_Q4) {
            k3_q4_quantize_row(w + r * C, C, packed + r * (C / 2), s + r * nb);
            q4_ints(packed + r * (C / 2), C, q + r * C);
        } else {
            k3_q8_quantize_row(w + r * C, C, q + r * C, s + r * nb);
        }
    }
    for (size_t i = 0; i < T * C; i++)
        X[i] = rnd();
    for (size_t t = 0; t < T; t++)
        for (size_t r = 0; r < R; r++)
            ref[t * R + r] = ref_dot(q + r * C, s + r * nb, C, X + t * C);
    for (size_t r = 0; r < R; r++)
        xt[r] = rnd();
    for (size_t c = 0; c < C; c++) {
        reft[c] = 0;
        for (size_t r = 0; r < R; r++)
            reft[c] = fmaf(xt[r], (float)q[r * C + c] * bf(s[r * nb + c / 32]), reft[c]);
    }
    k3_mat m = { (k3_mat_kind)kind, (int64_t)R, (int64_t)C,
                 kind == K3_MAT_Q4 ? (const void *)packed : (const void *)q, (const uint8_t *)s,
                 0, 0, 0 };
    CHECK(k3_isa_select(name) == 0, "select %s", name);
    void *buf = k3_os_aligned_alloc(64, k3_mm_ws_bytes(2, SIZE_MAX, SIZE_MAX));
    CHECK(buf != NULL, "workspace");
    const k3_mm_ws wss[3] = { { buf, 2, C, T }, { buf, 2, SIZE_MAX, SIZE_MAX },
                              { buf, 2, 32, 2 } };
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (size_t tt = 1; tt <= T; tt = tt < 8 ? tt + 1 : tt * 3) {
            for (int k = 0; k < 3; k++) {
                memset(got, 0xFF, tt * R * sizeof *got);
                k3_matmul(&m, X, tt, got, &wss[k]);
                CHECK(same(ref, got, tt * R), "%s kind %d matmul %zux%zu T=%zu threads %d ws %d",
                      name, kind, R, C, tt, threads, k);
            }
        }
        k3_matvec(&m, X, got);
        CHECK(same(ref, got, R), "%s q8 matvec %zux%zu threads %d", name, R, C, threads);
        k3_matvec_t(&m, xt, gott);
        CHECK(same(reft, gott, C), "%s q8 matvec_t %zux%zu", name, R, C);
        if (R > 3) {
            k3_mat v = k3_mat_rows(&m, 2, (int64_t)R - 3);
            k3_matvec(&v, X, got);
            CHECK(same(ref + 2, got, R - 3), "%s q8 rows slice %zux%zu", name, R, C);
        }
    }
    k3_os_aligned_free(buf);
    free(packed), free(w), free(s), free(q), free(X), free(ref), free(got), free(xt), free(reft);
    free(gott);
}

int main(void)
{
    test_quantizer();
    test_q4_quantizer();
    static const size_t rows[] = { 1, 5, 24, 37 };
    static const size_t cols[] = { 1, 15, 32, 33, 100, 288, 600, 1100, 1120 };
    int ran = 0;
    for (size_t i = 0; k3_isa_names[i]; i++) {
        if (!k3_isa_find(k3_isa_names[i]))
            continue;
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
            for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
                for (int kind = K3_MAT_Q8; kind <= K3_MAT_Q4; kind++)
                    if (kind == K3_MAT_Q8 || cols[c] % 32 == 0)
                        check_q8(k3_isa_names[i], kind, rows[r], cols[c], 40);
        check_q8(k3_isa_names[i], K3_MAT_Q8, 30, 4136, 100); /* past every block of k3_matmul */
        check_q8(k3_isa_names[i], K3_MAT_Q4, 30, 4128, 100);
        ran++;
    }
    CHECK(ran >= 1, "at least the scalar table ran");
    return check_report("test_q8");
}
