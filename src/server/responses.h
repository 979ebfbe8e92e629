/* responses.h - POST /v1/responses (OpenAI's Responses API, the subset
 * Codex and the openai SDK use) as a front end over the chat completions
 * request (translate.h): the same k3_api_request (kind K3_API_RESPONSES)
 * through the same turn.
 *
 * Fields:
 *   model, input (required: a string, one user message, or items:
 *     message {role user | system | developer | assistant, content: a
 *       string or parts input_text / output_text / input_image (image_url)},
 *     function_call {call_id, name, arguments}, function_call_output
 *       {call_id, output: a string or input_text parts}, reasoning {content
 *       reasoning_text parts, else summary summary_text parts}; consecutive
 *       assistant items (reasoning, assistant messages, function calls) are
 *       one assistant turn),
 *   instructions (a system message first), tools (function tools {name,
 *     description, parameters, strict}; tools of other types - web_search,
 *     local_shell, custom - are dropped and logged: k3 runs none of them),
 *   tool_choice ("auto", "none", "required", {type: "function", name} ->
 *     chat's named form), reasoning {effort: none | minimal | low | medium |
 *     high | xhigh (= max), summary (ignored)}, max_output_tokens (clamped,
 *     api.h), temperature, top_p, stream, parallel_tool_calls, text {format:
 *     text | json_object | json_schema {name, schema, strict}, verbosity
 *     (ignored)} -> response_format,
 *   accepted and ignored: store (nothing is ever stored), metadata, user,
 *     include, prompt_cache_key, safety_identifier, service_tier, truncation,
 *     max_tool_calls, stream_options, client_metadata (Codex), background false;
 *   refused (400): previous_response_id and conversation (k3 keeps no
 *     responses: send the whole input), background true, prompt.
 * Extension: return_token_ids (api.h; the response carries prompt_token_ids
 * and token_ids).
 * Any other field is a 400 naming it. */
#ifndef K3_SERVER_RESPONSES_H
#define K3_SERVER_RESPONSES_H

#include <stddef.h>

#include "server/api.h"

int k3_responses_parse(const char *body, size_t len, const k3_api_limits *lim,
                       k3_api_request *out, k3_api_error *err);

#endif
