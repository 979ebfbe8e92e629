/* part.h - k3_matmul's row partition over the ranks of an MPI communicator
 * (the hook of core/kernels.h, k3_mm_part).
 *
 * Rank r of N computes rows [lo_r, hi_r) of every product large enough to
 * split, then one MPI_Allgatherv gives every rank all rows. The split is in
 * units of K3_MPI_ROW_UNIT rows (16 output floats: one 64-byte line per
 * token), units dealt out as evenly as integer division allows, so any N
 * works, whether or not it divides the rows (some ranks may get none). Each
 * element is one whole dot computed by one rank in the single-process
 * order, so the product's bits do not depend on N.
 *
 * Products with rows x cols below the split threshold (elements, default
 * K3_MPI_SPLIT_MIN, environment K3_MPI_SPLIT_MIN) are computed whole on
 * every rank: a collective costs microseconds, a small product less. The
 * decision depends on (rows, cols) only, the same on every rank, and
 * either way gives the same bits.
 *
 * Collectives are non-blocking and polled: a rank that waits longer than the
 * timeout (seconds, default K3_MPI_TIMEOUT_S, environment K3_MPI_TIMEOUT)
 * for the others ends the whole job (MPI_Abort, exit 1) naming itself, so a
 * hung peer never hangs the job silently. Threading: one thread at a time
 * (the one running the forward pass). */
#ifndef K3_MPI_PART_H
#define K3_MPI_PART_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "core/kernels.h"
#include "core/row_split.h"
#include "gen/draft.h"
#include "model/moe_part.h"

#define K3_MPI_ROW_UNIT  K3_ROW_UNIT
#define K3_MPI_SPLIT_MIN K3_ROW_SPLIT_MIN
#define K3_MPI_TIMEOUT_S 900

/* What the partition did, counted in the hook (the cost model's inputs). */
typedef struct k3_mpi_stats {
    uint64_t products;  /* k3_matmul calls */
    uint64_t split;     /* of them split across ranks (one collective each) */
    uint64_t tokens;    /* sum of T over split products */
    uint64_t bytes_own; /* bytes of this rank's slices (what it contributes) */
    uint64_t bytes_in;  /* bytes of the other ranks' slices it received */
    /* (these four: k3_matmul's gathers only; the experts' below) */
    double wait_s;      /* seconds spent in collectives (waiting included) */
    uint64_t expert_gathers; /* expert gathers, one per MoE layer a call (experts.c) */
    uint64_t expert_rows;    /* expert outputs they gathered (k a token) */
    uint64_t experts_here;   /* of those, the ones this rank computed */
    uint64_t expert_floats_in; /* floats of the other ranks' expert outputs received */
} k3_mpi_stats;

typedef struct k3_mpi_part {
    MPI_Comm comm;
    int rank, size;
    int64_t split_min; /* rows x cols below this: whole on every rank */
    double timeout_s;
    int *counts, *displs; /* [size] of the current gather */
    /* Packed slices for T > 1, [T][rows] by rank: grown to the largest split
     * product's T x rows floats, outside the memory plan (docs/SCALE.md). */
    float *buf;
    size_t buf_floats;
    int64_t lo, hi; /* this rank's rows of the current product */
    k3_mpi_stats st;
    k3_mm_part hook; /* what k3_mm_set_part gets; ctx = this */
    k3_moe_part moe_hook; /* what k3_moe_set_part gets (experts.c); ctx = this */
    float *ebuf;          /* experts.c: this rank's outputs, then everyone's */
    size_t ebuf_floats;
    k3_spec_agree spec_hook; /* what k3_spec_set_agree gets (spec.c); ctx = this */
} k3_mpi_part;

/* Sets p up over comm (reads the environment); 0 or K3_ERUNTIME with a
 * message on stderr. */
int k3_mpi_part_init(k3_mpi_part *p, MPI_Comm comm);
void k3_mpi_part_free(k3_mpi_part *p);
/* Sets p->moe_hook up: one token's routed experts split by expert id
 * (model/moe_part.h), outputs gathered with one MPI_Allgatherv (experts.c). */
void k3_mpi_experts_init(k3_mpi_part *p);
/* Sets p->spec_hook up: each speculative step's draft count is rank 0's,
 * broadcast over p's communicator (spec.c). */
void k3_mpi_spec_init(k3_mpi_part *p);
/* Rows [*lo, *hi) of `rows` that rank r of n computes. */
void k3_mpi_rows_of(int64_t rows, int r, int n, int64_t *lo, int64_t *hi);
/* Completes *rq, polling; past the timeout, ends the job naming what
 * waited (what). */
void k3_mpi_wait(const k3_mpi_part *p, MPI_Request *rq, const char *what);

#endif
