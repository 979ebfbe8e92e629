/* reply.h - reading a generated chat reply back (k3/chat.h, "Reading a
 * reply back"): the assistant message the model writes after the
 * generation prompt, split into reasoning, response text and tool calls
 * as the tokens arrive.
 *
 * The model continues the open assistant message with the same markup the
 * renderer writes:
 *   [reasoning <|close|>think<|sep|>] <|open|>response<|sep|> text
 *   <|close|>response<|sep|> [<|open|>tools<|sep|> <|open|>call tool="NAME"
 *   index="1"<|sep|> <|open|>argument key="K" type="string"<|sep|> value
 *   <|close|>argument<|sep|> ... <|close|>call<|sep|> ... <|close|>tools<|sep|>]
 *   <|close|>message<|sep|>
 * The caller classifies each generated id: the three markup ids go to
 * k3_reply_markup, every other id's bytes to k3_reply_text (the reader
 * never sees the tokenizer, so it is a pure function of what it is fed).
 *
 * Text is routed by the innermost open element: think -> reasoning;
 * response, the message itself or anything unknown -> content (so nothing
 * the model says outside the markup is lost); argument and json bodies ->
 * the current call; text between tool elements is dropped. A call is
 * reported when its element closes, with its arguments as one JSON object
 * text (string-typed values quoted, other values verbatim when they are
 * JSON) or, for a json element, that element's text verbatim. Malformed
 * markup never fails: a close tag matching nothing open is ignored, an
 * unclosed call is never reported. */
#ifndef K3_CHAT_REPLY_H
#define K3_CHAT_REPLY_H

#include <stddef.h>

#include "k3/error.h"
#include "util/json_write.h"

enum { K3_REPLY_REASONING, K3_REPLY_CONTENT };
enum { K3_REPLY_OPEN, K3_REPLY_CLOSE, K3_REPLY_SEP };

/* Where the reader's output goes. Each returns a k3 status; a failure
 * stops the reader and is returned by the k3_reply_* call. */
typedef struct k3_reply_sink {
    void *ctx;
    /* Bytes of reasoning or content (channel K3_REPLY_*), in order; a
     * UTF-8 character may be split across calls. */
    int (*text)(void *ctx, int channel, const char *s, size_t n, k3_err *e);
    /* A complete tool call. */
    int (*call)(void *ctx, const char *name, size_t name_len, const char *args, size_t args_len,
                k3_err *e);
} k3_reply_sink;

#define K3_REPLY_DEPTH 32

typedef struct k3_reply {
    k3_reply_sink sink;
    int mode;                        /* body, open tag, close tag */
    unsigned char kind[K3_REPLY_DEPTH]; /* the open elements, outermost first */
    int depth;
    k3_buf tag;   /* the tag being read (between <|open|> or <|close|> and <|sep|>) */
    k3_buf name;  /* the current call's tool name */
    k3_buf args;  /* the current call's arguments so far */
    k3_buf key;   /* the current argument's key */
    k3_buf value; /* the current argument's or json element's text */
    int nargs, arg_is_string, raw_args;
} k3_reply;

/* Starts reading after a generation prompt that opened the assistant
 * message and then its think element (thinking != 0) or its response
 * element. */
void k3_reply_init(k3_reply *r, int thinking, const k3_reply_sink *sink);

/* One markup id (K3_REPLY_OPEN, _CLOSE or _SEP). */
int k3_reply_markup(k3_reply *r, int which, k3_err *e);

/* The bytes of one ordinary id. */
int k3_reply_text(k3_reply *r, const char *s, size_t n, k3_err *e);

/* Whether a think element is open (the reasoning, its closing tag until
 * the tag's <|sep|> included). */
int k3_reply_thinking(const k3_reply *r);

void k3_reply_free(k3_reply *r);

#endif
