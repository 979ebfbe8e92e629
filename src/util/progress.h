/* progress.h - a progress line for long jobs (bytes done, rate, ETA).
 *
 * On a terminal the line is redrawn in place a few times a second; when the
 * output is a file or a pipe (CI logs) a plain line is written every
 * K3_PROGRESS_PLAIN_SECONDS instead, so logs stay readable. A NULL stream
 * makes every call a no-op. */
#ifndef K3_UTIL_PROGRESS_H
#define K3_UTIL_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "util/clock.h"

#define K3_PROGRESS_PLAIN_SECONDS 10.0

typedef struct k3_progress {
    FILE *out;
    const char *what;
    const char *unit;   /* "GB" for bytes (scale 1e9), or a count's unit (scale 1) */
    double scale;
    uint64_t total, done;
    double start, last;
    int tty;
} k3_progress;

void k3_progress_start(k3_progress *p, FILE *out, const char *what, uint64_t total);
/* The same for a count of things (e.g. unit "tokens") instead of bytes. */
void k3_progress_start_count(k3_progress *p, FILE *out, const char *what, uint64_t total,
                             const char *unit);
/* Adds n bytes (or things) done; redraws when it is time. */
void k3_progress_add(k3_progress *p, uint64_t n);
/* Writes the final line (total, seconds, average rate). */
void k3_progress_end(k3_progress *p);

#endif
