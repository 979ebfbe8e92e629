/* draft_pack.h - writing a draft trunk (format: model/draft_trunk.h). An
 * offline tool like trunk_pack.h: bin/k3 only (k3 pack-trunk --draft q8),
 * never libk3.a.
 *
 * k3_draft_pack reads every matrix the draft trunk holds from the shards
 * (w from a plan-only open: its runs' pieces name the source tensors),
 * quantizes it row by row (k3_q8_quantize_row or k3_q4_quantize_row: pure
 * functions of the bits, so the same checkpoint always gives the same
 * file; the routers are copied as they are), and writes
 * DIR/draft.bin atomically (util/atomic_file.h: a failed or killed pack
 * leaves the old file or none). The exact trunk (DIR/trunk.bin) and the
 * checkpoint are not touched. A BF16 Inf or NaN in a matrix is K3_EINPUT
 * naming the tensor (its quantization would be meaningless); a failed
 * read is K3_EINVALID (RUN INVALID). Memory: one matrix's scales and a
 * window of at most 64 MB of its rows. */
#ifndef K3_PACK_DRAFT_PACK_H
#define K3_PACK_DRAFT_PACK_H

#include <stdint.h>
#include <stdio.h>

#include "k3/error.h"
#include "model/weights.h"

typedef struct k3_draft_pack_result {
    uint64_t bytes;          /* the file's size */
    size_t matrices;
    uint64_t bf16_bytes;     /* the same matrices' BF16 bytes in the checkpoint */
    double seconds;
} k3_draft_pack_result;

/* kind: K3_DRAFT_KIND_Q8 or _Q4. progress: NULL for none. fp:
 * k3_draft_fingerprint of the checkpoint. */
int k3_draft_pack(const k3_weights *w, uint32_t kind, uint64_t fp, const char *dir,
                  FILE *progress, k3_draft_pack_result *r, k3_err *e);

#endif
