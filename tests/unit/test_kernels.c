/* test_kernels.c - kernels against first principles: hand-built MXFP4
 * bytes, the E8M0 NaN byte, our exp/tanh against float64, the summation
 * contract, and bit-identity across matvec/matmul and thread counts. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/kernels.h"
#include "core/mathfn.h"
#include "util/os.h"

static void test_mxfp4(void)
{
    /* Row of 64 elements: byte j holds element 2j (LOW nibble) and 2j+1. */
    uint8_t packed[32], scales[2] = { 127, 129 }; /* x1 then x4 */
    memset(packed, 0, sizeof packed);
    packed[0] = 0x21;  /* e0 = nibble 1 = 0.5, e1 = nibble 2 = 1.0 */
    packed[1] = 0xF9;  /* e2 = nibble 9 = -0.5, e3 = nibble 15 = -6 */
    packed[2] = 0x87;  /* e4 = 6, e5 = -0 */
    packed[16] = 0x35; /* e32 = 3 * 4, e33 = 1.5 * 4 */
    const float want[6] = { 0.5f, 1.0f, -0.5f, -6.0f, 6.0f, -0.0f };
    for (int i = 0; i < 6; i++)
        CHECK(k3_mxfp4_value(packed, scales, i) == want[i], "element %d = %g", i,
              k3_mxfp4_value(packed, scales, i));
    CHECK(k3_mxfp4_value(packed, scales, 32) == 12.0f && k3_mxfp4_value(packed, scales, 33) == 6.0f,
          "second group uses the second scale");
    /* The lowest and highest usable scales are exact powers of two. */
    uint8_t lo[1] = { 0 }, hi[1] = { 254 };
    CHECK(k3_mxfp4_value(packed, lo, 0) == ldexpf(0.5f, -127), "scale byte 0");
    CHECK(k3_mxfp4_value(packed, hi, 1) == ldexpf(1.0f, 127), "scale byte 254");
    /* A matvec over that row uses the same decoding. */
    float x[64], y;
    for (int i = 0; i < 64; i++)
        x[i] = (float)(i + 1);
    k3_mat m = { K3_MAT_MXFP4, 1, 64, packed, scales, 0, 0, 0 };
    k3_matvec(&m, x, &y);
    float ref = 0.5f * 1 + 1.0f * 2 - 0.5f * 3 - 6.0f * 4 + 6.0f * 5 + 12.0f * 33 + 6.0f * 34;
    CHECK(y == ref, "mxfp4 matvec %g vs %g", y, ref);
    /* Swapping the nibbles of one byte changes the result (the order matters). */
    packed[0] = 0x12;
    k3_matvec(&m, x, &y);
    CHECK(y != ref, "swapped nibbles must change the product");
    /* 255 is E8M0's NaN: found, wherever it is. */
    uint8_t sc[5] = { 1, 127, 254, 255, 0 };
    CHECK(k3_mxfp4_find_nan_scale(sc, 5) == 3, "NaN scale byte found");
    CHECK(k3_mxfp4_find_nan_scale(sc, 3) == -1, "no NaN scale byte");
}

static double ulp_err(float got, double want)
{
    if (want == 0)
        return got == 0 ? 0 : INFINITY;
    float w = (float)want;
    double ulp = fabs((double)nextafterf(w, INFINITY) - (double)w);
    return fabs((double)got - want) / ulp;
}

static void test_mathfn(void)
{
    double worst_exp = 0, worst_tanh = 0, worst_tanh_abs = 0;
    for (int i = -200000; i <= 200000; i++) {
        float x = (float)i * 0.0004f; /* [-80, 80] */
        double e = ulp_err(k3_expf(x), exp((double)x));
        if (e > worst_exp)
            worst_exp = e;
        float xt = (float)i * 0.00005f; /* [-10, 10] */
        double t = tanh((double)xt);
        double et = ulp_err(k3_tanhf(xt), t), ea = fabs((double)k3_tanhf(xt) - t);
        if (et > worst_tanh)
            worst_tanh = et;
        if (ea > worst_tanh_abs)
            worst_tanh_abs = ea;
    }
    CHECK(worst_exp <= 2.0, "expf worst %.2f ulp", worst_exp);
    CHECK(worst_tanh <= 3.0, "tanhf worst %.2f ulp", worst_tanh);
    CHECK(worst_tanh_abs <= 1.2e-7, "tanhf worst abs %.3g", worst_tanh_abs);
    CHECK(k3_expf(-200.0f) == 0.0f && isinf(k3_expf(100.0f)) && k3_expf(0.0f) == 1.0f,
          "exp limits");
    CHECK(k3_sigmoidf(-200.0f) == 0.0f && k3_sigmoidf(200.0f) == 1.0f, "sigmoid limits");
    CHECK(k3_tanhf(-20.0f) == -1.0f && k3_tanhf(0.0f) == 0.0f, "tanh limits");
    /* SiTU's caps: the gate saturates at b1 * sigmoid, the up branch at b2. */
    float g[2] = { 100.0f, 0.5f }, u[2] = { 1e4f, 1e4f };
    k3_situ(g, u, 2, 4.0f, 25.0f);
    CHECK(fabsf(g[0] - 4.0f * 25.0f) < 1e-3f, "SiTU saturates: %g", g[0]);
}

/* The order contract, written out independently of kernels.c. */
static float contract_dot(const float *a, const float *b, size_t n)
{
    float lane[16] = { 0 };
    for (size_t i = 0; i < n; i++)
        lane[i % 16] = fmaf(a[i], b[i], lane[i % 16]);
    float l8[8], l4[4], l2[2];
    for (int j = 0; j < 8; j++) l8[j] = lane[j] + lane[j + 8];
    for (int j = 0; j < 4; j++) l4[j] = l8[j] + l8[j + 4];
    for (int j = 0; j < 2; j++) l2[j] = l4[j] + l4[j + 2];
    return l2[0] + l2[1];
}

static uint32_t rng = 12345;
static float rnd(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((int32_t)(rng >> 8) - (1 << 23)) / (float)(1 << 23);
}

static void test_order(void)
{
    enum { R = 97, C = 333, T = 5 };
    static float a[C], W[R * C], X[T * C], Y1[T * R], Y2[T * R], Y3[T * R];
    static uint16_t Wb[R * C];
    for (int i = 0; i < C; i++)
        a[i] = rnd();
    for (int i = 0; i < R * C; i++) {
        W[i] = rnd() * 3;
        Wb[i] = (uint16_t)(rng >> 16);
    }
    for (int i = 0; i < T * C; i++)
        X[i] = rnd();
    for (size_t n = 0; n <= C; n += 37)
        CHECK(k3_dot(a, W, n) == contract_dot(a, W, n), "k3_dot follows the contract at n=%zu", n);
    k3_mat kinds[2] = { { K3_MAT_F32, R, C, W, NULL, 0, 0, 0 },
                        { K3_MAT_BF16, R, C, Wb, NULL, 0, 0, 0 } };
    void *buf = NULL;
    CHECK((buf = k3_os_aligned_alloc(64, k3_mm_ws_bytes(2, C, T))) != NULL, "matmul workspace");
    k3_mm_ws ws = { buf, 2, C, T };
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(1);
        k3_matmul(&kinds[k], X, T, Y1, &ws);
        omp_set_num_threads(2);
        k3_matmul(&kinds[k], X, T, Y2, &ws);
        for (int t = 0; t < T; t++)
            k3_matvec(&kinds[k], X + t * C, Y3 + t * R);
        CHECK(!memcmp(Y1, Y2, sizeof Y1), "matmul independent of threads (kind %d)", k);
        CHECK(!memcmp(Y1, Y3, sizeof Y1), "matmul == matvec bitwise (kind %d)", k);
    }
    k3_os_aligned_free(buf);
    /* Row views and the transposed product. */
    float xt[R], yt[C];
    for (int i = 0; i < R; i++)
        xt[i] = rnd();
    k3_matvec_t(&kinds[0], xt, yt);
    double err = 0;
    for (int c = 0; c < C; c++) {
        double acc = 0;
        for (int r = 0; r < R; r++)
            acc += (double)W[r * C + c] * xt[r];
        err = fmax(err, fabs(acc - yt[c]));
    }
    CHECK(err < 1e-4, "matvec_t error %g", err);
    k3_mat v = k3_mat_rows(&kinds[0], 10, 3);
    float y3[3], yfull[R];
    k3_matvec(&v, X, y3);
    k3_matvec(&kinds[0], X, yfull);
    CHECK(y3[0] == yfull[10] && y3[2] == yfull[12], "row view");
    /* argmax ties go to the lowest index. */
    float ties[4] = { 1, 3, 3, 2 };
    CHECK(k3_argmax(ties, 4) == 1, "argmax tie");
}

int main(void)
{
    test_mxfp4();
    test_mathfn();
    test_order();
    return check_report("test_kernels");
}
