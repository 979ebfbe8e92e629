/* atomic_file.c - see atomic_file.h. */
#include "util/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/os.h"

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
        char link[4096], dir[4096];
        int64_t n = k3_os_readlink(out, link, sizeof link);
        if (n == 0)
            return K3_OK;
        if (hops == MAX_LINKS)
            return k3_fail(e, K3_EINPUT, "%s: too many levels of symbolic links", path);
        if (n < 0)
            return k3_fail(e, K3_EINPUT, "%s: %s", out, strerror(errno));
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
        if (pid <= 0 || end[0] != '-' || strlen(end + 1) != 6 || pid == k3_os_pid())
            continue;
        if (k3_os_pid_alive(pid))
            continue; /* alive (or not ours to ask about): maybe mid-write */
        char stale[8192];
        if ((size_t)snprintf(stale, sizeof stale, "%s/%s", dir, name) < sizeof stale)
            (void)k3_os_unlink(stale);
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
                         k3_os_pid()) >= sizeof a->tmp)
        return k3_fail(e, K3_EINPUT, "%s: path too long", path);
    remove_stale(a->target);
    int fd = k3_os_mkstemp(a->tmp);
    if (fd < 0) {
        int err = errno;
        a->tmp[0] = '\0';
        return k3_fail(e, K3_EINPUT, "%s: cannot create a file next to it: %s", path,
                       strerror(err));
    }
    if (exists)
        k3_os_copy_mode(fd, (unsigned)st.st_mode); /* best effort: keep the old permissions */
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        int err = errno;
        close(fd);
        k3_os_unlink(a->tmp);
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
    (void)k3_os_sync_dir(dir); /* not every file system supports it on directories */
}

int k3_atomic_commit(k3_atomic_file *a, k3_err *e)
{
    if (!a->f)
        return k3_fail(e, K3_ERUNTIME, "%s: nothing to commit", a->path);
    int ok = fflush(a->f) == 0 && !ferror(a->f) && k3_os_fsync(fileno(a->f)) == 0;
    int err = errno;
    ok = (fclose(a->f) == 0) && ok;
    if (!ok && !err)
        err = errno ? errno : EIO;
    a->f = NULL;
    if (ok && k3_os_replace(a->tmp, a->target) == 0) {
        sync_dir(a->target);
        a->tmp[0] = '\0';
        return K3_OK;
    }
    if (ok)
        err = errno;
    k3_os_unlink(a->tmp);
    a->tmp[0] = '\0';
    return k3_fail(e, K3_ERUNTIME, "%s: write failed: %s", a->path, strerror(err));
}

void k3_atomic_abort(k3_atomic_file *a)
{
    if (a->f)
        fclose(a->f);
    a->f = NULL;
    if (a->tmp[0])
        k3_os_unlink(a->tmp);
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
