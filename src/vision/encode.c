/* encode.c - the encoder and projector, docs/VISION.md §5 (contracts in
 * vmodel.h).
 *
 * Rows are processed in blocks of VBLOCK (the per-row steps: norms,
 * matrices, MLP; each row's bits are its own, k3_matmul's contract), so the
 * working memory is the packed x [N, D] and qkv [N, 3Q] plus blocks; the
 * attention of a block's query rows reads its item's whole k and v. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "util/error.h"
#include "util/os.h"
#include "vision/vmath.h"
#include "vision/vmodel.h"

#define VBLOCK 256          /* rows per block of the per-row steps */
#define VROPE_SIDE 512      /* §5.4 step 3 */

int64_t k3_vision_item_rows(const k3_vitem *it)
{
    return (int64_t)(it->h / 2) * (it->w / 2);
}

static int threads_max(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* The packed rows and the largest item's rows. */
static void count_rows(const k3_vitem *items, size_t n, size_t *rows, size_t *item_max,
                       size_t *out_rows)
{
    *rows = *item_max = *out_rows = 0;
    for (size_t i = 0; i < n; i++) {
        size_t r = (size_t)items[i].t * items[i].h * items[i].w;
        *rows += r;
        *item_max = r > *item_max ? r : *item_max;
        *out_rows += (size_t)k3_vision_item_rows(&items[i]);
    }
}

/* The working set, as offsets in floats of one allocation. */
typedef struct vwork {
    size_t x, qkv, cs, a, o, f, tmp, score, m, u, total;
    size_t mm_bytes;
} vwork;

static size_t widest(const k3_vcfg *c)
{
    size_t w = (size_t)3 * c->p * c->p;
    size_t cand[] = { (size_t)c->D, (size_t)c->Q, (size_t)c->I, (size_t)c->M, 3 * (size_t)c->Q };
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        w = cand[i] > w ? cand[i] : w;
    return w;
}

static void work_layout(const k3_vcfg *c, size_t rows, size_t item_max, int threads, vwork *w)
{
    size_t at = 0, blk = VBLOCK;
#define TAKE(field, n) (w->field = at, at += ((n) + 15) / 16 * 16)
    TAKE(x, rows * c->D);
    TAKE(qkv, rows * 3 * (size_t)c->Q);
    TAKE(cs, rows * (size_t)c->d);            /* cos, sin of the d/2 pairs of each row */
    TAKE(a, blk * widest(c));
    TAKE(o, blk * (size_t)c->Q);
    TAKE(f, blk * (size_t)c->I);
    TAKE(tmp, blk * (size_t)(c->D > c->T ? c->D : c->T));
    TAKE(score, (size_t)threads * item_max);
    TAKE(m, blk * (size_t)c->M);
    TAKE(u, blk * (size_t)c->M);
#undef TAKE
    w->total = at;
    w->mm_bytes = k3_mm_ws_bytes(threads, widest(c), VBLOCK);
}

uint64_t k3_vision_work_bytes(const k3_vcfg *c, const k3_vitem *items, size_t n)
{
    size_t rows, item_max, out_rows;
    count_rows(items, n, &rows, &item_max, &out_rows);
    vwork w;
    work_layout(c, rows, item_max, threads_max(), &w);
    return (uint64_t)w.total * sizeof(float) + w.mm_bytes;
}

/* §5.3 step 2: per output index of one axis, the two source indices and
 * their weights (half-pixel, clamped below at 0, no antialiasing). */
static void bilinear_axis(int n_in, int n_out, int *i0, int *i1, double *l1)
{
    for (int o = 0; o < n_out; o++) {
        double src = (o + 0.5) * n_in / n_out - 0.5;
        if (src < 0.0)
            src = 0.0;
        int a = (int)floor(src);
        i0[o] = a;
        i1[o] = a < n_in - 1 ? a + 1 : a;
        l1[o] = src - a;
    }
}

/* §5.2-§5.4 for one item whose rows start at x: adds the position rows to
 * the patch embeddings and fills the rows' cos/sin. */
static int item_positions(const k3_vision *v, const k3_vitem *it, float *x, float *cs,
                          k3_err *e)
{
    const k3_vcfg *c = &v->cfg;
    int h = it->h, w = it->w, D = c->D;
    int *yi = malloc(sizeof *yi * 2 * (size_t)(h + w));
    double *yl = malloc(sizeof *yl * (size_t)(h + w));
    double *tau = it->t > 1 ? malloc(sizeof *tau * (size_t)it->t * D) : NULL;
    double *fr = malloc(sizeof *fr * (size_t)(c->d / 4 > 0 ? c->d / 4 : 1));
    if (!yi || !yl || (it->t > 1 && !tau) || !fr) {
        free(yi);
        free(yl);
        free(tau);
        free(fr);
        return k3_fail(e, K3_ERUNTIME, "out of memory for the position embedding");
    }
    int *y0 = yi, *y1 = yi + h, *x0 = yi + 2 * h, *x1 = yi + 2 * h + w;
    double *ly = yl, *lx = yl + h;
    bilinear_axis(c->H0, h, y0, y1, ly);
    bilinear_axis(c->W0, w, x0, x1, lx);
    /* §5.3 step 3: τ[f] = [sin(f ω_k)]_k ++ [cos(f ω_k)]_k, ω_k = 10000^(-k/(D/2)). */
    for (int f = 0; tau && f < it->t; f++)
        for (int k = 0; k < D / 2; k++) {
            double om = pow(10000.0, -(double)k / (D / 2));
            tau[(size_t)f * D + k] = sin(f * om);
            tau[(size_t)f * D + D / 2 + k] = cos(f * om);
        }
    for (int i = 0; i < c->d / 4; i++)
        fr[i] = pow(10000.0, -4.0 * i / c->d);
    size_t hw = (size_t)h * w;
    for (int y = 0; y < h; y++)
        for (int xx = 0; xx < w; xx++) {
            const float *t00 = v->pos + ((size_t)y0[y] * c->W0 + x0[xx]) * D;
            const float *t01 = v->pos + ((size_t)y0[y] * c->W0 + x1[xx]) * D;
            const float *t10 = v->pos + ((size_t)y1[y] * c->W0 + x0[xx]) * D;
            const float *t11 = v->pos + ((size_t)y1[y] * c->W0 + x1[xx]) * D;
            double a1 = ly[y], a0 = 1.0 - a1, b1 = lx[xx], b0 = 1.0 - b1;
            for (int f = 0; f < it->t; f++) {
                float *row = x + ((size_t)f * hw + (size_t)y * w + xx) * D;
                for (int k = 0; k < D; k++) {
                    double p = a0 * (b0 * t00[k] + b1 * t01[k]) + a1 * (b0 * t10[k] + b1 * t11[k]);
                    if (tau)
                        p += tau[(size_t)f * D + k];
                    row[k] = row[k] + (float)p;
                }
                /* §5.4: pair 2i turns by x·φ_i, pair 2i+1 by y·φ_i; cos then sin. */
                float *r = cs + ((size_t)f * hw + (size_t)y * w + xx) * c->d;
                for (int i = 0; i < c->d / 4; i++) {
                    double ax = xx * fr[i], ay = y * fr[i];
                    r[4 * i + 0] = (float)cos(ax);
                    r[4 * i + 1] = (float)sin(ax);
                    r[4 * i + 2] = (float)cos(ay);
                    r[4 * i + 3] = (float)sin(ay);
                }
            }
        }
    free(yi);
    free(yl);
    free(tau);
    free(fr);
    return K3_OK;
}

/* §5.4 step 2 on one head's d values: pair j = (v[2j], v[2j+1]) by the
 * angle whose cos, sin are cs[2j], cs[2j+1]. */
static void rope_head(float *h, const float *cs, int d)
{
    for (int j = 0; j < d / 2; j++) {
        float a = h[2 * j], b = h[2 * j + 1], co = cs[2 * j], si = cs[2 * j + 1];
        float ac = a * co, bs = b * si, as = a * si, bc = b * co;
        h[2 * j] = ac - bs;
        h[2 * j + 1] = as + bc;
    }
}

/* §5.5 step 4 for the query rows [r0, r1) and every head: scores against
 * every row of the query's item (bound[item_of[r]] .. bound[item_of[r] + 1]),
 * softmax, then the sum of v over the item's rows in ascending order. o is
 * [r1 - r0][Q]; score holds `stride` floats per thread. One task per (row,
 * head): a task's bits do not depend on which thread runs it. */
static void attend_block(const k3_vcfg *c, const float *qkv, const size_t *item_of,
                         const size_t *bound, size_t r0, size_t r1, float *o, float *score,
                         size_t stride)
{
    int H = c->heads, d = c->d;
    size_t Q = (size_t)c->Q, W = 3 * Q;
    float scale = (float)(1.0 / sqrt((double)d));
    long tasks = (long)((r1 - r0) * H);
#pragma omp parallel for schedule(static)
    for (long t = 0; t < tasks; t++) {
        size_t r = r0 + (size_t)(t / H);
        int hd = (int)(t % H);
        size_t it = item_of[r], lo = bound[it], hi = bound[it + 1];
#ifdef _OPENMP
        float *s = score + (size_t)omp_get_thread_num() * stride;
#else
        float *s = score;
        (void)stride;
#endif
        const float *q = qkv + r * W + (size_t)hd * d;
        for (size_t k = lo; k < hi; k++)
            s[k - lo] = k3_dot(q, qkv + k * W + Q + (size_t)hd * d, (size_t)d) * scale;
        k3_softmax(s, hi - lo);
        float *out = o + (r - r0) * Q + (size_t)hd * d;
        memset(out, 0, sizeof *out * (size_t)d);
        for (size_t k = lo; k < hi; k++)
            k3_axpy(out, s[k - lo], qkv + k * W + 2 * Q + (size_t)hd * d, (size_t)d);
    }
}

static void add_rows(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] + y[i];
}

static int check_items(const k3_vcfg *c, const k3_vitem *items, size_t n, k3_err *e)
{
    if (n == 0)
        return k3_fail(e, K3_EINPUT, "no media item to encode");
    for (size_t i = 0; i < n; i++) {
        const k3_vitem *it = &items[i];
        if (it->t < 1 || it->t > c->T_max || it->h < 2 || it->w < 2 || it->h % 2 ||
            it->w % 2 || it->h > VROPE_SIDE || it->w > VROPE_SIDE)
            return k3_fail(e, K3_EINPUT, "media item %zu: grid (t %d, h %d, w %d): needs 1 <= t "
                           "<= %d and even h, w in 2..%d (docs/VISION.md §5)", i, it->t, it->h,
                           it->w, c->T_max, VROPE_SIDE);
    }
    return K3_OK;
}

int k3_vision_encode(k3_vision *v, const k3_vitem *items, size_t n, const float *patches,
                     float *out, k3_err *e)
{
    const k3_vcfg *c = &v->cfg;
    if (check_items(c, items, n, e))
        return e->code;
    size_t rows, item_max, out_rows;
    count_rows(items, n, &rows, &item_max, &out_rows);
    int threads = threads_max();
    vwork L;
    work_layout(c, rows, item_max, threads, &L);
    float *buf = k3_os_aligned_alloc(64, L.total * sizeof(float) + L.mm_bytes);
    size_t *item_of = malloc(sizeof *item_of * rows), *bound = malloc(sizeof *bound * (n + 1));
    if (!buf || !item_of || !bound) {
        k3_os_aligned_free(buf);
        free(item_of);
        free(bound);
        return k3_fail(e, K3_ERUNTIME, "out of memory: the vision encoder's %llu bytes for %zu "
                       "patches", (unsigned long long)(L.total * sizeof(float) + L.mm_bytes),
                       rows);
    }
    k3_mm_ws ws = { buf + L.total, threads, widest(c), VBLOCK };
    float *x = buf + L.x, *qkv = buf + L.qkv, *cs = buf + L.cs, *a = buf + L.a, *o = buf + L.o;
    float *f = buf + L.f, *tmp = buf + L.tmp, *score = buf + L.score, *m = buf + L.m;
    float *u = buf + L.u;
    size_t D = (size_t)c->D, Q = (size_t)c->Q, I = (size_t)c->I, M = (size_t)c->M;
    size_t T = (size_t)c->T, P3 = (size_t)3 * c->p * c->p;
    int rc = K3_OK;
    bound[0] = 0;
    for (size_t i = 0; i < n; i++) {
        bound[i + 1] = bound[i] + (size_t)items[i].t * items[i].h * items[i].w;
        for (size_t r = bound[i]; r < bound[i + 1]; r++)
            item_of[r] = i;
    }
    /* §5.2 patch embedding, §5.3 positions, §5.4 angles. */
    for (size_t r0 = 0; r0 < rows; r0 += VBLOCK) {
        size_t nb = rows - r0 < VBLOCK ? rows - r0 : VBLOCK;
        k3_matmul(&v->patch, patches + r0 * P3, nb, x + r0 * D, &ws);
    }
    for (size_t i = 0; i < n && !rc; i++)
        rc = item_positions(v, &items[i], x + bound[i] * D, cs + bound[i] * (size_t)c->d, e);
    /* §5.5 the layers. */
    for (int l = 0; l < c->layers && !rc; l++) {
        const k3_vlayer *ly = &v->layer[l];
        for (size_t r0 = 0; r0 < rows; r0 += VBLOCK) {          /* steps 1-3 */
            size_t nb = rows - r0 < VBLOCK ? rows - r0 : VBLOCK;
            for (size_t r = 0; r < nb; r++)
                k3_rmsnorm(a + r * D, x + (r0 + r) * D, ly->norm0, D, K3_VISION_EPS_V);
            k3_matmul(&ly->wqkv, a, nb, qkv + r0 * 3 * Q, &ws);
            for (size_t r = r0; r < r0 + nb; r++)
                for (int hd = 0; hd < c->heads; hd++) {
                    rope_head(qkv + r * 3 * Q + (size_t)hd * c->d, cs + r * c->d, c->d);
                    rope_head(qkv + r * 3 * Q + Q + (size_t)hd * c->d, cs + r * c->d, c->d);
                }
        }
        for (size_t r0 = 0; r0 < rows; r0 += VBLOCK) {          /* steps 4-5 */
            size_t nb = rows - r0 < VBLOCK ? rows - r0 : VBLOCK;
            attend_block(c, qkv, item_of, bound, r0, r0 + nb, o, score, item_max);
            k3_matmul(&ly->wo, o, nb, tmp, &ws);
            add_rows(x + r0 * D, tmp, nb * D);
        }
        for (size_t r0 = 0; r0 < rows; r0 += VBLOCK) {          /* steps 6-7 */
            size_t nb = rows - r0 < VBLOCK ? rows - r0 : VBLOCK;
            for (size_t r = 0; r < nb; r++)
                k3_rmsnorm(a + r * D, x + (r0 + r) * D, ly->norm1, D, K3_VISION_EPS_V);
            k3_matmul(&ly->fc0, a, nb, f, &ws);
            for (size_t j = 0; j < nb * I; j++)
                f[j] = k3_vis_gelu_tanh(f[j]);
            k3_matmul(&ly->fc1, f, nb, tmp, &ws);
            add_rows(x + r0 * D, tmp, nb * D);
        }
    }
    /* §5.6 final norm, §5.7 merge, §5.8 projector, item by item. */
    for (size_t r = 0; r < rows && !rc; r++)
        k3_rmsnorm(x + r * D, x + r * D, v->final_norm, D, K3_VISION_EPS_V);
    float *dst = out;
    for (size_t i = 0; i < n && !rc; i++) {
        const k3_vitem *it = &items[i];
        size_t hw = (size_t)it->h * it->w, W2 = (size_t)it->w / 2;
        size_t nwin = (size_t)k3_vision_item_rows(it);
        const float *z = x + bound[i] * D;
        for (size_t w0 = 0; w0 < nwin; w0 += VBLOCK) {
            size_t nb = nwin - w0 < VBLOCK ? nwin - w0 : VBLOCK;
            for (size_t wi = 0; wi < nb; wi++) {
                size_t Y = (w0 + wi) / W2, X = (w0 + wi) % W2;
                for (int q = 0; q < 4; q++) {
                    size_t pr = (2 * Y + (size_t)(q / 2)) * it->w + 2 * X + (size_t)(q % 2);
                    float *mm = m + wi * M + (size_t)q * D;
                    memcpy(mm, z + pr * D, sizeof *mm * D);
                    for (int fr = 1; fr < it->t; fr++)
                        add_rows(mm, z + ((size_t)fr * hw + pr) * D, D);
                    if (it->t > 1)
                        for (size_t k = 0; k < D; k++)
                            mm[k] = mm[k] / (float)it->t;
                }
            }
            k3_matmul(&v->p0, m, nb, u, &ws);
            for (size_t j = 0; j < nb * M; j++)
                u[j] = k3_vis_gelu_erf(u[j]);
            k3_matmul(&v->p2, u, nb, dst, &ws);
            for (size_t wi = 0; wi < nb; wi++)
                k3_rmsnorm(dst + wi * T, dst + wi * T, v->post_norm, T, c->eps_p);
            dst += nb * T;
        }
    }
    k3_os_aligned_free(buf);
    free(item_of);
    free(bound);
    return rc;
}
