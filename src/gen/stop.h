/* stop.h - stop strings over streamed text.
 *
 * Generation stops when its text contains one of the stop strings, and
 * the stop string itself is never shown. Streaming makes the second half
 * subtle: a token may end with the first bytes of a stop string that the
 * next token completes (or not). So the matcher holds back the longest
 * tail of the text that is a prefix of some stop string, releases the
 * rest, and drops everything from the first complete stop string on.
 * Bytes, not characters: pass the released bytes on through a
 * k3_utf8_stream so a character held in part is not split either. */
#ifndef K3_GEN_STOP_H
#define K3_GEN_STOP_H

#include <stddef.h>

#include "k3/error.h"
#include "util/json_write.h"

typedef struct k3_stop {
    const char *const *strs; /* the stop strings (not copied; empty ones ignored) */
    size_t n;
    k3_buf held;             /* text not released yet */
    int matched;             /* after a push that stopped: the index in strs of the
                              * string found (the earliest in the text; of two ending
                              * there, the first listed); -1 before */
} k3_stop;

/* strs[0..n) must outlive the matcher. */
void k3_stop_init(k3_stop *s, const char *const *strs, size_t n);
void k3_stop_free(k3_stop *s);

/* Adds text[0..n) and appends to out what may be shown now. *stopped is
 * set when a stop string is complete (out then ends just before it and the
 * matcher holds nothing). K3_ERUNTIME when out of memory. */
int k3_stop_push(k3_stop *s, const char *text, size_t n, k3_buf *out, int *stopped, k3_err *e);

/* At the end of the text: appends what is held back to out. */
int k3_stop_flush(k3_stop *s, k3_buf *out, k3_err *e);

#endif
