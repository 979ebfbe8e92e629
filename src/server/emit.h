/* emit.h - response bodies: OpenAI chat completions and text completions
 * (emit.c), Anthropic Messages (emit_messages.c) and OpenAI Responses
 * (emit_responses.c), whole or as server-sent events, plus errors and the
 * model list. One k3_emit serves every API: the answer (answer.c) calls the
 * same functions, which hand a Messages or Responses emitter to its file.
 *
 * One k3_emit follows one answer. Streaming, every call appends complete
 * SSE events ("data: {...}\n\n") to out, ready to send: a chat stream
 * starts with a delta carrying the role, then carries
 * delta.reasoning_content / delta.content / delta.tool_calls, a last chunk
 * with finish_reason, a usage chunk (choices: []) when include_usage was
 * asked, and "data: [DONE]". Not streaming, the parts are kept and
 * k3_emit_finish appends the one JSON object. Pure formatting: no I/O. */
#ifndef K3_SERVER_EMIT_H
#define K3_SERVER_EMIT_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"
#include "server/api.h"
#include "util/json_write.h"

typedef struct k3_usage {
    size_t prompt, completion; /* tokens */
    size_t reasoning;          /* of completion, the thinking's (k3_turn_result.reasoning) */
    size_t cached;             /* prompt tokens reused from the previous request's state */
    double prompt_seconds;     /* feeding the prompt ids the state did not hold */
    double gen_seconds;        /* generating, from the end of the prompt to the last id */
} k3_usage;

typedef struct k3_emit {
    k3_api_kind api;
    int chat, stream, include_usage; /* chat: api is not K3_API_COMPLETION */
    char id[48];
    long long created;
    const char *model;
    k3_buf content, reasoning; /* not streaming: the answer so far */
    k3_buf calls;              /* not streaming: the tool calls as JSON array items */
    size_t ncalls;
    int started;               /* streaming chat: the role chunk went out */
    /* logprobs (k3_emit_logprob): the entries not yet sent. Chat: items of
     * logprobs.content; completions: items of tokens, token_logprobs,
     * top_logprobs and text_offset. */
    int logprobs;
    k3_buf lp[4];
    size_t nlp;                /* entries in lp */
    size_t lp_offset;          /* completions: bytes of the ids' text so far */
    const char *warnings;      /* k3_emit_warnings (borrowed), or NULL */
    /* Messages and Responses: the answer is a list of blocks (Anthropic's
     * content blocks, Responses' output items) - reasoning, text, tool
     * calls - each opened by its first piece and closed by the next block
     * or the end; content or reasoning holds the open block's text. */
    size_t prompt, cached;     /* the prompt's ids and of them those reused (k3_emit_prompt) */
    int open;                  /* the open block's channel (K3_REPLY_*), or -1 */
    size_t nblocks;            /* blocks opened so far (the next one's index) */
    k3_buf blocks;             /* the closed blocks as JSON array items */
    size_t seq;                /* Responses: the next event's sequence_number */
    int begun;                 /* streaming: the opening events went out */
    const char *stop_string;   /* the stop string the answer ended at (the request's,
                                * borrowed; answer.c), or NULL */
} k3_emit;

/* One id and its log-probability (a piece of the tokenizer: bytes[0..len)). */
typedef struct k3_emit_alt {
    const unsigned char *bytes;
    size_t len;
    double logprob;
} k3_emit_alt;

/* id: the response id ("chatcmpl-...", "cmpl-...", "msg_...", "resp_...");
 * model and id are borrowed for the emitter's life. */
void k3_emit_init(k3_emit *em, k3_api_kind api, int stream, int include_usage, const char *id,
                  long long created, const char *model);

/* The prompt's size and the part of it reused from the state, before the
 * first text (Anthropic's message_start carries the usage so far). */
void k3_emit_prompt(k3_emit *em, size_t prompt, size_t cached);
void k3_emit_free(k3_emit *em);

/* The answer carries logprobs (called once, after init). */
void k3_emit_want_logprobs(k3_emit *em);

/* The log-probability of a generated id and of the ntop most likely ids
 * at its step, in that order. Chat: an item {token, logprob, bytes,
 * top_logprobs: [{token, logprob, bytes}]} of choices[].logprobs.content;
 * completions: choices[].logprobs {tokens, token_logprobs, top_logprobs
 * (one {token: logprob} object per id), text_offset (bytes into the ids'
 * text)}. Not streaming, every id's entry is in the answer; streaming,
 * each chunk carries the entries added since the previous chunk (an id's
 * text goes out before its entry is added, so its entry rides on the next
 * chunk: the last one carries what is left). A logprob that is not finite
 * is written as -9999.0. */
int k3_emit_logprob(k3_emit *em, const k3_emit_alt *chosen, const k3_emit_alt *top, size_t ntop,
                    k3_err *e);

/* Answer text: channel K3_REPLY_REASONING or K3_REPLY_CONTENT (reply.h);
 * completions have only content. Bytes need not be valid UTF-8
 * (jtext.h); empty text emits nothing. */
int k3_emit_text(k3_emit *em, int channel, const char *s, size_t n, k3_buf *out, k3_err *e);

/* A complete tool call (chat only): name and arguments (JSON text). */
int k3_emit_call(k3_emit *em, const char *name, size_t name_len, const char *args,
                 size_t args_len, k3_buf *out, k3_err *e);

/* The ids of an answer, for requests with return_token_ids (vLLM's
 * extension): the choice gets "token_ids" (the generated ids, an end id
 * included) and the response "prompt_token_ids"; streaming, both ride on
 * the last chunk (the one with finish_reason). */
typedef struct k3_emit_ids {
    const uint32_t *prompt;
    size_t nprompt;
    const uint32_t *generated;
    size_t ngenerated;
} k3_emit_ids;

/* Warnings (lines of text, borrowed until the end) the answer carries as
 * a top-level "warnings" array of strings: in the body, or streamed in a
 * chunk of their own (choices: []) before the finish chunk. Structured
 * outputs use it for what a non-strict json_schema could not enforce. */
void k3_emit_warnings(k3_emit *em, const char *lines);
/* ,"KEY":[id,...] (the ids' lists of every API's answer). */
int k3_emit_id_list(const char *key, const uint32_t *ids, size_t n, k3_buf *b, k3_err *e);

/* The end: finish_reason "stop", "length" or "tool_calls", the usage, the
 * ids when ids is not NULL, and llama-server's "timings" object
 * {prompt_n, prompt_ms, prompt_per_token_ms, prompt_per_second, predicted_n,
 * predicted_ms, predicted_per_token_ms, predicted_per_second} (prompt_n: the
 * prompt ids computed, not the cached ones). Streaming, ids and timings ride
 * on the chunk with the finish reason. */
int k3_emit_finish(k3_emit *em, const char *reason, const k3_usage *u, const k3_emit_ids *ids,
                   k3_buf *out, k3_err *e);

/* {"error": {"message", "type", "param", "code"}}; as an SSE event when sse. */
int k3_emit_error(const k3_api_error *err, int sse, k3_buf *out, k3_err *e);

/* An error in the shape of api: OpenAI's (k3_emit_error), Anthropic's
 * {"type": "error", "error": {"type", "message"}} (an "event: error" when
 * sse), or Responses' (an "event: error" {type, code, message, param} when
 * sse, else OpenAI's). */
int k3_emit_error_as(k3_api_kind api, const k3_api_error *err, int sse, k3_buf *out, k3_err *e);

/* Whether a stream of api ends with "data: [DONE]" (OpenAI's two APIs). */
int k3_emit_has_done(k3_api_kind api);

/* The Messages and Responses halves (emit_messages.c, emit_responses.c):
 * k3_emit_text / call / finish / error_as hand over to these. With ids
 * (return_token_ids), the message object (streaming: message_delta) or
 * the response object carries "prompt_token_ids" and "token_ids". */
int k3_emit_msg_text(k3_emit *em, int channel, const char *s, size_t n, k3_buf *out, k3_err *e);
int k3_emit_msg_call(k3_emit *em, const char *name, size_t nl, const char *args, size_t al,
                     k3_buf *out, k3_err *e);
int k3_emit_msg_finish(k3_emit *em, const char *reason, const k3_usage *u,
                       const k3_emit_ids *ids, k3_buf *out, k3_err *e);
int k3_emit_msg_error(const k3_api_error *err, int sse, k3_buf *out, k3_err *e);
int k3_emit_resp_text(k3_emit *em, int channel, const char *s, size_t n, k3_buf *out, k3_err *e);
int k3_emit_resp_call(k3_emit *em, const char *name, size_t nl, const char *args, size_t al,
                      k3_buf *out, k3_err *e);
int k3_emit_resp_finish(k3_emit *em, const char *reason, const k3_usage *u,
                        const k3_emit_ids *ids, k3_buf *out, k3_err *e);
int k3_emit_resp_error(const k3_api_error *err, int sse, k3_buf *out, k3_err *e);

/* GET /v1/models: the model and its aliases (naliases of them). */
int k3_emit_models_list(const char *model, const char *const *aliases, size_t naliases,
                        long long created, k3_buf *out, k3_err *e);

/* GET /v1/models/{id}: the model alone. */
int k3_emit_model(const char *model, long long created, k3_buf *out, k3_err *e);

#endif
