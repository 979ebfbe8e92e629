/* line_input.h - where the chat reads the user's messages from.
 *
 * On a terminal, in a build with libedit (Makefile EDIT=1, Debian's
 * libedit-dev, BSD-licensed): an editing line as in other terminal
 * programs - arrows and the emacs keys edit, Up/Down recall earlier
 * messages, Ctrl-R searches them - with bracketed paste (the terminal
 * marks a paste, k3 takes the whole block, newlines included, into the
 * line: a pasted snippet is ONE message), and the messages kept in a
 * history file (one per entry, libedit's format) across runs.
 *
 * Anywhere else (stdin not a terminal, or a build without libedit): plain
 * lines read with k3_os_getline, the prompt on stderr only on a terminal,
 * exactly as before - so scripts piping messages in see the same bytes.
 *
 * Ctrl-C: the chat's SIGINT handler sets *interrupted; a read then returns
 * -1 (the caller looks at the flag), in both modes. */
#ifndef K3_CLI_LINE_INPUT_H
#define K3_CLI_LINE_INPUT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

typedef struct k3_line_input k3_line_input;

/* history: the file Up/Ctrl-R recall from and each message is added to
 * (NULL: none); read when it exists, directories made as needed. Editing
 * only when stdin and stderr are terminals and the build has libedit. */
int k3_line_input_open(k3_line_input **out, const char *history,
                       volatile sig_atomic_t *interrupted, k3_err *e);

/* 1 when reads go through the line editor. */
int k3_line_input_editing(const k3_line_input *in);

/* One line without its end of line into *line (owned by in, valid until
 * the next call); prompt is shown first on a terminal. Returns its length,
 * or -1 at the end of input or when interrupted. */
int64_t k3_line_input_read(k3_line_input *in, const char *prompt, const char **line);

/* Adds a whole message to the history (and rewrites the file atomically;
 * a failure to write it is said once on stderr, the chat goes on). */
void k3_line_input_remember(k3_line_input *in, const char *msg, size_t len);

void k3_line_input_close(k3_line_input *in);

/* The default history file: $XDG_STATE_HOME/k3/history, else
 * $HOME/.local/state/k3/history; "" when neither variable is set. */
void k3_line_input_default_path(char *out, size_t cap);

#endif
