/* atomic_file.h - replacing a file's whole content so that a crash leaves
 * either the old content or the new one, never a mix or a torn tail.
 *
 * The new content goes to a temporary file in the same directory as the
 * file it replaces (so the rename stays within one file system), which is
 * flushed and fsync'ed, given the old file's permissions, renamed over it
 * (atomic in POSIX), and then the directory is fsync'ed so the rename
 * itself is durable. Used for every file k3 writes: reports, logit dumps,
 * cache traces, state files and chat history.
 *
 * Symbolic links: when path is a link (or a chain of them), the file that
 * is replaced is the link's final target, so the link keeps pointing at
 * the new content (a dangling link gets its target created).
 *
 * Temporary files are named "TARGET.tmp-PID-XXXXXX". A process killed
 * before its rename (kill -9, a crash, a power cut) leaves one behind;
 * k3_atomic_begin removes those of TARGET whose PID is no longer running,
 * so they never accumulate. (A PID reused since is left alone, harmlessly,
 * until a later begin finds it gone.) */
#ifndef K3_UTIL_ATOMIC_FILE_H
#define K3_UTIL_ATOMIC_FILE_H

#include <stdio.h>

#include "k3/error.h"

typedef struct k3_atomic_file {
    FILE *f;            /* write the new content here; NULL when not begun */
    const char *path;   /* the path given (used in messages) */
    char target[4096];  /* the file it will replace: path with links followed */
    char tmp[4096];     /* the temporary file's name */
} k3_atomic_file;

/* Creates the temporary file (K3_EINPUT, naming the errno, when path is a
 * directory or its directory does not allow it). */
int k3_atomic_begin(k3_atomic_file *a, const char *path, k3_err *e);
/* Flushes, syncs and renames over the target (K3_ERUNTIME on any failure,
 * which removes the temporary file and leaves the target as it was). */
int k3_atomic_commit(k3_atomic_file *a, k3_err *e);
/* Discards the temporary file (target untouched). Safe on one not begun. */
void k3_atomic_abort(k3_atomic_file *a);
/* Checks now that path could be written later (begin, then abort), so a
 * long run does not find out at its end. */
int k3_atomic_probe(const char *path, k3_err *e);

#endif
