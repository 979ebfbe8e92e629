/* kernels_simd.h - the SIMD inner loops of kernels_isa.h, written once over
 * a vector of the contract's 16 lanes. An ISA file includes it once per
 * table after defining:
 *
 *   SIMD_FN(name)      this table's copy of a name, e.g. name##_avx512
 *   SIMD_TARGET        attributes of every function here: the target ISA
 *                      (empty when it is the baseline, as NEON on aarch64)
 *   SIMD_MR, SIMD_NR   register block, rows x tokens, of tile() and of the
 *                      row dots of several tokens: MR*NR accumulators, NR
 *                      token vectors and one row vector must fit the
 *                      register file (NR is 2 or 6)
 *   SIMD_ROW_TOKENS    the table's row_tokens (kernels_isa.h)
 *   v16                16 float lanes; lane l takes element l of a 16-step
 *   v16_zero() v16_load(p) v16_store(p, v)
 *   v16_fma(a, b, c)   c + a*b per lane with one rounding (as fmaf)
 *   v16_bf16(p)        16 BF16 values -> floats (exact)
 *   mx_base            type of the 16 values of a nibble (k3_e2m1 for MXFP4,
 *   mx_base_load(t)    k3_q4_values for Q4) loaded once per call from t[16]
 *   mx_table           type of those values times one group's scale,
 *   mx_table_of(b, s)  each product rounded as the scalar E2M1[nib] * s
 *   v16_mxfp4(p, tab, &lo, &hi)  the 32 elements of one group from its 16
 *                      packed bytes: lo = elements 0-15, hi = 16-31
 *   v16_q8(p, s)       16 int8 values times the float s (exact, kernels.h)
 *
 * and it defines the table SIMD_FN(k3_isa), named SIMD_NAME.
 *
 * Why this reproduces the contract bit for bit: an accumulator vector IS
 * the 16 lanes of one dot; elements enter in ascending 16-steps, element i
 * in lane i % 16, by a fused multiply-add (one rounding, as fmaf); the
 * elements after the last whole step and the (8,4,2,1) tree run through the
 * same scalar code as the plain kernels (k3_lanes_*, k3_reduce16); decoded
 * weights are the same exact floats. No other operation touches a lane. */

#define SIMD_AI static inline __attribute__((always_inline)) SIMD_TARGET

/* Rows per block of the row dots. With one token each dot is one chain of
 * dependent FMAs, so SIMD_ROWS rows at once keep that many chains in flight
 * (FMA latency ~4 cycles) while x is loaded once per step for all; with
 * more tokens the accumulators multiply, and the block is SIMD_MR rows. */
#define SIMD_ROWS 4
#define SIMD_ROWS_FOR(N) ((N) == 1 ? SIMD_ROWS : SIMD_MR)

/* Stores the lanes of one dot, adds elements [i0, n) by the scalar code and
 * returns the reduced sum (F32 and BF16 rows). */
SIMD_AI float SIMD_FN(finish_f32)(v16 acc, const float *w, const float *x, size_t i0, size_t n)
{
    float lanes[16];
    v16_store(lanes, acc);
    k3_lanes_f32(lanes, w, x, i0, n);
    return k3_reduce16(lanes);
}

SIMD_AI float SIMD_FN(finish_bf16)(v16 acc, const uint16_t *w, const float *x, size_t i0,
                                   size_t n)
{
    float lanes[16];
    v16_store(lanes, acc);
    k3_lanes_bf16(lanes, w, x, i0, n);
    return k3_reduce16(lanes);
}

/* --- Row dots: R rows x N tokens, constants once inlined. Each 16-step
 * loads the N token vectors once and decodes each row vector once. ------ */

#define SIMD_MAXR (SIMD_ROWS > SIMD_MR ? SIMD_ROWS : SIMD_MR)

/* The loop the row dots of whole-element formats share: a[q][t] (R rows x
 * N tokens, v16 each) zeroed, then over the whole 16-steps [0, nv) of x
 * (N rows of n floats) each step loads the N token vectors once, decodes
 * row q's 16 weights once as WV (an expression of q and i) and adds
 * WV * x lane-wise: lane j of a[q][t] sums elements i + j in ascending i,
 * the contract's order. The caller finishes the lanes (the tail after nv,
 * then k3_reduce16). */
#define SIMD_DOTS16(a, WV)                                                         \
    do {                                                                           \
        _Pragma("GCC unroll 8") for (int q = 0; q < R; q++)                        \
        _Pragma("GCC unroll 8") for (int t = 0; t < N; t++)                        \
            a[q][t] = v16_zero();                                                  \
        for (size_t i = 0; i < nv; i += 16) {                                      \
            v16 xv[SIMD_NR];                                                       \
            _Pragma("GCC unroll 8") for (int t = 0; t < N; t++)                    \
                xv[t] = v16_load(x + (size_t)t * n + i);                           \
            _Pragma("GCC unroll 8") for (int q = 0; q < R; q++) {                  \
                v16 wv = WV;                                                       \
                _Pragma("GCC unroll 8") for (int t = 0; t < N; t++)                \
                    a[q][t] = v16_fma(wv, xv[t], a[q][t]);                         \
            }                                                                      \
        }                                                                          \
    } while (0)

SIMD_AI void SIMD_FN(dots_f32)(const float *w, size_t n, const float *x, float *y, size_t ldy,
                               const int R, const int N)
{
    v16 a[SIMD_MAXR][SIMD_NR];
    size_t nv = n & ~(size_t)15;
    SIMD_DOTS16(a, v16_load(w + (size_t)q * n + i));
#pragma GCC unroll 8
    for (int q = 0; q < R; q++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++)
            y[(size_t)t * ldy + (size_t)q] =
                SIMD_FN(finish_f32)(a[q][t], w + (size_t)q * n, x + (size_t)t * n, nv, n);
}

SIMD_AI void SIMD_FN(dots_bf16)(const uint16_t *w, size_t n, const float *x, float *y,
                                size_t ldy, const int R, const int N)
{
    v16 a[SIMD_MAXR][SIMD_NR];
    size_t nv = n & ~(size_t)15;
    SIMD_DOTS16(a, v16_bf16(w + (size_t)q * n + i));
#pragma GCC unroll 8
    for (int q = 0; q < R; q++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++)
            y[(size_t)t * ldy + (size_t)q] =
                SIMD_FN(finish_bf16)(a[q][t], w + (size_t)q * n, x + (size_t)t * n, nv, n);
}

/* Q8 rows: element i's scale is s[i / 32], so each 16-step uses the scale
 * of its half of a 32-block; the tail after the last whole step runs the
 * plain lanes (k3_lanes_q8), as every table. */
SIMD_AI void SIMD_FN(dots_q8)(const int8_t *w, const uint16_t *s, size_t n, const float *x,
                              float *y, size_t ldy, const int R, const int N)
{
    v16 a[SIMD_MAXR][SIMD_NR];
    size_t nv = n & ~(size_t)15, nb = (n + 31) / 32;
    SIMD_DOTS16(a, v16_q8(w + (size_t)q * n + i, k3_bf16(s[(size_t)q * nb + i / 32])));
#pragma GCC unroll 8
    for (int q = 0; q < R; q++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) {
            float lanes[16];
            v16_store(lanes, a[q][t]);
            k3_lanes_q8(lanes, w + (size_t)q * n, s + (size_t)q * nb, x + (size_t)t * n, nv, n);
            y[(size_t)t * ldy + (size_t)q] = k3_reduce16(lanes);
        }
}

/* n % 32 == 0: whole groups only, no tail. Expert rows are short (1.5-1.8
 * KB), too short for the hardware prefetcher to ramp up on each of the R
 * interleaved streams, so the same bytes of the next R rows are requested
 * while these are computed (one request per 64-byte line; a prefetch past
 * the matrix's end is harmless, and computed as an integer, not a pointer).
 * Within a group, every lane takes its element of the first 16 (lo) before
 * its element of the last 16 (hi), as the contract orders them. MXFP4 and
 * Q4 share it: a nibble's value from `values`, times the group's scale
 * (E8M0 bytes, or BF16 with bf16_scales); both products are exact. */
SIMD_AI void SIMD_FN(dots_nib)(const uint8_t *packed, const void *scales, const int bf16_scales,
                               const float *values, size_t n, const float *x, float *y,
                               size_t ldy, const int R, const int N)
{
    v16 a[SIMD_MAXR][SIMD_NR];
    mx_base base = mx_base_load(values);
#pragma GCC unroll 8
    for (int q = 0; q < R; q++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++)
            a[q][t] = v16_zero();
    for (size_t g = 0; g < n / 32; g++) {
        if (g % 4 == 0) {
#pragma GCC unroll 8
            for (int q = 0; q < R; q++)
                __builtin_prefetch((const void *)((uintptr_t)packed +
                                                  (size_t)(q + R) * (n / 2) + 16 * g));
        }
#pragma GCC unroll 8
        for (int q = 0; q < R; q++) {
            v16 lo, hi;
            mx_table tab = mx_table_of(base, k3_nib_scale(scales, bf16_scales,
                                                          (size_t)q * (n / 32) + g));
            v16_mxfp4(packed + (size_t)q * (n / 2) + 16 * g, tab, &lo, &hi);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++)
                a[q][t] = v16_fma(lo, v16_load(x + (size_t)t * n + 32 * g), a[q][t]);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++)
                a[q][t] = v16_fma(hi, v16_load(x + (size_t)t * n + 32 * g + 16), a[q][t]);
        }
    }
#pragma GCC unroll 8
    for (int q = 0; q < R; q++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) {
            float lanes[16];
            v16_store(lanes, a[q][t]);
            y[(size_t)t * ldy + (size_t)q] = k3_reduce16(lanes);
        }
}

SIMD_AI void SIMD_FN(dots_mxfp4)(const uint8_t *packed, const uint8_t *scales, size_t n,
                                 const float *x, float *y, size_t ldy, const int R, const int N)
{
    SIMD_FN(dots_nib)(packed, scales, 0, k3_e2m1, n, x, y, ldy, R, N);
}

SIMD_AI void SIMD_FN(dots_q4)(const uint8_t *packed, const uint16_t *scales, size_t n,
                              const float *x, float *y, size_t ldy, const int R, const int N)
{
    SIMD_FN(dots_nib)(packed, scales, 1, k3_q4_values, n, x, y, ldy, R, N);
}

/* All rows for N tokens: blocks of SIMD_ROWS_FOR(N) rows, then one by one;
 * the arguments before y are those of dots_FMT for the rows from r on. */
#define SIMD_ROWS_N(FMT, N, ...)                                                   \
    do {                                                                           \
        size_t r = 0;                                                              \
        for (; r + SIMD_ROWS_FOR(N) <= rows; r += SIMD_ROWS_FOR(N))                \
            SIMD_FN(dots_##FMT)(__VA_ARGS__, y + r, ldy, SIMD_ROWS_FOR(N), N);     \
        for (; r < rows; r++)                                                      \
            SIMD_FN(dots_##FMT)(__VA_ARGS__, y + r, ldy, 1, N);                    \
    } while (0)

/* "case N: CALL(N); break;" for N = 1..SIMD_NR: a run-time token count
 * picks the copy of a loop compiled for that constant. */
#if SIMD_NR == 6
#define SIMD_CASES_N(CALL)                                                         \
    case 1: CALL(1); break;                                                        \
    case 2: CALL(2); break;                                                        \
    case 3: CALL(3); break;                                                        \
    case 4: CALL(4); break;                                                        \
    case 5: CALL(5); break;                                                        \
    case 6: CALL(6); break;
#elif SIMD_NR == 2
#define SIMD_CASES_N(CALL)                                                         \
    case 1: CALL(1); break;                                                        \
    case 2: CALL(2); break;
#else
#error "kernels_simd.h: SIMD_NR must be 2 or 6"
#endif

SIMD_TARGET static void SIMD_FN(rows_f32)(const float *w, size_t n, size_t rows, const float *x,
                                          size_t nt, float *y, size_t ldy)
{
#define SIMD_CALL(N) SIMD_ROWS_N(f32, N, w + r * n, n, x)
    switch (nt) {
        SIMD_CASES_N(SIMD_CALL)
    default: break;
    }
#undef SIMD_CALL
}

SIMD_TARGET static void SIMD_FN(rows_bf16)(const uint16_t *w, size_t n, size_t rows,
                                           const float *x, size_t nt, float *y, size_t ldy)
{
#define SIMD_CALL(N) SIMD_ROWS_N(bf16, N, w + r * n, n, x)
    switch (nt) {
        SIMD_CASES_N(SIMD_CALL)
    default: break;
    }
#undef SIMD_CALL
}

SIMD_TARGET static void SIMD_FN(rows_mxfp4)(const uint8_t *packed, const uint8_t *scales,
                                            size_t n, size_t rows, const float *x, size_t nt,
                                            float *y, size_t ldy)
{
#define SIMD_CALL(N) SIMD_ROWS_N(mxfp4, N, packed + r * (n / 2), scales + r * (n / 32), n, x)
    switch (nt) {
        SIMD_CASES_N(SIMD_CALL)
    default: break;
    }
#undef SIMD_CALL
}

SIMD_TARGET static void SIMD_FN(rows_q4)(const uint8_t *packed, const uint16_t *scales, size_t n,
                                         size_t rows, const float *x, size_t nt, float *y,
                                         size_t ldy)
{
#define SIMD_CALL(N) SIMD_ROWS_N(q4, N, packed + r * (n / 2), scales + r * (n / 32), n, x)
    switch (nt) {
        SIMD_CASES_N(SIMD_CALL)
    default: break;
    }
#undef SIMD_CALL
}

SIMD_TARGET static void SIMD_FN(rows_q8)(const int8_t *q, const uint16_t *scales, size_t n,
                                         size_t rows, const float *x, size_t nt, float *y,
                                         size_t ldy)
{
    size_t nb = (n + 31) / 32;
#define SIMD_CALL(N) SIMD_ROWS_N(q8, N, q + r * n, scales + r * nb, n, x)
    switch (nt) {
        SIMD_CASES_N(SIMD_CALL)
    default: break;
    }
#undef SIMD_CALL
}

SIMD_TARGET static void SIMD_FN(decode_q8)(const int8_t *q, const uint16_t *scales, size_t k0,
                                           size_t n, float *out)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        v16_store(out + i, v16_q8(q + k0 + i, k3_bf16(scales[(k0 + i) / 32])));
    for (; i < n; i++)
        out[i] = (float)q[k0 + i] * k3_bf16(scales[(k0 + i) / 32]);
}

/* --- Decoding (k3_matmul's weight panels). ------------------------------- */

SIMD_TARGET static void SIMD_FN(decode_bf16)(const uint16_t *w, size_t n, float *out)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        v16_store(out + i, v16_bf16(w + i));
    for (; i < n; i++)
        out[i] = k3_bf16(w[i]);
}

SIMD_AI void SIMD_FN(decode_nib)(const uint8_t *packed, const void *scales, const int bf16_scales,
                                 const float *values, size_t n, float *out)
{
    mx_base base = mx_base_load(values);
    for (size_t g = 0; g < n / 32; g++) {
        v16 lo, hi;
        v16_mxfp4(packed + 16 * g, mx_table_of(base, k3_nib_scale(scales, bf16_scales, g)), &lo,
                  &hi);
        v16_store(out + 32 * g, lo);
        v16_store(out + 32 * g + 16, hi);
    }
}

SIMD_TARGET static void SIMD_FN(decode_mxfp4)(const uint8_t *packed, const uint8_t *scales,
                                              size_t n, float *out)
{
    SIMD_FN(decode_nib)(packed, scales, 0, k3_e2m1, n, out);
}

SIMD_TARGET static void SIMD_FN(decode_q4)(const uint8_t *packed, const uint16_t *scales,
                                           size_t n, float *out)
{
    SIMD_FN(decode_nib)(packed, scales, 1, k3_q4_values, n, out);
}

/* --- Multi-token row dot (k3_matmul). ------------------------------------ */

/* R rows x N tokens (constants once inlined): per 16-step, N token vectors
 * are loaded once and each row vector once, for R*N FMAs. */
SIMD_AI void SIMD_FN(tile_rn)(const float *w, size_t ldw, const float *x, size_t ldx, size_t k,
                              float *acc, size_t lda, const int R, const int N)
{
    v16 a[SIMD_MR][SIMD_NR];
    size_t kv = k & ~(size_t)15;
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++)
            a[r][t] = v16_load(acc + ((size_t)r * lda + (size_t)t) * 16);
    for (size_t i = 0; i < kv; i += 16) {
        v16 xv[SIMD_NR];
#pragma GCC unroll 8
        for (int t = 0; t < N; t++)
            xv[t] = v16_load(x + (size_t)t * ldx + i);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            v16 wv = v16_load(w + (size_t)r * ldw + i);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++)
                a[r][t] = v16_fma(wv, xv[t], a[r][t]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) {
            float *lanes = acc + ((size_t)r * lda + (size_t)t) * 16;
            v16_store(lanes, a[r][t]);
            k3_lanes_f32(lanes, w + (size_t)r * ldw, x + (size_t)t * ldx, kv, k);
        }
}

/* R rows x any nr <= SIMD_NR tokens. */
SIMD_AI void SIMD_FN(tile_r)(const float *w, size_t ldw, const float *x, size_t ldx, size_t nr,
                             size_t k, float *acc, size_t lda, const int R)
{
#define SIMD_CALL(N) SIMD_FN(tile_rn)(w, ldw, x, ldx, k, acc, lda, R, N)
    switch (nr) {
        SIMD_CASES_N(SIMD_CALL)
    default: break;
    }
#undef SIMD_CALL
}

/* Whole SIMD_MR-row blocks use the full register block; a partial block
 * (the last rows of a matrix) goes one row at a time. */
SIMD_TARGET static void SIMD_FN(tile)(const float *w, size_t ldw, size_t mr, const float *x,
                                      size_t ldx, size_t nr, size_t k, float *acc, size_t lda)
{
    if (mr == SIMD_MR) {
        SIMD_FN(tile_r)(w, ldw, x, ldx, nr, k, acc, lda, SIMD_MR);
        return;
    }
    for (size_t r = 0; r < mr; r++)
        SIMD_FN(tile_r)(w + r * ldw, ldw, x, ldx, nr, k, acc + r * lda * 16, lda, 1);
}

SIMD_TARGET static void SIMD_FN(axpy)(float *y, float a, const float *x, size_t n)
{
    v16 av;
    float a16[16];
    for (int l = 0; l < 16; l++)
        a16[l] = a;
    av = v16_load(a16);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        v16_store(y + i, v16_fma(av, v16_load(x + i), v16_load(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

const k3_isa SIMD_FN(k3_isa) = {
    .name = SIMD_NAME, .mr = SIMD_MR, .nr = SIMD_NR, .row_tokens = SIMD_ROW_TOKENS,
    .rows_f32 = SIMD_FN(rows_f32), .rows_bf16 = SIMD_FN(rows_bf16),
    .rows_mxfp4 = SIMD_FN(rows_mxfp4), .rows_q8 = SIMD_FN(rows_q8), .rows_q4 = SIMD_FN(rows_q4),
    .decode_bf16 = SIMD_FN(decode_bf16), .decode_mxfp4 = SIMD_FN(decode_mxfp4),
    .decode_q8 = SIMD_FN(decode_q8), .decode_q4 = SIMD_FN(decode_q4), .tile = SIMD_FN(tile),
    .axpy = SIMD_FN(axpy),
};

#undef SIMD_AI
#undef SIMD_ROWS
#undef SIMD_ROWS_FOR
#undef SIMD_MAXR
#undef SIMD_ROWS_N
#undef SIMD_CASES_N
