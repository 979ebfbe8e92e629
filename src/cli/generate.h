/* generate.h - the generation run behind `k3 MODEL --ids ... --gen N`. */
#ifndef K3_CLI_GENERATE_H
#define K3_CLI_GENERATE_H

#include "cli/options.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"

/* Runs greedy generation from prompt[0..n) and writes what the options ask
 * for: with a tokenizer the text on stdout as it is produced, else the ids
 * at the end; logit dumps; the per-step table and the JSON report. */
int k3_run_generate(k3_model *m, const k3_options *o, const uint32_t *prompt, size_t n,
                    const k3_tokenizer *tok, k3_err *e);

#endif
