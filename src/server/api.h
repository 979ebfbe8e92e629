/* api.h - OpenAI request bodies to what k3 generates from: the mapping of
 * POST /v1/chat/completions and POST /v1/completions, as pure functions.
 *
 * Fields (both endpoints unless marked):
 *   model                       the served model's name or an alias (--alias); another
 *                               name is 404 model_not_found (conn.c checks it)
 *   messages (chat)             system / developer (= system) / user / assistant / tool
 *                               messages: content as a string, null or text parts
 *                               ([{"type": "text", "text": ...}], joined with "\n"),
 *                               name, tool_calls, tool_call_id, and the extension
 *                               reasoning_content on assistant messages (a past turn's
 *                               reasoning, kept in the prompt as the format says)
 *   prompt (completions)        a string, encoded with special tokens disallowed, a list
 *                               of one string, or a list of ids (taken as they are)
 *   tools, tool_choice (chat)   as OpenAI ("auto", "none", "required", or one function
 *                               named {"type": "function", "function": {"name"}}),
 *                               rendered as the format's notices and ENFORCED by
 *                               grammar-constrained decoding (docs/SERVE.md "Structured
 *                               outputs"): required / named force a tool call whose
 *                               arguments match the tool's parameters; auto constrains
 *                               the arguments of a call the model opens
 *   response_format             text, json_object or json_schema ({name, schema, strict,
 *                               description}), rendered as the format's notice (chat)
 *                               and enforced; strict true: a keyword decoding cannot
 *                               enforce is a 400 naming it and its JSON pointer; strict
 *                               false: the answer's "warnings" array says what is not
 *   structured-output extensions (at most one of them, and not with a JSON
 *     response_format): grammar, guided_grammar (a GBNF grammar, llama-server's and
 *     vLLM's), json_schema, guided_json (a schema object or its JSON text, enforced as
 *     strict), guided_choice (an array of strings: the answer is exactly one of them)
 *   max_tokens, max_completion_tokens (chat), n_predict (llama-server; -1 = not given)
 *                               >= 1; above the server's --max-tokens (or what the
 *                               context leaves, answer.h) it is clamped there and the
 *                               answer ends "length" when it gets there
 *   temperature [0, 2] (default 1), top_p (0, 1], frequency_penalty and presence_penalty
 *                               [-2, 2] (over the last 64 ids, k3/sample.h), seed (integer),
 *                               stop (a string or
 *                               up to 4 non-empty strings; matched in the reply text, not
 *                               in reasoning or tool calls), stream, stream_options
 *                               {include_usage}
 *   extensions: top_k (>= 0), min_p [0, 1], repetition_penalty (0, 10], ignore_eos
 *     (bool: generate past the end ids, as `k3 --ignore-eos`), return_token_ids (bool:
 *     the answer carries prompt_token_ids and the choice token_ids, as vLLM's), spec
 *     (0..16: speculative decoding's drafts per step, k3 --spec; the same answer); (chat)
 *     thinking (bool, default true, or Moonshot's object {"type": "enabled" |
 *     "disabled", "keep": "all" (what the format does: past reasoning stays in the
 *     prompt), "effort": "low" | "high" | "max"}), chat_template_kwargs {thinking,
 *     enable_thinking: bool} (vLLM's switch; "thinking" wins when both are given),
 *     and reasoning_effort (which overrides thinking.effort): "none" turns thinking off,
 *     "minimal" and "low" ask for low effort, "medium" adds no effort notice (the
 *     release's encoder knows no medium level), "high" and "max" ask for those.
 * tool_choice "required" needs a non-empty tools list (tools declared on system
 * messages count: conversation.h).
 * Accepted and ignored (they change nothing k3 does): user, store, metadata,
 * service_tier, parallel_tool_calls, cache_prompt (k3 always reuses what its
 * state holds), skip_special_tokens (answers never carry special tokens' text),
 * and, noted in the server's log, the llama-server/vLLM knobs listed in api.c
 * (ignorable[]: sampler variants k3 does not have, slot ids, timing switches),
 * min_tokens and stop_token_ids (NOT enforced: logged). Accepted only at their neutral value:
 * n 1, logit_bias {}, logprobs
 * false / 0, top_logprobs 0, echo false, best_of 1, suffix null. Any other
 * field is refused (as OpenAI does); so is a field of the wrong type or out
 * of range. null means "not given" everywhere. */
#ifndef K3_SERVER_API_H
#define K3_SERVER_API_H

#include <stddef.h>
#include <stdint.h>

#include "k3/chat.h"
#include "util/error.h"

#define K3_API_MAX_STOP 4

/* The API a request came in by. Every kind but COMPLETION carries a chat
 * (k3/chat.h) and runs the same turn; they differ in the parse (api.c,
 * messages.c, responses.c) and the emit (emit.c, emit_messages.c,
 * emit_responses.c). */
typedef enum {
    K3_API_CHAT,       /* POST /v1/chat/completions */
    K3_API_COMPLETION, /* POST /v1/completions */
    K3_API_MESSAGES,   /* POST /v1/messages (Anthropic; server/messages.h) */
    K3_API_RESPONSES   /* POST /v1/responses (OpenAI; server/responses.h) */
} k3_api_kind;

/* Names of the fields a request carried that k3 accepts and ignores
 * (llama-server's and vLLM's knobs that change nothing here), for the
 * server's log: "a, b, c", truncated. */
#define K3_API_IGNORED_MAX 256

/* An OpenAI-style error: the body {"error": {message, type, param, code}}. */
typedef struct k3_api_error {
    int status;        /* HTTP status */
    const char *type;  /* "invalid_request_error", "server_error" */
    const char *code;  /* NULL or a code such as "context_length_exceeded" */
    char param[128];   /* the request field at fault; "" for none */
    char message[1024];
} k3_api_error;

/* Sets every field of err; returns err->status. */
int k3_api_fail(k3_api_error *err, int status, const char *code, const char *param,
                const char *fmt, ...) K3_PRINTF(5, 6);

typedef struct k3_api_limits {
    long max_tokens; /* a larger max_tokens is clamped to it (the turn then ends
                      * "length" there) */
} k3_api_limits;

typedef struct k3_api_request {
    k3_api_kind kind;
    k3_chat *chat;     /* chat: the conversation, read and checked (k3/chat.h) */
    char *model;       /* the "model" field (NUL-terminated), or NULL when not given */
    size_t model_len;
    char *prompt;      /* completions: the prompt text (NUL-terminated) */
    size_t prompt_len;
    uint32_t *prompt_ids; /* completions: the prompt as ids ("prompt": [id, ...]),
                           * or NULL (then prompt is the text) */
    size_t nprompt_ids;
    int stream;        /* answer as server-sent events */
    int include_usage; /* stream_options.include_usage */
    long max_tokens;   /* -1 when not given */
    float temperature, top_p, min_p, repeat_penalty;
    float frequency_penalty, presence_penalty; /* [-2, 2], 0 when not given */
    int top_k;
    int has_seed;
    uint64_t seed;
    int ignore_eos;       /* generate past the end ids */
    int spec;             /* drafts verified per step (0..16), -1 when not given */
    int return_token_ids; /* the answer carries its prompt's and its own ids */
    int logprobs;         /* the answer carries each id's log-probability (chat:
                           * "logprobs": true; completions: "logprobs": N) */
    int top_logprobs;     /* and the N most likely ids at each step: chat
                           * "top_logprobs" 0..20, completions "logprobs" 0..5 */
    char *stop[K3_API_MAX_STOP]; /* NUL-terminated, non-empty */
    size_t nstop;
    /* Completions: the structured-output fields (chat: they are folded into
     * the conversation's options, k3/chat.h). kind: "gbnf" (text is a GBNF
     * grammar), "json_schema" (text is the schema's JSON), "json_object"
     * (text NULL), or NULL for none. */
    const char *constraint;
    char *constraint_text;   /* NUL-terminated, malloc'd */
    int constraint_strict;   /* json_schema: refuse what decoding cannot enforce */
    char ignored[K3_API_IGNORED_MAX]; /* fields accepted and ignored, for the log */
} k3_api_request;

/* Whether r carries a chat (every kind but completions). */
int k3_api_is_chat(const k3_api_request *r);

/* Whether key is one of the llama-server/vLLM fields accepted whatever
 * their value and ignored (api.c's list). */
int k3_api_ignorable(const char *key);

/* Notes that field name was accepted and ignored (k3_api_request.ignored). */
void k3_api_note_ignored(k3_api_request *r, const char *name);

/* Parse the JSON body[0..len) of a request into *out (which
 * k3_api_request_free releases, also after a failure). Returns 0, or the
 * HTTP status of the error described in *err (400 for every fault of the
 * request, 500 when out of memory). Pure: no I/O, no global state. */
int k3_api_parse_chat_request(const char *body, size_t len, const k3_api_limits *lim,
                              k3_api_request *out, k3_api_error *err);
int k3_api_parse_completion_request(const char *body, size_t len, const k3_api_limits *lim,
                                    k3_api_request *out, k3_api_error *err);

void k3_api_request_free(k3_api_request *r);

#endif
