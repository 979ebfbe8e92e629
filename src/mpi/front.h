/* front.h - rank 0 as the only front end of a k3-mpi job.
 *
 * Every rank runs the same command on the same inputs (the forward pass is
 * collective, src/mpi/part.h); what reaches the outside is rank 0's:
 *   - stdin: rank 0 reads the job's stdin (mpirun hands it to rank 0 only)
 *     and relays every byte to the other ranks, so each rank's stdin is a
 *     pipe with the same bytes (chat, --prompt-file -) in the same order;
 *   - stdout: the other ranks' is kept in a temporary file, shown only as
 *     k3-mpi --plan's per-rank plans (src/mpi/main.c);
 *   - stderr: the other ranks' is kept in a temporary file and shown, each
 *     line prefixed "k3-mpi: rank R: ", only when that rank fails;
 *   - files: the other ranks' output options (--out, --dump-logits,
 *     --dump-prompt-logits, --dump-cache-trace, --save-state, --history)
 *     point into a private temporary directory removed at the end (a
 *     --history file that exists is copied there first, as it is read).
 * The relay uses its own communicator and thread (MPI_THREAD_MULTIPLE). */
#ifndef K3_MPI_FRONT_H
#define K3_MPI_FRONT_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

/* Starts the relay and, on ranks other than 0, rewrites argv (a new array
 * in *argv_out, valid until k3_mpi_front_end) and redirects stdout/stderr.
 * keep_out: rank 0's stdout is kept too (--plan: printed with the other
 * ranks' through k3_mpi_front_real_stdout; shown as it is on failure).
 * 0, or K3_ERUNTIME with a message on stderr. */
int k3_mpi_front_begin(MPI_Comm comm, int argc, char **argv, int keep_out, char ***argv_out);
/* Rank 0: the job's stdout (stdout itself unless kept); NULL elsewhere. */
FILE *k3_mpi_front_real_stdout(void);
/* This rank's kept stdout so far (at most max bytes, NUL-terminated; *n
 * its length), malloc'd; NULL if not kept or out of memory. */
char *k3_mpi_front_kept_stdout(size_t max, size_t *n);
/* After the command returned rc on this rank: on a follower with rc != 0,
 * shows its kept stderr; stops the relay (rc == 0: in an orderly way that
 * lets every rank finalize) and removes the private directory. */
void k3_mpi_front_end(int rc);

#endif
