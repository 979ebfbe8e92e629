/* error.c - see error.h. */
#include "error.h"

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

char *k3_read_small_file(k3_err *e, const char *path, size_t max_bytes, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        k3_fail(e, K3_EINPUT, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = k3_malloc(e, cap + 1, path);
    while (buf) {
        if (n == cap) {
            if (cap >= max_bytes) {
                k3_fail(e, K3_EINPUT, "%s: larger than the %zu-byte limit for this kind of file",
                        path, max_bytes);
                free(buf);
                buf = NULL;
                break;
            }
            cap = cap * 2 > max_bytes ? max_bytes : cap * 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                k3_fail(e, K3_ERUNTIME, "%s: out of memory", path);
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                k3_fail(e, K3_ERUNTIME, "%s: read error: %s", path, strerror(errno));
                free(buf);
                buf = NULL;
            }
            break;
        }
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = n;
    }
    return buf;
}
