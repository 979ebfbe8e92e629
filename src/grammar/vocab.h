/* vocab.h - the vocabulary index (k3_gram_vocab of grammar.h), read by
 * the matcher.
 *
 * The ordinary ids' byte strings form a trie whose nodes are numbered in
 * preorder (children in byte order), so a walk is a loop over node
 * indices that skips a dead subtree by jumping to its end:
 *   node i: byte[i] (the edge into it), depth[i] (bytes from the root;
 *   the root is not stored), end[i] (one past its last descendant), and
 *   the ids whose bytes end exactly there: ids[id_off[i]..id_off[i+1]).
 * Special ids are not in the trie: spec[0..nspec) lists them. */
#ifndef K3_GRAMMAR_VOCAB_H
#define K3_GRAMMAR_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"

struct k3_gram_vocab {
    uint32_t n;      /* ids */
    uint32_t nnodes; /* trie nodes */
    uint8_t *byte;
    uint16_t *depth;
    uint32_t *end, *id_off, *ids;
    uint32_t maxdepth; /* longest ordinary id in bytes */
    uint8_t *special;  /* per id */
    uint32_t *spec, nspec;
    uint32_t *empty, nempty; /* ordinary ids with no bytes */
    unsigned char **bytes;   /* per id, its bytes (specials: their text) */
    size_t *lens;
};

/* The special id whose text is s[0..n), or -1. */
int64_t k3g_vocab_special(const k3_gram_vocab *v, const char *s, size_t n);

#endif
