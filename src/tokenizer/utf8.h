/* utf8.h - strict UTF-8 decoding (RFC 3629) for the tokenizer. */
#ifndef K3_TOKENIZER_UTF8_H
#define K3_TOKENIZER_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes the character at s[0..n), n > 0. Returns its length (1..4) and
 * sets *cp, or returns 0 when the bytes are not a complete, shortest-form
 * encoding of a Unicode scalar value (overlong forms, surrogates,
 * > U+10FFFF, stray continuation bytes and truncation are all refused). */
size_t k3_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Length (1..4) of the sequence a lead byte announces, 0 for a byte that
 * cannot start one. */
size_t k3_utf8_seq_len(unsigned char lead);

#endif
