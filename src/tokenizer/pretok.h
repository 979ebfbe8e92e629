/* pretok.h - the pre-tokeniser: Kimi's pat_str (MODEL.md §5.4), by hand.
 *
 * The pattern is eight alternatives joined with |; at each position the
 * regex engine (fancy-regex, Perl semantics) takes the first alternative
 * that matches, with greedy quantifiers that backtrack:
 *
 *   1 [\p{Han}]+
 *   2 [^\r\n\p{L}\p{N}]?UPPER*LOWER+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 *   3 [^\r\n\p{L}\p{N}]?UPPER+LOWER*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 *   4 \p{N}{1,3}
 *   5  ?[^\s\p{L}\p{N}]+[\r\n]*
 *   6 \s*[\r\n]+
 *   7 \s+(?!\S)
 *   8 \s+
 *
 * with UPPER = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] and
 * LOWER = [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]. Every character matches
 * some alternative, so the pieces tile the text. pretok.c derives each
 * alternative's match (with its backtracking) in closed form. */
#ifndef K3_TOKENIZER_PRETOK_H
#define K3_TOKENIZER_PRETOK_H

#include <stddef.h>
#include <stdint.h>

/* A character's classes in the pattern (one byte per character). */
enum {
    K3_PT_HAN = 1,       /* \p{Han} */
    K3_PT_UPPER = 2,     /* UPPER above */
    K3_PT_LOWER = 4,     /* LOWER above */
    K3_PT_LETTER = 8,    /* \p{L} */
    K3_PT_NUMBER = 16,   /* \p{N} */
    K3_PT_SPACE = 32,    /* \s (White_Space) */
    K3_PT_CRLF = 64,     /* \r or \n */
    K3_PT_PY_SPACE = 128 /* Python str.isspace(): not in the pattern; the
                            encoder's 25,000-character run rule uses it */
};

unsigned k3_pretok_class(uint32_t cp);

/* The piece that starts at character i of text cp[0..n) (cls[] holding
 * k3_pretok_class of each): returns its end, i < end <= n. n is where the
 * pattern sees the end of the text, which matters: \s+(?!\S) matches a
 * whole trailing run of spaces only at the end. */
size_t k3_pretok_next(const uint32_t *cp, const unsigned char *cls, size_t i, size_t n);

#endif
