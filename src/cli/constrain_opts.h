/* constrain_opts.h - --grammar FILE and --json-schema FILE: the command
 * line's structured outputs (structured/constrain.h), and how a saved
 * state carries them.
 *
 * A run with either option and --save-state FILE also writes FILE.grammar
 * (atomically): the position where the constrained text began and a hash
 * of the grammar or schema file. A later --load-state FILE with the same
 * option and no new prompt continues that text: the ids from that
 * position on are replayed through the grammar first, so the continuation
 * draws what the uninterrupted run draws. A run with --save-state has no
 * end budget (it is to be continued: its text need not close within
 * --gen), so the equality holds where the uninterrupted run's budget did
 * not steer the first part (a budget counts the ids left in its run's
 * --gen; docs/GRAMMAR.md). A different
 * grammar or schema is exit 2. Without FILE.grammar, or with a new
 * prompt, the constrained text starts after the loaded sequence. */
#ifndef K3_CLI_CONSTRAIN_OPTS_H
#define K3_CLI_CONSTRAIN_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "cli/options.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"
#include "structured/constrain.h"

/* The constraint --grammar / --json-schema ask for (a JSON Schema strictly:
 * a keyword it cannot enforce is exit 2), *cons NULL when neither is
 * given; *v the vocabulary it was made for (the caller frees both). tok
 * NULL (no tokenizer) is K3_EINPUT. Errors name the file. */
int k3_cli_constrain(const k3_options *o, const k3_tokenizer *tok, size_t vocab,
                     k3_constrain_vocab **v, k3_constrain **cons, k3_err *e);

/* The same for a text given inline (a --batch-file line's "grammar" or
 * "json_schema"), with where it came from for the messages. */
int k3_cli_constrain_text(const k3_constrain_vocab *v, k3_constrain_kind kind, const char *text,
                          size_t len, const char *where, k3_constrain **cons, k3_err *e);

/* Where the constrained text of a run begins, *from: the end of state s
 * (which holds the prompt), or, for --load-state with the same option and
 * no new prompt (np 0), FILE.grammar's position, the ids of s from there
 * replayed through cons (see above). */
int k3_cli_constrain_resume(const k3_options *o, const k3_state *s, size_t np,
                            k3_constrain *cons, size_t *from, k3_err *e);

/* --save-state: FILE.grammar saying the constrained text began at start. */
int k3_cli_constrain_save(const k3_options *o, size_t start, k3_err *e);

#endif
