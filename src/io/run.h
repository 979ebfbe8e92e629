/* run.h - a run: one byte image assembled from pieces of files, the unit
 * the dense trunk is read in (resid/trunk.h holds runs in memory; the
 * packed trunk, io/trunk_format.h, stores them back to back).
 *
 * A run is a description of byte ranges only: which bytes of which open
 * file land at which offset of the image. Nothing here knows what the
 * bytes mean (model/weights.c lays tensors out in the image). */
#ifndef K3_IO_RUN_H
#define K3_IO_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "io/direct.h"

typedef struct k3_run_piece {
    int fd;               /* source file, opened by the caller, kept open */
    const char *path;     /* for messages */
    const char *tensor;   /* the tensor it holds (messages, the trunk packer) */
    k3_file *file;        /* verified runs: read through it instead of fd, src_off
                           * and dst_off K3_IO_ALIGN multiples, len rounded up */
    uint64_t src_off;     /* byte offset in the file */
    uint64_t len;
    uint64_t dst_off;     /* byte offset in the run image */
} k3_run_piece;

typedef struct k3_run {
    k3_run_piece *pieces;
    size_t npieces;
    uint64_t bytes;       /* size of the run image */
    const char *name;     /* e.g. "layer 12", for messages */
    int verify;           /* the image must hash to checksum once read */
    int hash;             /* K3_RUN_XXH64: checksum is XXH64 (seed 0) of the image
                           * [0, bytes) (trunk format 2); K3_RUN_XXH3_BLOCKS: the
                           * block hashes of io/codec.h (format 3) */
    uint64_t checksum;
    int codec;            /* K3_RUN_PLAIN: the one piece holds the image;
                           * K3_RUN_BF16 (huffman blocks) or K3_RUN_BF16_NIBBLE
                           * (nibble blocks): it holds the image's compressed
                           * form (io/trunk_format.h), `stored` bytes, decoded
                           * on read */
    uint64_t stored;      /* bytes the piece holds (== bytes for a plain run) */
} k3_run;

enum { K3_RUN_XXH64 = 0, K3_RUN_XXH3_BLOCKS = 1 };
/* The codecs of a run's piece. Both compressed ones are read the same way
 * (io/read_coded.h: the decoder takes every block mode); they differ in the
 * block mode the packer chose, so in speed and size (io/codec.h). */
enum { K3_RUN_PLAIN = 0, K3_RUN_BF16 = 1, K3_RUN_BF16_NIBBLE = 2 };

#endif
