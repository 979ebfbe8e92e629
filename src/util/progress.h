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

/* The layer line of a slow forward call: "layer 37/93", redrawn in place
 * (dimmed) on a terminal once a call has run `after` seconds, erased when
 * its layers are done. Only for a terminal: k3_layer_progress_init leaves
 * it off (out NULL) when out is not one. */
typedef struct k3_layer_progress {
    FILE *out;        /* NULL: off */
    double after;     /* seconds a call runs before the line shows */
    double start;     /* when the current call's first layer began */
    double last;      /* when the line was last drawn */
    int shown;        /* the line is on the screen */
} k3_layer_progress;

/* The threshold: K3_PROGRESS_AFTER_MS from the environment (milliseconds,
 * >= 0) when set and valid, else K3_LAYER_PROGRESS_AFTER seconds. */
#define K3_LAYER_PROGRESS_AFTER 2.0
void k3_layer_progress_init(k3_layer_progress *p, FILE *out);
/* The forward pass's per-layer callback (model.h on_layer), ctx = p. */
void k3_layer_progress_step(void *ctx, size_t li, size_t L);

#endif
