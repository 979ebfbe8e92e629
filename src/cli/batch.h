/* batch.h - `k3 MODEL_DIR --batch-file F`: many prompts, one pass over the
 * weights per step (k3_forward_multi).
 *
 * F is JSONL: one object per line, {"prompt": "text"} (needs a tokenizer)
 * or {"ids": [1, 2, 3]}, with optional "gen" (ids to generate; default
 * --gen) and sampling fields "temperature", "top_p", "top_k", "seed"
 * (default: the command line's). Any other key, a line that is not such an
 * object, or an empty file is K3_EINPUT naming the file and line. Every
 * other option applies to every line (--stop, --ignore-eos, --max-context,
 * the memory options, --repeat-*). Each line's ids are those of running it
 * alone with --prompt TEXT or --ids LIST and the same options (a "prompt"
 * line ends as --prompt does, with the tokenizer's end ids; an "ids" line
 * as --ids does, without them). stdout: per line, in input order, a
 * heading "==> line N <==" and the answer's text (an "ids" line: its
 * generated ids, comma-separated); headings are separated by an empty
 * line. --spec (auto by default) drafts per line with the ngram drafter,
 * each line's cost gate choosing; the ids are those of --spec 0 (--draft
 * self is refused: see options.c). --out: the usual report (the top-level
 * prompt_ids, generated_ids, end, finish_reason and spec counts are line
 * 1's; step_seconds and steps are the batched steps, each with its rows,
 * sequences, and of them how many verified drafts and fed a prompt chunk)
 * plus "results": per line {"line", "prompt_ids", "generated_ids", "text"
 * (null for an "ids" line), "end", "finish_reason", "forwards", "drafted",
 * "accepted"}. */
#ifndef K3_CLI_BATCH_H
#define K3_CLI_BATCH_H

#include <stdio.h>

#include "cli/options.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"

/* Opens the model for sequences of at most `longest` positions (prompt +
 * gen), checks tok (may be NULL) fits it, prints the plan unless quiet and
 * sets the cache trace (main.c's open path). */
typedef int (*k3_batch_open)(const k3_options *o, size_t longest, const k3_tokenizer *tok,
                             k3_model **m, FILE *trace, k3_err *e);

/* Runs o->batch_file; returns e's code. */
int k3_cmd_batch_file(const k3_options *o, k3_batch_open open_model, k3_err *e);

#endif
