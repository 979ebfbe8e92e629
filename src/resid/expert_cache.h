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
 *  - Slot states: EMPTY, INFLIGHT (being read: never evicted, never
 *    returned), or holding a (layer, expert) key. Eviction is LRU among
 *    unpinned slots.
 *  - A read that fails or comes back short is retried; if it still fails
 *    the fetch returns K3_EINVALID ("RUN INVALID ...") and the run must
 *    stop: an expert is never skipped or replaced. A scale byte of 255
 *    (E8M0 NaN) in a loaded expert is also K3_EINVALID, naming the tensor.
 *  - Counters: hits, misses, evictions, bytes read, seconds spent reading.
 *  - With a trace file set, every requested (layer, expert) is written as
 *    one line "layer expert hit|miss" in request order. */
#ifndef K3_RESID_EXPERT_CACHE_H
#define K3_RESID_EXPERT_CACHE_H

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

void k3_ec_stats_get(const k3_expert_cache *ec, k3_ec_stats *s);
void k3_ec_set_trace(k3_expert_cache *ec, FILE *trace);

#endif
