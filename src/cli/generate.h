/* generate.h - the generation run behind `k3 MODEL --ids ... --gen N`. */
#ifndef K3_CLI_GENERATE_H
#define K3_CLI_GENERATE_H

#include "cli/options.h"
#include "k3/k3.h"

/* Runs greedy generation from prompt[0..n) and writes what the options ask
 * for (ids on stdout, logit dumps, JSON report). */
int k3_run_generate(k3_model *m, const k3_options *o, const uint32_t *prompt, size_t n,
                    k3_err *e);

#endif
