/* trunk_format.h - the packed trunk: trunk.bin and its manifest trunk.json.
 *
 * `k3 pack-trunk MODEL_DIR TRUNK_DIR` copies every run the engine reads (each
 * layer's matrices in the image layout weights.c describes, lm_head, and the
 * embedding as a run of its own) into TRUNK_DIR/trunk.bin, so that a
 * streamed layer is ONE aligned read instead of a dozen unaligned ones from
 * several shards, and direct I/O can be used.
 *
 * trunk.bin: the runs back to back in manifest order, each starting at a
 * multiple of K3_TRUNK_ALIGN and its tail zero-padded to the next multiple
 * (the file size is a multiple too). A run's bytes are its image exactly as
 * the engine builds it in memory: every tensor at its offset, the gaps the
 * 64-byte alignment leaves between tensors zero. Nothing else is in the
 * file: trunk.json says where everything is.
 *
 * trunk.json (version 4, what k3 pack-trunk writes), every member required:
 *   {"format": "k3-trunk", "version": 4, "checksum": "xxh3-blocks",
 *    "codec": "none", "bf16-huffman" or "bf16-nibble",
 *    "config_hash": HEX16,        XXH64 of the bytes of the model's config.json
 *    "tensor_table_hash": HEX16,  XXH64 of the canonical table text (below)
 *    "align": 4096, "file": "trunk.bin", "file_size": N,
 *    "runs": [{"name": "layer 0", "offset": N, "length": N, "stored": N,
 *              "checksum": HEX16,  the run image's block hashes folded
 *                                  (io/codec.h: XXH3-64 of each 64 KiB block
 *                                  of the DECODED image, then of those hashes)
 *              "source": HEX16,    fingerprint of the tensors it was packed from:
 *                                  shard, offset, sampled bytes (io/trunk_source.h)
 *              "tensors": [{"name": S, "dtype": "BF16", "shape": [R, C],
 *                           "offset": N}, ...]},    offset within the run
 *             ..., {"name": "lm_head", ...}, {"name": "embedding", ...}]}
 * A per-rank trunk (k3 pack-trunk --rank-of R/N: the rows rank R of N
 * binds, core/row_split.h) has one more top-level member,
 *   "rank_of": {"rank": R, "ranks": N}    (0 <= R < N, N >= 2)
 * and each tensor the split cuts has "rows": [LO, HI] after its "offset":
 * only those rows of its [D0, D1] shape are in the run ((HI - LO) x D1
 * elements; possibly none). A whole trunk has neither member.
 * "length" is the run image's bytes, "stored" the bytes it takes in
 * trunk.bin (from "offset"; the file holds it padded to K3_TRUNK_ALIGN).
 * With codec "none" stored == length and the bytes are the image. With
 * "bf16-huffman" (k3 pack-trunk --compress) or "bf16-nibble" (--compress-fast)
 * every run is stored as its K = ceil(length / 65536) blocks (io/codec.h:
 * each block raw or with its BF16 exponents Huffman-coded, or as 4-bit
 * nibbles with escapes), back to back, followed by the block table:
 * K little-endian u32, the stored length of each block in order. So
 * stored = sum(table) + 4 K; the reader checks that, and each entry, before
 * it decodes anything (a lying table is RUN INVALID, exit 4), and every
 * decoded block is hashed, so a block that decodes to other bytes fails the
 * run's checksum (RUN INVALID). The table is at the end so the packer can
 * write a run in one pass.
 *
 * Version 4's runs are the engine's sub-runs (model/weights.h): a dense
 * layer's MLP matrices are runs of their own ("layer N/gate", "layer
 * N/up", "layer N/down", after "layer N"), and lm_head is a run per row
 * block ("lm_head/J", J from 0), whose one tensor has "rows": [LO, HI]
 * (in a whole trunk too). Each is a run like any other: its own
 * checksum, source fingerprint and (compressed) block table.
 * Version 3 (still read, and written for runs bound whole: K3_SUBRUNS=0
 * or a per-rank trunk) is the same with every run whole ("layer N",
 * "lm_head"); the engine binds whole runs to read it.
 * Version 2 (still read): "checksum": "xxh64", no "codec" and no "stored"
 * (runs are plain), each run's checksum XXH64 (seed 0) of its image.
 * Version 1 (no "source") and any other version are refused with K3_EINPUT
 * telling the user to repack.
 * HEX16 is 16 lower-case hex digits (64-bit values do not fit JSON numbers
 * that every reader keeps exact). Run names are "layer N" (and its parts
 * above), "lm_head" or "lm_head/J", "embedding".
 *
 * Canonical table text: for each run in order, the line
 * "run NAME LENGTH\n", then for each of its tensors in order
 * "tensor NAME DTYPE D0xD1x... OFFSET\n" (decimal numbers), where a split
 * tensor's line ends " rows LO HI\n" instead; a per-rank trunk's text
 * starts with the line "rank_of R N\n". Hashing the
 * layout (run lengths, offsets) as well as names, dtypes and shapes means a
 * change in how weights.c lays out an image also makes a trunk stale.
 *
 * What the manifest cannot see: weights that differ from the packed ones
 * only where the source fingerprint does not sample (the middle of a
 * tensor); `k3 pack-trunk --verify` compares every byte. */
#ifndef K3_IO_TRUNK_FORMAT_H
#define K3_IO_TRUNK_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "io/run.h"
#include "io/safetensors.h"
#include "k3/error.h"

#define K3_TRUNK_VERSION 4     /* written; 2 and 3 are read too */
#define K3_TRUNK_CODEC_NAME "bf16-huffman"
#define K3_TRUNK_CODEC_NIBBLE_NAME "bf16-nibble"
#define K3_TRUNK_ALIGN 4096u
#define K3_TRUNK_BIN "trunk.bin"
#define K3_TRUNK_JSON "trunk.json"
#define K3_TRUNK_EMBED_RUN "embedding"

static inline uint64_t k3_trunk_align_up(uint64_t x)
{
    return (x + K3_TRUNK_ALIGN - 1) / K3_TRUNK_ALIGN * K3_TRUNK_ALIGN;
}

typedef struct k3_trunk_tensor {
    const char *name;
    k3_dtype dtype;
    uint32_t ndim;
    int64_t shape[K3_MAX_DIMS];
    uint64_t offset;         /* in the run image */
    uint64_t nbytes;
    /* split != 0 (a per-rank trunk): only rows [row_lo, row_hi) of the
     * [shape[0], shape[1]] matrix are stored, so nbytes is their bytes. */
    int split;
    int64_t row_lo, row_hi;
    /* Where the packer copies it from (layouts made from a model only). */
    const char *src_path;
    int src_fd;              /* src_path opened by the shard index */
    uint64_t src_off;        /* absolute byte offset in src_path */
} k3_trunk_tensor;

typedef struct k3_trunk_run {
    const char *name;
    uint64_t offset;         /* in trunk.bin, a multiple of K3_TRUNK_ALIGN */
    uint64_t length;         /* image bytes */
    uint64_t stored;         /* bytes in trunk.bin (the file holds it padded) */
    uint64_t checksum;       /* (see above, by version); 0 until packed */
    uint64_t source;         /* fingerprint of its source tensors (io/trunk_source.h) */
    k3_trunk_tensor *tensors;/* by offset */
    size_t ntensors;
} k3_trunk_run;

typedef struct k3_trunk_manifest {
    int version;
    int codec;               /* K3_RUN_PLAIN, K3_RUN_BF16 or K3_RUN_BF16_NIBBLE
                              * (io/run.h), every run */
    int rank, ranks;         /* ranks > 1: packed for rank `rank` of `ranks` (its rows
                              * only, "rank_of"); ranks 0: a whole trunk */
    uint64_t config_hash, table_hash, file_size;
    k3_trunk_run *runs;
    size_t nruns;
    void *doc;               /* the parsed trunk.json the names point into, or NULL */
    void *blocks;            /* the runs' and tensors' storage */
} k3_trunk_manifest;

/* XXH64 of MODEL_DIR/config.json's bytes. */
int k3_trunk_config_hash(const char *model_dir, uint64_t *hash, k3_err *e);

/* The layout a trunk packed from these runs has: runs[0..nruns) in order
 * (names and tensors from their pieces: every piece must name its tensor;
 * a piece holding a row range of its 2-D tensor, as weights.c binds a
 * rank's share, becomes a split tensor), rank and ranks as given (ranks 0:
 * no row split; then no piece may be a share),
 * then the embedding tensor `embed` as the run "embedding"; offsets in
 * trunk.bin assigned (for plain runs: stored = length; a compressing packer
 * reassigns them as it writes), version K3_TRUNK_VERSION, codec plain,
 * checksums and sources 0, table hash set. config_hash
 * is the caller's (k3_trunk_config_hash), and so are the sources
 * (k3_trunk_source_fingerprint). Names point into ix. */
int k3_trunk_layout(k3_trunk_manifest *m, const k3_run *runs, size_t nruns,
                    const k3_st_index *ix, const k3_tensor_info *embed, int rank, int ranks,
                    k3_err *e);

/* Reads and validates DIR/trunk.json: every member present and typed,
 * version supported, runs aligned, in order, inside file_size and not
 * overlapping, tensors inside their run, and the recorded table hash equal
 * to the table's. K3_EINPUT naming the file and the fault otherwise. */
int k3_trunk_manifest_read(k3_trunk_manifest *m, const char *dir, k3_err *e);
/* Writes m as trunk.json text to path (created or truncated) and fsyncs it. */
int k3_trunk_manifest_write(const k3_trunk_manifest *m, const char *path, k3_err *e);
void k3_trunk_manifest_free(k3_trunk_manifest *m);

/* The run called name, or NULL. */
const k3_trunk_run *k3_trunk_find_run(const k3_trunk_manifest *m, const char *name);

/* Compares the names, dtypes, shapes, offsets and lengths of two runs (a
 * run the engine binds against the same run in a trunk.json). Returns 0 when
 * equal, else 1 with the first difference written to why. */
int k3_trunk_run_differs(const k3_trunk_run *want, const k3_trunk_run *got, char *why,
                         size_t whylen);

/* "0123456789abcdef" (17 bytes with the NUL). */
void k3_trunk_hex(uint64_t v, char out[17]);

#endif
