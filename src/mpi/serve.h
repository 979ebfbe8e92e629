/* serve.h - `k3-mpi serve`: the server's op stream (server/engine.h) over
 * MPI.
 *
 * Rank 0 is the leader: it serves HTTP and broadcasts each model operation
 * before running it; every other rank follows (k3 serve runs
 * k3_engine_follow there: no socket). The commands travel by MPI_Ibcast
 * from rank 0 on a communicator of their own (a duplicate of the job's),
 * polled: a leader's broadcast waits at most the collectives' timeout
 * (part.h); a follower waiting for its next command waits without bound
 * (an idle server), sleeping between polls, so an idle job costs no core.
 * Followers ignore SIGINT and SIGTERM: serving ends when rank 0 stops (its
 * signal, --exit-after) and broadcasts the stop, so that every rank
 * finalizes; a rank that dies still ends the job through mpirun. */
#ifndef K3_MPI_SERVE_H
#define K3_MPI_SERVE_H

#include <mpi.h>

#include "mpi/part.h"
#include "server/engine.h"

typedef struct k3_mpi_serve {
    MPI_Comm comm;
    const k3_mpi_part *part;
    k3_engine_relay relay;
} k3_mpi_serve;

/* Collective over p's communicator: sets the relay (k3_engine_set_relay);
 * 0, or K3_ERUNTIME with a message on stderr. */
int k3_mpi_serve_begin(k3_mpi_serve *s, const k3_mpi_part *p);
/* Clears the relay and frees the communicator (after serving). */
void k3_mpi_serve_end(k3_mpi_serve *s);

#endif
