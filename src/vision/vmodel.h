/* vmodel.h - Kimi K3's vision tower and projector (docs/VISION.md §2, §5) in
 * C: the checkpoint's vision_config, its 5 + 6·L_v + 4 tensors held resident
 * (BF16 matrices as stored, norms and the position table decoded to float),
 * and the encoder + projector over packed media items.
 *
 * NUMERICS (VISION.md §6). FP32 arithmetic on exactly decoded BF16 weights;
 * every product through k3_matmul (src/core: one summation order, threads
 * split output rows), so a row's bits do not depend on the thread count or
 * the kernel table; RMSNorm k3_rmsnorm; softmax k3_softmax; tanh k3_tanhf;
 * erf vis_erf (vmath.h). Attention sums over keys in ascending row order
 * (k3_axpy), one query row per task. Computed in double then rounded once
 * to float: the bilinear position table at the item's grid (§5.3), the time
 * embedding and the RoPE angles' cos/sin (§5.4; C library sin, cos, pow in
 * double: a last-bit difference between C libraries is possible in
 * principle, rare since the double result is rounded to float). Held to
 * tools/k3vision_ref.py within 1e-5 relative by gate 17.
 *
 * MEMORY. Resident: every vision tensor (the release's 894,717,952 bytes,
 * VISION.md §2.3) plus, per call, the activations of the packed rows
 * (k3_vision_work_bytes). One k3_vision_encode at a time per k3_vision. */
#ifndef K3_VISION_VMODEL_H
#define K3_VISION_VMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/kernels.h"
#include "k3/error.h"

/* §1.1: the fields of vision_config k3 computes with. */
typedef struct k3_vcfg {
    int p;           /* patch_size */
    int D;           /* vt_hidden_size */
    int layers;      /* vt_num_hidden_layers */
    int heads;       /* vt_num_attention_heads */
    int Q;           /* qkv_hidden_size */
    int d;           /* Q / heads */
    int I;           /* vt_intermediate_size */
    int H0, W0;      /* init_pos_emb_height, _width */
    int T_max;       /* init_pos_emb_time */
    int M;           /* 4·mm_hidden_size (= 4·D) */
    int T;           /* text_hidden_size (= text_config.hidden_size) */
    float eps_p;     /* projector_ln_eps */
    int64_t media_id; /* media_placeholder_token_id */
} k3_vcfg;

/* The encoder norms' eps 2^-7 (VISION.md §5.1, §7 A1). */
#define K3_VISION_EPS_V 0.0078125f

typedef struct k3_vlayer {
    float *norm0, *norm1;          /* [D] */
    k3_mat wqkv, wo, fc0, fc1;     /* [3Q,D], [D,Q], [I,D], [D,I], BF16 */
} k3_vlayer;

typedef struct k3_vision {
    k3_vcfg cfg;
    k3_mat patch;                  /* [D, 3p²] BF16 */
    float *pos;                    /* [H0][W0][D] */
    k3_vlayer *layer;              /* [layers] */
    float *final_norm;             /* [D] */
    k3_mat p0, p2;                 /* [M, M], [T, M] BF16 */
    float *post_norm;              /* [T] */
    uint64_t weight_bytes;         /* bytes of every vision tensor as stored */
    void *arena;                   /* the BF16 matrices, one allocation */
} k3_vision;

/* Reads config.json's vision_config (every field of §1.1 required, the
 * architecture selectors checked) into *c. K3_EINPUT naming the field;
 * "has no vision_config" when the checkpoint has none. */
int k3_vision_config(const char *model_dir, k3_vcfg *c, k3_err *e);

/* Opens the vision tower of the checkpoint in model_dir: the config, then
 * every tensor of §2.2 bound by name with its dtype (BF16) and shape checked
 * (a mismatch names the tensor), read into memory; a NaN or Inf in a norm
 * or the position table is K3_EINPUT naming the tensor. */
int k3_vision_open(k3_vision **out, const char *model_dir, k3_err *e);
void k3_vision_close(k3_vision *v);
/* What k3_vision_open checks (the config, every tensor present with its
 * dtype and shape) without reading them: whether the checkpoint has a
 * vision tower at all (a server asks once, at start). */
int k3_vision_probe(const char *model_dir, k3_err *e);

/* One media item (§1.3): t frames of an h x w patch grid, h and w even,
 * 2 <= h, w <= 512, 1 <= t <= T_max. */
typedef struct k3_vitem {
    int t, h, w;
} k3_vitem;

/* Rows the item adds to the prompt: (h/2)·(w/2) (§5.7). */
int64_t k3_vision_item_rows(const k3_vitem *it);

/* Bytes of working memory k3_vision_encode allocates for these items (at
 * OpenMP's thread count). */
uint64_t k3_vision_work_bytes(const k3_vcfg *c, const k3_vitem *items, size_t n);
/* Bytes of the vision tensors of §2.2 as stored (BF16): what k3_vision_open
 * holds (the release's 894,717,952, VISION.md §2.3). */
uint64_t k3_vision_tensor_bytes(const k3_vcfg *c);

/* §5: patches [Σ t·h·w][3][p][p] (items packed in order, as process.h makes
 * them) -> out [Σ rows][T], item by item, window by window. Items never see
 * each other: encoding them together or one by one gives the same bits.
 * K3_EINPUT for a bad grid; K3_ERUNTIME out of memory. Threads: OpenMP's. */
int k3_vision_encode(k3_vision *v, const k3_vitem *items, size_t n, const float *patches,
                     float *out, k3_err *e);

#endif
