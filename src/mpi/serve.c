/* serve.c - see serve.h. */
#include "mpi/serve.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "k3/error.h"

/* A follower's poll interval while it waits for a command (ns). */
#define IDLE_POLL_NS 1000000L

static int relay_bcast(void *ctx, void *bytes, size_t n, int idle, k3_err *e)
{
    k3_mpi_serve *s = ctx;
    MPI_Request rq;
    if (n > INT_MAX) {
        e->code = K3_ERUNTIME;
        snprintf(e->msg, sizeof e->msg, "the op stream: a %zu-byte command", n);
        return e->code;
    }
    MPI_Ibcast(bytes, (int)n, MPI_BYTE, 0, s->comm, &rq);
    if (!idle) {
        k3_mpi_wait(s->part, &rq, "the serve op stream");
        return K3_OK;
    }
    for (;;) {
        int done = 0;
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (done)
            return K3_OK;
        struct timespec ts = { 0, IDLE_POLL_NS };
        nanosleep(&ts, NULL);
    }
}

/* The leader's forward failed past its checks: the followers may be inside
 * a collective it left, so the job ends (with the error's exit code). */
static void relay_fatal(void *ctx, const k3_err *e)
{
    k3_mpi_serve *s = ctx;
    fprintf(stderr, "k3-mpi: rank %d: error: a forward pass failed while serving (%s); "
            "the other ranks cannot go on: ending the job\n", s->part->rank, e->msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, e->code ? e->code : K3_ERUNTIME);
}

int k3_mpi_serve_begin(k3_mpi_serve *s, const k3_mpi_part *p)
{
    s->part = p;
    if (MPI_Comm_dup(p->comm, &s->comm) != MPI_SUCCESS) {
        fprintf(stderr, "k3-mpi: error: cannot make the op stream's communicator\n");
        return K3_ERUNTIME;
    }
    s->relay.ctx = s;
    s->relay.follower = p->rank != 0;
    s->relay.bcast = relay_bcast;
    s->relay.fatal = relay_fatal;
    if (s->relay.follower) {
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
    }
    k3_engine_set_relay(&s->relay);
    return 0;
}

void k3_mpi_serve_end(k3_mpi_serve *s)
{
    k3_engine_set_relay(NULL);
    MPI_Comm_free(&s->comm);
}
