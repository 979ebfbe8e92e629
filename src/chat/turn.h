/* turn.h - one turn of generation, the same for every front end.
 *
 * `k3 MODEL --prompt`, `k3 MODEL --chat`, POST /v1/completions and POST
 * /v1/chat/completions all run a turn the same way:
 *
 *   prompt ids (k3_turn_chat_prompt renders and encodes a conversation)
 *     -> k3_turn_feed: the state brought to the prompt, reusing what it holds
 *     -> k3_turn_generate: the decode loop (k3/generate.h) with one list of
 *        end ids (k3_turn_end_ids), each id routed:
 *          an end id                  -> nothing shown (reported, not fed)
 *          chat markup ids            -> the reply reader (chat/reply.h)
 *          every other id's bytes     -> chat: the reply reader; else content
 *        content text -> the stop strings (gen/stop.h) -> a UTF-8 holdback
 *        reasoning text ------------------------------> a UTF-8 holdback
 *        -> the sink (text per channel, tool calls, then the id itself)
 *
 * so every front end ends a turn at the same id for the same reason; it
 * differs only in its sink (a terminal, a JSON report, SSE events). */
#ifndef K3_CHAT_TURN_H
#define K3_CHAT_TURN_H

#include <stddef.h>
#include <stdint.h>

#include "chat/reply.h"
#include "gen/constraint.h"
#include "gen/draft.h"
#include "gen/stop.h"
#include "k3/chat.h"
#include "k3/generate.h"
#include "k3/k3.h"
#include "k3/sample.h"
#include "k3/tokenizer.h"

/* The most drafts one speculative step verifies. */
#define K3_TURN_MAX_SPEC 16

/* The tokenizer's end ids (at most this many). */
#define K3_TURN_MAX_END_IDS 2

/* Why a turn ended. */
typedef enum {
    K3_TURN_END_ID = 1,  /* an end id was generated (k3_gen_is_end) */
    K3_TURN_STOP_STRING, /* a stop string was completed in the content */
    K3_TURN_LENGTH,      /* max_tokens ids were generated */
    K3_TURN_CONTEXT,     /* the sequence reached max_context */
    K3_TURN_CALLER       /* the sink's token callback asked to stop */
} k3_turn_end;

/* "end id", "stop string", "length", "context" or "caller". */
const char *k3_turn_end_name(k3_turn_end end);

/* OpenAI's finish_reason: "stop" (an end id or a stop string; "tool_calls"
 * when the reply made calls), "length" (max_tokens or the context) or
 * "cancelled" (the caller). */
const char *k3_turn_finish_reason(k3_turn_end end, size_t ncalls);

/* Where a turn's output goes. Any callback may be NULL. Each returns a k3
 * status; a failure ends the turn with that error. */
typedef struct k3_turn_sink {
    void *ctx;
    /* Text to show, channel K3_REPLY_REASONING or K3_REPLY_CONTENT: content
     * has passed the stop strings, and no call splits a UTF-8 character
     * (an incomplete character is released only at the end, as it is). */
    int (*text)(void *ctx, int channel, const char *s, size_t n, k3_err *e);
    /* Chat: a complete tool call; its arguments are one JSON object text. */
    int (*call)(void *ctx, const char *name, size_t name_len, const char *args,
                size_t args_len, k3_err *e);
    /* Each generated id, after its text went to text/call, with the logits
     * row it was drawn from ([vocab]) and whether it ends the turn. Sets
     * *stop to end the turn after this id (K3_TURN_CALLER). */
    int (*token)(void *ctx, uint32_t id, const float *logits, int is_end, int *stop,
                 k3_err *e);
    /* Before each forward call of the decode (plain or a verification), so
     * a sink can count the ids each call appended (the prompt's feed is not
     * one of them). May be NULL. */
    void (*forward)(void *ctx);
} k3_turn_sink;

typedef struct k3_turn_params {
    k3_gen_params gen;        /* caps, sampling window, ignore_eos, recompute;
                               * end_ids are filled by k3_turn_generate */
    const k3_tokenizer *tok;  /* NULL: ids only (no text, no tokenizer end ids) */
    int chat;                 /* the prompt is a chat generation prompt: markup ids
                               * go to the reply reader, <|end_of_msg|> ends */
    int thinking;             /* chat: the prompt opened the think element */
    int show_special;         /* the text of special ids other than the chat markup
                               * (reserved ids, media tokens, an ignored end id) is
                               * shown; 0: they add no text (llama.cpp's default) */
    const char *const *stop;  /* [nstop] stop strings, matched in the content */
    size_t nstop;
    /* Speculative decoding: each step verifies up to spec ids the drafter
     * proposes in one forward call and keeps what the sampler itself would
     * have produced (k3/sample.h: a draw depends only on the seed and the
     * position), so the ids, logits and state are those of spec 0. */
    size_t spec;              /* 0: off */
    const k3_drafter *drafter;
    /* A speculative step's state operations: NULL for k3_state_spec_begin
     * and k3_state_spec_end (k3/k3.h); a server whose model operations are
     * relayed to replicas (server/engine.h) passes its own. */
    int (*spec_begin)(k3_state *s, size_t max_tokens, k3_err *e);
    int (*spec_end)(k3_state *s, size_t keep, const float *last_row, k3_err *e);
    /* Grammar-constrained decoding (gen/constraint.h; chat/constrain.h makes
     * one from a grammar, a schema or a conversation's options): every row
     * is masked by it before the draw, the end ids allowed exactly where it
     * may end, and every id reported advances it (an id it refuses fails
     * the turn: never silently unconstrained). Drafts it refuses are cut
     * before verification. NULL: none. Owned by the caller; the turn
     * starts from its state as given (a resumed run replays its ids first).
     * Refused with gen.ignore_eos (the text could never end). */
    const k3_constraint *constraint;
    int open_ended;           /* the constraint's end budget is off: the text need not
                               * close within max_tokens (a run saved to be continued,
                               * k3 --save-state) */
} k3_turn_params;

typedef struct k3_turn_result {
    k3_turn_end end;
    int stop_index;           /* K3_TURN_STOP_STRING: the index in the params' stop[] of
                               * the string that ended the turn; -1 otherwise */
    size_t generated;         /* ids reported, an end id included */
    size_t reasoning;         /* of them, ids read while the think element was open
                               * (chat; its closing tag included): the answer's
                               * reasoning tokens */
    size_t ncalls;            /* tool calls reported */
    size_t forwards;          /* forward calls of the decode (speculative or not) */
    size_t drafted, accepted; /* drafts verified; of them, kept */
    size_t cut;               /* drafts the constraint refused, never verified */
} k3_turn_result;

/* The tokenizer's ids that end a turn: [EOS] always, and <|end_of_msg|>
 * when chat (the config's eos ids end every turn by themselves, see
 * k3_gen_is_end). Fills ids[0..*n); none without a tokenizer. */
void k3_turn_end_ids(const k3_tokenizer *tok, int chat, uint32_t ids[K3_TURN_MAX_END_IDS],
                     size_t *n);

/* Renders conversation c and encodes it: *ids (malloc'd, caller frees),
 * *n, and *thinking = the rendering ends by opening the think element. */
int k3_turn_chat_prompt(const k3_chat *c, const k3_tokenizer *tok, uint32_t **ids, size_t *n,
                        int *thinking, k3_err *e);

/* Brings state s to the sequence ids[0..n) (k3_state_sync, rewinding to
 * mark or 0 where it departs), K3_PREFILL_CHUNK ids per call. cancelled
 * (may be NULL) is asked between calls; when it says yes the feed stops
 * early with K3_OK and *was_cancelled = 1. *common: ids the state shared
 * with ids before; *reused: ids it kept (common, or the mark's position
 * when it had to rewind). The first call reaches past the shared part, so
 * the reuse decision is that of one call for the whole sequence. */
int k3_turn_feed(k3_model *m, k3_state *s, k3_state_mark *mark, const uint32_t *ids,
                 size_t n, int (*cancelled)(void *ctx), void *ctx, size_t *common,
                 size_t *reused, int *was_cancelled, k3_err *e);

/* k3_turn_feed for a prompt with images: embeds[i] (may be NULL) replaces
 * position i's embedding lookup, img[0..nimg) the image spans (k3/k3.h
 * k3_state_sync_embeds): the reuse stops at the first image the state does
 * not share (VISION.md §10.5), and *common says so. */
int k3_turn_feed_embeds(k3_model *m, k3_state *s, k3_state_mark *mark, const uint32_t *ids,
                        const float *const *embeds, size_t n, const k3_image_span *img,
                        size_t nimg, int (*cancelled)(void *ctx), void *ctx, size_t *common,
                        size_t *reused, int *was_cancelled, k3_err *e);

/* What a turn's forward calls cost, measured: one-row calls (plain
 * decoding) and verification calls (their rows), so that a + b * rows can
 * be fitted and the number of drafts chosen (gen/draft.h k3_spec_choose).
 * In a call shared with other sequences (k3_forward_multi) the seconds are
 * the whole call's and the rows this sequence's: the fit's per-call part
 * then carries the others' rows, its per-row part what this sequence's own
 * drafts add, which is what its choice costs. */
typedef struct k3_turn_costs {
    double one_s;              /* seconds of the one-row calls */
    size_t one_n;
    double many_s, many_rows;  /* seconds and rows of the verification calls */
    size_t many_n;
    size_t plain_run;          /* steps in a row without drafting */
} k3_turn_costs;

/* A turn in progress, for a driver that runs the loop itself (several
 * sequences per forward call): k3_turn_begin, then k3_turn_decode_begin
 * (the first id), then per forward call k3_turn_decode_want (this turn's
 * rows: its pending id and, when the cost gate says so, the drafts that
 * follow it) and, after the call, k3_turn_decode_took (each row sampled,
 * routed, the drafts that match kept and the rest rolled back), until it
 * says done; then k3_turn_finish. k3_turn_generate is this loop with one
 * sequence per call: one verify/accept/rollback path for every driver.
 * (k3_turn_step alone routes an id the driver drew itself.) The fields
 * are the driver's own; a k3_turn must not be copied or moved between
 * begin and finish (gen points into it). */
typedef struct k3_turn {
    const k3_turn_params *p;
    const k3_turn_sink *sink;
    const k3_model *m;
    const k3_state *s;        /* the sequence the turn extends */
    k3_gen_params gen;        /* p->gen with the end ids */
    uint32_t end_ids[K3_TURN_MAX_END_IDS];
    k3_reply reply;           /* chat only */
    int64_t markup[3];        /* <|open|> <|close|> <|sep|> as K3_REPLY_OPEN.., or -1 */
    k3_stop stop;
    k3_utf8_stream utf8[2];   /* per channel: K3_REPLY_REASONING, K3_REPLY_CONTENT */
    int last_channel;         /* the channel text last went to, or -1 */
    k3_buf released;          /* scratch: what the stop matcher released */
    unsigned char *out;       /* scratch: what a UTF-8 holdback released */
    size_t out_cap;
    int stopped;              /* a stop string was completed: nothing more is shown */
    k3_turn_result res;       /* so far */
    /* The decode loop (k3_turn_decode_*). */
    k3_sampler *smp;
    size_t spec;              /* the most drafts a step (0: off) */
    int spec_always;          /* K3_SPEC_ALWAYS=1 (tests): ask for spec drafts every step */
    float *logits;            /* [spec + 1][vocab]: the rows of this turn's last call */
    uint32_t feed[K3_TURN_MAX_SPEC + 1]; /* the pending id, then its drafts */
    size_t nfeed;             /* rows of the pending call (0: none wanted yet) */
    uint32_t *seq;            /* [seq_cap] the drafter's view of the sequence */
    size_t seq_cap;
    k3_turn_costs costs;
    double call_t0;           /* when the pending call's rows were handed out */
    /* p->constraint: */
    float *masked;            /* [vocab] scratch: the row being drawn from, masked */
    uint32_t *ends;           /* [nends] every id that ends the turn (k3_gen_is_end) */
    size_t nends;
} k3_turn;

/* Starts a turn extending s (which must hold the prompt). K3_EINPUT for a
 * chat turn without the chat format's special tokens. */
int k3_turn_begin(k3_turn *t, const k3_model *m, const k3_state *s, const k3_turn_params *p,
                  const k3_turn_sink *sink, k3_err *e);

/* The next generated id, drawn from logits with the state not yet fed:
 * routes it to the sink and sets *done when the turn ends with it (then
 * t->res.end says why). */
int k3_turn_step(k3_turn *t, uint32_t id, const float *logits, int *done, k3_err *e);
/* The same for an id at sequence position pos (a speculative step's state
 * is ahead of the ids it reports). */
int k3_turn_step_at(k3_turn *t, uint32_t id, const float *logits, int64_t pos, int *done,
                    k3_err *e);

/* The decode loop's start, once s holds the prompt (its last logits):
 * the first id is drawn with smp and routed; *done when the turn ends
 * with it (or max_tokens is 0). spec: p->spec when p->drafter is set,
 * else 0 (at most K3_TURN_MAX_SPEC; 0 under recompute). */
int k3_turn_decode_begin(k3_turn *t, k3_state *s, k3_sampler *smp, int *done, k3_err *e);

/* The turn's rows for the next forward call, into *seq (state s; the
 * caller may put it among other sequences of one k3_forward_multi): the
 * pending id alone (logits: its row), or, when the cost gate chooses
 * drafts and the drafter proposes some, the id and its drafts with every
 * row's logits (k3_state_spec_begin done on s). The sink's forward
 * callback is called. */
int k3_turn_decode_want(k3_turn *t, k3_model *m, k3_state *s, k3_seq *seq, k3_err *e);

/* After the call that fed k3_turn_decode_want's rows: each row's id is
 * sampled as a plain run would and routed while it equals the next draft;
 * s keeps the pending id and the accepted drafts (k3_state_spec_end), so
 * it is byte for byte the state of feeding them one by one. The id drawn
 * from the last kept row is the next pending one, unless *done. */
int k3_turn_decode_took(k3_turn *t, k3_model *m, k3_state *s, int *done, k3_err *e);

/* Ends the turn: on success (e clear) the held text goes to the sink;
 * *res gets the result; everything the turn holds is freed. Returns e's code. */
int k3_turn_finish(k3_turn *t, k3_turn_result *res, k3_err *e);

/* Generates one turn from s's last logits (the caller fed the prompt): the
 * loop of k3/generate.h over k3_turn_step. On return s holds the sequence
 * minus the last id reported. */
int k3_turn_generate(k3_model *m, k3_state *s, k3_sampler *smp, const k3_turn_params *p,
                     const k3_turn_sink *sink, k3_turn_result *res, k3_err *e);

#endif
