/* read_coded.h - reading a compressed run of a format-3 trunk
 * (io/trunk_format.h: the blocks of io/codec.h, then the block table) into
 * its image, verifying it on the way.
 *
 * Steps: the block table is read and checked (every entry 1 ..
 * K3_CODEC_MAX_STORED, their sum plus the table equal to the stored size)
 * before anything is decoded; then the stored blocks are read in chunks of
 * at most K3_CODED_STAGE bytes into two staging buffers (each chunk through
 * io/read_queue.h: under io_uring several pieces of it in flight), and while chunk
 * c + 1 is being read a helper thread decodes chunk c straight into the
 * destination (its blocks in parallel, OpenMP), hashing each block right
 * after it is decoded, while it is in cache. The destination is the run's
 * image buffer (a ring slot or a pinned run): the layout the forward pass
 * reads is the plain run's, byte for byte.
 *
 * Failures: a read error as k3_file_readv reports it (retried there); a
 * lying table or a block that does not decode is K3_EINVALID with what
 * and where in the message (the caller names the run and says RUN
 * INVALID). A wrong hash is the caller's to judge (*hash is the folded
 * block hashes, io/codec.h). Thread-safe for distinct stage buffers. */
#ifndef K3_IO_READ_CODED_H
#define K3_IO_READ_CODED_H

#include <stddef.h>
#include <stdint.h>

#include "io/direct.h"
#include "k3/error.h"

/* Stored bytes per read: large enough for the disk's speed, small enough
 * that two stages stay a small part of the memory plan. */
#define K3_CODED_STAGE (8u << 20)

/* Bytes of the staging a reader of runs storing at most max_stored bytes
 * needs: two buffers of min(K3_CODED_STAGE, max_stored) with K3_IO_ALIGN
 * slack (so small models do not pay 16 MB). */
static inline size_t k3_coded_stage_bytes(uint64_t max_stored)
{
    uint64_t one = max_stored < K3_CODED_STAGE ? k3_io_align_up(max_stored) : K3_CODED_STAGE;
    return 2 * ((size_t)one + 2 * K3_IO_ALIGN);
}

typedef struct k3_coded_times {
    double decode_seconds;   /* CPU time decoding, summed over threads */
    double hash_seconds;     /* CPU time hashing decoded blocks, summed */
} k3_coded_times;

/* Reads the stored form [off, off + stored) of f (off K3_IO_ALIGN-aligned)
 * and decodes it into dst[0..len); stage (K3_IO_ALIGN-aligned) holds
 * stage_bytes, at least k3_coded_stage_bytes(stored) - or of any larger
 * size: a chunk is then at most stage_bytes / 2 - 2 K3_IO_ALIGN bytes.
 * *hash gets the image's folded block hashes. Times are added to *t. */
int k3_read_coded(k3_file *f, uint64_t off, uint64_t stored, uint8_t *dst, uint64_t len,
                  uint8_t *stage, size_t stage_bytes, uint64_t *hash, k3_coded_times *t,
                  k3_err *e);

#endif
