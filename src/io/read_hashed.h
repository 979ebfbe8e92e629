/* read_hashed.h - one large aligned read that is checksummed as it arrives.
 *
 * Reading a packed run and then hashing it would add the hash time (XXH64,
 * ~0.15 s per GB on one core) to every streamed layer. Here the range is
 * read in chunks through io/read_queue.h (K3_HASHED_CHUNK, one at a time, on
 * the threads reader; up to its depth in flight under uring) and a
 * helper thread hashes the chunks that have arrived in order while later
 * ones are being read, so a verified read takes about as long as the
 * slower of reading and hashing, not their sum. */
#ifndef K3_IO_READ_HASHED_H
#define K3_IO_READ_HASHED_H

#include <stdint.h>

#include "io/direct.h"

#define K3_HASHED_CHUNK (32u << 20)

/* Reads [off, off + len) of f into buf (off and buf K3_IO_ALIGN-aligned,
 * buf holding len rounded up to K3_IO_ALIGN; reads are retried as in
 * k3_file_readv) and sets *hash to XXH64 (seed 0) of the len bytes, or with
 * `blocks` set to their format-3 block hashes folded (io/codec.h; each
 * 64 KiB block hashed right after its chunk arrives, every chunk but the
 * last being a multiple of the block).
 * *exposed gets the seconds spent waiting for the hash after the last read
 * (the cost verification adds); *hashing the helper's hashing time. */
int k3_read_hashed(k3_file *f, uint64_t off, uint8_t *buf, uint64_t len, int blocks,
                   uint64_t *hash, double *exposed, double *hashing, k3_err *e);

#endif
