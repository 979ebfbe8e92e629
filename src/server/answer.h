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

#include "k3/k3.h"
#include "k3/sample.h"
#include "gen/draft.h"
#include "k3/tokenizer.h"
#include "server/api.h"

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
    k3_sampler sampler;
    uint64_t seeds;            /* answers without a seed get fresh ones from here */
    int spec;                  /* the most drafts per step (k3 serve --spec; 0: off) */
    k3_drafter drafter;        /* k3 serve --draft's drafter (gen/draft.h) */
} k3_answerer;

/* draft, draft_topk: k3_drafter_make's name and route_k. */
int k3_answerer_init(k3_answerer *a, k3_model *m, const k3_tokenizer *tok, int64_t context,
                     int spec, const char *draft, int draft_topk, k3_err *e);
void k3_answerer_free(k3_answerer *a);

/* A request ready for the worker. */
typedef struct k3_answer_job {
    const k3_api_request *req;
    uint32_t *ids;        /* the prompt (malloc'd: the job's owner frees it) */
    size_t n;
    size_t max_tokens;
    int thinking;         /* the prompt opened the think element */
    const char *id;       /* "chatcmpl-..." / "cmpl-..." */
    long long created;
    const char *model_name;
} k3_answer_job;

/* Fills job's req, ids, n, max_tokens and thinking from req: the prompt
 * is the chat rendered in the chat format and encoded, or a completion
 * prompt encoded with special tokens disallowed. max_tokens is the
 * request's (prompt + it must fit the context, else 400
 * context_length_exceeded), or by default what the context leaves, capped
 * by limit (chat: the server's default_tokens) or 16 (completions,
 * OpenAI's default). An empty prompt
 * or one that fills the context is 400. Returns 0 or the error's status
 * (job->ids may be set either way). */
int k3_answer_prompt(const k3_tokenizer *tok, const k3_api_request *req, int64_t context,
                     long limit, k3_answer_job *job, k3_api_error *err);

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
    const char *finish; /* "stop", "length", "tool_calls", "cancelled" or "error" */
    double prompt_seconds; /* feeding the prompt ids the state did not hold */
    double gen_seconds;    /* generating, from the end of the prompt to the last id */
    k3_err error;       /* finish "error": the engine's failure (K3_EINVALID: run invalid) */
} k3_answer_stats;

/* Generates the answer to job (one turn of chat/turn.h) and publishes it. Returns the HTTP status
 * of what was published: 200, or 500 after a failure of the engine (the
 * body, or the last SSE event, is then an error object). */
int k3_answer_run(k3_answerer *a, const k3_answer_job *job, const k3_answer_io *io,
                  k3_answer_stats *st);

#endif
