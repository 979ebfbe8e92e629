/* prefix_radix.h - a radix tree over token ids: the prefix cache's index
 * (model/prefix_cache.h), as SGLang's RadixAttention adapted to snapshot
 * points.
 *
 * Keys are id sequences; each value hangs at the node where its key ends
 * (several values may share one key: the cache keys on ids and image
 * spans, and the spans are compared by the caller). An edge is a run of
 * ids shared by every key below it; a node other than the root holds a
 * value or has at least two children (a node left with neither by a
 * removal is deleted, one left with no value and one child is merged into
 * that child), so the tree has at most 2 * values nodes and holds at most
 * the sum of its keys' lengths in ids: its memory is bounded by what the
 * cache indexes (k3_radix_bytes says how much).
 *
 * Values are the caller's pointers (never freed or read here). Threading:
 * one thread at a time. */
#ifndef K3_MODEL_PREFIX_RADIX_H
#define K3_MODEL_PREFIX_RADIX_H

#include <stddef.h>
#include <stdint.h>

#include "k3/k3.h"

typedef struct k3_radix k3_radix;

/* Called for a value whose key is ids[0..len) (k3_radix_prefixes). */
typedef void (*k3_radix_visit)(void *ctx, void *val, size_t len);

int k3_radix_new(k3_radix **out, k3_err *e);
void k3_radix_free(k3_radix *r);

/* Hangs val at key ids[0..n) (n may be 0: the root). The caller inserts a
 * value once. K3_ERUNTIME when out of memory or a size overflows (the tree
 * is then as it was). */
int k3_radix_insert(k3_radix *r, const uint32_t *ids, size_t n, void *val, k3_err *e);

/* Removes val from key ids[0..n), deleting and merging the nodes that
 * leaves without a purpose. 0, or -1 when val is not at that key. */
int k3_radix_remove(k3_radix *r, const uint32_t *ids, size_t n, const void *val);

/* Calls f for every value whose key is a prefix of ids[0..n) (ids[0..n)
 * itself included), by ascending key length; the longest cached prefix is
 * the last call. Time: O(n) plus one call per value found. */
void k3_radix_prefixes(const k3_radix *r, const uint32_t *ids, size_t n, k3_radix_visit f,
                       void *ctx);

/* Bytes the tree holds (nodes, runs, child and value arrays), and its
 * node count (the root included). */
uint64_t k3_radix_bytes(const k3_radix *r);
size_t k3_radix_nodes(const k3_radix *r);

#endif
