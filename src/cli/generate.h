/* generate.h - the generation run behind `k3 MODEL --prompt/--ids ... --gen N`. */
#ifndef K3_CLI_GENERATE_H
#define K3_CLI_GENERATE_H

#include <stdio.h>

#include "cli/options.h"
#include "cli/outputs.h"
#include "k3/generate.h"
#include "k3/k3.h"
#include "k3/sample.h"
#include "k3/tokenizer.h"

/* Writes ids[0..n) as "1,2,3" (no brackets, no newline). */
void k3_cli_write_ids(FILE *f, const uint32_t *ids, size_t n);

/* A sampler set up from the sampling options (--temperature ...). */
int k3_cli_sampler(k3_sampler *s, const k3_options *o, size_t vocab, k3_err *e);

/* Generation parameters from the options: max_tokens, the context cap, eos, penalty window. */
void k3_cli_gen_params(k3_gen_params *p, const k3_options *o, size_t max_tokens);

/* --max-context is a hard cap (K3_DEFAULT_MAX_CONTEXT unless given): start
 * positions already in the state + np prompt tokens + --gen must fit, else
 * K3_EINPUT, before anything is computed. */
int k3_cli_check_context(const k3_options *o, int64_t start, size_t np, k3_err *e);

/* Continues the --load-state sequence (or starts one) with prompt[0..n)
 * (n may be 0 after --load-state), generates as the options say and
 * writes: with a tokenizer the text on stdout as it is produced, else the
 * ids at the end; logit dumps and the JSON report into out's files (which
 * the caller commits or aborts); the per-step table; the --save-state file. */
int k3_run_generate(k3_model *m, const k3_options *o, const uint32_t *prompt, size_t n,
                    const k3_tokenizer *tok, k3_outputs *out, k3_err *e);
/* The same with embeds (NULL, or one entry per prompt id: a row replacing
 * that id's embedding, or NULL; k3_forward_embeds), for --image prompts. */
int k3_run_generate_embeds(k3_model *m, const k3_options *o, const uint32_t *prompt, size_t n,
                           const float *const *embeds, const k3_tokenizer *tok,
                           k3_outputs *out, k3_err *e);

#endif
