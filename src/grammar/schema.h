/* schema.h - the JSON Schema compiler's context, shared by schema.c
 * (types, objects, arrays, unions, refs), schema_str.c (strings:
 * lengths, patterns, formats), schema_num.c (integer and number ranges)
 * and reply_grammar.c (tool arguments). docs/GRAMMAR.md lists what is
 * supported. */
#ifndef K3_GRAMMAR_SCHEMA_H
#define K3_GRAMMAR_SCHEMA_H

#include "grammar/json_rules.h"
#include "util/json.h"
#include "util/json_write.h"

/* JSON types as bits (integer is its own bit; number includes it). */
enum {
    K3G_T_NULL = 1,
    K3G_T_BOOL = 2,
    K3G_T_INT = 4,
    K3G_T_NUM = 8,
    K3G_T_STR = 16,
    K3G_T_ARR = 32,
    K3G_T_OBJ = 64,
    K3G_T_ALL = 127
};

/* Returned (instead of a rule) by the compilers when the schema allows
 * no value of the asked types; not an error by itself. */
#define K3G_EMPTY (-2)

typedef struct k3g_refc {
    const k3_json *node;
    int64_t rule;
} k3g_refc;

typedef struct k3g_schema {
    k3g_builder *b;
    k3g_json j;
    int strict;
    k3_buf *warn;
    k3_err *e;
    const k3_json *root;
    const char *prefix; /* prepended to pointers in messages ("" or "tools[0].parameters") */
    char ptr[2048];     /* the JSON pointer of the node being compiled */
    size_t plen;
    int depth;
    k3g_refc *refs;
    size_t nrefs, caprefs;
} k3g_schema;

void k3g_schema_init(k3g_schema *s, k3g_builder *b, const k3_json *root, int strict, int ws,
                     k3_buf *warn, k3_err *e);
void k3g_schema_dispose(k3g_schema *s);

/* The rule for node restricted to the types in mask; raw: a string value
 * is its raw text (no quotes, no escapes: tool arguments), at this level
 * only. Returns a rule, K3G_EMPTY, or -1 with s->e set. */
int64_t k3g_schema_value(k3g_schema *s, const k3_json *node, unsigned mask, int raw);

/* An unsupported keyword at the current pointer (plus `key`): strict ->
 * K3_EINPUT, else a warning line; returns the status. */
int k3g_unsupported(k3g_schema *s, const char *key);
/* Pointer segments (keys escaped as RFC 6901). */
size_t k3g_ptr_push(k3g_schema *s, const char *seg);
size_t k3g_ptr_push_index(k3g_schema *s, size_t i);
void k3g_ptr_pop(k3g_schema *s, size_t mark);

int64_t k3g_schema_string(k3g_schema *s, const k3_json *node, int raw);
int64_t k3g_schema_integer(k3g_schema *s, const k3_json *node);
int64_t k3g_schema_number(k3g_schema *s, const k3_json *node);
/* The code points of set ranges[0..2n) as one string character each: raw,
 * or as JSON writes them inside a string (escaped when it must be). */
int64_t k3g_char_set(k3g_schema *s, const uint32_t *ranges, size_t n, int raw);

#endif
