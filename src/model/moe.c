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
 * does not depend on scores' ties, caches or I/O timing. A token's experts
 * are computed in the order their bytes arrive, each into its own output
 * slot, and summed over the slots afterwards ("experts as they arrive"). */
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/mathfn.h"
#include "model/model.h"
#include "model/moe_part.h"
#include "model/scratch.h"
#include "util/clock.h"
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

/* ---- experts as they arrive ----
 *
 * One chunk of a layer's experts, ids[0..n), fetched so that each can be
 * computed as soon as its bytes are usable: the cache's hits at once, its
 * misses one by one as their reads complete (resid/expert_cache.h,
 * k3_ec_begin / k3_ec_read / k3_ec_end), the latent projection and the
 * shared experts running meanwhile.
 *
 * Threads and ownership:
 *  - the forward thread begins the fetch (the cache's bookkeeping), then
 *    starts one I/O thread (a plain pthread, not an OpenMP thread: it sits
 *    blocked in reads) that runs k3_ec_read; the forward thread and its
 *    OpenMP team compute meanwhile and never call the cache until
 *    arrivals_finish has joined the I/O thread.
 *  - A miss's slot belongs to the reader until its view is handed over
 *    (arrived(), under mu: views[i] set, i appended to order, cv
 *    broadcast); from then on it is read-only to the compute team. When
 *    k3_ec_read returns, the I/O thread clears `reading` under mu and
 *    broadcasts: an expert not handed over by then failed and is never
 *    used (its bytes may be half-read).
 *  - Compute threads take indices from order[taken..nq) under mu, waiting
 *    on cv while none is there and the reads go on; each index is taken
 *    once, so each expert's output slot and scratch have one writer.
 *  - arrivals_finish (forward thread, after the compute's parallel region
 *    ended) joins the I/O thread and ends the fetch: on failure the cache
 *    unpins everything and every output computed is discarded (exit 4).
 * The outputs go to a slot per expert and are summed afterwards in
 * ascending expert id (the callers), so the arrival order, the reader and
 * the thread count change no bit.
 *
 * K3_EXPERT_ORDER=batch (k3_moe_order_check) makes the compute wait for
 * the whole chunk first, as k3 did before: for benchmarks (the same bits). */

static int order_batch; /* K3_EXPERT_ORDER=batch (k3_moe_set_order) */

void k3_moe_set_order(int batch) { order_batch = batch != 0; }

int k3_moe_order_check(k3_err *e)
{
    const char *v = getenv("K3_EXPERT_ORDER");
    if (v && strcmp(v, "ready") && strcmp(v, "batch"))
        return k3_fail(e, K3_EINPUT, "K3_EXPERT_ORDER=%s: expected ready or batch", v);
    k3_moe_set_order(v && !strcmp(v, "batch"));
    return K3_OK;
}

typedef struct {
    const k3_expert_source *src;
    const int32_t *ids;
    size_t n;
    const k3_expert **views;  /* [n] set once usable (under mu while reading) */
    size_t *order;            /* [n] indices in the order they became usable */
    size_t nq, taken;         /* order[0..nq) usable, [0..taken) taken */
    int reading;              /* the I/O thread has not finished */
    int threaded, sync;       /* an I/O thread to join; mu and cv exist */
    uint64_t early;           /* experts computed while reading */
    double t0;                /* when the fetch began */
    double wait;              /* seconds the forward thread waited for an arrival */
    k3_ec_ticket *ticket;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} arrivals;

static void arrived(void *ctx, size_t i, const k3_expert *x)
{
    arrivals *a = ctx;
    pthread_mutex_lock(&a->mu);
    a->views[i] = x;
    a->order[a->nq++] = i;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static void *io_main(void *arg)
{
    arrivals *a = arg;
    k3_ec_read(a->ticket, arrived, a);
    pthread_mutex_lock(&a->mu);
    a->reading = 0;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* Begins the fetch of ids[0..n) into views (order: n indices of scratch)
 * and starts its reads; 0 experts is an empty chunk. */
static int arrivals_start(arrivals *a, const k3_expert_source *src, const int32_t *ids, size_t n,
                          const k3_expert **views, size_t *order, k3_err *e)
{
    memset(a, 0, sizeof *a);
    a->src = src;
    a->ids = ids;
    a->n = n;
    a->views = views;
    a->order = order;
    a->t0 = k3_seconds();
    if (src->resident || n == 0) {
        for (size_t i = 0; i < n; i++) {
            views[i] = &src->resident[ids[i]];
            order[i] = i;
        }
        a->nq = n;
        return K3_OK;
    }
    int rc = k3_ec_begin(src->cache, src->layer, ids, n, views, &a->ticket, e);
    if (rc != K3_OK)
        return rc;
    for (size_t i = 0; i < n; i++) /* the hits, ascending */
        if (views[i])
            order[a->nq++] = i;
    if (!a->ticket)
        return K3_OK;
    if (pthread_mutex_init(&a->mu, NULL) != 0 || (pthread_cond_init(&a->cv, NULL) != 0 &&
                                                  (pthread_mutex_destroy(&a->mu), 1))) {
        k3_ec_read(a->ticket, NULL, NULL); /* read, unused: the fetch is undone */
        if (k3_ec_end(src->cache, a->ticket, e) == K3_OK)
            k3_ec_release(src->cache, src->layer, ids, n);
        a->ticket = NULL;
        return k3_fail(e, K3_ERUNTIME, "cannot create a mutex for the expert reads");
    }
    a->sync = a->reading = 1;
    if (pthread_create(&a->th, NULL, io_main, a) == 0)
        a->threaded = 1;
    else
        io_main(a); /* no thread to be had: read it all now, then compute */
    return K3_OK;
}

/* The next usable expert not yet taken (its index in ids), waiting while
 * reads go on; 0 when there is none left. Any thread of the team. */
static int arrivals_next(arrivals *a, size_t *q)
{
    if (!a->sync) {
        int got = 0;
#pragma omp critical(k3_moe_arrivals)
        if (a->taken < a->nq) {
            *q = a->order[a->taken++];
            got = 1;
        }
        return got;
    }
    pthread_mutex_lock(&a->mu);
    if (a->reading && (order_batch || a->taken == a->nq)) {
        double t0 = k3_seconds();
        while (a->reading && (order_batch || a->taken == a->nq))
            pthread_cond_wait(&a->cv, &a->mu);
        if (omp_get_thread_num() == 0) /* the forward thread (wait is under mu) */
            a->wait += k3_seconds() - t0;
    }
    int got = a->taken < a->nq;
    if (got)
        *q = a->order[a->taken++];
    pthread_mutex_unlock(&a->mu);
    return got;
}

/* An expert taken by arrivals_next has been computed. */
static void arrivals_computed(arrivals *a)
{
    if (!a->sync)
        return;
    pthread_mutex_lock(&a->mu);
    if (a->reading)
        a->early++;
    pthread_mutex_unlock(&a->mu);
}

/* Joins the reads and ends the fetch (forward thread, outside parallel
 * regions): K3_OK with every views[i] usable until released, or the
 * fetch's failure with nothing pinned. */
static int arrivals_finish(arrivals *a, k3_err *e)
{
    if (a->threaded)
        pthread_join(a->th, NULL);
    if (a->sync) {
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
    }
    a->threaded = a->sync = 0;
    if (a->src->resident || a->n == 0)
        return K3_OK;
    int rc = k3_ec_end(a->src->cache, a->ticket, e);
    a->ticket = NULL;
    if (rc == K3_OK)
        k3_ec_note(a->src->cache, a->early, k3_seconds() - a->t0, a->wait);
    return rc;
}

/* Every expert of the chunk, each whole on one thread of the team, in the
 * order they become usable, into its own output o + pos[q]*Z (pos NULL:
 * o + q*Z), q its index in the chunk; scratch hu: 2F floats per expert.
 * Every dot is the kernels' own (a matvec inside this region runs on its
 * thread), so which thread takes an expert, and when, changes no bit; one
 * parallel region per chunk instead of three per expert, which matters
 * when threads sleep between regions (OMP_WAIT_POLICY=passive). */
static void one_token_experts(arrivals *a, const float *z, size_t Z, size_t F, float b1, float b2,
                              float *o, const size_t *pos, float *hu)
{
#pragma omp parallel if (a->n > 1)
    {
        size_t q;
        while (arrivals_next(a, &q)) {
            float *h = hu + q * 2 * F, *u = h + F;
            k3_matvec(&a->views[q]->w1, z, h);
            k3_matvec(&a->views[q]->w3, z, u);
            k3_situ(h, u, F, b1, b2);
            k3_matvec(&a->views[q]->w2, h, o + (pos ? pos[q] : q) * Z);
            arrivals_computed(a);
        }
    }
}

/* One token's experts ids[0..n) in chunks of at most cap, the first
 * chunk's fetch already begun (a), each computed as it arrives into
 * o + pos[i]*Z (pos NULL: o + i*Z) for its index i in ids, with scratch
 * hu (2F floats per expert of a chunk). Sums nothing: the callers add the
 * outputs in ascending expert id once all are there. */
static int one_token_chunks(const k3_config *c, const k3_expert_source *src, const int32_t *ids,
                            size_t n, const size_t *pos, size_t cap, arrivals *a, const float *z,
                            float *o, float *hu, size_t *order, k3_err *e)
{
    size_t Z = (size_t)c->routed_expert_hidden_size, F = (size_t)c->moe_intermediate_size;
    float b1 = (float)c->situ_beta, b2 = (float)c->situ_linear_beta;
    int rc = K3_OK;
    for (size_t c0 = 0; c0 < n && rc == K3_OK; c0 += cap) {
        size_t m = n - c0 < cap ? n - c0 : cap;
        if (c0 > 0 && (rc = arrivals_start(a, src, ids + c0, m, a->views, order, e)) != K3_OK)
            break;
        one_token_experts(a, z, Z, F, b1, b2, pos ? o : o + c0 * Z, pos ? pos + c0 : NULL, hu);
        if ((rc = arrivals_finish(a, e)) == K3_OK)
            release(src, ids + c0, m);
    }
    return rc;
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

/* One token's routed experts: its picks uni[0..nu) (ascending, weights
 * wts), of which this process computes want[0..nwant) (all of uni, pos
 * NULL; under a k3_moe_part its own ones, pos their indices in uni), in
 * chunks of at most cap, the first chunk's fetch already begun (a), each
 * into o + (its index in uni) * Z as soon as its bytes are usable (hu after
 * all k outputs); under a k3_moe_part the gather fills the other outputs.
 * Then the sum over all nu in ascending expert order: the same axpys in
 * the same order whatever arrived when, on one process or many. */
static int routed_one(const k3_config *c, const k3_expert_source *src, const float *wts,
                      const float *z, const int32_t *uni, size_t nu, const int32_t *want,
                      const size_t *pos, size_t nwant, size_t cap, arrivals *a, float *y,
                      float *o, size_t *order, k3_err *e)
{
    size_t k = (size_t)c->num_experts_per_token, Z = (size_t)c->routed_expert_hidden_size;
    int rc = one_token_chunks(c, src, want, nwant, pos, cap, a, z, o, o + k * Z, order, e);
    /* A failure ends the job before the next collective (src/mpi). */
    if (rc != K3_OK)
        return rc;
    if (pos)
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
    size_t *order;    /* [E] the order a chunk's experts became usable in */
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
    b->order = k3_carve_take(&a, E, sizeof(size_t));
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

    /* The first chunk's fetch begins now (its reads on an I/O thread);
     * the latent projection and the shared experts compute meanwhile, then
     * one token's experts as they arrive (one_token_chunks). */
    arrivals a;
    int rc = arrivals_start(&a, src, want, nwant < cap ? nwant : cap, b.views, b.order, e);
    if (rc != K3_OK)
        return rc;
    k3_matmul(&w->latent_down, x, T, b.z, wk->mm);
    if (S > 0)
        situ_mlp(&w->shared_gate, &w->shared_up, &w->shared_down, x, T, b.shared, b.tmp, b1, b2,
                 wk->mm, NULL, NULL, e); /* no wait: cannot fail */
    memset(b.y, 0, T * Z * sizeof *b.y);
    if (T == 1)
        rc = routed_one(c, src, b.wts, b.z, b.uni, nu, want, mp ? b.pos : NULL, nwant, cap, &a,
                        b.y, b.o, b.order, e);
    else if ((rc = arrivals_finish(&a, e)) == K3_OK && mp)
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
