/* file.h - opening the files k3 reads, so that what a path names can never
 * hang or mislead the engine.
 *
 * Every input (config.json, the index, shards, tokenizer files, saved
 * states, histories, prompt and chat files) is opened through
 * k3_open_input: the open itself never blocks (O_NONBLOCK, so a FIFO with no
 * writer does not hang it), and anything that is not a regular file (a
 * directory, FIFO, socket or device) is refused with K3_EINPUT naming the
 * path and what it is. The descriptor handed back is blocking again. */
#ifndef K3_UTIL_FILE_H
#define K3_UTIL_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "k3/error.h"

/* A read-only descriptor (close-on-exec) of the regular file at path, or -1
 * with e set: K3_EINPUT when it cannot be opened or is not a regular file. */
int k3_open_input(const char *path, k3_err *e);

/* The same as a stdio stream ("rb"), or NULL with e set. */
FILE *k3_fopen_input(const char *path, k3_err *e);

/* Reads a whole small file (configs, headers, prompts; never weights) into a
 * malloc'd buffer, NUL-terminated, its length in *len (may be NULL). A file
 * of up to max_bytes is read whole; a larger one is refused (K3_EINPUT).
 * The path "-" reads standard input, to the same limit. */
char *k3_read_small_file(k3_err *e, const char *path, size_t max_bytes, size_t *len);

#endif
