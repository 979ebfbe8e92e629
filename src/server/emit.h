/* emit.h - OpenAI response bodies: chat completions and text completions,
 * whole or as server-sent events, plus errors and the model list.
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
    size_t cached;             /* prompt tokens reused from the previous request's state */
    double prompt_seconds;     /* feeding the prompt ids the state did not hold */
    double gen_seconds;        /* generating, from the end of the prompt to the last id */
} k3_usage;

typedef struct k3_emit {
    int chat, stream, include_usage;
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
} k3_emit;

/* One id and its log-probability (a piece of the tokenizer: bytes[0..len)). */
typedef struct k3_emit_alt {
    const unsigned char *bytes;
    size_t len;
    double logprob;
} k3_emit_alt;

/* id: the response id ("chatcmpl-..." or "cmpl-..."); model and id are
 * borrowed for the emitter's life. */
void k3_emit_init(k3_emit *em, int chat, int stream, int include_usage, const char *id,
                  long long created, const char *model);
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

/* GET /v1/models: the list of the one model; GET /v1/models/{id}: it alone. */
int k3_emit_models(const char *model, long long created, k3_buf *out, k3_err *e);
int k3_emit_model(const char *model, long long created, k3_buf *out, k3_err *e);

#endif
