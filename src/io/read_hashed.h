/* read_hashed.h - one large aligned read that is checksummed as it arrives.
 *
 * Reading a packed run and then hashing it would add the hash time (XXH64,
 * ~0.15 s per GB on one core) to every streamed layer. Here the range is
 * read in K3_HASHED_CHUNK pieces and a helper thread hashes piece k while
 * piece k + 1 is being read, so a verified read takes about as long as the
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
 * 64 KiB block hashed right after its chunk arrives, K3_HASHED_CHUNK being
 * a multiple of the block).
 * *exposed gets the seconds spent waiting for the hash after the last read
 * (the cost verification adds); *hashing the helper's hashing time. */
int k3_read_hashed(k3_file *f, uint64_t off, uint8_t *buf, uint64_t len, int blocks,
                   uint64_t *hash, double *exposed, double *hashing, k3_err *e);

#endif
