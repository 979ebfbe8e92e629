/* moe.c - the latent mixture-of-experts block and the dense SiTU MLP
 * (docs/MODEL.md §4.8 and §4.7; k3_route is §4.8 steps 1-3).
 *
 *   s_e   = sigmoid(W_gate x)                 all experts, fp32
 *   pick  = top k of s_e + bias_e             (the bias steers selection only)
 *   w_j   = s_j / (sum of picked s + 1e-20) * routed_scaling_factor
 *   z     = W_latent_down x
 *   y     = sum_j w_j * w2_j(SiTU(w1_j z, w3_j z))
 *   y     = rms(y, routed_expert_norm)        on the aggregate, not per expert
 *   out   = W_latent_up y + W_down SiTU(W_gate x, W_up x)   (shared experts)
 *
 * Summation order: the weighted expert outputs are added in ascending
 * expert index, whatever order they were chosen or arrived in, so the sum
 * does not depend on scores' ties, caches or I/O timing. */
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "core/mathfn.h"
#include "model/model.h"
#include "model/moe_part.h"
#include "model/scratch.h"
#include "util/error.h"

static const k3_moe_part *moe_part; /* k3_moe_set_part; NULL: every expert here */

void k3_moe_set_part(const k3_moe_part *p) { moe_part = p; }

const k3_moe_part *k3_moe_get_part(void) { return moe_part; }

/* Ties in the biased score go to the lower index. */
void k3_route(const k3_config *c, const float *logit, const float *bias, int32_t *ids,
              float *weights, float *sig)
{
    size_t E = (size_t)c->num_experts, k = (size_t)c->num_experts_per_token;
    float scaling = (float)c->routed_scaling_factor;
    int renormalize = c->moe_renormalize;
    for (size_t x = 0; x < E; x++)
        sig[x] = k3_sigmoidf(logit[x]);
    for (size_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (size_t x = 0; x < E; x++) {
            int taken = 0;
            for (size_t q = 0; q < j && !taken; q++)
                taken = ids[q] == (int32_t)x;
            if (taken)
                continue;
            if (best < 0 || sig[x] + bias[x] > sig[best] + bias[best])
                best = (int32_t)x;
        }
        ids[j] = best;
    }
    for (size_t a = 1; a < k; a++) /* insertion sort by expert index */
        for (size_t b = a; b > 0 && ids[b - 1] > ids[b]; b--) {
            int32_t t = ids[b];
            ids[b] = ids[b - 1];
            ids[b - 1] = t;
        }
    float sum = 0.0f;
    for (size_t j = 0; j < k; j++)
        sum += sig[ids[j]];
    for (size_t j = 0; j < k; j++)
        weights[j] = renormalize ? sig[ids[j]] / (sum + 1e-20f) * scaling : sig[ids[j]] * scaling;
}

/* Runs wait (if any) for m: 0 when m may be used. */
static int ready(k3_mat_wait wait, void *ctx, const k3_mat *m, k3_err *e)
{
    return wait ? wait(ctx, m, e) : K3_OK;
}

/* SiTU MLP: out = down(SiTU(gate x, up x)) for T rows; tmp holds 2*T*width.
 * wait (model.h) before each matrix: the products and their order are the
 * same with or without it. */
static int situ_mlp(const k3_mat *gate, const k3_mat *up, const k3_mat *down, const float *x,
                    size_t T, float *out, float *tmp, float b1, float b2, const k3_mm_ws *mm,
                    k3_mat_wait wait, void *ctx, k3_err *e)
{
    size_t F = (size_t)gate->rows;
    if (ready(wait, ctx, gate, e) != K3_OK)
        return e->code;
    k3_matmul(gate, x, T, tmp, mm);
    if (ready(wait, ctx, up, e) != K3_OK)
        return e->code;
    k3_matmul(up, x, T, tmp + T * F, mm);
    k3_situ(tmp, tmp + T * F, T * F, b1, b2);
    if (ready(wait, ctx, down, e) != K3_OK)
        return e->code;
    k3_matmul(down, tmp, T, out, mm);
    return K3_OK;
}

static uint64_t u64(int64_t v) { return v > 0 ? (uint64_t)v : 0; }

/* The dense MLP's working memory: tmp [2][T][intermediate_size], the gate
 * then the up projections (situ_mlp). */
uint64_t k3_dense_mlp_scratch(const k3_config *c, uint64_t T)
{
    k3_carve a = { NULL, 0 };
    k3_carve_take(&a, k3_sat_mul(k3_sat_mul(2, T), u64(c->intermediate_size)), sizeof(float));
    return a.used;
}

int k3_dense_mlp_forward(const k3_config *c, const k3_layer_weights *L, const float *x,
                         size_t T, float *out, const k3_work *wk, k3_mat_wait wait, void *ctx,
                         k3_err *e)
{
    if ((uint64_t)L->gate.rows != u64(c->intermediate_size) ||
        k3_dense_mlp_scratch(c, T) > wk->bytes)
        return k3_fail(e, K3_ERUNTIME, "MLP scratch: %llu bytes needed, %zu given",
                       (unsigned long long)k3_dense_mlp_scratch(c, T), wk->bytes);
    return situ_mlp(&L->gate, &L->up, &L->down, x, T, out, (float *)(void *)wk->buf,
                    (float)c->situ_beta, (float)c->situ_linear_beta, wk->mm, wait, ctx, e);
}

/* Up to n experts' views: from the resident array or pinned in the cache. */
static int fetch(const k3_expert_source *src, const int32_t *ids, size_t n,
                 const k3_expert **out, k3_err *e)
{
    if (src->resident) {
        for (size_t i = 0; i < n; i++)
            out[i] = &src->resident[ids[i]];
        return K3_OK;
    }
    return k3_ec_fetch(src->cache, src->layer, ids, n, out, e);
}

static void release(const k3_expert_source *src, const int32_t *ids, size_t n)
{
    if (!src->resident)
        k3_ec_release(src->cache, src->layer, ids, n);
}

/* The experts any of the T tokens chose, ascending: uni[0..n). */
static size_t expert_union(const k3_config *c, const int32_t *ids, size_t T, int32_t *uni)
{
    size_t E = (size_t)c->num_experts, k = (size_t)c->num_experts_per_token, nu = 0;
    for (size_t x = 0; x < E; x++)
        for (size_t t = 0; t < T; t++) {
            size_t j = 0;
            while (j < k && ids[t * k + j] != (int32_t)x)
                j++;
            if (j < k) {
                uni[nu++] = (int32_t)x;
                break;
            }
        }
    return nu;
}

/* A fetch run on a helper thread, so that reading the first experts from
 * disk overlaps the shared experts' compute. Until it is joined, only that
 * thread touches the expert source. */
typedef struct {
    const k3_expert_source *src;
    const int32_t *ids;
    size_t n;
    const k3_expert **views;
    k3_err err;
    int rc;
} fetch_job;

static void *fetch_main(void *arg)
{
    fetch_job *j = arg;
    j->rc = fetch(j->src, j->ids, j->n, j->views, &j->err);
    return NULL;
}

/* One token's experts q = 0..n-1, each whole on one thread, into its own
 * output o + pos[q]*Z (pos NULL: o + q*Z; scratch hu: 2F floats per
 * expert).
 * Every dot is the kernels' own (a matvec inside this loop runs on its
 * thread), so which thread takes an expert changes no bit; one parallel
 * region per chunk instead of three per expert, which matters when
 * threads sleep between regions (OMP_WAIT_POLICY=passive). */
static void one_token_experts(const k3_expert *const *views, size_t n, const float *z,
                              size_t Z, size_t F, float b1, float b2, float *o,
                              const size_t *pos, float *hu)
{
    ptrdiff_t m = (ptrdiff_t)n;
#pragma omp parallel for schedule(dynamic, 1) if (m > 1)
    for (ptrdiff_t q = 0; q < m; q++) {
        float *h = hu + (size_t)q * 2 * F, *u = h + F;
        k3_matvec(&views[q]->w1, z, h);
        k3_matvec(&views[q]->w3, z, u);
        k3_situ(h, u, F, b1, b2);
        k3_matvec(&views[q]->w2, h, o + (pos ? pos[q] : (size_t)q) * Z);
    }
}

/* The routed experts of all T tokens. Each expert any token chose is
 * applied once to every token that chose it: the union uni[0..nu),
 * ascending, in chunks of at most `cap` (what the source can pin at once);
 * the first chunk's views are already fetched (views). An expert's tokens
 * are gathered into one block and run as matrix-matrix products (each
 * weight row decoded once for all of them; k3_matmul gives each token the
 * bits of k3_matvec). Each token's chosen ids are ascending and so is the
 * union, so every token still adds its experts' outputs in ascending expert
 * order: the sum does not depend on T, the chunking or the cache.
 * Scratch (moe_bufs): g and o hold T x Z, hu 2 x T x F, next and tok T;
 * with one token, o holds its k experts' outputs and their SiTU inputs,
 * k x (Z + 2F). */
static int routed(const k3_config *c, const k3_expert_source *src, const int32_t *ids,
                  const float *wts, const float *z, size_t T, const int32_t *uni, size_t nu,
                  size_t cap, const k3_expert **views, float *y, float *g, float *o,
                  float *hu, size_t *next, size_t *tok, const k3_mm_ws *mm, k3_err *e)
{
    size_t k = (size_t)c->num_experts_per_token;
    size_t Z = (size_t)c->routed_expert_hidden_size, F = (size_t)c->moe_intermediate_size;
    float b1 = (float)c->situ_beta, b2 = (float)c->situ_linear_beta;
    float *h = hu, *u = hu + T * F;
    memset(next, 0, T * sizeof *next);
    int rc = K3_OK;
    for (size_t c0 = 0; c0 < nu && rc == K3_OK; c0 += cap) {
        size_t n = nu - c0 < cap ? nu - c0 : cap;
        if (c0 > 0 && (rc = fetch(src, uni + c0, n, views, e)) != K3_OK)
            break;
        if (T == 1) { /* the token's picks are uni itself, ascending */
            one_token_experts(views, n, z, Z, F, b1, b2, o, NULL, o + n * Z);
            for (size_t q = 0; q < n; q++)
                k3_axpy(y, wts[c0 + q], o + q * Z, Z);
            release(src, uni + c0, n);
            continue;
        }
        for (size_t q = 0; q < n; q++) {
            const k3_expert *ex = views[q];
            size_t m = 0;
            for (size_t t = 0; t < T; t++) {
                size_t j = next[t];
                if (j < k && ids[t * k + j] == uni[c0 + q]) {
                    memcpy(g + m * Z, z + t * Z, Z * sizeof *g);
                    tok[m++] = t;
                }
            }
            k3_matmul(&ex->w1, g, m, h, mm);
            k3_matmul(&ex->w3, g, m, u, mm);
            k3_situ(h, u, m * F, b1, b2);
            k3_matmul(&ex->w2, h, m, o, mm);
            for (size_t r = 0; r < m; r++) {
                size_t t = tok[r];
                k3_axpy(y + t * Z, wts[t * k + next[t]], o + r * Z, Z);
                next[t]++;
            }
        }
        release(src, uni + c0, n);
    }
    return rc;
}

/* One token's routed experts under a k3_moe_part: this process computes
 * its own ones, own[0..nown) (expert ids; pos: their indices in uni), in
 * chunks of at most cap, the first already fetched (views), each into
 * o + pos*Z (hu after all k outputs); the gather fills the other outputs;
 * then the sum over all nu in ascending expert order, as routed() does
 * for one process (the same axpys in the same order). */
static int routed_split(const k3_config *c, const k3_expert_source *src, const float *wts,
                        const float *z, const int32_t *uni, size_t nu, const int32_t *own,
                        const size_t *pos, size_t nown, size_t cap, const k3_expert **views,
                        float *y, float *o, k3_err *e)
{
    size_t k = (size_t)c->num_experts_per_token;
    size_t Z = (size_t)c->routed_expert_hidden_size, F = (size_t)c->moe_intermediate_size;
    float b1 = (float)c->situ_beta, b2 = (float)c->situ_linear_beta;
    int rc = K3_OK;
    for (size_t c0 = 0; c0 < nown && rc == K3_OK; c0 += cap) {
        size_t n = nown - c0 < cap ? nown - c0 : cap;
        if (c0 > 0 && (rc = fetch(src, own + c0, n, views, e)) != K3_OK)
            break;
        one_token_experts(views, n, z, Z, F, b1, b2, o, pos + c0, o + k * Z);
        release(src, own + c0, n);
    }
    /* Every process gathers, even after a failed read here: the others
     * wait in this collective, and the failure ends the job (src/mpi). */
    if (rc != K3_OK)
        return rc;
    moe_part->gather(moe_part->ctx, uni, nu, o, Z);
    for (size_t q = 0; q < nu; q++)
        k3_axpy(y, wts[q], o + q * Z, Z);
    return K3_OK;
}

/* T > 1 tokens' routed experts under a k3_moe_part: this process computes
 * the experts of the union it owns, own[0..nown) (ascending), in chunks of
 * at most cap, the first already fetched (views): each is applied to every
 * token that chose it by products on this process alone (k3_matmul_here:
 * the same bits as the row-split k3_matmul and as k3_matvec), its output
 * for token t's pick j into o + (t k + j) Z. The gather fills the other
 * picks' outputs; then each token adds its k outputs in pick order, which
 * is ascending expert id: the axpys routed() makes, in its order. Scratch:
 * g [T][Z] (the tokens' inputs, then the outputs), hu 2 x T x F, tok [T]. */
static int routed_split_many(const k3_config *c, const k3_expert_source *src,
                             const int32_t *ids, const float *wts, const float *z, size_t T,
                             const int32_t *own, size_t nown, size_t cap,
                             const k3_expert **views, float *y, float *g, float *o, float *hu,
                             size_t *tok, const k3_mm_ws *mm, k3_err *e)
{
    size_t k = (size_t)c->num_experts_per_token;
    size_t Z = (size_t)c->routed_expert_hidden_size, F = (size_t)c->moe_intermediate_size;
    float b1 = (float)c->situ_beta, b2 = (float)c->situ_linear_beta;
    float *h = hu, *u = hu + T * F;
    int rc = K3_OK;
    for (size_t c0 = 0; c0 < nown && rc == K3_OK; c0 += cap) {
        size_t n = nown - c0 < cap ? nown - c0 : cap;
        if (c0 > 0 && (rc = fetch(src, own + c0, n, views, e)) != K3_OK)
            break;
        for (size_t q = 0; q < n; q++) {
            const k3_expert *ex = views[q];
            size_t m = 0;
            for (size_t p = 0; p < T * k; p++)
                if (ids[p] == own[c0 + q]) {
                    memcpy(g + m * Z, z + (p / k) * Z, Z * sizeof *g);
                    tok[m++] = p;
                }
            k3_matmul_here(&ex->w1, g, m, h, mm);
            k3_matmul_here(&ex->w3, g, m, u, mm);
            k3_situ(h, u, m * F, b1, b2);
            k3_matmul_here(&ex->w2, h, m, g, mm);
            for (size_t r = 0; r < m; r++)
                memcpy(o + tok[r] * Z, g + r * Z, Z * sizeof *o);
        }
        release(src, own + c0, n);
    }
    if (rc != K3_OK) /* the failure ends the job (src/mpi) */
        return rc;
    moe_part->gather(moe_part->ctx, ids, T * k, o, Z);
    for (size_t p = 0; p < T * k; p++)
        k3_axpy(y + (p / k) * Z, wts[p], o + p * Z, Z);
    return K3_OK;
}

/* Whether T tokens' routed experts are split by expert (the installed
 * k3_moe_part's): one token always; more when their T x k outputs fit one
 * gather (an int count of floats). Shape only: the same on every process. */
static const k3_moe_part *split_of(const k3_config *c, uint64_t T)
{
    uint64_t outs = k3_sat_mul(k3_sat_mul(T, u64(c->num_experts_per_token)),
                               u64(c->routed_expert_hidden_size));
    return moe_part && (T == 1 || outs <= (uint64_t)INT_MAX) ? moe_part : NULL;
}

/* k3_moe_block's working memory for T tokens (E experts, k picked per
 * token, latent width Z, expert width F, shared width S = F x shared
 * experts, wide = max(S, F)). */
typedef struct {
    float *logits;    /* [T][E] router logits */
    float *sig;       /* [E] k3_route's scratch */
    float *wts;       /* [T][k] routing weights of the picks */
    float *z;         /* [T][Z] latent_down x */
    float *y;         /* [T][Z] weighted sum of the routed experts' outputs */
    float *tmp;       /* [2][T][wide] the shared experts' gate and up, then routed()'s hu */
    float *shared;    /* [T][H] the shared experts' output */
    float *g;         /* [T][Z] routed(): one expert's tokens, gathered */
    float *o;         /* [T][Z], or [k][Z + 2F] when T == 1: routed()'s outputs;
                       * [T][k][Z] when T > 1 tokens' experts are split (split_of) */
    int32_t *ids;     /* [T][k] the picks, ascending per token */
    int32_t *uni;     /* [E] the union of the picks, ascending */
    int32_t *own;     /* [E] under a k3_moe_part: the union's experts computed here */
    size_t *pos;      /* [E] their indices in uni (both [k], unused, without one) */
    size_t *next;     /* [T] routed(): each token's next pick */
    size_t *tok;      /* [T] routed(): each gathered row's token */
    const k3_expert **views; /* [E] the fetched experts of one chunk */
} moe_bufs;

/* The one layout of moe_bufs (scratch.h): sizes with base NULL. */
static uint64_t moe_layout(const k3_config *c, uint64_t T, unsigned char *base, moe_bufs *b)
{
    uint64_t H = u64(c->hidden_size), E = u64(c->num_experts);
    uint64_t k = u64(c->num_experts_per_token), Z = u64(c->routed_expert_hidden_size);
    uint64_t F = u64(c->moe_intermediate_size), S = k3_sat_mul(F, u64(c->num_shared_experts));
    uint64_t wide = S > F ? S : F, TZ = k3_sat_mul(T, Z), f = sizeof(float);
    uint64_t one = k3_sat_mul(k, k3_sat_add(Z, k3_sat_mul(2, F)));
    uint64_t outs = T == 1 ? one : split_of(c, T) ? k3_sat_mul(TZ, k) : TZ;
    k3_carve a = { base, 0 };
    b->logits = k3_carve_take(&a, k3_sat_mul(T, E), f);
    b->sig = k3_carve_take(&a, E, f);
    b->wts = k3_carve_take(&a, k3_sat_mul(T, k), f);
    b->z = k3_carve_take(&a, TZ, f);
    b->y = k3_carve_take(&a, TZ, f);
    b->tmp = k3_carve_take(&a, k3_sat_mul(k3_sat_mul(2, T), wide), f);
    b->shared = k3_carve_take(&a, k3_sat_mul(T, H), f);
    b->g = k3_carve_take(&a, TZ, f);
    b->o = k3_carve_take(&a, outs, f);
    b->ids = k3_carve_take(&a, k3_sat_mul(T, k), sizeof(int32_t));
    b->uni = k3_carve_take(&a, E, sizeof(int32_t));
    b->own = k3_carve_take(&a, moe_part ? E : k, sizeof(int32_t));
    b->pos = k3_carve_take(&a, moe_part ? E : k, sizeof(size_t));
    b->next = k3_carve_take(&a, T, sizeof(size_t));
    b->tok = k3_carve_take(&a, T, sizeof(size_t));
    b->views = k3_carve_take(&a, E, sizeof(const k3_expert *));
    return a.used;
}

uint64_t k3_moe_scratch(const k3_config *c, uint64_t T)
{
    moe_bufs b;
    return moe_layout(c, T, NULL, &b);
}

int k3_moe_block(const k3_config *c, const k3_moe_weights *w, const k3_expert_source *src,
                 const float *x, size_t T, float *out, const k3_work *wk, k3_err *e)
{
    size_t H = (size_t)c->hidden_size, E = (size_t)c->num_experts;
    size_t k = (size_t)c->num_experts_per_token, Z = (size_t)c->routed_expert_hidden_size;
    size_t S = (size_t)(c->moe_intermediate_size * c->num_shared_experts);
    float b1 = (float)c->situ_beta, b2 = (float)c->situ_linear_beta;
    moe_bufs b;
    if (k3_moe_scratch(c, T) > wk->bytes)
        return k3_fail(e, K3_ERUNTIME, "MoE scratch: %llu bytes needed, %zu given",
                       (unsigned long long)k3_moe_scratch(c, T), wk->bytes);
    moe_layout(c, T, wk->buf, &b);

    k3_matmul(&w->router, x, T, b.logits, wk->mm);
    for (size_t t = 0; t < T; t++)
        k3_route(c, b.logits + t * E, w->router_bias, b.ids + t * k, b.wts + t * k, b.sig);
    size_t nu = expert_union(c, b.ids, T, b.uni);
    size_t cap = src->resident ? E : k3_ec_capacity(src->cache);
    /* Under a k3_moe_part: only this process's experts are fetched and
     * computed (moe_part.h). */
    const k3_moe_part *mp = split_of(c, T);
    const int32_t *want = b.uni;
    size_t nwant = nu;
    if (mp) {
        nwant = 0;
        for (size_t q = 0; q < nu; q++)
            if (k3_moe_owner(b.uni[q], mp->size) == mp->rank) {
                b.pos[nwant] = q;
                b.own[nwant++] = b.uni[q];
            }
        want = b.own;
    }

    /* Reads of the first experts start now, on a helper thread; the latent
     * projection and the shared experts compute meanwhile. */
    fetch_job job = { src, want, nwant < cap ? nwant : cap, b.views, { 0, "" }, K3_OK };
    pthread_t th;
    int threaded = !src->resident && job.n > 0 && pthread_create(&th, NULL, fetch_main, &job) == 0;
    if (!threaded)
        fetch_main(&job);
    k3_matmul(&w->latent_down, x, T, b.z, wk->mm);
    if (S > 0)
        situ_mlp(&w->shared_gate, &w->shared_up, &w->shared_down, x, T, b.shared, b.tmp, b1, b2,
                 wk->mm, NULL, NULL, e); /* no wait: cannot fail */
    if (threaded)
        pthread_join(th, NULL);
    int rc = job.rc;
    if (rc != K3_OK)
        k3_fail(e, rc, "%s", job.err.msg);
    memset(b.y, 0, T * Z * sizeof *b.y);
    if (rc == K3_OK && mp && T == 1)
        rc = routed_split(c, src, b.wts, b.z, b.uni, nu, b.own, b.pos, nwant, cap, b.views, b.y,
                          b.o, e);
    else if (rc == K3_OK && mp)
        rc = routed_split_many(c, src, b.ids, b.wts, b.z, T, b.own, nwant, cap, b.views, b.y,
                               b.g, b.o, b.tmp, b.tok, wk->mm, e);
    else if (rc == K3_OK)
        rc = routed(c, src, b.ids, b.wts, b.z, T, b.uni, nu, cap, b.views, b.y, b.g, b.o, b.tmp,
                    b.next, b.tok, wk->mm, e);
    if (rc == K3_OK) {
        if (w->latent_norm)
            for (size_t t = 0; t < T; t++)
                k3_rmsnorm(b.y + t * Z, b.y + t * Z, w->latent_norm, Z, (float)c->rms_norm_eps);
        k3_matmul(&w->latent_up, b.y, T, out, wk->mm);
        if (S > 0)
            for (size_t i = 0; i < T * H; i++)
                out[i] = out[i] + b.shared[i];
    }
    return rc;
}
