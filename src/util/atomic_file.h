/* atomic_file.h - replacing a file's whole content so that a crash leaves
 * either the old content or the new one, never a mix or a torn tail.
 *
 * The new content goes to a temporary file in the same directory (so the
 * rename stays within one file system), which is flushed and fsync'ed,
 * given the old file's permissions, renamed over the path (atomic in
 * POSIX), and then the directory is fsync'ed so the rename itself is
 * durable. Used for state files and chat history. */
#ifndef K3_UTIL_ATOMIC_FILE_H
#define K3_UTIL_ATOMIC_FILE_H

#include <stdio.h>

#include "k3/error.h"

typedef struct k3_atomic_file {
    FILE *f;          /* write the new content here */
    const char *path; /* the file it will replace */
    char tmp[4096];   /* the temporary file's name */
} k3_atomic_file;

/* Creates the temporary file (K3_EINPUT when the directory does not allow it). */
int k3_atomic_begin(k3_atomic_file *a, const char *path, k3_err *e);
/* Flushes, syncs and renames over path (K3_ERUNTIME on any failure, which
 * removes the temporary file and leaves path as it was). */
int k3_atomic_commit(k3_atomic_file *a, k3_err *e);
/* Discards the temporary file (path untouched). */
void k3_atomic_abort(k3_atomic_file *a);

#endif
