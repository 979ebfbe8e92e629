/* json.h - a small, strict JSON (RFC 8259) reader.
 *
 * Used for config.json, safetensors headers, the shard index,
 * tokenizer_config.json and chat input. Strict on purpose: these files decide
 * what model is computed, so anything RFC 8259 does not allow (trailing
 * commas, comments, invalid UTF-8, lone surrogates, leading zeros, NaN) is an
 * error that names the byte offset rather than a guess.
 *
 * A parsed document is a tree of k3_json nodes living in one arena that
 * k3_json_free releases at once. Object members keep file order; duplicate
 * keys are an error (a header with two entries for one tensor is a lie). */
#ifndef K3_UTIL_JSON_H
#define K3_UTIL_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

typedef enum {
    K3J_NULL,
    K3J_BOOL,
    K3J_NUMBER,
    K3J_STRING,
    K3J_ARRAY,
    K3J_OBJECT
} k3_json_type;

typedef struct k3_json k3_json;
struct k3_json {
    k3_json_type type;
    int boolean;          /* K3J_BOOL */
    double number;        /* K3J_NUMBER */
    int is_int;           /* K3J_NUMBER written without fraction/exponent and fits int64 */
    int64_t integer;      /* valid when is_int */
    const char *str;      /* K3J_STRING: decoded UTF-8, NUL-terminated */
    size_t len;           /* K3J_STRING: bytes (a \u0000 escape may make strlen shorter) */
    size_t count;         /* K3J_ARRAY / K3J_OBJECT: number of children */
    k3_json *items;       /* children, in file order */
    const char **keys;    /* K3J_OBJECT: keys[i] names items[i] */
    size_t *key_lens;     /* K3J_OBJECT: byte lengths of keys */
};

typedef struct k3_json_doc k3_json_doc;

/* Parses text[0..len). On failure returns NULL and writes "byte N: what"
 * into err. Nesting deeper than 512 levels is refused. */
k3_json_doc *k3_json_parse(const char *text, size_t len, char *err, size_t errlen);
const k3_json *k3_json_root(const k3_json_doc *doc);
void k3_json_free(k3_json_doc *doc);
/* The file at path (at most max_bytes) parsed; NULL with K3_EINPUT naming
 * the file and the place (or the read's error). */
k3_json_doc *k3_json_load(const char *path, size_t max_bytes, k3_err *e);

/* Member of an object by key, or NULL (also NULL when obj is not an object). */
const k3_json *k3_json_get(const k3_json *obj, const char *key);

#endif
