/* atomic_file.c - see atomic_file.h. */
#include "util/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

int k3_atomic_begin(k3_atomic_file *a, const char *path, k3_err *e)
{
    a->f = NULL;
    a->path = path;
    if ((size_t)snprintf(a->tmp, sizeof a->tmp, "%s.tmp-XXXXXX", path) >= sizeof a->tmp)
        return k3_fail(e, K3_EINPUT, "%s: path too long", path);
    int fd = mkstemp(a->tmp);
    if (fd < 0)
        return k3_fail(e, K3_EINPUT, "%s: cannot create a file next to it: %s", path,
                       strerror(errno));
    struct stat st;
    if (stat(path, &st) == 0)
        (void)fchmod(fd, st.st_mode & 07777); /* best effort: keep the old permissions */
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        close(fd);
        unlink(a->tmp);
        return k3_fail(e, K3_ERUNTIME, "%s: %s", a->tmp, strerror(errno));
    }
    return K3_OK;
}

/* fsync of the directory holding path, so a completed rename survives a crash. */
static void sync_dir(const char *path)
{
    char dir[4096] = ".";
    const char *slash = strrchr(path, '/');
    if (slash == path) {
        strcpy(dir, "/");
    } else if (slash) {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir)
            return;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd); /* not every file system supports it on directories */
        close(fd);
    }
}

int k3_atomic_commit(k3_atomic_file *a, k3_err *e)
{
    int ok = fflush(a->f) == 0 && !ferror(a->f) && fsync(fileno(a->f)) == 0;
    int err = errno;
    ok = (fclose(a->f) == 0) && ok;
    a->f = NULL;
    if (ok && rename(a->tmp, a->path) == 0) {
        sync_dir(a->path);
        return K3_OK;
    }
    if (ok)
        err = errno;
    unlink(a->tmp);
    return k3_fail(e, K3_ERUNTIME, "%s: write failed: %s", a->path, strerror(err));
}

void k3_atomic_abort(k3_atomic_file *a)
{
    if (a->f)
        fclose(a->f);
    a->f = NULL;
    unlink(a->tmp);
}
