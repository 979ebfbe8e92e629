/* expert_cache.h - routed experts streamed from the shards through a
 * fixed number of memory slots (one expert per slot).
 *
 * An expert is six tensors in the shards (w1/w3/w2 weight_packed and
 * weight_scale, MXFP4). The cache never changes what is computed: a caller
 * fetches the experts it needs, uses the returned k3_expert views, and
 * releases them; only the time it takes depends on the capacity.
 *
 * Contract:
 *  - k3_ec_fetch(layer, ids, n) makes all n experts resident and pins them
 *    until k3_ec_release. n must not exceed the capacity (callers with more
 *    experts than slots work in chunks). ids are distinct.
 *  - Misses are read as one batch, in disk-offset order, adjacent byte
 *    ranges coalesced into one read, several reads in flight at once.
 *    k3_ec_begin / k3_ec_read / k3_ec_end split a fetch so that a caller
 *    can use each expert as soon as its own bytes are in (below).
 *  - Slot states: EMPTY, INFLIGHT (being read: never evicted, never
 *    returned), or holding a (layer, expert) key. Eviction is LRU among
 *    unpinned slots.
 *  - A read that fails or comes back short is retried; if it still fails
 *    the fetch returns K3_EINVALID ("RUN INVALID ...") and the run must
 *    stop: an expert is never skipped or replaced. A scale byte of 255
 *    (E8M0 NaN) in a loaded expert is also K3_EINVALID, naming the tensor.
 *  - Counters: hits, misses, evictions, bytes read, seconds spent reading;
 *    and what the caller notes of its compute (k3_ec_note).
 *  - With a trace file set, every requested (layer, expert) is written as
 *    one line "layer expert hit|miss" in request order. */
#ifndef K3_RESID_EXPERT_CACHE_H
#define K3_RESID_EXPERT_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/kernels.h"
#include "io/safetensors.h"
#include "k3/error.h"

/* One routed expert: w1 gate and w3 up [inter, latent], w2 down
 * [latent, inter], all MXFP4. Views the cache returns point into a slot
 * and stay valid until released. */
typedef struct k3_expert {
    k3_mat w1, w3, w2;
} k3_expert;

/* The shape of the routed experts, all the cache knows of the model (the
 * model fills it from its config). Expert x of layer l is the six tensors
 * "language_model.model.layers.<l>.block_sparse_moe.experts.<x>.*". */
typedef struct k3_ec_dims {
    int first_moe;           /* first layer with routed experts */
    int n_layers;            /* the cache serves layers [first_moe, n_layers) */
    int64_t experts;         /* routed experts per MoE layer */
    int64_t inter;           /* F: rows of w1 and w3, columns of w2 */
    int64_t latent;          /* Z: columns of w1 and w3, rows of w2 */
} k3_ec_dims;

typedef struct k3_expert_cache k3_expert_cache;

typedef struct k3_ec_stats {
    uint64_t requests, hits, misses, evictions;
    uint64_t bytes_read;
    double read_seconds;
    /* k3_ec_note's sums: fetches noted, experts computed before their
     * fetch's reads had all ended, the caller's wall seconds and the
     * seconds it waited for bytes within them. */
    uint64_t noted, early;
    double wall_seconds, wait_seconds;
} k3_ec_stats;

/* Bytes one slot holds for experts of these widths (packed + scales of w1,
 * w3, w2, plus alignment slack for direct I/O; only d->inter and d->latent
 * matter). Used by the memory plan. */
uint64_t k3_ec_slot_bytes(const k3_ec_dims *d);

/* Resolves every expert tensor of layers [d->first_moe, d->n_layers) in ix by
 * name, checking dtype and shape (K3_EINPUT naming the tensor otherwise),
 * and allocates nslots slots (nslots >= 1). direct_io asks for O_DIRECT
 * reads where the file system allows them (falling back to buffered reads).
 * The cache keeps a copy of *d and uses ix until k3_ec_free. */
int k3_ec_new(k3_expert_cache **out, const k3_st_index *ix, const k3_ec_dims *d, size_t nslots,
              int direct_io, k3_err *e);
void k3_ec_free(k3_expert_cache *ec);

size_t k3_ec_capacity(const k3_expert_cache *ec);
int k3_ec_fetch(k3_expert_cache *ec, int layer, const int32_t *ids, size_t n,
                const k3_expert **out, k3_err *e);
void k3_ec_release(k3_expert_cache *ec, int layer, const int32_t *ids, size_t n);

/* A fetch in two halves, so that a caller can compute on each expert as
 * soon as its bytes are in while the others are still being read
 * (model/moe.c). k3_ec_fetch is the three calls on one thread.
 *
 *  k3_ec_begin (the caller's thread): k3_ec_fetch's checks; pins the hits
 *    (out[i] their views at once) and gives each miss a slot, INFLIGHT
 *    (out[i] NULL). *ticket: the misses to read, NULL when there are none
 *    (the fetch is then complete). On failure nothing is pinned and
 *    *ticket is NULL. ids must stay unchanged until k3_ec_end.
 *  k3_ec_read (one thread, any: a NULL ticket does nothing): reads the
 *    misses. As the last byte of a miss ids[i] arrives and its scales
 *    pass, calls arrived(ctx, i, view): from the reader threads, several
 *    at once (under the threads reader) or from this thread (uring); a view
 *    handed over is complete and no reader touches its slot again. A miss
 *    that failed, came back short or has a NaN scale is never handed over.
 *    Touches only the ticket and its INFLIGHT slots: between k3_ec_begin
 *    and k3_ec_end the caller may use the views it has but must not call
 *    the cache.
 *  k3_ec_end (the caller's thread, after k3_ec_read returned; frees the
 *    ticket): the fetch's result. K3_OK: every expert is pinned until
 *    k3_ec_release, as after k3_ec_fetch. Otherwise K3_EINVALID ("RUN
 *    INVALID ...", the first failed read in disk order, else the first
 *    broken expert in ids order): the misses' slots are EMPTY again and the
 *    hits unpinned; every view handed out is void and must not be used
 *    (nor released). */
typedef struct k3_ec_ticket k3_ec_ticket;
typedef void (*k3_ec_arrived_fn)(void *ctx, size_t i, const k3_expert *x);
int k3_ec_begin(k3_expert_cache *ec, int layer, const int32_t *ids, size_t n,
                const k3_expert **out, k3_ec_ticket **ticket, k3_err *e);
void k3_ec_read(k3_ec_ticket *t, k3_ec_arrived_fn arrived, void *ctx);
int k3_ec_end(k3_expert_cache *ec, k3_ec_ticket *t, k3_err *e);

/* The caller's note of one fetch's compute, for the counters: `early`
 * experts computed before the fetch's reads had all ended, `wall` seconds
 * from before k3_ec_begin to the end of its compute, `wait` of them spent
 * waiting for an expert's bytes (wall - wait: the compute). */
void k3_ec_note(k3_expert_cache *ec, uint64_t early, double wall, double wait);

void k3_ec_stats_get(const k3_expert_cache *ec, k3_ec_stats *s);
void k3_ec_set_trace(k3_expert_cache *ec, FILE *trace);

#endif
