/* k3/chat.h - chat conversations rendered in Kimi K3's XTML format
 * (docs/MODEL.md §6), byte-exact with the release's encoder
 * (k3-release/chat_vectors.json).
 *
 * A conversation is read from JSON shaped like one chat_vectors case:
 *
 *   {"messages": [...], "tools": [...] or null, "options": {...}}
 *
 * and rendered to SEGMENTS: runs of text each encoded on its own, either
 * structural (the special tokens <|open|> <|sep|> <|close|> <|end_of_msg|>,
 * encoded with special tokens allowed) or text (tag and attribute names,
 * attribute values, message content, reasoning, tool arguments: encoded
 * with special tokens disallowed, so "<|sep|>" typed by a user stays plain
 * text). Segment boundaries matter: the tokenizer never merges across
 * them, so the ids are the concatenation of each segment's encoding. */
#ifndef K3_CHAT_H
#define K3_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"
#include "k3/tokenizer.h"

/* A conversation: messages plus rendering options. Opaque. */
typedef struct k3_chat k3_chat;

/* Reads a conversation from JSON text[0..len). Strict: an unknown key, role
 * or option value, or a value of the wrong type is K3_EINPUT with a message
 * naming it ("messages[2].role: ..."). The accepted shape:
 *   messages: array of objects with "role" one of
 *     system, user  {content, name}
 *     assistant     {content, reasoning_content, tool_calls: [{id, type:
 *                   "function", function: {name, arguments}}]}; arguments
 *                   is a JSON-object string (OpenAI style) or an object
 *     tool          {content, tool_call_id, name}
 *     content, name, reasoning_content, tool_call_id: string or null.
 *   tools: null or an array of tool declarations (any JSON objects).
 *   options: thinking (bool, default true), thinking_effort ("low", "high",
 *     "max" or null), add_generation_prompt (bool, default true),
 *     tool_choice ("auto", "required", "none", null, or a named function
 *     {"type": "function", "function": {"name": N}} with N declared in tools,
 *     rendered as "required"), response_format (null or {"type": "text" |
 *     "json_object"} or {"type": "json_schema", "json_schema": {"schema":
 *     {...}, "strict": bool, ...}}), grammar (k3's extension: a GBNF grammar
 *     the reply must match; nothing is rendered for it). Decoding enforces
 *     tool_choice, response_format and grammar (docs/SERVE.md "Structured
 *     outputs"). */
int k3_chat_read(k3_chat **out, const char *text, size_t len, k3_err *e);

/* k3_chat_read on a file; messages are prefixed with its path. */
int k3_chat_load(k3_chat **out, const char *path, k3_err *e);

void k3_chat_free(k3_chat *c);

/* For a chat loop: an empty conversation with the default options
 * (thinking on, no effort, generation prompt on). */
int k3_chat_new(k3_chat **out, k3_err *e);

/* For a chat loop: thinking mode on or off, and the thinking effort
 * ("low", "high", "max", or NULL for none; K3_EINPUT for anything else). */
int k3_chat_set_thinking(k3_chat *c, int on, const char *effort, k3_err *e);

/* For a chat loop: turn the generation prompt (the opening of the next
 * assistant message) on or off, overriding options.add_generation_prompt. */
void k3_chat_set_generation_prompt(k3_chat *c, int on);

/* For a chat loop: the reply's text must be JSON valid under the JSON
 * Schema json[0..len) (options.response_format json_schema, strict as
 * given: K3_EINPUT when it is not a JSON object), or match the GBNF grammar
 * gbnf[0..len) (options.grammar). Copied. */
int k3_chat_set_json_schema(k3_chat *c, const char *json, size_t len, int strict, k3_err *e);
int k3_chat_set_grammar(k3_chat *c, const char *gbnf, size_t len, k3_err *e);

/* For a chat loop: appends a system or user message ("system"/"user") with
 * content text[0..len) (copied). */
int k3_chat_add_message(k3_chat *c, const char *role, const char *text, size_t len, k3_err *e);

/* For a chat loop: appends an assistant message with content
 * content[0..clen) and reasoning_content reasoning[0..rlen) (copied;
 * reasoning NULL = none). */
int k3_chat_add_assistant(k3_chat *c, const char *content, size_t clen, const char *reasoning,
                          size_t rlen, k3_err *e);

/* One segment: text[off .. off+len) of its k3_chat_segments. */
typedef struct k3_chat_seg {
    size_t off, len;
    int allow_special; /* 1: structural, 0: text (special tokens disallowed) */
} k3_chat_seg;

/* Rendered segments. The segments are stored back to back, so `text` IS
 * the rendered string (the concatenation), NUL-terminated. No segment is
 * empty. Zero-initialise; k3_chat_segments_free releases. */
typedef struct k3_chat_segments {
    char *text;
    size_t len, cap;
    k3_chat_seg *seg;
    size_t n, seg_cap;
} k3_chat_segments;

/* Renders c (replacing whatever out held). Besides running out of memory
 * it fails (K3_EINPUT, naming the message) for the two errors only
 * rendering sees: tool-call arguments that are JSON but not an object, and
 * a tool result that neither a tool_call_id, a name nor its position ties
 * to a call.
 *
 * Reading a reply back: the model continues after the generation prompt
 * with the same markup, e.g. (thinking)
 *   reasoning <|close|> think <|sep|> <|open|> response <|sep|> text
 *   <|close|> response <|sep|> [<|open|> tools ...] <|close|> message <|sep|>
 * and stops at <|end_of_msg|>. Split the generated ids the way segments
 * are split - each special id alone, runs of ordinary ids as text - and
 * the reply parses unambiguously: text never contains a special id (it is
 * encoded with special tokens disallowed), so an element's body always
 * ends at the next <|close|> id, and a tag with its attributes is the text
 * between <|open|> and <|sep|>. */
int k3_chat_render(const k3_chat *c, k3_chat_segments *out, k3_err *e);

void k3_chat_segments_free(k3_chat_segments *s);

/* Token ids of the segments: each encoded with its own allow_special flag,
 * concatenated. *ids is malloc'd (caller frees). */
int k3_chat_encode(const k3_tokenizer *tok, const k3_chat_segments *s, uint32_t **ids,
                   size_t *n, k3_err *e);

#endif
