/* messages.h - POST /v1/messages and /v1/messages/count_tokens (Anthropic's
 * Messages API) as a front end over the chat completions request
 * (translate.h): the body is rewritten into a chat completions body, then
 * parsed by k3_api_parse_chat_request, so a Messages request is the same
 * k3_api_request (kind K3_API_MESSAGES) through the same turn.
 *
 * Fields:
 *   model (required), max_tokens (required but for count_tokens; clamped as
 *     api.h says), messages (required: user / assistant, content a string or
 *     blocks), system (a string or text blocks, one system message first),
 *   content blocks: text; image with a base64 source (a data: URL for the
 *     vision tower) or a url source; tool_use {id, name, input} (assistant);
 *     tool_result {tool_use_id, content: a string or text blocks, is_error}
 *     (user: a tool message each, in place); thinking {thinking, signature}
 *     (assistant: reasoning_content, kept as the format keeps past reasoning;
 *     the signature is not checked); redacted_thinking (dropped: k3 cannot
 *     read it); cache_control on any block or tool is accepted and ignored
 *     (k3 reuses the longest prefix its state holds by itself),
 *   tools: [{name, description, input_schema}] (type absent or "custom";
 *     Anthropic's server tools are refused),
 *   tool_choice {type: auto | any | tool (name) | none} -> "auto", "required",
 *     {"type": "function", "function": {"name"}}, "none" (a named or forced
 *     choice the conversation reader refuses is its 400, never ignored),
 *   stop_sequences (up to 4), temperature, top_p, top_k, stream, metadata
 *     (accepted, ignored), service_tier (ignored),
 *   thinking {type: "enabled", budget_tokens} -> thinking on with effort low
 *     (budget < 8192), high (< 24576) or max; {type: "adaptive"} -> on,
 *     no effort; {type: "disabled"} -> off; absent -> K3's default (on).
 * Any other field is a 400 naming it. */
#ifndef K3_SERVER_MESSAGES_H
#define K3_SERVER_MESSAGES_H

#include <stddef.h>

#include "server/api.h"

/* count: the body of /v1/messages/count_tokens (max_tokens not needed,
 * stream refused). Returns 0 or the error's status (err in OpenAI's
 * terms; emit.h writes it in Anthropic's shape). */
int k3_messages_parse(const char *body, size_t len, const k3_api_limits *lim, int count,
                      k3_api_request *out, k3_api_error *err);

#endif
