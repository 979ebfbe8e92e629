/* row_split.h - which rows of a matrix each of N processes holds and
 * computes: the rule of k3-mpi's product split (src/mpi/part.h) and of a
 * per-rank packed trunk (k3 pack-trunk --rank-of, which must bind exactly
 * the rows that rank will use), kept in one place so the two cannot drift.
 *
 * Rows go out in units of K3_ROW_UNIT (16 output floats: one 64-byte line
 * per token), the units dealt as evenly as integer division allows, so any
 * N works (some processes may get none). A rows x cols matrix with fewer
 * than split_min elements is not split (every process holds it whole). */
#ifndef K3_CORE_ROW_SPLIT_H
#define K3_CORE_ROW_SPLIT_H

#include <stdint.h>

#define K3_ROW_UNIT 16
/* The default split_min (elements); k3-mpi and pack-trunk read
 * K3_MPI_SPLIT_MIN from the environment. */
#define K3_ROW_SPLIT_MIN 65536

/* Rows [*lo, *hi) of `rows` that process r of n holds. */
void k3_rows_of(int64_t rows, int r, int n, int64_t *lo, int64_t *hi);
/* 1 when a rows x cols matrix is split over n processes (n > 1, rows in
 * 1..INT_MAX, rows x cols >= split_min), with process r's rows in
 * [*lo, *hi); else 0 (the whole matrix everywhere). */
int k3_row_split(int64_t rows, int64_t cols, int r, int n, int64_t split_min, int64_t *lo,
                 int64_t *hi);

#endif
