/* constrain.h - structured outputs: what a request or a command line asks
 * for (a GBNF grammar, a JSON Schema, any JSON object, a conversation's
 * tool_choice / response_format / grammar) as a decoding constraint the
 * turn driver enforces (gen/constraint.h, chat/turn.h).
 *
 * The grammar engine (src/grammar/, docs/GRAMMAR.md) compiles and matches;
 * this file is the one place that decides WHICH grammar a front end's
 * options mean, so `k3 --grammar/--json-schema`, `--chat`, `--batch-file`
 * lines and every server endpoint that builds a k3_chat enforce the same
 * thing the same way:
 *
 *   k3_chat (k3_constrain_chat)       the grammar
 *   -------------------------------   ----------------------------------
 *   tool_choice "required"            the reply is one or more tool calls
 *                                     in K3's XTML syntax, each call's
 *                                     arguments valid under its tool's
 *                                     parameters schema
 *   tool_choice {"function": {name}}  the same, calling that tool only
 *   tools, tool_choice auto (or none  free text, but a tool call the model
 *     given nothing else)             opens has arguments valid under its
 *                                     tool's schema
 *   response_format json_object       the reply's text is a JSON object
 *   response_format json_schema       the reply's text is JSON valid under
 *                                     the schema (strict: a keyword the
 *                                     engine cannot enforce is refused)
 *   options.grammar (GBNF)            the reply's text matches it
 *   thinking                          the reasoning before is free text;
 *                                     the constraint starts after it
 *   tool_choice "none", nothing       no constraint (*out NULL)
 *
 * Fail closed: whatever is asked and cannot be enforced is an error
 * (K3_EINPUT naming the keyword and its JSON pointer, or the grammar's
 * line), except under a non-strict json_schema, whose unenforced keywords
 * are returned as warnings (one per line) and enforced as far as the
 * engine can. A request never runs silently unconstrained. */
#ifndef K3_STRUCTURED_CONSTRAIN_H
#define K3_STRUCTURED_CONSTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "gen/constraint.h"
#include "k3/chat.h"
#include "k3/error.h"
#include "k3/tokenizer.h"
#include "util/json_write.h"

/* The tokenizer's vocabulary as the engine matches it (a trie of every
 * id's bytes): built once per tokenizer, read-only after, shared by every
 * constraint and thread. vocab: the model's size (ids past the
 * tokenizer's are never allowed). */
typedef struct k3_constrain_vocab k3_constrain_vocab;
int k3_constrain_vocab_new(const k3_tokenizer *tok, size_t vocab, k3_constrain_vocab **out,
                           k3_err *e);
void k3_constrain_vocab_free(k3_constrain_vocab *v);

/* A compiled grammar and its matcher: one turn's (not shared). */
typedef struct k3_constrain k3_constrain;

typedef enum {
    K3_CONSTRAIN_GBNF,        /* text is a GBNF grammar (docs/GRAMMAR.md) */
    K3_CONSTRAIN_JSON_SCHEMA, /* text is a JSON Schema's JSON */
    K3_CONSTRAIN_JSON_OBJECT  /* any JSON object (text unused) */
} k3_constrain_kind;

/* The whole generated text (no chat markup: a plain prompt, a completion)
 * constrained to kind/text. strict (JSON Schema): refuse what cannot be
 * enforced; else each such keyword is a line of *warnings (may be NULL
 * only when strict). */
int k3_constrain_new(const k3_constrain_vocab *v, k3_constrain_kind kind, const char *text,
                     size_t len, int strict, k3_constrain **out, k3_buf *warnings, k3_err *e);

/* A chat reply constrained by conversation c's options (the table above);
 * thinking: the generation prompt opened the think element (the reply
 * starts with reasoning). *out is NULL when c asks for nothing. */
int k3_constrain_chat(const k3_constrain_vocab *v, const k3_chat *c, int thinking,
                      k3_constrain **out, k3_buf *warnings, k3_err *e);

/* The constraint the turn driver takes (chat/turn.h k3_turn_params), valid
 * until k3_constrain_free. */
const k3_constraint *k3_constrain_get(k3_constrain *c);

/* Advances c over ids[0..n) already generated under it (a run resumed
 * from a saved state): K3_EINPUT when the grammar refuses one. */
int k3_constrain_replay(k3_constrain *c, const uint32_t *ids, size_t n, k3_err *e);

void k3_constrain_free(k3_constrain *c);

#endif
