/* file.c - see file.h. */
#include "util/file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/os.h"

static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (k3_os_is_socket_mode((unsigned)m))
        return "a socket";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device";
    return "not a regular file";
}

int k3_open_input(const char *path, k3_err *e)
{
    int fd = k3_os_open_input(path);
    if (fd < 0) {
        k3_fail(e, K3_EINPUT, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        k3_fail(e, K3_ERUNTIME, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        k3_fail(e, K3_EINPUT, "%s: is %s, not a regular file", path, kind_of(st.st_mode));
        close(fd);
        return -1;
    }
    if (k3_os_input_blocking(fd) != 0) {
        k3_fail(e, K3_ERUNTIME, "%s: fcntl: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

FILE *k3_fopen_input(const char *path, k3_err *e)
{
    int fd = k3_open_input(path, e);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        k3_fail(e, K3_ERUNTIME, "%s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

/* Reads f to its end into a buffer of at most max_bytes; one byte more is
 * asked for, so a file of exactly max_bytes is accepted and a longer one
 * is not. */
static char *read_all(k3_err *e, FILE *f, const char *path, size_t max_bytes, size_t *len)
{
    size_t cap = 4096 < max_bytes ? 4096 : max_bytes, n = 0;
    char *buf = k3_malloc(e, cap + 1, path);
    while (buf) {
        if (n == cap) {
            if (cap >= max_bytes) {
                int c = fgetc(f);
                if (c == EOF && !ferror(f))
                    break;
                k3_fail(e, K3_EINPUT, "%s: larger than the %zu-byte limit for this kind of file",
                        path, max_bytes);
                free(buf);
                return NULL;
            }
            cap = cap > max_bytes / 2 ? max_bytes : cap * 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                k3_fail(e, K3_ERUNTIME, "%s: out of memory", path);
                free(buf);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (buf && ferror(f)) {
        k3_fail(e, K3_ERUNTIME, "%s: read error: %s", path, strerror(errno));
        free(buf);
        return NULL;
    }
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = n;
    }
    return buf;
}

char *k3_read_small_file(k3_err *e, const char *path, size_t max_bytes, size_t *len)
{
    if (!strcmp(path, "-"))
        return read_all(e, stdin, "standard input", max_bytes, len);
    FILE *f = k3_fopen_input(path, e);
    if (!f)
        return NULL;
    char *buf = read_all(e, f, path, max_bytes, len);
    fclose(f);
    return buf;
}
