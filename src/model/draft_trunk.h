/* draft_trunk.h - a quantized copy of the trunk, held in memory, for the
 * self drafter's forwards (gen/draft_self.c; `k3 pack-trunk MODEL DIR
 * --draft q8` writes it, `--draft-trunk DIR` reads it).
 *
 * What it holds: every BF16 matrix of every layer's run and of lm_head, in
 * the order weights.c binds them (each run's k3_mat_slots), as Q8
 * (core/kernels.h: int8 per element, a BF16 scale per 32 columns) or Q4
 * (sign-magnitude int4, two a byte, the same scales; every matrix's
 * columns a multiple of 32), but the MoE routers, kept BF16 (draft_trunk.c
 * says why). What it
 * does not: the small vectors (norms, biases, conv taps: fp32 from the
 * checkpoint, as the exact model has them), the embedding (rows from the
 * exact model, resident or read per token) and the routed experts (MXFP4
 * from the expert cache, route_k of them). A state that uses it
 * (k3_state_set_draft_trunk) computes an approximation of the model, for
 * drafts only: verification keeps only what the exact model produces, so
 * outputs never depend on it; its arithmetic still follows the order
 * contract, so drafts are the same at every thread count, table and budget.
 *
 * DIR/draft.bin, little-endian:
 *   [0, 4096) the header: "K3DRAFT\0", u32 version (1), u32 kind (1 = q8, 2 = q4),
 *     u32 block (32), u32 matrices, u64 fingerprint, u64 file size,
 *     u64 payload hash, u64 header hash (XXH64, seed 0, of bytes [0, 48));
 *     zeros after.
 *   then each matrix in bind order (layer by layer, each layer's matrices
 *     in the order weights.c binds them, then lm_head whole: the same
 *     whether the runs are cut into sub-runs or not): its values at a multiple of 64 (q8:
 *     int8 [rows][cols]; q4: [rows][cols/2] bytes), then its BF16 scales
 *     [rows][ceil(cols/32)] at the next multiple of 64 (a router: its BF16
 *     [rows][cols] at a multiple of 64); gaps zero; the file ends after the
 *     last matrix.
 * The payload hash is XXH64 (seed 0) of bytes [4096, file size). The
 * fingerprint ties the file to the checkpoint: XXH64 of the config hash,
 * the tensor table hash and the source fingerprint of every matrix it
 * holds, each taken as a run of its own (io/trunk_source.h: its header and
 * sampled bytes), so that it does not depend on how the trunk's runs are
 * cut (a packed trunk of format 3 binds without sub-runs, 4 with), and a draft
 * trunk of another model or other weights is refused at open, as is one
 * of another kind, version or size, or whose bytes do not hash. */
#ifndef K3_MODEL_DRAFT_TRUNK_H
#define K3_MODEL_DRAFT_TRUNK_H

#include <stddef.h>
#include <stdint.h>

#include "core/kernels.h"
#include "io/run.h"
#include "io/safetensors.h"
#include "k3/error.h"
#include "model/weights.h"

#define K3_DRAFT_FILE "draft.bin"
#define K3_DRAFT_HEADER 4096u
#define K3_DRAFT_VERSION 1u
#define K3_DRAFT_KIND_Q8 1u
#define K3_DRAFT_KIND_Q4 2u

/* One matrix of the file: its layer (n_layers: lm_head) and the offset of
 * its k3_mat in k3_layer_weights, its shape, where its exact BF16 rows are
 * in the checkpoint (src: the bound piece; lm_head's whole tensor also
 * when it is bound in row blocks; dst_off 0), and where its int8 values
 * and scales are in the file (bf16: the MoE router, kept as BF16 values
 * at q_off, no scales). */
typedef struct k3_draft_entry {
    int layer;
    size_t field;
    int64_t rows, cols;
    int bf16;
    k3_run_piece src;
    uint64_t q_off, s_off;
} k3_draft_entry;

/* The layout of a file of `kind` for the bound weights w: entries
 * (malloc'd, *n of them) and the file size. K3_EINPUT when a matrix is a
 * row share (a k3-mpi rank binds part of it: the draft trunk holds whole
 * matrices), or for q4 when a matrix's columns are not a multiple of 32. */
int k3_draft_layout(const k3_weights *w, uint32_t kind, k3_draft_entry **entries, size_t *n,
                    uint64_t *size, k3_err *e);

/* The size of DIR/draft.bin for w, of the kind its header names (q8 when
 * it cannot be read: opening it says why), 0 when w has no layout: what
 * the plan counts. */
uint64_t k3_draft_trunk_bytes(const char *dir, const k3_weights *w);

/* "q8", "q4", or NULL for another kind. */
const char *k3_draft_kind_name(uint32_t kind);

/* The fingerprint (above) of the checkpoint in model_dir as bound in w.
 * Reads a few hundred bytes per run. */
int k3_draft_fingerprint(const char *model_dir, const k3_weights *w, const k3_st_index *ix,
                         uint64_t *fp, k3_err *e);

/* The header (all 4096 bytes) of a file of `size` bytes and n matrices. */
void k3_draft_header_encode(uint8_t out[K3_DRAFT_HEADER], uint32_t kind, uint32_t nmats,
                            uint64_t fingerprint, uint64_t size, uint64_t payload_hash);

typedef struct k3_draft_trunk k3_draft_trunk;

/* Reads DIR/draft.bin whole into memory and checks it against w and the
 * checkpoint's fingerprint fp (k3_draft_fingerprint, taken while w's runs
 * still name the shards): K3_EINPUT naming the file and the fault for a
 * missing file, another kind, version, layout or size, a damaged file
 * (hashes) or another checkpoint (fingerprint). */
int k3_draft_trunk_open(k3_draft_trunk **out, const char *dir, const k3_weights *w, uint64_t fp,
                        k3_err *e);
void k3_draft_trunk_close(k3_draft_trunk *d);
/* Bytes held in memory. */
uint64_t k3_draft_trunk_size(const k3_draft_trunk *d);

/* Layer i of w with its matrices replaced by the draft trunk's (small
 * vectors from w), and lm_head (whole: the file's last matrix). */
void k3_draft_layer_view(const k3_draft_trunk *d, const k3_weights *w, int i,
                         k3_layer_weights *view);
k3_mat k3_draft_lm_head(const k3_draft_trunk *d);

#endif
