/* chat_cmd.h - the CLI's chat rendering command (--render-chat FILE). */
#ifndef K3_CLI_CHAT_CMD_H
#define K3_CLI_CHAT_CMD_H

#include <stdio.h>

#include "k3/error.h"
#include "k3/tokenizer.h"

/* Reads the conversation in path (k3/chat.h: {"messages", "tools",
 * "options"}) and renders it. tokenize == 0: writes the rendered string,
 * byte for byte with no newline added (tok may be NULL). tokenize != 0:
 * writes its token ids comma-separated on one line, each segment encoded
 * with its own allow-special flag (tok required). Returns a k3 status (the
 * exit code) and fills e. */
int k3_cmd_render_chat(const k3_tokenizer *tok, const char *path, int tokenize, FILE *out,
                       k3_err *e);

#endif
