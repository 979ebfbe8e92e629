/* spec.c - speculation's draft count agreed over the ranks (gen/draft.h
 * k3_spec_agree): rank 0's cost gate decides for every rank.
 *
 * The gate chooses each step's drafts from the process's own measured
 * call times, which differ between ranks; a rank that verified another
 * count of rows would enter other collectives (a mismatched gather). Every
 * rank runs the same decode loop, so each reaches each step's choice at
 * the same point between the same collectives: one MPI_Ibcast of rank 0's
 * count there keeps the calls identical. What the drafts are follows from
 * the count and the ids (ngram), or from forward passes every rank runs
 * alike (self), so it is the same everywhere without being sent. */
#include <stdint.h>

#include "mpi/part.h"

static size_t agree(void *ctx, size_t n)
{
    k3_mpi_part *p = ctx;
    uint64_t v = (uint64_t)n;
    MPI_Request rq;
    MPI_Ibcast(&v, 1, MPI_UINT64_T, 0, p->comm, &rq);
    k3_mpi_wait(p, &rq, "the speculative step's draft count");
    return (size_t)v;
}

void k3_mpi_spec_init(k3_mpi_part *p)
{
    p->spec_hook.fn = agree;
    p->spec_hook.ctx = p;
}
