/* pretok.c - see pretok.h. Each alt_* function returns the end of its
 * alternative's match at i, or 0 when it does not match (a match is never
 * empty, so its end is never 0). The backtracking is spelled out where it
 * changes the result. */
#include "tokenizer/pretok.h"

#include "tokenizer/unicode.h"

unsigned k3_pretok_class(uint32_t cp)
{
    unsigned p = k3_uc_props(cp), gc = p & K3_UC_GC_MASK, c = 0;
    if (p & K3_UC_HAN)
        c |= K3_PT_HAN;
    else if (gc == K3_UC_LU || gc == K3_UC_LT)
        c |= K3_PT_UPPER;
    else if (gc == K3_UC_LL)
        c |= K3_PT_LOWER;
    else if (gc == K3_UC_LM || gc == K3_UC_LO || gc == K3_UC_M)
        c |= K3_PT_UPPER | K3_PT_LOWER;
    if (gc >= K3_UC_LU && gc <= K3_UC_LO)
        c |= K3_PT_LETTER;
    if (gc == K3_UC_N)
        c |= K3_PT_NUMBER;
    if (p & K3_UC_WHITE_SPACE)
        c |= K3_PT_SPACE;
    if (p & K3_UC_PY_SPACE)
        c |= K3_PT_PY_SPACE;
    if (cp == '\r' || cp == '\n')
        c |= K3_PT_CRLF;
    return c;
}

/* [^\r\n\p{L}\p{N}] */
#define IS_PREFIX(c) (!((c) & (K3_PT_CRLF | K3_PT_LETTER | K3_PT_NUMBER)))
/* [^\s\p{L}\p{N}] */
#define IS_SYMBOL(c) (!((c) & (K3_PT_SPACE | K3_PT_LETTER | K3_PT_NUMBER)))

/* End of the run of characters from i that have class bit. */
static size_t run_of(const unsigned char *cls, size_t i, size_t n, unsigned bit)
{
    while (i < n && (cls[i] & bit))
        i++;
    return i;
}

/* Length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or 0. The second letters
 * all differ, so at most one alternative can match. Case-insensitive is
 * simple case folding: 'S and 'ſ (U+017F) match 's. */
static size_t contraction(const uint32_t *cp, size_t i, size_t n)
{
    if (i + 1 >= n || cp[i] != '\'')
        return 0;
    int a = k3_uc_fold_az(cp[i + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    int b = i + 2 < n ? k3_uc_fold_az(cp[i + 2]) : 0;
    if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* 2: PREFIX? UPPER* LOWER+ C?. The engine tries the prefix taken, then not;
 * for each, UPPER* from longest to shortest, until LOWER+ can match one
 * character; then LOWER+ and C? are greedy and cannot fail. UPPER and LOWER
 * overlap (Lm, Lo, M), so giving back UPPER characters matters:
 * "ʰ" alone is UPPER* = "" then LOWER+ = "ʰ". */
static size_t alt_lower(const uint32_t *cp, const unsigned char *cls, size_t i, size_t n)
{
    for (size_t j = i + (IS_PREFIX(cls[i]) ? 1 : 0);; j--) {
        for (size_t k = run_of(cls, j, n, K3_PT_UPPER);; k--) {
            if (k < n && (cls[k] & K3_PT_LOWER)) {
                size_t end = run_of(cls, k, n, K3_PT_LOWER);
                return end + contraction(cp, end, n);
            }
            if (k == j)
                break;
        }
        if (j == i)
            return 0;
    }
}

/* 3: PREFIX? UPPER+ LOWER* C?. After UPPER+ nothing can fail. Giving the
 * prefix back cannot help either: it would need a character that is both
 * PREFIX and UPPER, a mark, and at a mark alternative 2 has matched. */
static size_t alt_upper(const uint32_t *cp, const unsigned char *cls, size_t i, size_t n)
{
    size_t j = i + (IS_PREFIX(cls[i]) ? 1 : 0);
    if (j == n || !(cls[j] & K3_PT_UPPER))
        return 0;
    size_t end = run_of(cls, run_of(cls, j, n, K3_PT_UPPER), n, K3_PT_LOWER);
    return end + contraction(cp, end, n);
}

/* 4: \p{N}{1,3} */
static size_t alt_number(const unsigned char *cls, size_t i, size_t n)
{
    size_t end = i;
    while (end < n && end < i + 3 && (cls[end] & K3_PT_NUMBER))
        end++;
    return end > i ? end : 0;
}

/* 5: " "?SYMBOL+[\r\n]* */
static size_t alt_symbols(const uint32_t *cp, const unsigned char *cls, size_t i, size_t n)
{
    size_t j = i;
    if (cp[i] == ' ' && i + 1 < n && IS_SYMBOL(cls[i + 1]))
        j = i + 1;
    if (!IS_SYMBOL(cls[j]))
        return 0;
    while (j < n && IS_SYMBOL(cls[j]))
        j++;
    return run_of(cls, j, n, K3_PT_CRLF);
}

/* 6-8 on the run of \s from i (an empty run fails all three).
 * 6: \s*[\r\n]+ gives back spaces until [\r\n]+ can start, so it ends just
 *    after the run's last \r or \n.
 * 7: \s+(?!\S) takes the whole run at the end of the text; otherwise all
 *    but the last space, which is left to precede the next piece (" word").
 * 8: \s+ is what remains: a single space before a non-space. */
static size_t alt_spaces(const unsigned char *cls, size_t i, size_t n)
{
    size_t end = run_of(cls, i, n, K3_PT_SPACE);
    if (end == i)
        return 0;
    for (size_t k = end; k > i; k--)
        if (cls[k - 1] & K3_PT_CRLF)
            return k;
    if (end < n && end - i >= 2)
        return end - 1;
    return end;
}

size_t k3_pretok_next(const uint32_t *cp, const unsigned char *cls, size_t i, size_t n)
{
    size_t end;
    if (cls[i] & K3_PT_HAN)
        return run_of(cls, i, n, K3_PT_HAN);
    if ((end = alt_lower(cp, cls, i, n)) || (end = alt_upper(cp, cls, i, n)) ||
        (end = alt_number(cls, i, n)) || (end = alt_symbols(cp, cls, i, n)) ||
        (end = alt_spaces(cls, i, n)))
        return end;
    /* Not reached: a character that is not Han, a letter, a number or
     * \s is a SYMBOL. Consuming it keeps the caller's loop finite anyway. */
    return i + 1;
}
