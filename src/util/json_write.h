/* json_write.h - JSON text exactly as Python's json.dumps(ensure_ascii=False)
 * writes it, plus the growable byte buffer it writes into.
 *
 * The chat format embeds JSON the release's Python encoder produced: tool
 * declarations as json.dumps(sort_keys, separators=(",", ":")) (MODEL.md
 * §6.4) and tool-call argument values with the default ", " / ": "
 * separators (§6.3 step 2c).
 * The model was trained on those exact bytes, so this writer reproduces
 * Python's choices: only '"', '\\' and control characters are escaped
 * (\n \r \t \b \f by name, the rest as lower-case \u00xx), other characters
 * are written as UTF-8; integers print as digits and other numbers as
 * Python's repr(float) (shortest round-trip digits, "1.0", "1e-05", "1e+16").
 * Keys are sorted by code point when asked, which for UTF-8 is byte order. */
#ifndef K3_UTIL_JSON_WRITE_H
#define K3_UTIL_JSON_WRITE_H

#include <stddef.h>

#include "k3/error.h"
#include "util/error.h"
#include "util/json.h"

/* A growable byte buffer, kept NUL-terminated once anything was added.
 * Zero-initialise it; k3_buf_free releases it. */
typedef struct k3_buf {
    char *data;
    size_t len, cap;
} k3_buf;

/* Appends s[0..n). Fails only for lack of memory (K3_ERUNTIME). */
int k3_buf_put(k3_buf *b, const void *s, size_t n, k3_err *e);
int k3_buf_puts(k3_buf *b, const char *s, k3_err *e);
/* Appends printf-formatted text of any length. */
int k3_buf_printf(k3_buf *b, k3_err *e, const char *fmt, ...) K3_PRINTF(3, 4);
void k3_buf_free(k3_buf *b);

enum {
    K3_JW_SORT_KEYS = 1, /* object members in code-point order of their keys */
    K3_JW_SPACED = 2     /* Python's default separators ", " and ": " */
};

/* JSON's name for v's type: null, boolean, number, string, array, object
 * (also the type attribute of XTML tool-call arguments). */
const char *k3_json_type_name(const k3_json *v);

/* Appends the JSON text of v (flags: K3_JW_*). */
int k3_json_write(k3_buf *b, const k3_json *v, unsigned flags, k3_err *e);

#endif
