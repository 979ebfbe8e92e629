/* prefix_cache.h - snapshots of sequences by their prefix, in memory and
 * on disk, so a prompt that begins with a sequence computed before starts
 * from there (k3 serve's slots, k3 --chat).
 *
 * Kimi K3 is a hybrid: its KDA layers carry a recurrent state that cannot
 * be cut back to an earlier position, its MLA layers a per-position latent
 * cache. A reusable prefix is therefore a SNAPSHOT: a whole state (the KDA
 * states at one position, the MLA rows up to it, the ids, image spans and
 * last logits), taken when a state stands exactly at a point a later
 * prompt may branch from (the caller chooses the points: the end of each
 * chat message, the end of each prompt). Restoring one is k3_state_copy
 * (RAM) or k3_state_load (disk): bit for bit the state that feeding its
 * ids gives, so an answer from a snapshot equals the cold answer.
 *
 * Key: the snapshot's ids and its image spans (k3_image_span: equal ids do
 * not mean equal rows where images took positions). A snapshot matches a
 * prompt when its ids are a prefix of the prompt's and every span below
 * its position is in both, with the same start and hash. The index is a
 * radix tree over the ids (model/prefix_radix.h): a lookup walks the
 * prompt's ids once and meets exactly the snapshots whose ids are a
 * prefix, shortest first, so it costs the prompt's length whatever the
 * number of snapshots; the spans are compared on those. Each snapshot
 * holds its own copy of the MLA rows (no sharing of rows between the
 * snapshots of one branch: docs/TUNING.md "Prefix cache" says why at the
 * release's shapes the copies cost little next to the KDA states).
 *
 * Tiers: snapshots live in RAM within ram_bytes; to make room the one of
 * least value goes (value: positions saved per byte held, times one plus
 * its hits, over its age in puts and restores), spilled to the disk tier
 * when there is one (dir), else dropped. The disk tier is a directory of
 * state files (k3_state_save: checksummed, written atomically) named
 * k3p-NS-KEY.state, where NS is the caller's namespace (a hash of the
 * tokenizer and the chat format: a file of another namespace is never
 * used) and KEY the XXH64 of the ids and spans; it is bounded by
 * disk_bytes (the least valuable files are removed), scanned when the
 * cache opens (a file of another model, truncated, or whose name does not
 * match its ids is skipped with a log line; a checksum mismatch is found
 * when it is read, and then it is skipped, removed and the prompt computed
 * cold), and every RAM snapshot is spilled there when the cache closes, so
 * a restarted server or chat starts warm; k3_prefix_cache_flush has
 * them written behind by a thread of the cache's (the server after each
 * answer), so a killed one does too.
 * A disk snapshot is read only where reading is predicted to beat
 * recomputing: the cache measures its reads (seconds per byte) and the
 * caller reports its prefill speed (seconds per position,
 * k3_prefix_cache_prefill_rate).
 *
 * Threading: the calls below are made by one thread at a time (the
 * server's worker); the cache's own writer thread (k3_prefix_cache_flush)
 * shares its state under a mutex, and takes it only briefly except while
 * it writes a snapshot's file, which the caller waits for only when it
 * must free or spill that very snapshot. */
#ifndef K3_MODEL_PREFIX_CACHE_H
#define K3_MODEL_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "k3/k3.h"

typedef struct k3_prefix_opts {
    uint64_t ram_bytes;  /* RAM for snapshots; 0: none held in RAM (with a dir, every
                          * snapshot goes to disk at once) */
    const char *dir;     /* the disk tier's directory (created if missing), or NULL */
    uint64_t disk_bytes; /* the disk tier's bound */
    uint64_t ns;         /* the namespace: tokenizer and chat-format options */
    FILE *log;           /* skipped files and failures are reported here (NULL: none) */
} k3_prefix_opts;

typedef struct k3_prefix_stats {
    uint64_t hits, misses;     /* restores that found a snapshot; lookups that did not */
    uint64_t disk_hits;        /* of the hits, read from disk */
    uint64_t tokens_saved;     /* positions restored instead of computed */
    uint64_t ram_bytes, disk_bytes; /* held now */
    uint64_t ram_entries, disk_entries;
    uint64_t puts;             /* snapshots taken */
    uint64_t evictions;        /* snapshots that left RAM (spilled or dropped) */
    uint64_t spills;           /* of them, written to disk */
    uint64_t disk_evictions;   /* files removed for the disk bound */
    uint64_t skipped;          /* files skipped (foreign, corrupt) */
} k3_prefix_stats;

typedef struct k3_prefix_cache k3_prefix_cache;

/* Opens a cache for model m (the snapshots' states are m's), scanning the
 * disk tier. K3_EINPUT when dir cannot be made or read. */
int k3_prefix_cache_open(k3_prefix_cache **out, const k3_model *m, const k3_prefix_opts *o,
                         k3_err *e);
/* Spills the RAM snapshots to the disk tier (when there is one), frees. */
void k3_prefix_cache_close(k3_prefix_cache *c);

/* Brings s to the longest snapshot that matches ids[0..n) with image spans
 * img[0..nimg) (the rule above), if that is longer than `have` (what s can
 * keep by itself) and, on disk, predicted to be quicker to read than to
 * compute. Returns the position s now holds from the cache, 0 when none
 * was used (s untouched, or reset after a failed read: the caller feeds
 * from its own position). Failures are logged, never returned. */
size_t k3_prefix_cache_restore(k3_prefix_cache *c, k3_state *s, const uint32_t *ids, size_t n,
                               const k3_image_span *img, size_t nimg, size_t have);

/* Takes a snapshot of s at its position (its ids and spans are the key);
 * a key held already is only touched. Failures (memory, disk) are logged
 * and leave the cache as it was. */
void k3_prefix_cache_put(k3_prefix_cache *c, const k3_state *s);

/* Wakes the cache's writer thread (started by the first call) to write
 * every RAM snapshot that has no file yet to the disk tier (nothing
 * without one), and returns at once: a process killed once they are
 * written (kill -9, a crash) finds them when it restarts. To keep other
 * snapshots' files, the writer only removes files of snapshots that are
 * no longer in RAM; one it cannot place waits for its eviction's spill.
 * The server calls it after each answer. Failures are logged. */
void k3_prefix_cache_flush(k3_prefix_cache *c);

/* The caller's prefill speed: `positions` computed in `seconds` (folded
 * into a running mean that the disk tier's read-or-compute choice uses). */
void k3_prefix_cache_prefill_rate(k3_prefix_cache *c, size_t positions, double seconds);

void k3_prefix_cache_stats(k3_prefix_cache *c, k3_prefix_stats *st);

/* Bytes a snapshot of `positions` positions holds in RAM (the memory
 * plan's unit: how many the budget keeps). */
uint64_t k3_prefix_snapshot_bytes(const k3_model *m, int64_t positions);

#endif
