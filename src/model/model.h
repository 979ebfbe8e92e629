/* model.h - the engine's internal view of an open model and its state. */
#ifndef K3_MODEL_MODEL_H
#define K3_MODEL_MODEL_H

#include "core/kernels.h"
#include "io/safetensors.h"
#include "io/trunk_file.h"
#include "k3/k3.h"
#include "model/config.h"
#include "model/draft_trunk.h"
#include "model/plan.h"
#include "model/weights.h"
#include "resid/expert_cache.h"
#include "resid/trunk.h"

struct k3_model {
    k3_config cfg;
    k3_st_index *ix;
    k3_weights w;
    k3_plan plan;
    k3_trunk *trunk;          /* layer and lm_head runs */
    k3_trunk_file *trunk_file;/* --trunk: the runs come from its trunk.bin */
    k3_expert_cache *experts; /* NULL when the model has no MoE layer */
    k3_draft_trunk *draft;    /* --draft-trunk: the drafter's quantized trunk, or NULL */
    /* The scratch arena: all of k3_forward's working memory (forward.c,
     * k3_forward_scratch), allocated at open with plan.scratch bytes for
     * plan.max_batch tokens at plan.context positions, and carved anew by
     * each call. It is the model's: one k3_forward at a time per model
     * (calls on different models may run concurrently). NULL when plan_only. */
    unsigned char *arena;
    size_t arena_bytes;
    /* Progress of a forward call (the CLI's layer line, util/progress.h):
     * called on the calling thread before layer li of L (li = 0 .. L-1)
     * and once with li = L when the layers are done. NULL: not called (one
     * pointer test per layer). Must not touch the model or the state. */
    void (*on_layer)(void *ctx, size_t li, size_t L);
    void *on_layer_ctx;
};

/* A block's working memory: buf (64-byte aligned) holds `bytes`, at least
 * the block's k3_*_scratch for the call; mm is the workspace its matrix
 * products use (kernels.h). */
typedef struct k3_work {
    unsigned char *buf;
    size_t bytes;
    const k3_mm_ws *mm;
} k3_work;

/* Bytes of working memory each block needs for a call of T tokens, laid
 * out by the block's one layout function (its file lists every buffer and
 * its shape). Exact, or UINT64_MAX when that does not fit 64 bits, for any
 * config field values. end: the positions the call's last token attends
 * to (the state's pos + T). */
uint64_t k3_kda_scratch(const k3_config *c, uint64_t T);
uint64_t k3_mla_scratch(const k3_config *c, uint64_t T, uint64_t end);
uint64_t k3_moe_scratch(const k3_config *c, uint64_t T);
uint64_t k3_dense_mlp_scratch(const k3_config *c, uint64_t T);
/* The working memory of any k3_forward piece of 1..T tokens whose last
 * attends to at most `end` positions (forward.c): its own buffers, the
 * matmul workspace for `threads` threads, and the largest block's scratch
 * over the first `layers` layers. The plan's scratch line, and the arena,
 * are this at T = max_batch, end = the planned context. */
uint64_t k3_forward_scratch(const k3_config *c, int64_t layers, uint64_t T, uint64_t end,
                            int threads);

/* A scratch arena of `bytes` (model.c): 64-byte aligned, not cleared;
 * free() releases it. NULL with K3_ERUNTIME when it cannot be had. */
unsigned char *k3_arena_alloc(uint64_t bytes, k3_err *e);

/* Where a MoE block gets its routed experts: a resident array indexed by
 * expert id (tests), or the expert cache for `layer`. */
typedef struct k3_expert_source {
    const k3_expert *resident;
    k3_expert_cache *cache;
    int layer;
} k3_expert_source;

/* Per-sequence state. KDA layers keep the last K-1 pre-conv inputs of q, k
 * and v (oldest first) and the recurrent state S [heads][key d][value d];
 * MLA layers keep, per position, the normed KV latent followed by the
 * shared (unrotated) rope key: kv_lora_rank + qk_rope_head_dim floats. */
/* Most layers a state keeps the outputs of for a drafter (k3_state_set_taps). */
#define K3_MAX_TAPS 16

struct k3_state {
    const k3_model *m;
    int64_t pos;
    float **conv;     /* [layer] -> [3][K-1][C], NULL for MLA layers */
    float **S;        /* [layer] -> [NH][D][D], NULL for MLA layers */
    float **kv;       /* [layer] -> [kv_cap][kv_lora + rope], NULL for KDA layers */
    int64_t kv_cap;   /* positions allocated in each kv cache and in ids */
    uint32_t *ids;    /* [kv_cap]: the ids consumed, [0, pos) valid */
    float *last;      /* [vocab]: logits of position pos-1 (valid when pos > 0) */
    uint64_t epoch;   /* changed by reset, load and rewind: older marks are stale */
    struct k3_spec_journal *spec; /* a speculative step's journal (state.c), or NULL */
    int route_k;      /* routed experts per token in this state's forwards: 0 = the
                       * config's (exact); fewer = a self-drafter's approximation */
    int draft_trunk;  /* forwards use the model's draft trunk (a self-drafter's) */
    k3_image_span *img; /* [nimg] the image spans of ids, ascending start; only those
                         * with start < pos count (kept lazily: a reset or rewind
                         * just lowers pos), see k3_state_images */
    size_t nimg, img_cap;
    /* A drafter's taps (k3_state_set_taps): the outputs of layers
     * tap_layer[0..ntaps) (0-based; a layer's output is the next layer's
     * h_in, MODEL.md §4.3 step 7) of every position fed, written by the
     * forward pass itself: [kv_cap][ntaps][hidden], rows [0, pos) valid
     * (a rewind lowers pos, the rows are rewritten as the ids are fed
     * again). NULL, ntaps 0: not kept. */
    float *taps;
    int ntaps;
    int tap_layer[K3_MAX_TAPS];
};

/* Keeps the outputs of the n layers `layers` (0-based, each < the bound
 * layers; n <= K3_MAX_TAPS; n == 0 stops keeping them) of every position
 * fed from now on, in s->taps; the state must be empty (pos 0). K3_EINPUT
 * for a layer outside the model or a state that is not empty. */
int k3_state_set_taps(k3_state *s, const int *layers, int n, k3_err *e);


/* A speculative step (verifying drafts, include/k3/k3.h k3_state_spec_*):
 * the KDA states at its start and, per KDA layer and token fed since, the
 * recurrence's inputs, so the state can be cut back to any prefix of what
 * was fed by replaying only the recurrence. */
typedef struct k3_spec_journal {
    int active;
    int64_t pos0;       /* the state's position at begin */
    size_t cap;         /* tokens it can journal */
    float *snap;        /* the KDA conv and S states at begin (every KDA layer) */
    float **in;         /* [layer] -> [cap][4C + NH]: q, k, v pre-conv, decay input,
                         * beta logits of each token; NULL for MLA layers */
    float *step;        /* [3C + 2D] k3_kda_step's scratch, [C] its output */
} k3_spec_journal;

/* Floats of one token's journal record in a KDA layer: 4C + NH. */
size_t k3_spec_record_floats(const k3_config *c);

/* Makes room for positions [0, need) in every MLA cache and in ids. */
int k3_state_reserve(k3_state *s, int64_t need, k3_err *e);
/* Every MLA cache and ids reallocated to exactly cap positions (>= pos). */
int k3_state_resize(k3_state *s, int64_t cap, k3_err *e);

/* dst becomes a copy of src's whole sequence (state_copy.c): ids, image
 * spans, last logits, KDA states and MLA rows [0, pos), with room for
 * exactly src's positions when dst has less. Both states of one model;
 * dst's marks go stale and a speculative step of dst ends. */
int k3_state_copy(k3_state *dst, const k3_state *src, k3_err *e);
/* Bytes the state holds (its arrays at their capacity, the struct). */
uint64_t k3_state_bytes(const k3_state *s);

/* The key of a state file (state_file.c): checks the header against the
 * model (magic, version, identity, the file's exact size) and reads the
 * ids and image spans, not the rest; the checksum is checked by
 * k3_state_load. *ids and *img are malloc'd (the caller frees them). */
int k3_state_file_key(const k3_model *m, const char *path, uint32_t **ids, size_t *n,
                      k3_image_span **img, size_t *nimg, k3_err *e);

/* Records a completed k3_forward of ids[0..T): appends the ids, keeps the
 * last position's logits row (last_row may be s->last itself) and
 * advances pos. Room was reserved. */
void k3_state_commit(k3_state *s, const uint32_t *ids, size_t T, const float *last_row);

/* Floats of one KDA layer's conv and recurrent state, and of one MLA cache
 * row (shared by state.c and state_file.c). */
size_t k3_state_conv_floats(const k3_config *c);
size_t k3_state_s_floats(const k3_config *c);
size_t k3_state_kv_width(const k3_config *c);

/* AttnRes over n sources of H floats: score_s = rms(s, norm) . proj, and
 * out = sum_s softmax(score)_s * s (raw sources, summed in source order).
 * tmp holds H floats, score n floats. */
void k3_attn_res(float *out, const float *const *src, size_t n, const float *norm,
                 const float *proj, size_t H, float eps, float *tmp, float *score);

/* KDA's recurrence for one token, all heads (kda.c): short conv of the
 * pre-conv projections, gates, L2 norms, decay, delta rule, read. o gets
 * [NH][D] before o_norm. hist is the conv state, S the recurrent state;
 * scratch holds 3*C + 2*D floats. */
void k3_kda_step(const k3_config *c, const k3_kda_weights *w, float *hist, float *S,
                 const float *q_pre, const float *k_pre, const float *v_pre, const float *graw,
                 const float *beta_logit, float *o, float *scratch);

/* MLA attention of one token's queries q [NH][nope+rope] over cache rows
 * [0, npos) (mla.c). o gets [NH][v] before the output gate; scratch holds
 * 2*R + npos floats. */
void k3_mla_attend(const k3_config *c, const k3_mat *kv_b, const float *cache, size_t npos,
                   const float *q, float *o, float *scratch);

/* Router: top k of sigmoid(logit)+bias, ids in ASCENDING expert index with
 * their weights (moe.c). sig is E floats of scratch. */
void k3_route(const k3_config *c, const float *logit, const float *bias, int32_t *ids,
              float *weights, float *sig);

/* The MoE block on T tokens of x [T][H] (moe.c); wk holds
 * k3_moe_scratch(c, T) bytes. */
int k3_moe_block(const k3_config *c, const k3_moe_weights *w, const k3_expert_source *src,
                 const float *x, size_t T, float *out, const k3_work *wk, k3_err *e);

/* Reads K3_EXPERT_ORDER (moe.c): unset or "ready", a token's routed experts
 * are computed as their bytes arrive; "batch", after the whole chunk was
 * read (benchmarks: the same bits either way). K3_EINPUT for anything else.
 * Called by k3_model_open, before any forward pass. */
int k3_moe_order_check(k3_err *e);
/* The same choice in place of the environment (batch nonzero: "batch"),
 * for a benchmark that compares both in one process. Not to be called
 * while a forward pass runs. */
void k3_moe_set_order(int batch);

/* One sequence's rows in a call over several sequences (forward.c): rows
 * [t0, t0 + n) of the call's row-major buffers are the next n tokens of
 * state s, at its positions s->pos... . A call's segments are ordered by
 * t0, adjacent (the first at 0, each ending where the next starts), each of
 * n >= 1 rows and each of a different state. */
typedef struct k3_seg {
    k3_state *s;
    size_t t0, n;
} k3_seg;

/* The attention blocks over the T rows of segments seg[0..nseg) with layer
 * `layer`'s weights in view lw: the projections run once over all T rows
 * (k3_matmul: each row's bits are its one-row product's), the recurrence
 * per segment on that segment's state. x is [T][H] (already normed); out
 * [T][H]; wk holds the block's k3_*_scratch for T (and, for MLA, end = the
 * largest s->pos + n of the segments; each state has room for its
 * positions). A wk smaller than that is K3_ERUNTIME. */
int k3_kda_forward(const k3_config *c, const k3_layer_weights *lw, const k3_seg *seg,
                   size_t nseg, int layer, const float *x, size_t T, float *out,
                   const k3_work *wk, k3_err *e);
int k3_mla_forward(const k3_config *c, const k3_layer_weights *lw, const k3_seg *seg,
                   size_t nseg, int layer, const float *x, size_t T, float *out,
                   const k3_work *wk, k3_err *e);
/* Called before each matrix of a block is used (gate, up, down in turn),
 * with that matrix of the caller's view: when its w is NULL (its sub-run,
 * model/weights.h, is not here yet) it must make the view's matrix
 * resident and set it, else return an error code (the block stops). */
typedef int (*k3_mat_wait)(void *ctx, const k3_mat *m, k3_err *e);
/* The dense SiTU MLP; wait (NULL: every matrix is resident) is called
 * before each of lw's gate, up and down. */
int k3_dense_mlp_forward(const k3_config *c, const k3_layer_weights *lw, const float *x,
                         size_t T, float *out, const k3_work *wk, k3_mat_wait wait, void *ctx,
                         k3_err *e);

#endif
