/* json_rules.h - JSON's pieces as rules, built once per builder, and the
 * shared helpers of the schema compiler (schema.c, schema_str.c,
 * schema_num.c) and the chat reply builder (reply_grammar.c).
 *
 * Whitespace policy (grammar.h): separators ", " and ": " (spaced) or ","
 * and ":" (compact), nothing else. Strings: raw characters except '"',
 * '\\' and U+0000..U+001F; escapes \" \\ \/ \b \f \n \r \t and \uXXXX
 * outside the surrogates (so every string character is one code point and
 * length limits are exact). */
#ifndef K3_GRAMMAR_JSON_RULES_H
#define K3_GRAMMAR_JSON_RULES_H

#include "grammar/ir.h"

typedef struct k3g_json {
    k3g_builder *b;
    int ws;
    /* lazily built rules, -1 until then */
    int64_t chr, str, num, intg, val, obj, arr, anychr, anytext;
} k3g_json;

void k3g_json_init(k3g_json *j, k3g_builder *b, int ws);
const char *k3g_comma(const k3g_json *j); /* ", " or "," */
const char *k3g_colon(const k3g_json *j); /* ": " or ":" */
int64_t k3g_json_char(k3g_json *j);       /* one string character (raw or escaped) */
int64_t k3g_json_string(k3g_json *j);     /* "..." */
int64_t k3g_json_number(k3g_json *j);
int64_t k3g_json_integer(k3g_json *j);
int64_t k3g_json_value(k3g_json *j);
int64_t k3g_json_object(k3g_json *j);
int64_t k3g_json_array(k3g_json *j);
int64_t k3g_any_char(k3g_json *j); /* any code point, raw (tool string arguments) */
int64_t k3g_any_text(k3g_json *j); /* any bytes, any length (free text) */

/* A rule matching exactly one of the byte strings s[i][0..len[i]), built
 * as a trie so alternatives that share a prefix share its rules. */
int64_t k3g_literal_set(k3g_builder *b, const char *const *s, const size_t *len, size_t n);

/* rule ::= a b (two elements; either may be K3G_END's "nothing" by
 * passing type K3G_END) */
int64_t k3g_seq2(k3g_builder *b, k3g_el a, k3g_el c);

static inline k3g_el k3g_r(int64_t r)
{
    k3g_el el;
    el.type = K3G_RULE;
    el.arg = (uint32_t)r;
    return el;
}

#endif
