/* textout.h - generated text to a terminal or pipe, as it is produced:
 * never splitting a UTF-8 character across writes (k3_utf8_stream) and
 * never showing any part of a stop string (gen/stop.h). */
#ifndef K3_CLI_TEXTOUT_H
#define K3_CLI_TEXTOUT_H

#include <stdio.h>

#include "gen/stop.h"
#include "k3/tokenizer.h"

typedef struct k3_textout {
    FILE *f;
    k3_stop stop;
    k3_utf8_stream utf8;
    k3_buf ready;   /* scratch: what the stop matcher released */
    unsigned char *out; /* scratch: what the UTF-8 stream released */
    size_t out_cap;
    int stopped;    /* a stop string was completed: nothing more is written */
    size_t released;/* bytes of the text accepted for showing: a prefix of what was put */
} k3_textout;

/* stop[0..nstop) must outlive t. */
void k3_textout_init(k3_textout *t, FILE *f, const char *const *stop, size_t nstop);
/* Writes what of p[0..n) may be shown now and flushes f. */
int k3_textout_put(k3_textout *t, const void *p, size_t n, k3_err *e);
/* At the end of the text: writes whatever was held back (unless stopped). */
int k3_textout_end(k3_textout *t, k3_err *e);
void k3_textout_free(k3_textout *t);

#endif
