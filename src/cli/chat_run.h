/* chat_run.h - `k3 MODEL --chat`: an interactive chat on stdin/stdout.
 *
 * Reads one user message per line from stdin (so it can be scripted; a
 * line ending in a backslash continues on the next; "/exit" or the end of
 * input ends it, "/reset", "/save FILE" and "/help" are commands), renders the conversation in the
 * K3 chat format, and streams each reply to stdout as it is generated:
 * the thinking hidden, or with --show-thinking shown first (dimmed when
 * stdout is a terminal and NO_COLOR is not set), then the reply text. A
 * reply is one turn of chat/turn.h: it ends at <|end_of_msg|>, [EOS] or
 * the config's eos ids (unless --ignore-eos), a stop string, --gen tokens
 * or --max-context. With --out FILE, FILE gets every turn's prompt ids,
 * generated ids, reuse and end as JSON. The state is kept between turns so a turn costs time
 * for its new tokens only; per turn, stderr gets
 *   turn N: prefilled X new tokens, reused Y
 *   turn N: generated G tokens (END), first token after S s, R tok/s
 * (END as k3_turn_end_name).
 * Errors end the chat with their exit code (2 for bad input: a history
 * line, a message that is not UTF-8, a conversation over --max-context);
 * the history written so far stays intact. */
#ifndef K3_CLI_CHAT_RUN_H
#define K3_CLI_CHAT_RUN_H

#include "cli/options.h"
#include "cli/outputs.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"

int k3_run_chat(k3_model *m, const k3_options *o, const k3_tokenizer *tok, k3_outputs *out,
                k3_err *e);

#endif
