/* trunk_source.h - the fingerprints binding a packed trunk's runs to the
 * weights they were packed from (trunk.json, each run's "source",
 * io/trunk_format.h).
 *
 * The config hash and the tensor table say a trunk has the right SHAPE;
 * only the weights' bytes say it is the right MODEL: two checkpoints of one
 * config (another seed, a fine-tune) have identical tables. Hashing every
 * source byte at open would read the whole trunk (~109 GB for the release),
 * so the fingerprint samples. A run's is XXH64 (seed 0), for each of its
 * tensors in order, over:
 *   the text "source NAME DTYPE D0xD1x.. SHARD OFFSET NBYTES\n" (SHARD the
 *   shard file's base name, OFFSET the tensor's absolute byte offset in it:
 *   its safetensors header entry, so another layout of the shards differs);
 *   the tensor's first min(NBYTES, K3_TRUNK_SAMPLE) bytes;
 *   for the run's last tensor, when its NBYTES exceeds K3_TRUNK_SAMPLE,
 *   also its last K3_TRUNK_SAMPLE bytes (lm_head and the embedding are
 *   runs of one tensor, so both ends of them are seen).
 * Per run, not per trunk, so that a model bound with fewer layers than
 * were packed checks the runs it uses, and a refusal can name the run.
 * Cost at open: one small read per tensor plus one per run; for the release
 * (93 layers, ~1300 tensors) ~1400 reads of 256 bytes, ~6 MB of 4 KiB pages
 * (a read costs whole pages: a 256-byte sample mostly lies in one, a 4 KiB
 * one at an unaligned offset always spans two). tests/gates/trunk_check.py
 * recomputes the value from this description alone.
 *
 * What it cannot see: bytes in the middle of a tensor (and the tail of a
 * tensor that does not end its run). Checkpoints differing only there share
 * a fingerprint; `k3 pack-trunk MODEL TRUNK --verify` compares every byte of
 * trunk.bin with the source tensors and finds them. */
#ifndef K3_IO_TRUNK_SOURCE_H
#define K3_IO_TRUNK_SOURCE_H

#include <stdint.h>

#include "io/trunk_format.h"
#include "k3/error.h"

/* Bytes sampled at each end (see above). */
#define K3_TRUNK_SAMPLE 256u

/* Sets the source of every run of m (m from k3_trunk_layout: every tensor
 * has src_fd, src_path and src_off). A sample that cannot be read (after
 * K3_READ_ATTEMPTS tries) is K3_EINVALID "RUN INVALID: reading ...". */
int k3_trunk_source_fingerprint(k3_trunk_manifest *m, k3_err *e);

#endif
