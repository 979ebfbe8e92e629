/* matmul.c - the drivers of the matrix kernels (kernels.h): they split the
 * work over threads and blocks and call the inner loops of the active ISA
 * table (kernels_isa.h), so every ISA shares them. Threads split output
 * rows only; each dot runs whole inside one thread, in contract order. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernels.h"
#include "core/kernels_isa.h"

/* Threads only pay off above this many multiply-adds. */
#define PAR_MIN_WORK (1 << 15)

/* Rows per matvec work item: 16 output floats are one 64-byte line, so two
 * threads never write the same line. */
#define MV_ROWS 16

/* k3_matmul for more than the table's row_tokens tokens. The contract fixes
 * the order inside each dot (16 lanes, ascending elements) but neither the
 * order of the (row, token) pairs nor where a dot may pause: its lanes can
 * be parked in memory between column chunks and resumed. So rows go MM_ROWS
 * at a time, tokens MM_TOKENS at a time and columns MM_COLS at a time:
 *   panel  MM_ROWS x MM_COLS decoded weights (768 KB, L2), decoded once per
 *          token block and then read by every register tile;
 *   lanes  MM_ROWS x MM_TOKENS x 16 parked accumulators (144 KB, L2);
 *   X      a register tile's tokens x MM_COLS (<= 192 KB) stay in L2 while
 *          every row tile of the panel passes over them.
 * With T <= MM_TOKENS every weight is read and decoded exactly once. Long
 * column chunks matter most (measured on Zen 4: 4096-8192 columns beat 256
 * by ~25%, as a tile's start and its parked lanes cost less per FMA, and
 * whole rows are decoded from one sequential stream). 24 rows is a multiple
 * of every table's register block (1, 2, 4 rows), MM_COLS one of 32 (MXFP4
 * groups) and of 16 (lanes). */
#define MM_ROWS 24
#define MM_TOKENS 96
#define MM_COLS 8192

float k3_dot(const float *a, const float *b, size_t n)
{
    float y;
    k3_isa_active()->rows_f32(a, n, 1, b, 1, &y, 1);
    return y;
}

void k3_axpy(float *y, float a, const float *x, size_t n) { k3_isa_active()->axpy(y, a, x, n); }

/* A Q8 or Q4 matrix's scales (kernels.h: BF16 bits). */
static const uint16_t *q8_scales(const k3_mat *m)
{
    return (const uint16_t *)(const void *)m->scales;
}

/* Y[t*ldy + r - r0] = row r of m . X[t] for rows r0..r0+nrows and nt <=
 * isa->nr tokens: the row dots read each weight once for all nt tokens. */
static void row_dots(const k3_isa *isa, const k3_mat *m, int64_t r0, size_t nrows, const float *X,
                     size_t nt, float *Y, size_t ldy)
{
    size_t n = (size_t)m->cols, r = (size_t)r0;
    switch (m->kind) {
    case K3_MAT_BF16:
        isa->rows_bf16((const uint16_t *)m->w + r * n, n, nrows, X, nt, Y, ldy);
        break;
    case K3_MAT_MXFP4:
        isa->rows_mxfp4((const uint8_t *)m->w + r * (n / 2), m->scales + r * (n / 32), n, nrows,
                        X, nt, Y, ldy);
        break;
    case K3_MAT_Q4:
        isa->rows_q4((const uint8_t *)m->w + r * (n / 2), q8_scales(m) + r * (n / 32), n, nrows, X,
                     nt, Y, ldy);
        break;
    case K3_MAT_Q8:
        isa->rows_q8((const int8_t *)m->w + r * n, q8_scales(m) + r * (size_t)k3_q8_blocks(m->cols),
                     n, nrows, X, nt, Y, ldy);
        break;
    case K3_MAT_F32:
    default:
        isa->rows_f32((const float *)m->w + r * n, n, nrows, X, nt, Y, ldy);
        break;
    }
}

/* Row dots of all rows for nt <= isa->nr tokens, threads splitting rows. */
static void row_dots_all(const k3_isa *isa, const k3_mat *m, const float *X, size_t nt, float *Y)
{
    int64_t rows = m->rows, nblocks = (rows + MV_ROWS - 1) / MV_ROWS;
#pragma omp parallel for schedule(static) if (rows * m->cols * (int64_t)nt >= PAR_MIN_WORK)
    for (int64_t b = 0; b < nblocks; b++) {
        int64_t r0 = b * MV_ROWS;
        size_t nr = (size_t)(rows - r0 < MV_ROWS ? rows - r0 : MV_ROWS);
        row_dots(isa, m, r0, nr, X, nt, Y + r0, (size_t)rows);
    }
}

/* A share (k3_mat.share) used where every row is needed: an internal
 * error (the weights were bound for a partition this use ignores); reading
 * on would compute with rows that are not there. */
static void whole_needed(const k3_mat *m, const char *where)
{
    fprintf(stderr, "k3: internal error: %s of a %lld x %lld matrix that holds only rows "
            "[%lld, %lld) (a row partition's share)\n", where, (long long)m->rows,
            (long long)m->cols, (long long)m->held_lo, (long long)m->held_hi);
    abort();
}

void k3_matvec(const k3_mat *m, const float *x, float *y)
{
    if (m->share)
        whole_needed(m, "k3_matvec");
    row_dots_all(k3_isa_active(), m, x, 1, y);
}

/* Columns [k0, k0+len) of row `row` of m, a kind other than F32, decoded
 * into out (exact for every kind: kernels.h). k0 is a multiple of 32 for
 * the block formats. */
static void decode_row(const k3_isa *isa, const k3_mat *m, size_t row, size_t k0, size_t len,
                       float *out)
{
    size_t n = (size_t)m->cols;
    switch (m->kind) {
    case K3_MAT_BF16:
        isa->decode_bf16((const uint16_t *)m->w + row * n + k0, len, out);
        break;
    case K3_MAT_Q4:
        isa->decode_q4((const uint8_t *)m->w + row * (n / 2) + k0 / 2,
                       q8_scales(m) + row * (n / 32) + k0 / 32, len, out);
        break;
    case K3_MAT_Q8:
        isa->decode_q8((const int8_t *)m->w + row * n,
                       q8_scales(m) + row * (size_t)k3_q8_blocks(m->cols), k0, len, out);
        break;
    case K3_MAT_MXFP4:
    default:
        isa->decode_mxfp4((const uint8_t *)m->w + row * (n / 2) + k0 / 2,
                          m->scales + row * (n / 32) + k0 / 32, len, out);
        break;
    }
}

/* Columns [k0, k0+kc) of rows r0..r0+rb as floats: F32 in place, other
 * kinds decoded into panel. Returns the rows' start; *ld their stride. */
static const float *panel_of(const k3_isa *isa, const k3_mat *m, size_t r0, size_t rb, size_t k0,
                             size_t kc, float *panel, size_t pcols, size_t *ld)
{
    size_t n = (size_t)m->cols;
    if (m->kind == K3_MAT_F32) {
        *ld = n;
        return (const float *)m->w + r0 * n + k0;
    }
    for (size_t r = 0; r < rb; r++)
        decode_row(isa, m, r0 + r, k0, kc, panel + r * pcols);
    *ld = pcols;
    return panel;
}

/* Rows r0..r0+rb (rb <= MM_ROWS) for all T tokens, columns pcols and
 * tokens ptok at a time; scratch holds the panel [MM_ROWS][pcols] and the
 * parked lanes [MM_ROWS][ptok][16]. */
static void matmul_rows(const k3_isa *isa, const k3_mat *m, size_t r0, size_t rb, const float *X,
                        size_t T, float *Y, float *scratch, size_t pcols, size_t ptok)
{
    size_t n = (size_t)m->cols, rows = (size_t)m->rows;
    float *panel = scratch, *lanes = scratch + MM_ROWS * pcols;
    for (size_t t0 = 0; t0 < T; t0 += ptok) {
        size_t tb = T - t0 < ptok ? T - t0 : ptok;
        memset(lanes, 0, MM_ROWS * ptok * 16 * sizeof *lanes);
        for (size_t k0 = 0; k0 < n; k0 += pcols) {
            size_t kc = n - k0 < pcols ? n - k0 : pcols, ld;
            const float *w = panel_of(isa, m, r0, rb, k0, kc, panel, pcols, &ld);
            /* Token tiles outside: a tile's inputs stay in L1 while every
             * row tile of the panel passes over them. */
            for (size_t t = 0; t < tb; t += isa->nr) {
                size_t nr = tb - t < isa->nr ? tb - t : isa->nr;
                for (size_t r = 0; r < rb; r += isa->mr) {
                    size_t mr = rb - r < isa->mr ? rb - r : isa->mr;
                    isa->tile(w + r * ld, ld, mr, X + (t0 + t) * n + k0, n, nr, kc,
                              lanes + (r * ptok + t) * 16, ptok);
                }
            }
        }
        for (size_t r = 0; r < rb; r++)
            for (size_t t = 0; t < tb; t++)
                Y[(t0 + t) * rows + r0 + r] = k3_reduce16(lanes + (r * ptok + t) * 16);
    }
}

/* A workspace's column chunk and token block: MM_COLS and MM_TOKENS, or
 * less for narrower matrices and shorter calls (the cols cap rounded up to
 * 32, so chunks start on MXFP4 groups and 16-lane boundaries; where a dot
 * pauses changes no bit, see above). */
static void ws_dims(size_t cols, size_t tokens, size_t *pcols, size_t *ptok)
{
    size_t c = cols < MM_COLS ? (cols + 31) / 32 * 32 : MM_COLS;
    *pcols = c ? c : 32;
    *ptok = tokens < 1 ? 1 : tokens < MM_TOKENS ? tokens : MM_TOKENS;
}

size_t k3_mm_ws_bytes(int threads, size_t cols, size_t tokens)
{
    size_t pcols, ptok;
    ws_dims(cols, tokens, &pcols, &ptok);
    return threads > 0 ? (size_t)threads * (MM_ROWS * pcols + MM_ROWS * ptok * 16) * sizeof(float)
                       : 0;
}

static const k3_mm_part *mm_part; /* k3_mm_set_part; NULL: every row here */

void k3_mm_set_part(const k3_mm_part *p) { mm_part = p; }

const k3_mm_part *k3_mm_get_part(void) { return mm_part; }

int k3_mm_share(int64_t rows, int64_t cols, int64_t *lo, int64_t *hi)
{
    const k3_mm_part *p = mm_part;
    *lo = 0;
    *hi = rows;
    if (!p || !p->keep_shares || !p->share || !p->share(p->ctx, rows, cols, lo, hi)) {
        *lo = 0;
        *hi = rows;
        return 0;
    }
    return 1;
}

/* k3_matmul over all rows of m, here (kernels.h). */
void k3_matmul_here(const k3_mat *m, const float *X, size_t T, float *Y, const k3_mm_ws *ws)
{
    const k3_isa *isa = k3_isa_active();
    if (m->share)
        whole_needed(m, "k3_matmul without a partition");
    if (T <= isa->row_tokens) { /* passes of row dots, nr tokens each */
        size_t n = (size_t)m->cols, rows = (size_t)m->rows;
        for (size_t t = 0; t < T; t += isa->nr)
            row_dots_all(isa, m, X + t * n, T - t < isa->nr ? T - t : isa->nr, Y + t * rows);
        return;
    }
    int64_t rows = m->rows, nblocks = (rows + MM_ROWS - 1) / MM_ROWS;
    int nt = omp_get_max_threads() < ws->threads ? omp_get_max_threads() : ws->threads;
    size_t pcols, ptok;
    ws_dims(ws->cols, ws->tokens, &pcols, &ptok);
    size_t slice = MM_ROWS * pcols + MM_ROWS * ptok * 16;
#pragma omp parallel num_threads(nt) if (rows * m->cols * (int64_t)T >= PAR_MIN_WORK)
    {
        float *scratch = ws->buf + (size_t)omp_get_thread_num() * slice;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < nblocks; b++) {
            size_t r0 = (size_t)(b * MM_ROWS);
            size_t rb = (size_t)rows - r0 < MM_ROWS ? (size_t)rows - r0 : MM_ROWS;
            matmul_rows(isa, m, r0, rb, X, T, Y, scratch, pcols, ptok);
        }
    }
}

void k3_matmul(const k3_mat *m, const float *X, size_t T, float *Y, const k3_mm_ws *ws)
{
    const k3_mm_part *p = mm_part;
    if (!p) {
        k3_matmul_here(m, X, T, Y, ws);
        return;
    }
    /* Token chunks of at most K3_MM_PART_MAX_FLOATS output floats: each
     * token's row is independent of the others', so chunks change no bit. */
    size_t tc = m->rows > 0 && (uint64_t)m->rows * T > (uint64_t)K3_MM_PART_MAX_FLOATS
                    ? (size_t)(K3_MM_PART_MAX_FLOATS / m->rows) : T;
    if (tc == 0)
        tc = 1;
    for (size_t t0 = 0; t0 < T; t0 += tc) {
        size_t n = T - t0 < tc ? T - t0 : tc;
        const float *x = X + t0 * (size_t)m->cols;
        float *y = Y + t0 * (size_t)m->rows;
        int64_t lo = 0, hi = 0;
        float *mine = p->begin(p->ctx, m->rows, m->cols, n, y, &lo, &hi);
        if (!mine) {
            k3_matmul_here(m, x, n, y, ws);
            continue;
        }
        k3_mat v = k3_mat_rows(m, lo, hi - lo); /* rows lo..hi: the same dots, packed */
        k3_matmul_here(&v, x, n, mine, ws);
        p->end(p->ctx, y, m->rows, n);
    }
}

k3_mat k3_mat_rows(const k3_mat *m, int64_t r0, int64_t n)
{
    k3_mat v = *m;
    size_t cols = (size_t)m->cols;
    if (m->share) { /* rows [r0, r0+n) must be held; offsets from held_lo */
        if (n < 0 || (n > 0 && (r0 < m->held_lo || r0 + n > m->held_hi)))
            whole_needed(m, "rows outside the share");
        r0 = n > 0 ? r0 - m->held_lo : 0;
        v.share = 0;
        v.held_lo = v.held_hi = 0;
    }
    v.rows = n;
    switch (m->kind) {
    case K3_MAT_BF16: v.w = (const uint16_t *)m->w + (size_t)r0 * cols; break;
    case K3_MAT_F32: v.w = (const float *)m->w + (size_t)r0 * cols; break;
    case K3_MAT_MXFP4:
        v.w = (const uint8_t *)m->w + (size_t)r0 * (cols / 2);
        v.scales = m->scales + (size_t)r0 * (cols / 32);
        break;
    case K3_MAT_Q4:
        v.w = (const uint8_t *)m->w + (size_t)r0 * (cols / 2);
        v.scales = (const uint8_t *)(q8_scales(m) + (size_t)r0 * (cols / 32));
        break;
    case K3_MAT_Q8:
        v.w = (const int8_t *)m->w + (size_t)r0 * cols;
        v.scales = (const uint8_t *)(q8_scales(m) + (size_t)r0 * (size_t)k3_q8_blocks(m->cols));
        break;
    }
    return v;
}

/* Column chunks of MT_COLS keep the decoded row and y in L1; within a
 * chunk, rows go in ascending order, which is the contract's order for
 * every y[c]. */
#define MT_COLS 256

void k3_matvec_t(const k3_mat *m, const float *x, float *y)
{
    const k3_isa *isa = k3_isa_active();
    size_t n = (size_t)m->cols;
    float row[MT_COLS];
    if (m->share)
        whole_needed(m, "k3_matvec_t");
    memset(y, 0, n * sizeof *y);
    for (size_t c0 = 0; c0 < n; c0 += MT_COLS) {
        size_t len = n - c0 < MT_COLS ? n - c0 : MT_COLS;
        for (int64_t r = 0; r < m->rows; r++) {
            const float *w = row;
            if (m->kind == K3_MAT_F32)
                w = (const float *)m->w + (size_t)r * n + c0;
            else
                decode_row(isa, m, (size_t)r, c0, len, row);
            isa->axpy(y + c0, x[r], w, len);
        }
    }
}
