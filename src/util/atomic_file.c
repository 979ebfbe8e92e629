/* atomic_file.c - see atomic_file.h. */
#include "util/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "util/error.h"

/* Symbolic links followed before giving up (as the kernel's own limit). */
#define MAX_LINKS 40

/* The directory part of path ("." when it has none) into dir[cap]. */
static int dir_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return snprintf(dir, cap, ".") >= (int)cap ? -1 : 0;
    if (slash == path)
        return snprintf(dir, cap, "/") >= (int)cap ? -1 : 0;
    size_t n = (size_t)(slash - path);
    if (n >= cap)
        return -1;
    memcpy(dir, path, n);
    dir[n] = '\0';
    return 0;
}

/* Follows path's links to the file they end at (which need not exist). */
static int follow_links(const char *path, char *out, size_t cap, k3_err *e)
{
    if ((size_t)snprintf(out, cap, "%s", path) >= cap)
        return k3_fail(e, K3_EINPUT, "%s: path too long", path);
    for (int hops = 0;; hops++) {
        struct stat st;
        if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode))
            return K3_OK;
        if (hops == MAX_LINKS)
            return k3_fail(e, K3_EINPUT, "%s: too many levels of symbolic links", path);
        char link[4096], dir[4096];
        ssize_t n = readlink(out, link, sizeof link - 1);
        if (n < 0)
            return k3_fail(e, K3_EINPUT, "%s: %s", out, strerror(errno));
        link[n] = '\0';
        if (link[0] == '/') {
            memcpy(out, link, (size_t)n + 1);
        } else if (dir_of(out, dir, sizeof dir) != 0 ||
                   (size_t)snprintf(out, cap, "%s/%s", dir, link) >= cap) {
            return k3_fail(e, K3_EINPUT, "%s: path too long", path);
        }
    }
}

/* Removes TARGET.tmp-PID-XXXXXX files whose PID no longer runs. */
static void remove_stale(const char *target)
{
    char dir[4096];
    if (dir_of(target, dir, sizeof dir) != 0)
        return;
    const char *slash = strrchr(target, '/');
    const char *base = slash ? slash + 1 : target;
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (strncmp(name, base, blen) || strncmp(name + blen, ".tmp-", 5))
            continue;
        char *end;
        long pid = strtol(name + blen + 5, &end, 10);
        if (pid <= 0 || end[0] != '-' || strlen(end + 1) != 6 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or not ours to ask about): maybe mid-write */
        char stale[8192];
        if ((size_t)snprintf(stale, sizeof stale, "%s/%s", dir, name) < sizeof stale)
            (void)unlink(stale);
    }
    closedir(d);
}

int k3_atomic_begin(k3_atomic_file *a, const char *path, k3_err *e)
{
    a->f = NULL;
    a->path = path;
    a->tmp[0] = '\0';
    if (follow_links(path, a->target, sizeof a->target, e) != K3_OK)
        return e->code;
    struct stat st;
    int exists = stat(a->target, &st) == 0;
    if (exists && !S_ISREG(st.st_mode))
        return k3_fail(e, K3_EINPUT, "%s: exists and is not a regular file", path);
    if ((size_t)snprintf(a->tmp, sizeof a->tmp, "%s.tmp-%ld-XXXXXX", a->target,
                         (long)getpid()) >= sizeof a->tmp)
        return k3_fail(e, K3_EINPUT, "%s: path too long", path);
    remove_stale(a->target);
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        int err = errno;
        a->tmp[0] = '\0';
        return k3_fail(e, K3_EINPUT, "%s: cannot create a file next to it: %s", path,
                       strerror(err));
    }
    if (exists)
        (void)fchmod(fd, st.st_mode & 07777); /* best effort: keep the old permissions */
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        int err = errno;
        close(fd);
        unlink(a->tmp);
        a->tmp[0] = '\0';
        return k3_fail(e, K3_ERUNTIME, "%s: %s", path, strerror(err));
    }
    return K3_OK;
}

/* fsync of the directory holding path, so a completed rename survives a crash. */
static void sync_dir(const char *path)
{
    char dir[4096];
    if (dir_of(path, dir, sizeof dir) != 0)
        return;
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd); /* not every file system supports it on directories */
        close(fd);
    }
}

int k3_atomic_commit(k3_atomic_file *a, k3_err *e)
{
    if (!a->f)
        return k3_fail(e, K3_ERUNTIME, "%s: nothing to commit", a->path);
    int ok = fflush(a->f) == 0 && !ferror(a->f) && fsync(fileno(a->f)) == 0;
    int err = errno;
    ok = (fclose(a->f) == 0) && ok;
    if (!ok && !err)
        err = errno ? errno : EIO;
    a->f = NULL;
    if (ok && rename(a->tmp, a->target) == 0) {
        sync_dir(a->target);
        a->tmp[0] = '\0';
        return K3_OK;
    }
    if (ok)
        err = errno;
    unlink(a->tmp);
    a->tmp[0] = '\0';
    return k3_fail(e, K3_ERUNTIME, "%s: write failed: %s", a->path, strerror(err));
}

void k3_atomic_abort(k3_atomic_file *a)
{
    if (a->f)
        fclose(a->f);
    a->f = NULL;
    if (a->tmp[0])
        unlink(a->tmp);
    a->tmp[0] = '\0';
}

int k3_atomic_probe(const char *path, k3_err *e)
{
    k3_atomic_file a;
    if (k3_atomic_begin(&a, path, e) != K3_OK)
        return e->code;
    k3_atomic_abort(&a);
    return K3_OK;
}
