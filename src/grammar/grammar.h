/* grammar.h - grammar-constrained decoding (docs/GRAMMAR.md): a compiled
 * grammar, a vocabulary index, and a per-sequence matcher that gives the
 * set of ids allowed next.
 *
 * Three objects, three lifetimes:
 *   k3_grammar      compiled once from GBNF, a JSON Schema, "any JSON object"
 *                   or the chat-reply builder; immutable afterwards, so any
 *                   number of matchers on any threads may share it. It does
 *                   not know the tokenizer: special-token terminals are kept
 *                   by text or id and resolved when a matcher is made.
 *   k3_gram_vocab   built once per tokenizer: every id's bytes, which ids are
 *                   special, and a byte trie over the ordinary ids.
 *                   Immutable after construction; shared read-only.
 *   k3_gram_matcher one sequence's position in one grammar (a set of
 *                   pushdown stacks over bytes, deterministic and bounded,
 *                   with the history needed to roll back). Used by one
 *                   thread at a time; it caches masks for grammar
 *                   positions it has met, so its first mask at a new
 *                   position costs more than the later ones.
 *
 * The language is over BYTES plus SPECIAL-TOKEN terminals. An ordinary id
 * is its bytes: it is allowed when appending them keeps the output a
 * viable prefix of the grammar. A special id (k3_tok_is_special) is never
 * bytes: it is allowed only where the grammar names that id as a token
 * terminal (so ordinary ids spelling "<|open|>" never match the special
 * <|open|>), or where it is one of the matcher's end ids and the grammar
 * may end. Character classes are Unicode code points matched as their
 * UTF-8 bytes, so an id holding part of a character is allowed when the
 * character can be completed.
 *
 * Errors follow k3/error.h: K3_EINPUT for a bad grammar, schema or id
 * (the message names line:column for GBNF, the JSON pointer for schemas),
 * K3_ERUNTIME for lack of memory. Every limit below is enforced and its
 * breach is a K3_EINPUT naming the limit; no input can make compile, mask
 * or accept take unbounded time or memory. */
#ifndef K3_GRAMMAR_GRAMMAR_H
#define K3_GRAMMAR_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"
#include "k3/tokenizer.h"
#include "util/json.h"
#include "util/json_write.h"

/* ---- limits (each breach is K3_EINPUT naming it) ---- */
#define K3_GRAM_MAX_TEXT   (4u << 20) /* bytes of GBNF or schema text */
#define K3_GRAM_MAX_RULES  65536      /* rules after desugaring */
#define K3_GRAM_MAX_ELEMS  (4u << 20) /* grammar elements after desugaring */
#define K3_GRAM_MAX_NEST   128        /* GBNF group / schema nesting depth */
#define K3_GRAM_MAX_REPEAT 4096       /* the m and n of {m,n}, minItems... */
#define K3_GRAM_MAX_STACKS 4096       /* live stacks (ambiguity) per byte */
#define K3_GRAM_MAX_DEPTH  4096       /* frames in one stack (recursion) */

/* ---- compiled grammars ---- */
typedef struct k3_grammar k3_grammar;

/* Whitespace policy of every JSON a grammar here produces (schema,
 * json_object, tool arguments that are not strings): exactly the text
 * Python's json.dumps writes, no free whitespace anywhere.
 *   K3_GRAM_WS_SPACED   separators ", " and ": " (json.dumps defaults; the
 *                       form the release renders tool arguments in)
 *   K3_GRAM_WS_COMPACT  separators "," and ":"
 * Strings: any character except '"', '\\' and controls U+0000..U+001F
 * raw; escapes \" \\ \/ \b \f \n \r \t \uXXXX accepted. Numbers: JSON
 * number syntax (RFC 8259). */
enum { K3_GRAM_WS_SPACED = 0, K3_GRAM_WS_COMPACT = 1 };

/* Options of the JSON Schema compiler. Zero-initialised = not strict,
 * spaced. */
typedef struct k3_gram_schema_opts {
    int strict; /* 1: an unsupported keyword is K3_EINPUT; 0: a warning */
    int ws;     /* K3_GRAM_WS_* */
} k3_gram_schema_opts;

/* GBNF (llama.cpp's dialect, docs/GRAMMAR.md): `name ::= alternatives`,
 * literals "..." with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes, char
 * classes [a-z] [^...], `.` (any character), groups ( ), alternation |,
 * postfix * + ? {m} {m,} {m,n}, # comments; `root` is the start rule.
 * Token terminals: <[ID]> (that id), <TEXT> e.g. <|open|> (the special id
 * whose text is TEXT, resolved by k3_gram_matcher_new), and !<...> (any
 * one id except that one, special ids included). Refused (K3_EINPUT):
 * syntax errors, undefined rules and rules defined twice (with
 * "grammar:LINE:COLUMN:"), a missing root, left recursion (a rule that can
 * reach itself without consuming input; the message names both rules), a
 * root that can never finish, any limit above. */
int k3_gram_from_gbnf(k3_grammar **out, const char *text, size_t len, k3_err *e);

/* JSON Schema (the subset in docs/GRAMMAR.md) as text or as a parsed node
 * (the node is only read during the call). Unsupported keywords: strict ->
 * K3_EINPUT "unsupported keyword 'K' at /json/pointer"; not strict -> that
 * same line plus '\n' appended to *warn (may be NULL) and the keyword
 * ignored. A schema whose language is empty (e.g. false, minimum >
 * maximum) is K3_EINPUT naming the pointer. */
int k3_gram_from_schema(k3_grammar **out, const char *json, size_t len,
                        const k3_gram_schema_opts *opts, k3_buf *warn, k3_err *e);
int k3_gram_from_schema_json(k3_grammar **out, const k3_json *schema,
                             const k3_gram_schema_opts *opts, k3_buf *warn, k3_err *e);

/* Any JSON object (response_format json_object), ws one of K3_GRAM_WS_*. */
int k3_gram_json_object(k3_grammar **out, int ws, k3_err *e);

void k3_gram_free(k3_grammar *g);

/* ---- the chat reply (XTML, src/chat/reply.h) ---- */

/* What the response content must be. */
enum {
    K3_GRAM_CONTENT_FREE = 0, /* any text (any ordinary ids) */
    K3_GRAM_CONTENT_JSON_OBJECT,
    K3_GRAM_CONTENT_SCHEMA, /* content_schema (parsed) */
    K3_GRAM_CONTENT_GBNF    /* content_text[0..content_len) */
};

/* Tool choice. */
enum {
    K3_GRAM_TOOLS_NONE = 0, /* no tools element */
    K3_GRAM_TOOLS_AUTO,     /* content, or tool calls of declared tools */
    K3_GRAM_TOOLS_REQUIRED, /* empty content, then 1..max_calls calls */
    K3_GRAM_TOOLS_NAMED     /* empty content, then exactly one call of tool_name */
};

typedef struct k3_gram_tool {
    const char *name;          /* NUL-terminated */
    const k3_json *parameters; /* a JSON Schema of an object, or NULL = no arguments
                                  constraint beyond "any argument elements" */
} k3_gram_tool;

typedef struct k3_gram_reply_spec {
    int thinking; /* the generation prompt opened <|open|>think<|sep|> (1) or
                     <|open|>response<|sep|> (0), as k3_reply_init */
    int content;  /* K3_GRAM_CONTENT_* */
    const k3_json *content_schema;
    const char *content_text;
    size_t content_len;
    const k3_gram_tool *tools;
    size_t ntools;
    int tool_mode;              /* K3_GRAM_TOOLS_* */
    const char *tool_name;      /* K3_GRAM_TOOLS_NAMED */
    size_t max_calls;           /* calls in one reply (0 = 8); index="1".."N" */
    k3_gram_schema_opts schema; /* strictness and whitespace of every schema here */
} k3_gram_reply_spec;

/* The grammar of the whole reply after the generation prompt, ending
 * after <|close|>message<|sep|> (the matcher's end ids, e.g.
 * <|end_of_msg|>, are allowed exactly there):
 *   thinking: TEXT <|close|>think<|sep|> <|open|>response<|sep|>
 *   then:     CONTENT <|close|>response<|sep|> [TOOLS] <|close|>message<|sep|>
 * TEXT is any ordinary ids (the reasoning is free). TOOLS is
 *   <|open|>tools<|sep|> CALL... <|close|>tools<|sep|>, each CALL
 *   <|open|>call tool="NAME" index="I"<|sep|> ARG... <|close|>call<|sep|>,
 *   each ARG <|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|>
 * with NAME and K escaped as render.c writes attributes (& -> &amp;,
 * " -> &quot;), I counting from 1, T the JSON type name of the value
 * (string, number, boolean, null, array, object) and VALUE the string's
 * raw text (type string) or the value's JSON as json.dumps writes it.
 * Arguments follow the parameters' "properties" order: required ones
 * present, optional ones optional, no others. Tool modes:
 *   NONE      no TOOLS.
 *   AUTO      CONTENT_FREE: free content, TOOLS optional. Otherwise either
 *             content matching the constraint and no TOOLS, or empty
 *             content and TOOLS.
 *   REQUIRED  empty content, TOOLS with 1..max_calls calls of declared tools.
 *   NAMED     empty content, TOOLS with exactly one call of tool_name.
 * Warnings and errors as k3_gram_from_schema (pointers are prefixed with
 * the tool: "tools[i].parameters/..."). */
int k3_gram_chat_reply(k3_grammar **out, const k3_gram_reply_spec *spec, k3_buf *warn, k3_err *e);

/* ---- the vocabulary ---- */
typedef struct k3_gram_vocab k3_gram_vocab;

/* n ids: bytes[i][0..lens[i]) and special[i] (nonzero: a special id, never
 * text; its bytes are its name for <TEXT> terminals). Copies what it needs. */
int k3_gram_vocab_new(k3_gram_vocab **out, uint32_t n, const unsigned char *const *bytes,
                      const size_t *lens, const unsigned char *special, k3_err *e);
int k3_gram_vocab_from_tokenizer(k3_gram_vocab **out, const k3_tokenizer *tok, k3_err *e);
uint32_t k3_gram_vocab_size(const k3_gram_vocab *v);
void k3_gram_vocab_free(k3_gram_vocab *v);

/* ---- the matcher ---- */
typedef struct k3_gram_matcher k3_gram_matcher;

/* A matcher at the grammar's start. g and v must outlive it. end_ids[0..
 * n_end) are the ids that end generation (e.g. <|end_of_msg|>): each is
 * allowed exactly where the grammar may end. K3_EINPUT when a token
 * terminal names no special id of v or an id outside it. */
int k3_gram_matcher_new(k3_gram_matcher **out, const k3_grammar *g, const k3_gram_vocab *v,
                        const uint32_t *end_ids, size_t n_end, k3_err *e);
void k3_gram_matcher_free(k3_gram_matcher *m);

/* Words of a mask: (vocab size + 31) / 32; bit (id % 32) of word id / 32
 * set = id allowed. */
size_t k3_gram_mask_words(const k3_gram_vocab *v);

/* The ids allowed next, written to mask[0..k3_gram_mask_words).
 * budget = ids the caller may still generate including the end id
 * (max_tokens - generated), or -1 for no limit. THE END BUDGET: let
 * fin(s) be the fewest bytes (a token terminal counts 1) that complete
 * the grammar from state s. With budget b >= 0 an ordinary or grammar
 * token id t is allowed only if it is viable and fin(after t) + 1 <=
 * b - 1 (what is left after t can spell the rest byte by byte and then
 * the end id); an end id only if the grammar may end and b >= 1. Since
 * every byte is an id, a sequence started with fin(start) + 1 <= b always
 * completes within b. When no viable id meets the budget (b was already
 * too small) the mask falls back to the viable ids that lower fin, then
 * to all viable ids. After an end id was accepted the mask is empty.
 * Deterministic: a function of (grammar, vocab, end ids, accepted ids,
 * budget) only. K3_EINPUT when a limit is hit. */
int k3_gram_mask(k3_gram_matcher *m, int64_t budget, uint32_t *mask, k3_err *e);

/* Accepts one id (an end id where the grammar may end marks the matcher
 * done, unless the grammar names that id as a terminal there).
 * K3_EINPUT when id is not viable here (the budget is not checked: it
 * shapes the mask, not acceptance); the state is then unchanged. */
int k3_gram_accept(k3_gram_matcher *m, uint32_t id, k3_err *e);

/* Undoes the last n accepted ids (n <= k3_gram_count; more is clamped). */
void k3_gram_rollback(k3_gram_matcher *m, size_t n);

/* Back to the start (keeps the caches). */
void k3_gram_reset(k3_gram_matcher *m);

/* Ids accepted so far (the end id included). Save/restore is replay: a
 * fresh matcher that accepts the same ids is in the same state. */
size_t k3_gram_count(const k3_gram_matcher *m);

/* Whether the grammar may end here (the end ids are allowed). */
int k3_gram_is_accepting(const k3_gram_matcher *m);

/* The fewest ids that finish from here, the end id included: fin + 1
 * (0 once done). A budget of at least this many ids always ends
 * complete (k3_gram_mask); less may still end if the model's ids are
 * long. Useful to refuse a max_tokens that cannot fit the grammar. */
size_t k3_gram_min_ids(const k3_gram_matcher *m);

/* Whether an end id was accepted. */
int k3_gram_is_done(const k3_gram_matcher *m);

#endif
