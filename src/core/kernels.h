/* kernels.h - the numeric kernels of k3 and their one summation contract.
 *
 * THE ORDER CONTRACT. Every dot product in the engine (matrix rows, norms,
 * attention scores) is computed as:
 *     acc[0..15] = 0
 *     for i in 0..n-1:  acc[i % 16] = fmaf(a[i], b[i], acc[i % 16])
 *     for w in 8, 4, 2, 1:  acc[j] = acc[j] + acc[j + w]   (j < w)
 *     result = acc[0]
 * Sixteen lanes map onto one AVX-512 register, two AVX2 registers or four
 * NEON registers, so every SIMD path can reproduce these exact bits; FMA is
 * used everywhere (fmaf in C), so the scalar path agrees with SIMD paths.
 * Threads split matrices by output rows only, never inside a dot product,
 * so results do not depend on the thread count either.
 *
 * Weight elements are converted exactly to float before the FMA: BF16 by a
 * shift, MXFP4 as E2M1 value times 2^(scale-127), both exact in fp32.
 *
 * IMPLEMENTATIONS. The functions below are drivers (matmul.c) over one
 * table of inner loops per instruction set: the plain C kernels (kernels.c,
 * "scalar", the reference), AVX2+FMA and AVX-512F (kernels_x86.c), NEON
 * (kernels_neon.c). The table is chosen once per process at the first call
 * (dispatch.c): the best the CPU runs, or the one named by the environment
 * variable K3_KERNELS=scalar|avx2|avx512|neon (a name this build or CPU
 * cannot run is an error, exit status 2). Every table follows the contract
 * above, so the choice changes speed, never a bit of any result. */
#ifndef K3_CORE_KERNELS_H
#define K3_CORE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* A weight matrix [rows, cols] as stored on disk, row-major. */
typedef enum { K3_MAT_F32, K3_MAT_BF16, K3_MAT_MXFP4, K3_MAT_Q8, K3_MAT_Q4 } k3_mat_kind;

typedef struct k3_mat {
    k3_mat_kind kind;
    int64_t rows, cols;
    const void *w;           /* F32: float; BF16: uint16 bits; MXFP4: packed nibbles;
                              * Q8: int8 [rows][cols]; Q4: packed nibbles as MXFP4 */
    const uint8_t *scales;   /* MXFP4: [rows][cols/32] E8M0 bytes; Q8: BF16 bits
                              * [rows][k3_q8_blocks(cols)]; Q4: BF16 bits [rows][cols/32]
                              * (uint16, 2-byte aligned) */
    /* share != 0: this process's share of a row-partitioned matrix
     * (k3_mm_share): w (and scales) hold only rows [held_lo, held_hi), row
     * held_lo first (possibly none). share == 0: every row is held. Only
     * k3_matmul under the installed partition may use a share (anything
     * else aborts: it would read rows that are not there). */
    int share;
    int64_t held_lo, held_hi;
} k3_mat;

float k3_bf16_to_f32(uint16_t b);
/* Decoded value of MXFP4 element i of a row (exact). */
float k3_mxfp4_value(const uint8_t *packed_row, const uint8_t *scale_row, int64_t i);
/* Index of the first scale byte equal to 255 (E8M0 NaN), or -1. */
int64_t k3_mxfp4_find_nan_scale(const uint8_t *scales, size_t n);

/* Q8 (a drafter's copy of BF16 weights, model/draft_trunk.h): element i of
 * a row is q[i] * scale[i / K3_Q8_BLOCK], q an int8 in -127..127 and scale
 * a BF16 value per block of 32 columns (the last block may be shorter).
 * The product has at most 7 + 8 significant bits, so it is EXACT in fp32
 * (subnormal scales included): decoding is as exact as BF16's, and a Q8
 * matrix follows the order contract like any other kind. */
#define K3_Q8_BLOCK 32
static inline int64_t k3_q8_blocks(int64_t cols) { return (cols + K3_Q8_BLOCK - 1) / K3_Q8_BLOCK; }
/* Elements [k0, k0 + n) of one Q8 row (q, scales: the row's start) as
 * floats; k0 a multiple of K3_Q8_BLOCK. Exact (above). */
void k3_q8_decode(const int8_t *q, const uint16_t *scales, size_t k0, size_t n, float *out);
/* Quantizes one row of n BF16 values (round to nearest, ties away from 0):
 * per block, scale = BF16(max |w| / 127) (round to nearest even), q =
 * round(w / scale) clamped to -127..127 (0 where scale is 0). A pure
 * function of the bits, the same on every machine. Non-finite inputs are
 * the caller's to refuse. */
void k3_q8_quantize_row(const uint16_t *w, size_t n, int8_t *q, uint16_t *scales);
/* Q4: MXFP4's layout (two elements a byte, the even one in the low nibble;
 * cols % 32 == 0) with sign-magnitude integers -7..7 (bits 0-2 the
 * magnitude, bit 3 the sign) and a BF16 scale per 32: value = k3_q4 value
 * of the nibble times the scale, exact (3 + 8 significant bits). The
 * quantizer is k3_q8_quantize_row's with 7 for 127 (n % 32 == 0). */
void k3_q4_quantize_row(const uint16_t *w, size_t n, uint8_t *packed, uint16_t *scales);
/* Element i of a Q4 row (exact). */
float k3_q4_value(const uint8_t *packed_row, const uint16_t *scale_row, int64_t i);

/* Canonical dot product (see the contract above). */
float k3_dot(const float *a, const float *b, size_t n);
/* y[i] = fmaf(a, x[i], y[i]) for i < n: elementwise, so any vector width
 * gives the same bits. The building block for sums whose order runs over
 * an outer index (state updates, transposed products). */
void k3_axpy(float *y, float a, const float *x, size_t n);
/* Name of the kernel table in use ("scalar", "avx2", "avx512", "neon"). */
const char *k3_kernels_name(void);

/* y[r] = row r of m . x  for r in [0, rows). */
void k3_matvec(const k3_mat *m, const float *x, float *y);
/* k3_matmul's working memory, owned by its caller: for each of up to
 * `threads` threads one slice (a decoded weight panel and parked
 * accumulators), slice i at buf + i * k3_mm_ws_bytes(1, cols, tokens); buf
 * is 64-byte aligned. cols and tokens are the widest matrix (columns) and
 * the longest call (tokens) the caller sized it for: any matrix and T still
 * work, in column chunks and token blocks of at most those (the same bits;
 * only speed depends on them). One k3_matmul at a time may use a workspace. */
typedef struct k3_mm_ws {
    float *buf;
    int threads;   /* >= 1 */
    size_t cols, tokens;
} k3_mm_ws;
/* Bytes of buf (a multiple of 64; 0 for threads <= 0). At most about
 * 0.9 MB a thread, whatever cols and tokens. */
size_t k3_mm_ws_bytes(int threads, size_t cols, size_t tokens);
/* Y[t][r] = row r of m . X[t]  for T inputs X [T][cols] -> Y [T][rows];
 * each element bit-identical to k3_matvec on X[t]. X and Y must not
 * overlap (threads write Y while others still read X), nor either of them
 * ws->buf. It allocates nothing: above a few tokens (the ISA's row_tokens)
 * it works in ws, one slice per thread. Above a small amount of work (rows
 * x cols x T >= 2^15) it starts threads: an OpenMP parallel region of its
 * own with at most min(omp_get_max_threads(), ws->threads) threads, which
 * split the rows. It must not be called from inside a parallel region
 * (nested teams would share the slices). */
void k3_matmul(const k3_mat *m, const float *X, size_t T, float *Y, const k3_mm_ws *ws);
/* k3_matmul computed wholly by this process whatever partition is
 * installed (below): for products a caller already split its own way
 * (a process's own routed experts, model/moe_part.h). The same bits. */
void k3_matmul_here(const k3_mat *m, const float *X, size_t T, float *Y, const k3_mm_ws *ws);

/* A row partition of every k3_matmul over cooperating processes (src/mpi),
 * or none (the default: every row is computed here, and nothing below is
 * ever called). With one installed, each k3_matmul first calls begin: NULL
 * means "all rows here" (a product too small to be worth a collective);
 * otherwise this process computes only rows [*lo, *hi) of Y, packed as
 * [T][hi - lo] at the returned buffer, and then end(ctx, Y, rows, T) must
 * leave all of Y [T][rows] filled (the other processes' rows from the
 * processes that computed them). Each element is still one whole dot in the
 * contract's order, computed by exactly one process, so Y's bits do not
 * depend on the partition. begin and end are called by the thread that
 * calls k3_matmul, never inside a parallel region; every process must make
 * the same sequence of k3_matmul calls (the same shapes), as begin's answer
 * may depend only on (rows, cols, T). */
typedef struct k3_mm_part {
    float *(*begin)(void *ctx, int64_t rows, int64_t cols, size_t T, float *Y, int64_t *lo,
                    int64_t *hi);
    void (*end)(void *ctx, float *Y, int64_t rows, size_t T);
    /* Whether products of this shape are split, and this process's rows
     * [*lo, *hi) of them: begin's answer for every T (the same rows). */
    int (*share)(void *ctx, int64_t rows, int64_t cols, int64_t *lo, int64_t *hi);
    int keep_shares; /* weights hold only this process's rows (k3_mm_share) */
    int rank, size;  /* this process and how many (plans, messages) */
    void *ctx;
} k3_mm_part;
/* Installs p (NULL: none) for every later k3_matmul of the process; p must
 * outlive them. Not thread-safe: set it before any k3_matmul runs. With a
 * partition, k3_matmul runs at most K3_MM_PART_MAX_FLOATS output floats
 * (rows x tokens) per begin/end, in token chunks, so a gather's counts fit
 * an int. */
void k3_mm_set_part(const k3_mm_part *p);
#define K3_MM_PART_MAX_FLOATS 0x7fffffffLL
/* The installed partition, or NULL. */
const k3_mm_part *k3_mm_get_part(void);
/* 1 when the installed partition keeps shares and splits products of a
 * rows x cols matrix: this process then needs only rows [*lo, *hi) of it
 * (possibly none); else 0 (*lo = 0, *hi = rows: the whole matrix). */
int k3_mm_share(int64_t rows, int64_t cols, int64_t *lo, int64_t *hi);

/* Rows [r0, r0+n) of m as a matrix of its own (no copy). */
k3_mat k3_mat_rows(const k3_mat *m, int64_t r0, int64_t n);
/* y[c] = sum over rows r of m[r][c] * x[r]  (x has rows entries, y cols).
 * Order: y[c] starts at 0, then rows r = 0..rows-1, one fmaf each, for every c. */
void k3_matvec_t(const k3_mat *m, const float *x, float *y);

/* out = x / sqrt(mean(x^2) + eps) * w   (out may alias x). */
void k3_rmsnorm(float *out, const float *x, const float *w, size_t n, float eps);
/* SiTU in place on gate: gate[i] = b1 tanh(g/b1) sigmoid(g) * b2 tanh(u/b2). */
void k3_situ(float *gate, const float *up, size_t n, float b1, float b2);
/* In-place softmax over n >= 1 scores, in one fixed order: m = the largest
 * x[i]; e[i] = k3_expf(x[i] - m) and sum += e[i] for i = 0..n-1 (one float
 * add each, ascending); then x[i] = e[i] / sum. */
void k3_softmax(float *x, size_t n);
/* Index of the largest value; ties go to the lowest index. */
size_t k3_argmax(const float *x, size_t n);

#endif
