/* pread_all.c - see pread_all.h. */
#include "io/pread_all.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "io/fault.h"
#include "util/os.h"

ssize_t k3_pread_all(int fd, void *buf, size_t n, off_t off)
{
    size_t done = 0;
    while (done < n) {
        int64_t r = k3_os_pread(fd, (char *)buf + done, n - done, (uint64_t)off + done);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

/* One attempt with the fault shim's say. */
static ssize_t attempt(int fd, void *buf, size_t n, off_t off)
{
    int mode = k3_fault_read();
    if (mode == K3_FAULT_FAIL || mode == K3_FAULT_EINVAL) {
        errno = mode == K3_FAULT_FAIL ? EIO : EINVAL;
        return -1;
    }
    ssize_t got = k3_pread_all(fd, buf, n, off);
    if (got > 0 && mode == K3_FAULT_SHORT && (size_t)got == n)
        got--;
    if (got > 0 && mode == K3_FAULT_CORRUPT)
        k3_fault_invert(buf, (size_t)got);
    return got;
}

int k3_pread_weight(int fd, void *buf, size_t n, off_t off, char *why, size_t whylen)
{
    for (int i = 0; i < K3_READ_ATTEMPTS; i++) {
        ssize_t got = attempt(fd, buf, n, off);
        if (got == (ssize_t)n)
            return 0;
        if (got < 0)
            snprintf(why, whylen, "%s", strerror(errno));
        else
            snprintf(why, whylen, "short read: %lld of %zu bytes", (long long)got, n);
    }
    return -1;
}
