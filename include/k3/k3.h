/* k3/k3.h - the k3 engine: Kimi K3's text model on a CPU.
 *
 * Open a checkpoint directory in the release's format, make a state (the
 * per-sequence caches), and feed tokens. Feeding n tokens at once or one at
 * a time gives bit-identical logits: the state carries everything (MLA
 * latent KV cache, KDA short-conv history and recurrent state). */
#ifndef K3_K3_H
#define K3_K3_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "k3/error.h"

typedef struct k3_model k3_model;
typedef struct k3_state k3_state;

/* Positions (prompt + generated tokens) a sequence may hold when the user
 * sets no cap: the CLI, chat, history replay and the server refuse more. */
#define K3_DEFAULT_MAX_CONTEXT 4096

/* Ids per k3_forward call when a front end feeds a long prompt (the CLI,
 * the server, k3_state_sync), and the default max_batch: the largest call
 * the memory plan budgets scratch for. Feeding in pieces of this size, or
 * of any size, gives bit-identical logits (k3_forward). */
#define K3_PREFILL_CHUNK 512

/* How the model is held in memory. None of these changes a computed bit;
 * they trade memory for speed. GB means GiB (2^30 bytes). */
typedef struct k3_model_opts {
    int n_layers;        /* bind and run only the first n layers (diagnostics); 0 = all */
    double budget_gb;    /* total budget (a preset): splits trunk and cache; < 0 = unset */
    double trunk_gb;     /* pinned trunk budget; layers beyond it stream; < 0 = pin all */
    int trunk_layers;    /* pin exactly this many layers (diagnostics); < 0 = use trunk_gb */
    int trunk_ring;      /* ring slots for streamed layers; 0 = default (2) */
    double cache_gb;     /* expert cache budget; < 0 = every expert resident */
    int64_t cache_experts; /* expert cache in experts (diagnostics); > 0 overrides cache_gb */
    int stream_embed;    /* read embedding rows from disk per token */
    int stream_lm_head;  /* stream lm_head through the ring instead of pinning it */
    int64_t max_context; /* positions the KV cache is planned for; 0 = the default */
    int max_batch;       /* tokens per k3_forward piece (longer calls are split):
                          * the scratch planned; <= 0 = K3_PREFILL_CHUNK */
    int spec;            /* drafts a speculative step may verify (0: none): the plan
                          * counts the step's KDA copy, journal and logits rows, once
                          * per sequence */
    int self_draft;      /* with spec: plan the self drafter's second state too */
    int sequences;       /* states run together (k3_forward_multi): the plan counts
                          * each one's KDA state and MLA cache; <= 0 = 1 */
    int no_mem_check;    /* plan, but do not refuse a plan larger than the machine */
    int plan_only;       /* index, bind and plan; load nothing (k3_forward unusable) */
    uint64_t held_bytes; /* what the caller holds for the run beside the model (the
                          * image rows of a prompt, docs/VISION.md §10.4): counted
                          * in the plan's total; 0 = none */
    const char *trunk_dir; /* packed trunk (k3 pack-trunk): layers and lm_head from
                            * DIR/trunk.bin, checksummed; NULL = from the shards */
    int marks;           /* marks each sequence keeps (k3_state_mark_take): the plan
                          * counts each one's KDA copy and logits row; <= 0 = none */
    const char *draft_trunk; /* a quantized copy of the trunk for drafting (k3 pack-trunk
                              * --draft q8): DIR/draft.bin, held resident and counted
                              * by the plan, used by states that ask for it
                              * (k3_state_set_draft_trunk); NULL = none */
} k3_model_opts;

/* Everything resident, nothing streamed. */
void k3_model_opts_default(k3_model_opts *o);

/* Opens MODEL_DIR: reads the config, indexes the shards, binds and checks
 * every tensor, makes the memory plan (K3_EBUDGET if it does not fit) and
 * loads what the plan keeps resident. */
int k3_model_open(k3_model **out, const char *dir, const k3_model_opts *opts, k3_err *e);

/* Cumulative I/O of the run so far (for per-step deltas). */
typedef struct k3_io_counters {
    uint64_t trunk_bytes, expert_bytes;      /* bytes read from disk */
    uint64_t expert_requests, expert_hits;
    double io_wait_seconds;                  /* compute stalled on reads */
} k3_io_counters;
void k3_model_io(const k3_model *m, k3_io_counters *c);

/* Bytes a forward call reads of the trunk (every layer's run and lm_head,
 * resident or streamed: once per call, whatever its rows), and of one
 * routed expert (each row reads the experts it routes to; rows of a call
 * that chose the same expert share one read). */
void k3_model_pass_bytes(const k3_model *m, uint64_t *trunk, uint64_t *expert);

/* Writes every routed-expert request as a line "layer expert hit|miss"
 * (for tools/sim_cache.py); NULL stops. */
void k3_model_set_trace(k3_model *m, FILE *trace);

/* Named memory budgets: ultra 8 GB, laptop 16, desktop 32, workstation 64,
 * server 256, max (everything resident: -1), auto (what the machine has
 * available now). Returns 0 and sets *gb, or -1 for an unknown name. */
int k3_preset_budget(const char *name, double *gb);
/* Prints the presets, and with a model the plan each would make. */
void k3_print_presets(FILE *f);

/* Prints the memory plan and the run's I/O statistics so far. */
void k3_model_print_plan(const k3_model *m, FILE *f);
void k3_model_print_io(const k3_model *m, FILE *f);
/* The same as JSON members (no surrounding braces). */
void k3_model_print_json(const k3_model *m, FILE *f, const char *indent);
void k3_model_close(k3_model *m);

uint32_t k3_model_vocab(const k3_model *m);
/* Tensors in the checkpoint's shards (all of them, vision tower included). */
size_t k3_model_tensor_count(const k3_model *m);
int k3_model_n_layers(const k3_model *m);
/* Routed experts each token uses (the config's num_experts_per_token). */
int k3_model_experts_per_token(const k3_model *m);
/* Generation stops on these ids (the config's eos_token_id list). */
int k3_model_is_eos(const k3_model *m, uint32_t id);

int k3_state_new(k3_state **out, const k3_model *m, k3_err *e);
void k3_state_free(k3_state *s);
/* Forgets the sequence: the next token is position 0. */
void k3_state_reset(k3_state *s);
/* Tokens consumed so far. */
int64_t k3_state_pos(const k3_state *s);

/* Consumes ids[0..n) at the state's next positions. logits receives
 * vocab floats for the last token, or n rows of vocab floats when
 * all_positions is set; with logits NULL only the state keeps the last
 * row (k3_state_logits). An id outside the vocabulary is K3_EINPUT and
 * leaves the state unchanged. A call of more than the model's max_batch
 * ids runs as consecutive pieces of max_batch (the last shorter), with the
 * same bits as one call, so its working memory stays the plan's scratch.
 * The working memory is the model's (an arena allocated at open): one
 * k3_forward at a time per model, from any thread; calls on different
 * models may run concurrently. A failure after the checks (I/O, memory, a
 * non-finite logit) leaves the state part-way through the ids (the pieces
 * before the failing one consumed, the failing one half-applied): reset it
 * or rewind it to a mark before further use. */
int k3_forward(k3_model *m, k3_state *s, const uint32_t *ids, size_t n, float *logits,
               int all_positions, k3_err *e);

/* One sequence of a k3_forward_multi call: the next n ids of `state`,
 * with logits as in k3_forward (NULL; the last row, vocab floats; or, with
 * all_positions, n rows of vocab floats). embeds: NULL, or n pointers, as
 * k3_forward_embeds's (a non-NULL one is position i's input row, hidden_size
 * floats, instead of ids[i]'s embedding: an image's rows). */
typedef struct k3_seq {
    k3_state *state;
    const uint32_t *ids;
    size_t n;
    float *logits;
    int all_positions;
    const float *const *embeds;
} k3_seq;

/* Advances several sequences in one pass over the weights: sequence i
 * consumes seqs[i].ids[0..n) (n >= 1: a prompt chunk, one decode id, a few
 * ids to verify) at its state's next positions. The rows of all sequences
 * share every layer's matrix products and each routed expert's read (the
 * union of the rows that chose it); each sequence's recurrences (KDA conv
 * and recurrent state, MLA cache, position) run on its own state. Every
 * sequence's logits and state are bit-identical to a k3_forward of its ids
 * alone, whatever the other sequences, their order and the model's
 * max_batch. Rows beyond max_batch run as consecutive pieces (a sequence's
 * ids in order), so the working memory is the plan's scratch. The states
 * must be distinct states of this model (K3_EINPUT otherwise; so is any
 * sequence k3_forward would refuse, naming it; then no state changed). The
 * arena and the failure rules are k3_forward's: after a failure past the
 * checks, reset or rewind every state of the call. k3_forward is this with
 * one sequence. */
int k3_forward_multi(k3_model *m, const k3_seq *seqs, size_t n_seqs, k3_err *e);

/* k3_forward with embedding lookups overridden: embeds holds n pointers, and
 * where embeds[i] is not NULL position i takes those hidden_size floats as
 * its input row instead of ids[i]'s embedding (an image's projected rows in
 * place of its placeholder ids, docs/VISION.md §4 step 3); ids[i] is still
 * what the state records. Every other position, and every position of a
 * call with embeds NULL, is exactly k3_forward's. The rows must be finite
 * (K3_EINPUT otherwise, nothing consumed). */
int k3_forward_embeds(k3_model *m, k3_state *s, const uint32_t *ids,
                      const float *const *embeds, size_t n, float *logits, int all_positions,
                      k3_err *e);

/* The ids consumed so far (k3_state_pos of them), and the logits of the
 * last one (vocab floats; NULL when nothing was consumed), so generation
 * can continue from a state without feeding anything. Both stay valid
 * until the state next changes. */
const uint32_t *k3_state_ids(const k3_state *s);
const float *k3_state_logits(const k3_state *s);

/* A mark remembers a state's position p and what cannot be recomputed
 * cheaply (the KDA conv and recurrent states, the last logits). Rewinding
 * to it forgets everything consumed after p: the MLA cache rows [0, p)
 * are still in place because the state only appended since. Cost: the
 * KDA states' size (no KV rows are copied). k3_state_mark_take makes *mark (or
 * overwrites it when not NULL). A mark goes stale when the state is reset,
 * loaded or rewound to another mark; k3_state_rewind refuses a stale
 * mark, or one of another state (K3_EINPUT), and keeps the mark usable. */
typedef struct k3_state_mark k3_state_mark;
int k3_state_mark_take(const k3_state *s, k3_state_mark **mark, k3_err *e);
int64_t k3_state_mark_pos(const k3_state_mark *mark);
int k3_state_rewind(k3_state *s, k3_state_mark *mark, k3_err *e);
void k3_state_mark_free(k3_state_mark *mark);

/* A speculative step, for verifying drafted ids: k3_state_spec_begin
 * remembers the state (its position p and KDA states) and journals the
 * next at most max_tokens ids fed; k3_forward then feeds the candidates
 * (one call, all positions' logits); k3_state_spec_end keeps the first
 * `keep` of the ids fed since begin (keep <= fed) and forgets the rest, so
 * that the state is byte for byte the state of feeding just those ids to
 * the state at p (last_row: the logits of the last kept id, from the
 * verification call). Cutting back costs the KDA recurrence of the kept
 * ids, not a forward pass. No mark may be taken between begin and end
 * (K3_EINPUT); a reset ends the step. The journal stays allocated with the
 * state for the next step. */
int k3_state_spec_begin(k3_state *s, size_t max_tokens, k3_err *e);
int k3_state_spec_end(k3_state *s, size_t keep, const float *last_row, k3_err *e);

/* Routed experts per token in this state's forwards: 0 (the default) is
 * the checkpoint's num_experts_per_token, the exact model; 1 .. that many
 * picks only the top k (weights renormalised over them): an approximation
 * that reads fewer experts, for a drafter's own state (gen/draft.h), never
 * for what is output. K3_EINPUT outside 0 .. num_experts_per_token. */
int k3_state_set_route_k(k3_state *s, int k, k3_err *e);

/* Whether the model was opened with a draft trunk (k3_model_opts). */
int k3_model_has_draft_trunk(const k3_model *m);
/* on != 0: this state's forwards multiply by the draft trunk's quantized
 * matrices instead of the exact trunk (small vectors, embedding and
 * experts stay the checkpoint's): an approximation held in memory, for a
 * drafter's own state, never for what is output. Deterministic like every
 * path (the same bits at every thread count, table and budget). K3_EINPUT
 * when the model has no draft trunk. */
int k3_state_set_draft_trunk(k3_state *s, int on, k3_err *e);

/* Brings the state to the sequence ids[0..n) at the least cost: when what
 * it consumed is a prefix of ids, it feeds only the rest; otherwise it
 * rewinds to `mark` (may be NULL) if the mark's position is within the
 * common prefix, else resets, and feeds from there. *reused receives the
 * positions kept. Afterwards k3_state_logits are ids[n-1]'s. n == 0
 * resets. Feeds in calls of at most K3_PREFILL_CHUNK ids. Results are
 * bit-identical to feeding ids to a fresh state. */
int k3_state_sync(k3_model *m, k3_state *s, k3_state_mark *mark, const uint32_t *ids, size_t n,
                  size_t *reused, k3_err *e);

/* An image's rows in a sequence (docs/VISION.md §4 step 3, §10.5):
 * positions [start, start + n) took projected rows instead of embedding
 * lookups, and hash identifies those rows (XXH64 of their float bytes, as
 * the caller computes it; k3 only compares hashes). Two images of the same
 * size have equal ids (the pads), so prompt reuse compares these too. */
typedef struct k3_image_span {
    int64_t start, n;
    uint64_t hash;
} k3_image_span;

/* k3_state_sync for a sequence whose positions embeds[i] != NULL take rows
 * (k3_forward_embeds; embeds may be NULL), img[0..nimg) its image spans in
 * ascending start. The state keeps what it may reuse: the longest common
 * prefix of ids that also stops at the first image span that is not in
 * both, with the same start and hash (a span the state holds but the
 * sequence lacks counts as different, so does one only the sequence has).
 * Afterwards the state records img's spans (those below its position).
 * k3_state_sync is this with no rows and no spans. */
int k3_state_sync_embeds(k3_model *m, k3_state *s, k3_state_mark *mark, const uint32_t *ids,
                         const float *const *embeds, size_t n, const k3_image_span *img,
                         size_t nimg, size_t *reused, k3_err *e);

/* The prefix of ids[0..n) (with spans img[0..nimg)) that the state could
 * keep, by the rule of k3_state_sync_embeds (no rewind: a count only). */
size_t k3_state_common(const k3_state *s, const uint32_t *ids, size_t n,
                       const k3_image_span *img, size_t nimg);

/* The image spans the state holds (start below its position; the last may
 * extend past it when the state stopped inside an image). */
size_t k3_state_images(const k3_state *s, const k3_image_span **img);

/* Declares the image spans img[0..n) (ascending start) of the sequence the
 * state holds and is about to be fed, for a caller that feeds it itself
 * (k3_forward_multi with embeds, as k3 serve does) instead of through
 * k3_state_sync_embeds: the spans below the state's position must be the
 * ones its ids took, the rest are those its next ids will take. Copies
 * them (K3_ERUNTIME out of memory). */
int k3_state_set_images(k3_state *s, const k3_image_span *img, size_t n, k3_err *e);

/* A state file (format version 2; version 1 files still load) holds: the
 * model's identity (a hash of its configuration, the layer map and
 * dimensions, and a fingerprint of its weights), pos, the ids consumed,
 * the image spans (k3_image_span), the last logits, every KDA conv and
 * recurrent state, the MLA cache rows [0, pos), and an XXH64 checksum of
 * all of it. k3_state_save writes a temporary file, syncs it and renames
 * it over path, so an interrupted save never leaves a damaged file.
 * k3_state_load refuses (K3_EINPUT, saying why) a file of another model, a
 * truncated, corrupted or future-version file; on any failure the state is
 * reset (never half-loaded). Floats are stored in the machine's byte order
 * (every supported target is little-endian). */
int k3_state_save(const k3_state *s, const char *path, k3_err *e);
int k3_state_load(k3_state *s, const char *path, k3_err *e);

#endif
