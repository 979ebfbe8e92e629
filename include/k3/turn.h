/* k3/turn.h - one chat turn, the way `k3 MODEL --chat` and `k3 serve` run
 * it, for a program that links libk3: render the conversation, bring the
 * state to it (reusing what the state already holds), generate with the
 * release's end rules (the config's eos ids, [EOS] and <|end_of_msg|>),
 * and read the reply back into content, reasoning and tool calls.
 *
 *   k3_chat *c;  k3_chat_new(&c, &e);  k3_chat_add_message(c, "user", ...);
 *   k3_chat_reply r;
 *   k3_chat_turn(m, s, tok, c, &smp, &params, on_text, ctx, &r, &e);
 *   ... r.content, r.reasoning, r.calls, r.finish_reason ...
 *   k3_chat_add_assistant(c, r.content, r.content_len, r.reasoning, ...);
 *   k3_chat_reply_free(&r);
 *
 * The ids are those of the CLI's chat and the server for the same
 * conversation, sampler and parameters (they run the same turn driver). */
#ifndef K3_TURN_H
#define K3_TURN_H

#include <stddef.h>

#include "k3/chat.h"
#include "k3/generate.h"
#include "k3/k3.h"
#include "k3/sample.h"
#include "k3/tokenizer.h"

/* A tool call of the reply: both strings NUL-terminated, malloc'd;
 * arguments is one JSON object text. */
typedef struct k3_chat_call {
    char *name;
    char *arguments;
} k3_chat_call;

/* What a turn produced. Every string is NUL-terminated and malloc'd ("" when
 * the channel stayed empty); k3_chat_reply_free releases them. */
typedef struct k3_chat_reply {
    char *content;
    size_t content_len;
    char *reasoning;          /* the thinking channel */
    size_t reasoning_len;
    k3_chat_call *calls;
    size_t ncalls;
    size_t prompt_tokens;     /* the rendered conversation */
    size_t cached_tokens;     /* of them, kept from what the state held */
    size_t generated_tokens;  /* the end id included */
    /* "stop" (an end id), "tool_calls" (an end id after calls), "length"
     * (max_tokens or max_context), or "cancelled" (on_text asked to stop).
     * A static string. */
    const char *finish_reason;
    int ended_in_thinking;    /* not ended by an end id: thinking, and no content yet */
} k3_chat_reply;

/* Text as it is generated: reasoning 1 for the thinking channel, 0 for the
 * content; a call never splits a UTF-8 character. Return 0 to go on,
 * nonzero to end the turn after this text ("cancelled"). */
typedef int (*k3_chat_text_fn)(void *user, int reasoning, const char *s, size_t n);

/* Runs one assistant turn of conversation c (its generation prompt on, the
 * default) on state s: renders and encodes c with tok, brings s to the
 * prompt (what s holds of it is kept, the rest fed; s is reset first when
 * it departs), and generates with smp under p (max_tokens, max_context,
 * ignore_eos, repeat_last_n; p->end_ids are ignored: the turn's own end
 * ids apply). on_text (may be NULL) gets the text as it comes. On return
 * s holds the prompt and the reply but its last id. *out is filled (zero
 * it first or pass one k3_chat_reply_free released). K3_EINPUT for a
 * tokenizer without the chat format's special tokens or a conversation
 * over p->max_context. */
int k3_chat_turn(k3_model *m, k3_state *s, const k3_tokenizer *tok, const k3_chat *c,
                 k3_sampler *smp, const k3_gen_params *p, k3_chat_text_fn on_text, void *user,
                 k3_chat_reply *out, k3_err *e);

void k3_chat_reply_free(k3_chat_reply *r);

#endif
