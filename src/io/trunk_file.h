/* trunk_file.h - the engine's side of a packed trunk (io/trunk_format.h):
 * checks TRUNK_DIR against the model, then serves the runs from trunk.bin.
 *
 * Open refuses, with K3_EINPUT naming every difference it finds, a trunk
 * that is not this model's: trunk.json missing or malformed, another
 * config.json (hash), a run the model uses missing from trunk.json or
 * holding other tensors (names, dtypes, shapes, offsets, length),
 * trunk.bin not of the recorded size, or - the same shape, other weights -
 * a run whose source fingerprint (io/trunk_source.h: sampled bytes of its
 * tensors in the shards, a few small reads per run) differs from the packed
 * one. A sample that cannot be read is K3_EINVALID (RUN INVALID). Only
 * then do every run's pieces become ONE piece: the run's aligned extent of
 * trunk.bin, read through a k3_file opened for direct I/O (buffered where
 * the file system refuses), and the run is marked for verification
 * against its packed checksum, so a corrupted trunk.bin stops the run with
 * K3_EINVALID (resid/trunk.h) instead of computing with wrong weights. A
 * format-3 trunk's runs take its codec (compressed runs are decoded on read,
 * the piece then covers the stored bytes) and its block hashes; format 2's
 * are plain with XXH64 checksums.
 *
 * The embedding is checked too (it is in the tensor table), but the engine
 * still reads it from the shards: its row reads are separate (weights.c). */
#ifndef K3_IO_TRUNK_FILE_H
#define K3_IO_TRUNK_FILE_H

#include "io/run.h"
#include "io/safetensors.h"
#include "k3/error.h"

typedef struct k3_trunk_file k3_trunk_file;

/* runs[0..nruns) are the model's runs as bound (weights.c), embed its
 * embedding tensor; rank of ranks (ranks 0: none) the row split the runs
 * were bound with: a per-rank trunk is refused (K3_EINPUT) unless packed
 * for exactly that rank and count, and a whole trunk when ranks > 0. On
 * success the runs read from trunk.bin; the trunk file must then outlive
 * every use of them (close it after the k3_trunk). On failure the runs are
 * unchanged. */
int k3_trunk_file_open(k3_trunk_file **out, const char *trunk_dir, const char *model_dir,
                       k3_run *runs, size_t nruns, const k3_st_index *ix,
                       const k3_tensor_info *embed, int rank, int ranks, k3_err *e);
void k3_trunk_file_close(k3_trunk_file *tf);

/* The format version of TRUNK_DIR/trunk.json (io/trunk_format.h), or 0
 * when it cannot be read (k3_trunk_file_open then says why). Version 4
 * trunks hold the runs cut as model/weights.h cuts them; 2 and 3 whole. */
int k3_trunk_file_version(const char *trunk_dir);

#endif
