/* bytemap.h - hash map from byte strings to token ids.
 *
 * The map does not copy keys: id i's key is the byte string
 * base[off[i] .. off[i+1]) of the tokenizer's token table, which must stay
 * put while the map is used. Open addressing with linear probing, a load
 * factor of at most 1/2, and 32 bits of each key's hash kept in its slot so
 * a miss (the common case in BPE, which probes pairs that are mostly not
 * tokens) rarely touches the key bytes. */
#ifndef K3_TOKENIZER_BYTEMAP_H
#define K3_TOKENIZER_BYTEMAP_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

#define K3_BYTEMAP_NONE UINT32_MAX

typedef struct k3_bytemap {
    uint64_t *slot; /* (hash >> 32) << 32 | (id + 1); 0 = empty */
    size_t mask;
    const unsigned char *base;
    const uint32_t *off;
} k3_bytemap;

/* An empty map with room for count keys of the table (base, off). */
int k3_bytemap_init(k3_bytemap *m, size_t count, const unsigned char *base,
                    const uint32_t *off, k3_err *e);
void k3_bytemap_free(k3_bytemap *m);

/* Adds id. Returns K3_BYTEMAP_NONE, or the id already holding the same
 * bytes (then nothing is added). */
uint32_t k3_bytemap_add(k3_bytemap *m, uint32_t id);

/* The id whose bytes are key[0..len), or K3_BYTEMAP_NONE. */
uint32_t k3_bytemap_get(const k3_bytemap *m, const unsigned char *key, size_t len);

#endif
