/* error.c - see error.h. */
#include "util/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int k3_fail(k3_err *e, int code, const char *fmt, ...)
{
    if (e && e->code == K3_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

void *k3_malloc(k3_err *e, size_t n, const char *what)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        k3_fail(e, K3_ERUNTIME, "out of memory allocating %zu bytes for %s", n, what);
    return p;
}

void *k3_calloc(k3_err *e, size_t count, size_t size, const char *what)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        k3_fail(e, K3_ERUNTIME, "out of memory allocating %zu x %zu bytes for %s",
                count, size, what);
    return p;
}
