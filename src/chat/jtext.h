/* jtext.h - JSON strings from bytes a model produced.
 *
 * Generated text is whatever bytes the sampled tokens carry: a byte-level
 * BPE can produce invalid UTF-8, which JSON (and the chat renderer) cannot
 * hold. Every generated string the server writes goes through k3_jtext_put,
 * and every reply a chat keeps through k3_jtext_clean, which replace each byte that
 * does not start a valid UTF-8 character with U+FFFD (one per byte, so
 * text cut at character boundaries gives the same result piece by piece as
 * whole). */
#ifndef K3_CHAT_JTEXT_H
#define K3_CHAT_JTEXT_H

#include <stddef.h>

#include "k3/error.h"
#include "util/json_write.h"

/* Appends s[0..n) to out with each byte that starts no valid UTF-8
 * character (tokenizer/utf8.h) replaced by U+FFFD. */
int k3_jtext_clean(const char *s, size_t n, k3_buf *out, k3_err *e);

/* Appends s[0..n) to b as a JSON string (quotes included), written as
 * k3_json_write writes strings, after k3_jtext_clean. */
int k3_jtext_put(k3_buf *b, const char *s, size_t n, k3_err *e);

/* Appends `"key":`, after a comma unless first. */
int k3_jtext_key(k3_buf *b, int first, const char *key, k3_err *e);

#endif
