/* clock.h - the one clock k3 times things with (implemented by the platform
 * layer: util/os_posix.c clock_gettime(CLOCK_MONOTONIC), util/os_win.c
 * QueryPerformanceCounter). */
#ifndef K3_UTIL_CLOCK_H
#define K3_UTIL_CLOCK_H

/* Seconds on the monotonic clock (an arbitrary origin: only differences
 * mean anything). Every phase timing, step table and I/O counter uses it,
 * so their numbers add up. */
double k3_seconds(void);

#endif
