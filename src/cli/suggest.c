/* suggest.c - see suggest.h. */
#include "cli/suggest.h"

#include <string.h>

/* Longest word compared (bytes); the rows below hold this many + 1. */
#define MAX_WORD 63

size_t k3_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[MAX_WORD + 1];
    if (la > MAX_WORD || lb > MAX_WORD)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0]; /* row[i-1][j-1] */
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

void k3_suggest_fold(const char *word, const char *cand, const char **best, size_t *dist)
{
    size_t limit = strlen(word) / 3;
    if (limit < 1)
        limit = 1;
    if (limit > 3)
        limit = 3;
    size_t d = k3_edit_distance(word, cand);
    if (d == 0 || d > limit || (*best && d >= *dist))
        return;
    *best = cand;
    *dist = d;
}
