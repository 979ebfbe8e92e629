/* outputs.h - the files a run writes, opened before anything is loaded.
 *
 * A run of the real model can take hours; finding at its end that --out
 * names a directory that does not exist would waste them. So every output
 * path is checked (and the stream ones begun) before the model is opened:
 * an unwritable path is exit 2 naming the path and the errno, at once.
 * Each output is written to a temporary file and renamed over its path
 * only when the run succeeds (util/atomic_file.h): a failed, interrupted
 * or killed run leaves every old file as it was, never a torn one. */
#ifndef K3_CLI_OUTPUTS_H
#define K3_CLI_OUTPUTS_H

#include <stdio.h>

#include "k3/error.h"
#include "util/atomic_file.h"

/* The options naming the files below (part of k3_options). */
typedef struct k3_output_opts {
    const char *out_json;         /* --out FILE (with --chat: a report of every turn) */
    const char *dump_logits;      /* --dump-logits FILE: one row per generated token */
    const char *dump_prompt_logits; /* --dump-prompt-logits FILE: one row per prompt token */
    const char *cache_trace_dir;  /* --dump-cache-trace DIR */
} k3_output_opts;

typedef struct k3_outputs {
    k3_atomic_file report;        /* --out FILE */
    k3_atomic_file logits;        /* --dump-logits FILE */
    k3_atomic_file prompt_logits; /* --dump-prompt-logits FILE */
    k3_atomic_file trace;         /* --dump-cache-trace DIR: DIR/trace.txt */
    char trace_path[4096];
} k3_outputs;

/* Begins every stream output o asks for and probes the files written
 * whole later (save_state, history: --save-state, --history; either may
 * be NULL). Each .f is NULL when its option was not given. On failure
 * nothing is left behind. */
int k3_outputs_open(k3_outputs *out, const k3_output_opts *o, const char *save_state,
                    const char *history, k3_err *e);
/* Renames every begun output over its path; on the first failure the rest
 * are discarded. */
int k3_outputs_commit(k3_outputs *out, k3_err *e);
/* Discards every begun output (the old files stay). */
void k3_outputs_abort(k3_outputs *out);

#endif
