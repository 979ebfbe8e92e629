/* clock.c - see clock.h. */
#include "util/clock.h"

#include <time.h>

double k3_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
