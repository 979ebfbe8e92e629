/* tfcheck.h - `k3 ... --ids/--prompt ... --tf-check`: a drafter's quality
 * on a given id sequence, without a model (the context-lookup drafter
 * needs none).
 *
 * Teacher-forced: at every position i >= 1 the drafter is given ids[0..i)
 * and proposes up to --spec N ids (4 when --spec is 0); the position is a
 * hit when its first draft is ids[i], and its run is how many drafts match
 * ids[i..] in a row. stdout gets one line per position
 *   POS ID FIRST-DRAFT-OR-- hit|miss RUN
 * and a summary; the speculative replay of the same ids (verify, keep the
 * run, emit run + 1 ids a pass) gives the tokens per forward pass
 * speculation would reach if the model produced exactly these ids.
 * --out FILE gets the summary as JSON. */
#ifndef K3_CLI_TFCHECK_H
#define K3_CLI_TFCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "cli/options.h"
#include "cli/outputs.h"

/* Teacher-forces ids[0..n) through the drafter (--draft; m: the model for
 * the self drafter, NULL for ngram): per position, whether its first draft
 * is the next id, and the ids per pass a speculative replay would emit. */
int k3_run_tf_check(const k3_options *o, k3_model *m, const uint32_t *ids, size_t n,
                    k3_outputs *out, k3_err *e);

#endif
