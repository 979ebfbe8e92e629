/* prefix_hook.h - the prefix cache (model/prefix_cache.h) in an answer:
 * where a prompt's snapshots are taken, and its start from the longest
 * cached prefix.
 *
 * Snapshot points of a prompt (ids only, so the same prefix gets the same
 * points in every request): after an end-of-message id (<|end_of_msg|>,
 * chat/xtml.h: the end of the system and tools block, of each message)
 * that is at least K3_PREFIX_GAP positions past the previous point, after
 * the last end-of-message id, and at the prompt's end. A completion
 * prompt (special tokens refused) has only its end. The slots feed a
 * prompt in pieces that stop at each point (so the state stands there),
 * and a snapshot is taken at each point the answer computed (what came
 * from the state or the cache is already held). Every answer through
 * k3_answer_begin gets this: chat completions, completions, and any API
 * that runs through the answerer. */
#ifndef K3_SERVER_PREFIX_HOOK_H
#define K3_SERVER_PREFIX_HOOK_H

#include <stddef.h>
#include <stdint.h>

#include "k3/tokenizer.h"
#include "model/prefix_cache.h"

/* Fewest positions between two message-end snapshot points but the last
 * (each point ends a forward piece: more points, more passes). */
#define K3_PREFIX_GAP 256

/* The snapshot points of ids[0..n) (ascending, the last n) into a
 * malloc'd *pts; eom: the end-of-message id, < 0 for none. */
int k3_prefix_points(const uint32_t *ids, size_t n, int64_t eom, size_t **pts, size_t *npts,
                     k3_err *e);

/* The namespace of a cache's files (prefix_cache.h): the tokenizer's
 * pieces and the chat format's version, so a snapshot is never used under
 * another tokenizer or format. */
uint64_t k3_prefix_namespace(const k3_tokenizer *tok);

#endif
