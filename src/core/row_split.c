/* row_split.c - see row_split.h. */
#include "core/row_split.h"

#include <limits.h>

void k3_rows_of(int64_t rows, int r, int n, int64_t *lo, int64_t *hi)
{
    int64_t units = (rows + K3_ROW_UNIT - 1) / K3_ROW_UNIT;
    int64_t u0 = units * r / n, u1 = units * (r + 1) / n;
    *lo = u0 * K3_ROW_UNIT < rows ? u0 * K3_ROW_UNIT : rows;
    *hi = u1 * K3_ROW_UNIT < rows ? u1 * K3_ROW_UNIT : rows;
}

int k3_row_split(int64_t rows, int64_t cols, int r, int n, int64_t split_min, int64_t *lo,
                 int64_t *hi)
{
    /* rows x cols: rows <= INT_MAX and cols from a checked config, no overflow. */
    if (n < 2 || rows <= 0 || rows > INT_MAX || rows * cols < split_min)
        return 0;
    k3_rows_of(rows, r, n, lo, hi);
    return 1;
}
