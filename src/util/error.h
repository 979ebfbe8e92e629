/* error.h - helpers for the one error convention of k3 (k3/error.h).
 *
 * Every fallible function takes a k3_err * and returns an int status that is
 * also the process exit code the CLI uses, so a failure deep in a parser
 * reaches the user unchanged. */
#ifndef K3_UTIL_ERROR_H
#define K3_UTIL_ERROR_H

#include <stddef.h>

#include "k3/error.h"

#if defined(__MINGW32__)
/* mingw-w64 builds with __USE_MINGW_ANSI_STDIO (C99 printf, %zu), which
 * GCC checks as gnu_printf; its plain printf means Microsoft's. */
#define K3_PRINTF(a, b) __attribute__((format(gnu_printf, a, b)))
#elif defined(__GNUC__)
#define K3_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define K3_PRINTF(a, b)
#endif

/* Records the first failure (later calls do not overwrite it) and returns
 * code, so callers can write `return k3_fail(e, K3_EINPUT, "...")`. */
int k3_fail(k3_err *e, int code, const char *fmt, ...) K3_PRINTF(3, 4);

/* Allocation that reports failure through e (code 1) instead of crashing. */
void *k3_malloc(k3_err *e, size_t n, const char *what);
void *k3_calloc(k3_err *e, size_t count, size_t size, const char *what);

#endif
