/* trunk_pack.h - writing a packed trunk (format: io/trunk_format.h). An
 * offline tool: src/pack links into bin/k3 (k3 pack-trunk), never into
 * libk3.a (tests/gates/06-lib-contents.sh); the engine only reads trunks.
 *
 * k3_trunk_pack copies every run of a layout (k3_trunk_layout) from the
 * shards into DIR/trunk.bin and writes DIR/trunk.json:
 *
 *  - Lock and clean: DIR is locked (flock) for the pack, so a second pack
 *    into it fails at once; then trunk.bin.tmp and trunk.json.tmp, the
 *    leftovers of a pack that was killed, are removed.
 *  - Up to date? If DIR/trunk.json reads back valid with the same format
 *    version, config hash, tensor table hash and every run's source
 *    fingerprint (io/trunk_source.h, computed from the shards) as the
 *    layout, and DIR/trunk.bin exists with the recorded size, nothing is
 *    written. A trunk of another model or of other weights of the same
 *    config is stale: it is repacked, as after an edit of config.json (the
 *    old trunk stays usable until the new one is published). Nothing more
 *    is checked: re-reading ~109 GB on every run would take minutes.
 *    opts.verify does it on demand: every byte of trunk.bin is compared
 *    with the run images assembled afresh from the source tensors (so it
 *    sees what the sampled fingerprint cannot), and every run's read-back
 *    checksum with trunk.json's.
 *  - Copy: each run is assembled in 16 MB aligned windows (tensors at
 *    their image offsets, alignment gaps zero), hashed (the format-3 block
 *    hashes, io/codec.h: the run's checksum) and written with pwrite at its
 *    4096-aligned offset. With opts.compress each window's 64 KiB blocks
 *    are encoded (in parallel) and appended through an aligned output
 *    buffer, the run's block table after its blocks, and the runs' offsets,
 *    stored sizes and the file size are set as they are written; a reader
 *    thread assembles the next window while the current one is hashed and
 *    written. Shards are read and trunk.bin written with direct I/O where
 *    the file system allows it (unaligned tensor data goes through an
 *    aligned bounce buffer), so packing ~109 GB neither flushes the page
 *    cache nor piles up dirty pages. trunk.bin is first sized with
 *    ftruncate, and 4096-byte blocks that are all zero are not written at
 *    all, so holes in the source (sparse test checkpoints) and padding stay
 *    holes in trunk.bin and cost no disk (they still cost reading time).
 *  - Verify: trunk.bin is fsynced, its cached pages dropped, and every run
 *    re-read (direct I/O where allowed), decoded by the engine's own reader
 *    when compressed (io/read_coded.h: that needs a buffer of the largest
 *    run, as streaming it does), and re-hashed: the checksum read back must
 *    equal the one computed from the source bytes, else nothing is
 *    published. A trunk of format 2, or with the other codec than asked,
 *    is stale and repacked.
 *  - Publish: the data goes to trunk.bin.tmp and the manifest to
 *    trunk.json.tmp; only when both are complete and fsynced is the old
 *    trunk.json removed, trunk.bin.tmp renamed to trunk.bin and then
 *    trunk.json.tmp to trunk.json (directory fsynced). An interrupted pack
 *    therefore leaves either the previous complete trunk or no trunk.json at
 *    all, never a trunk.json describing a partial trunk.bin. A pack that
 *    fails (a full disk, a read error) removes its temporary files; one
 *    that is killed leaves them to the next pack's cleaning. Nothing
 *    partial is ever under the final names.
 *
 * Test hook: with K3_PACK_TEST_KILL_AFTER=N in the environment the process
 * kills itself (SIGKILL) after copying N runs, as an interrupted pack
 * would end (tests/gates/26-trunk.sh). */
#ifndef K3_PACK_TRUNK_PACK_H
#define K3_PACK_TRUNK_PACK_H

#include <stdio.h>

#include "io/trunk_format.h"

typedef struct k3_pack_opts {
    int force;             /* repack even when up to date */
    int verify;            /* up to date: compare every byte with the source tensors */
    int compress;          /* store the runs compressed: 1 codec bf16-huffman
                            * (--compress), 2 bf16-nibble (--compress-fast) */
    FILE *log;             /* progress and summary lines; NULL = silent */
} k3_pack_opts;

typedef struct k3_pack_result {
    int up_to_date;        /* nothing was written */
    uint64_t bytes;        /* run bytes copied (and verified) */
    uint64_t stored;       /* the bytes they take in trunk.bin (padding excluded) */
    double copy_seconds, verify_seconds, total_seconds;
} k3_pack_result;

/* layout: from k3_trunk_layout, config_hash set; its checksums and sources
 * are filled in. dir must exist. Failures are K3_ERUNTIME (exit 1). */
int k3_trunk_pack(k3_trunk_manifest *layout, const char *dir, const k3_pack_opts *opts,
                  k3_pack_result *res, k3_err *e);

#endif
