/* options.h - the k3 command line, parsed strictly: an unknown option or a
 * bad value is a one-line error saying what was expected (exit 2). */
#ifndef K3_CLI_OPTIONS_H
#define K3_CLI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

typedef struct k3_options {
    const char *model_dir;
    const char *ids_csv;          /* --ids */
    long gen;                     /* --gen N (default 16) */
    int recompute;                /* --recompute: rerun the whole sequence each step */
    int ignore_eos;               /* --ignore-eos: do not stop at an end-of-message id */
    const char *dump_logits;      /* --dump-logits FILE: one row per generated token */
    const char *dump_prompt_logits; /* --dump-prompt-logits FILE: one row per prompt token */
    const char *out_json;         /* --out FILE */
    int layers;                   /* --layers N */
    int threads;                  /* --threads N (0 = all cores) */
    int quiet;                    /* --quiet */
    int help, version;
} k3_options;

int k3_options_parse(k3_options *o, int argc, char **argv, k3_err *e);
void k3_options_usage(void);

/* Parses "1,2,3" (decimal, no spaces, no empty entries) into a malloc'd
 * array. Errors name the offending entry. */
int k3_parse_ids(const char *csv, uint32_t **ids, size_t *n, k3_err *e);

#endif
