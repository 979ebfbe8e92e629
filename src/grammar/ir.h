/* ir.h - the grammar's internal form, shared by every front end (GBNF,
 * JSON Schema, the chat reply) and read by the matcher.
 *
 * A grammar is a list of rules over three kinds of terminal: a byte set
 * (one byte out of 256), a token terminal (one special id, or any id but
 * one) and, as non-terminals, references to rules. Front ends build rules
 * with the builder below; k3g_finish checks and flattens them into a
 * k3_grammar:
 *   elements  one flat array; each alternative of each rule is a run of
 *             elements ended by K3G_END, and a position is an index into it
 *   alts      rule r's alternatives start at alts[alt_off[r]..alt_off[r+1])
 *   minrest   per position: fewest bytes (a token terminal counts 1) that
 *             finish the alternative from there
 * Finishing refuses left recursion (a rule reaching itself at the same
 * input position, which would make expansion loop) and drops
 * alternatives that can never finish (so every live stack can complete,
 * and the mask is exactly "can still be completed"). */
#ifndef K3_GRAMMAR_IR_H
#define K3_GRAMMAR_IR_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"

enum { K3G_END = 0, K3G_SET, K3G_RULE, K3G_TOKEN };

#define K3G_INF UINT32_MAX

typedef struct k3g_el {
    uint32_t type : 2;
    uint32_t arg : 30; /* set, rule or token index */
} k3g_el;

/* A token terminal: id >= 0 names that id; otherwise text[0..len) names
 * the special id with that text (resolved by the matcher). neg: any one
 * id except that one. */
typedef struct k3g_token {
    int64_t id;
    char *text;
    size_t len;
    int neg;
} k3g_token;

struct k3_grammar {
    uint32_t nel, nrules, nsets, ntok, root;
    k3g_el *el;
    uint32_t *alt_off, *alts;
    uint8_t (*sets)[32];
    k3g_token *tok;
    uint32_t *minrest;
};

static inline int k3g_set_has(const uint8_t *set, unsigned c)
{
    return (set[c >> 3] >> (c & 7)) & 1;
}

/* ---- the builder ---- */
typedef struct k3g_rule {
    k3g_el *v; /* alternatives, each ended by a K3G_END element */
    size_t n, cap;
    int defined;
} k3g_rdef;

typedef struct k3g_builder {
    k3g_rdef *rules;
    size_t nrules, caprules;
    uint8_t (*sets)[32];
    size_t nsets, capsets;
    k3g_token *tok;
    size_t ntok, captok;
    size_t nel; /* elements so far, for K3_GRAM_MAX_ELEMS */
    /* caches so shared pieces are built once: the class rules */
    void *classes;
    size_t nclasses, capclasses;
    k3_err *e;
} k3g_builder;

/* Grows the array *p of *cap items of sz bytes to hold need items
 * (doubling); K3_ERUNTIME on failure. */
int k3g_grow(void **p, size_t *cap, size_t need, size_t sz, k3_err *e);
/* Replaces the code-point ranges (*r)[0..2n) by their complement within
 * U+0000..U+10FFFF; returns the new count, or SIZE_MAX on failure. */
size_t k3g_complement(uint32_t **r, size_t n, k3_err *e);

void k3g_init(k3g_builder *b, k3_err *e);
void k3g_dispose(k3g_builder *b);
/* A new empty rule; returns its index or -1 (e set). */
int64_t k3g_rule(k3g_builder *b);
/* Appends to rule r's current alternative (elements) or ends it (k3g_alt).
 * Each returns the status. The rule counts as defined once an alternative
 * was ended. */
int k3g_add(k3g_builder *b, uint32_t r, unsigned type, uint32_t arg);
int k3g_alt(k3g_builder *b, uint32_t r);
/* Index of a byte set (deduplicated) or -1. */
int64_t k3g_set(k3g_builder *b, const uint8_t set[32]);
int k3g_byte(k3g_builder *b, uint32_t r, unsigned c);
int k3g_bytes(k3g_builder *b, uint32_t r, const void *s, size_t n);
/* Index of a token terminal or -1. */
int64_t k3g_token_add(k3g_builder *b, int64_t id, const char *text, size_t len, int neg);
/* A rule matching one code point out of ranges[0..2n) (inclusive pairs,
 * any order, surrogates never match) as UTF-8; cached by content. */
int64_t k3g_class(k3g_builder *b, const uint32_t *ranges, size_t n);
void k3g_classes_free(k3g_builder *b); /* by k3g_dispose */
/* A rule: item repeated min..max times (max K3G_INF: unbounded), where
 * item is one element. */
int64_t k3g_repeat(k3g_builder *b, k3g_el item, uint32_t min, uint32_t max);
/* A rule: exactly the bytes of s. */
int64_t k3g_literal(k3g_builder *b, const void *s, size_t n);

/* Parses GBNF text into b (grammar.h has the dialect); *root is its root
 * rule. names_out (may be NULL): rule names for messages, an array of
 * b->nrules + 1 whose last entry holds the names' storage (free it, then
 * the array). */
int k3g_gbnf_into(k3g_builder *b, const char *text, size_t len, uint32_t *root, char ***names_out);

/* Checks and flattens with rule root as the start. names (may be NULL)
 * gives rule names for messages. Frees nothing of b. */
int k3g_finish(k3g_builder *b, uint32_t root, const char *const *names, k3_grammar **out);

#endif
