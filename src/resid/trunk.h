/* trunk.h - the dense trunk's residency: pinned runs plus a ring of slots.
 *
 * A run is one unit of residency (one layer's matrices, or a part of a
 * large layer or of lm_head: the sub-runs of model/weights.h): a byte
 * image assembled from pieces of files (io/run.h). The first
 * `npinned` runs are loaded once and stay; the others take turns in `nring`
 * slots, each sized for the largest of them. While the engine computes with run L, a reader
 * thread loads the runs it was asked to prefetch, so I/O overlaps compute.
 *
 * Residency never changes the bytes a run holds, so it never changes what
 * is computed. A piece that cannot be read (after retries) makes acquire
 * fail with K3_EINVALID: the run must stop, never continue with stale data.
 *
 * Packed trunks (io/trunk_file.h): a run read from trunk.bin has `verify`
 * set and exactly one piece, with `file` set: it is read in large aligned
 * reads (direct where allowed) and hashed as it arrives (io/read_hashed.h);
 * its image must hash to `checksum` (XXH64) or acquire fails with
 * K3_EINVALID "RUN INVALID: layer N of trunk.bin fails its checksum". A
 * compressed run (codec K3_RUN_BF16) is decoded into the same buffer on
 * read (io/read_coded.h), so the image the forward pass sees is the same;
 * its stored form lying (block table, undecodable block) is RUN INVALID
 * too. Pinned runs are held decoded. The trunk then also allocates the
 * decoder's staging (k3_coded_stage_bytes, counted by
 * k3_trunk_plan_bytes), used by one read at a time. Run
 * buffers are K3_IO_ALIGN-aligned and rounded up to a multiple of it, as
 * direct reads need.
 *
 * Slot states: EMPTY, INFLIGHT (being read: never handed out, never
 * evicted), LOADED with a run id. A slot is evictable when LOADED and not
 * acquired. Threading: acquire/release/prefetch are called from one thread
 * (the forward pass); the reader thread only fills INFLIGHT slots. */
#ifndef K3_RESID_TRUNK_H
#define K3_RESID_TRUNK_H

#include <stddef.h>
#include <stdint.h>

#include "io/run.h"
#include "k3/error.h"

typedef struct k3_trunk_stats {
    uint64_t bytes_read;  /* from disk: a compressed run's stored bytes */
    uint64_t image_bytes; /* the runs' images (== bytes_read when nothing is compressed) */
    uint64_t runs_read;
    double read_seconds;  /* time the reader spent in reads (verified ones included,
                           * compressed ones with their decoding) */
    double verify_seconds;/* CPU time hashing verified runs (helper threads',
                           * overlapping their reads) */
    double decode_seconds;/* CPU time decoding compressed runs, summed over threads */
    double wait_seconds;  /* time acquire waited for a run to arrive */
    uint64_t pinned_bytes, ring_bytes;
} k3_trunk_stats;

typedef struct k3_trunk k3_trunk;

/* Bytes a configuration will allocate (for the memory plan). */
uint64_t k3_trunk_plan_bytes(const k3_run *runs, size_t nruns, const uint8_t *pinned,
                             size_t nring);

/* Takes ownership of nothing: runs and pinned (one flag per run) must
 * outlive the trunk. Loads the pinned runs now. nring >= 1 unless every run
 * is pinned. With nring >= 2 a reader thread prefetches. */
int k3_trunk_new(k3_trunk **out, const k3_run *runs, size_t nruns, const uint8_t *pinned,
                 size_t nring, k3_err *e);
void k3_trunk_free(k3_trunk *t);

/* The image of run r, resident until released. Waits for it if needed. */
const uint8_t *k3_trunk_acquire(k3_trunk *t, size_t r, k3_err *e);
void k3_trunk_release(k3_trunk *t, size_t r);
/* Asks the reader to load run r into a free slot if one is available. */
void k3_trunk_prefetch(k3_trunk *t, size_t r);

void k3_trunk_stats_get(k3_trunk *t, k3_trunk_stats *s);

#endif
