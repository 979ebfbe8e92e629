/* suggest.h - "did you mean": the closest of a few known words to a
 * mistyped one (an option name, a directory name).
 *
 * Closeness is the edit distance (insertions, deletions, substitutions of
 * bytes); a candidate is offered only when it is at most a third of the
 * typed word's length away (at least 1, at most 3), so "--promt" offers
 * "--prompt" but "--x" offers nothing. */
#ifndef K3_CLI_SUGGEST_H
#define K3_CLI_SUGGEST_H

#include <stddef.h>

/* The edit distance of a and b; words longer than 63 bytes count as
 * (size_t)-1 (never suggested). */
size_t k3_edit_distance(const char *a, const char *b);

/* Folds candidate cand into the running best for word: *best (NULL at
 * first) and *dist are replaced when cand is closer and close enough. */
void k3_suggest_fold(const char *word, const char *cand, const char **best, size_t *dist);

#endif
