/* answer.h - one OpenAI answer: a checked request turned into prompt ids,
 * then generated into response bytes.
 *
 * Two halves for two threads. k3_answer_prompt needs only the tokenizer,
 * so a connection thread runs it before queueing (a prompt over the
 * context is refused without waiting for the model). k3_answer_run needs
 * the model and runs on the one worker thread that owns a k3_answerer. */
#ifndef K3_SERVER_ANSWER_H
#define K3_SERVER_ANSWER_H

#include <stddef.h>
#include <stdint.h>

#include "chat/images.h"
#include "k3/k3.h"
#include "k3/sample.h"
#include "gen/draft.h"
#include "k3/tokenizer.h"
#include "server/api.h"
#include "server/prefix_hook.h"

/* What the worker keeps between answers: the model's one state (so a
 * conversation that continues the previous prompt feeds only what is new),
 * a mark at the end of the last prompt (so a regenerated or continued
 * reply rewinds there instead of starting over), and a sampler. */
typedef struct k3_answerer {
    k3_model *model;
    const k3_tokenizer *tok;
    int64_t context;          /* prompt + generated ids never exceed it */
    k3_state *state;
    k3_state_mark *mark;
    k3_state_mark *pmark;     /* where the last prompt departed from what the state
                               * held (a shared system prompt, say): a later prompt
                               * that departs there too rewinds to it */
    k3_sampler sampler;
    uint64_t seeds;            /* answers without a seed get fresh ones from here */
    int spec;                  /* the most drafts per step (k3 serve --spec; 0: off) */
    k3_drafter drafter;        /* k3 serve --draft's drafter (gen/draft.h) */
    k3_prefix_cache *cache;    /* the server's prefix cache, shared by every slot (one
                                * worker thread uses it), or NULL; set after init */
    int64_t eom;               /* <|end_of_msg|>: where snapshot points may fall */
} k3_answerer;

/* draft, draft_topk: k3_drafter_make's name and route_k. */
int k3_answerer_init(k3_answerer *a, k3_model *m, const k3_tokenizer *tok, int64_t context,
                     int spec, const char *draft, int draft_topk, k3_err *e);
void k3_answerer_free(k3_answerer *a);

/* A request ready for the worker. */
typedef struct k3_answer_job {
    const k3_api_request *req;
    uint32_t *ids;        /* the prompt (malloc'd: the job's owner frees it), each image's
                           * pad expanded to its rows */
    size_t n;
    /* Images (server/images.h): span k is the conversation's image image[k]; its
     * hash, rows and the positions' row pointers are set by the worker. */
    k3_image_span span[K3_CHAT_MAX_IMAGES];
    size_t image[K3_CHAT_MAX_IMAGES];
    size_t nspan;
    float *rows;          /* the images' rows (malloc'd) */
    const float **embeds; /* [n] a position's row, or NULL; NULL: no images */
    double encode_seconds; /* the worker's encoding of them (the tower read included) */
    size_t max_tokens;
    int thinking;         /* the prompt opened the think element */
    struct k3_constrain *cons; /* structured outputs (structured/constrain.h): the grammar
                           * the answer is held to, or NULL; the job's owner frees it */
    char *warnings;       /* what a non-strict json_schema could not enforce, one per
                           * line (malloc'd, NUL-terminated), or NULL */
    const char *id;       /* "chatcmpl-..." / "cmpl-..." */
    long long created;
    const char *model_name;
} k3_answer_job;

/* Fills job's req, ids, n, max_tokens and thinking from req: the prompt
 * is the chat rendered in the chat format and encoded (its images placed
 * by server/images.h with vision; NULL: the server takes none), or a
 * completion prompt encoded with special tokens disallowed (or its ids,
 * each checked against the vocabulary). max_tokens is the request's, or by
 * default limit (chat: the server's default_tokens) or 16 (completions,
 * OpenAI's default), clamped to what the context leaves (the turn then
 * ends "length"). An empty prompt or one that fills the context is 400
 * (context_length_exceeded). Returns 0 or the error's status
 * (job->ids may be set either way). */
struct k3_server_vision;
struct k3_constrain_vocab;
int k3_answer_prompt(const k3_tokenizer *tok, const struct k3_server_vision *vision,
                     const k3_api_request *req, int64_t context, long limit,
                     k3_answer_job *job, k3_api_error *err);

/* The request's structured output (structured/constrain.h): a chat's
 * conversation options (tool_choice, response_format, grammar, and the
 * structured-output fields folded into them), or a completion's
 * constraint, compiled for gv into job->cons (NULL when none is asked
 * for), with a non-strict schema's warnings in job->warnings. A grammar
 * or schema that cannot be enforced is a 400 naming it. Returns 0 or the
 * error's status. Call after k3_answer_prompt (job->thinking). */
int k3_answer_constrain(const struct k3_constrain_vocab *gv, const k3_api_request *req,
                        k3_answer_job *job, k3_api_error *err);

/* Where an answer's bytes go. publish takes bytes ready to send (complete
 * SSE events, or the whole JSON body at the end); cancelled says the
 * client is gone. */
typedef struct k3_answer_io {
    void *ctx;
    int (*publish)(void *ctx, const char *s, size_t n, k3_err *e);
    int (*cancelled)(void *ctx);
} k3_answer_io;

typedef struct k3_answer_stats {
    size_t reused;      /* prompt ids the state already held */
    size_t generated;   /* ids generated (the end id included) */
    size_t drafted, accepted; /* drafts verified; of them, kept */
    const char *finish; /* "stop", "length", "tool_calls", "cancelled" or "error" */
    double prompt_seconds; /* feeding the prompt ids the state did not hold */
    double gen_seconds;    /* generating, from the end of the prompt to the last id */
    k3_err error;       /* finish "error": the engine's failure (K3_EINVALID: run invalid) */
} k3_answer_stats;

/* One answer in progress (answer.c), driven by a scheduler that runs
 * several of them per forward call (slots.h):
 *   k3_answer_begin   sets the sampler and emitter and brings the answerer's
 *                     state back to the longest part of the prompt it can
 *                     keep (what it holds, or its mark): st->reused;
 *   k3_answer_want    the rows it needs in the next k3_forward_multi call:
 *                     the next piece of the prompt (at most room ids) or
 *                     the one id it generated last; 0 when it needs none;
 *   k3_answer_advance after that call: takes in the rows, and once the
 *                     prompt is in, samples, routes and publishes the next
 *                     id (chat/turn.h); sets *done when the answer ended;
 *   k3_answer_finish  publishes the end (usage, or an error object) and
 *                     frees it; returns the HTTP status (200, or 500 after
 *                     a failure of the engine: the body, or the last SSE
 *                     event, is then an error object).
 * fail (k3_answer_fail) ends it with the engine's error e (the state is
 * reset: it may be part-way through a call). A client that went away ends
 * the answer at the next advance or want ("cancelled"). With the
 * answerer's spec > 0, want's rows may be the generated id and the drafts
 * to verify after it (chat/turn.h k3_turn_decode_want), and advance keeps
 * what matches (k3_turn_decode_took): the answer is that of spec 0. */
typedef struct k3_answer k3_answer;
int k3_answer_begin(k3_answerer *a, const k3_answer_job *job, const k3_answer_io *io,
                    k3_answer_stats *st, k3_answer **out, k3_err *e);
int k3_answer_want(k3_answer *w, size_t room, k3_seq *seq);
/* Whether its next rows are one generated id (else the prompt's). */
int k3_answer_decoding(const k3_answer *w);
/* Prompt ids it has still to feed. */
size_t k3_answer_prompt_left(const k3_answer *w);
int k3_answer_advance(k3_answer *w, int *done, k3_err *e);
void k3_answer_fail(k3_answer *w, const k3_err *e);
int k3_answer_finish(k3_answer *w);

/* The ids of job's prompt that answerer a's state could keep: its held
 * ids when they are a prefix of the prompt (ids and images alike,
 * k3_state_common with the job's spans), else the later of its two marks
 * within the common part (k3_state_sync's rule, with two marks), else 0.
 * A mark made stale by a rewind to the other one is found so only when
 * the rewind is tried (then the other one, or a reset). */
size_t k3_answer_reusable(const k3_answerer *a, const k3_answer_job *job);

/* begin, then want/advance with one sequence per call until done, then
 * finish: one answer alone. */
int k3_answer_run(k3_answerer *a, const k3_answer_job *job, const k3_answer_io *io,
                  k3_answer_stats *st);

#endif
