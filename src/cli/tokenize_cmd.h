/* tokenize_cmd.h - the CLI's tokenizer commands (--tokenize, --detokenize,
 * --tokenize-jsonl). Each returns a k3 status (the exit code) and fills e. */
#ifndef K3_CLI_TOKENIZE_CMD_H
#define K3_CLI_TOKENIZE_CMD_H

#include <stddef.h>
#include <stdio.h>

#include "k3/error.h"
#include "k3/tokenizer.h"

/* Prints the ids of text[0..len) comma-separated on one line (an empty line
 * for empty text). Invalid UTF-8 is an error naming the byte offset. */
int k3_cmd_tokenize(const k3_tokenizer *tok, const char *text, size_t len, int allow_special,
                    FILE *out, k3_err *e);

/* Writes the bytes of the ids in ids_csv ("1,2,3": decimal, no spaces; ""
 * is no ids). A malformed entry or an id outside the vocabulary is an error
 * naming it (exit 2). */
int k3_cmd_detokenize(const k3_tokenizer *tok, const char *ids_csv, FILE *out, k3_err *e);

/* Diagnostic mode of the tokenizer gate: path holds one JSON string per
 * line; prints one line of ids per string, as k3_cmd_tokenize would, so
 * one process encodes a whole corpus. Also decodes each result and fails
 * (exit 1, naming the line) unless it gives back the string's bytes. */
int k3_cmd_tokenize_jsonl(const k3_tokenizer *tok, const char *path, int allow_special,
                          FILE *out, k3_err *e);

#endif
