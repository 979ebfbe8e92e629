/* os_posix.c - util/os.h and util/os_net.h on POSIX systems (Linux; macOS
 * shares this file but is neither built nor tested here). */
#if !defined(_WIN32)
#if defined(__linux__)
#define _GNU_SOURCE /* O_DIRECT, preadv, flock */
#elif defined(__APPLE__)
#define _DARWIN_C_SOURCE /* F_NOCACHE, preadv, flock */
#endif
#include "util/os.h"
#include "util/os_net.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"

/* ---- files ---- */

int k3_os_open_input(const char *path)
{
    return open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
}

int k3_os_input_blocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ? -1 : 0;
}

int k3_os_open_output(const char *path, int direct)
{
#ifdef O_DIRECT
    if (direct) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
        if (fd >= 0 || errno != EINVAL)
            return fd;
    }
#else
    (void)direct;
#endif
    return open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}

int k3_os_is_socket_mode(unsigned mode)
{
    return S_ISSOCK((mode_t)mode);
}

int64_t k3_os_pread(int fd, void *buf, size_t n, uint64_t off)
{
    return (int64_t)pread(fd, buf, n, (off_t)off);
}

int64_t k3_os_preadv(int fd, const k3_os_iov *v, int niov, uint64_t off)
{
    struct iovec iov[64];
    if (niov < 1 || niov > 64) {
        errno = EINVAL;
        return -1;
    }
    for (int i = 0; i < niov; i++) {
        iov[i].iov_base = v[i].buf;
        iov[i].iov_len = v[i].len;
    }
    return (int64_t)preadv(fd, iov, niov, (off_t)off);
}

int64_t k3_os_pwrite(int fd, const void *buf, size_t n, uint64_t off)
{
    ssize_t w = pwrite(fd, buf, n, (off_t)off);
#ifdef O_DIRECT
    /* A file system that refuses a direct write: go on buffered. */
    int fl;
    if (w < 0 && errno == EINVAL && (fl = fcntl(fd, F_GETFL)) >= 0 && (fl & O_DIRECT) &&
        fcntl(fd, F_SETFL, fl & ~O_DIRECT) == 0)
        w = pwrite(fd, buf, n, (off_t)off);
#endif
    return (int64_t)w;
}

int k3_os_set_direct(int fd, int on)
{
#if defined(O_DIRECT)
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, on ? fl | O_DIRECT : fl & ~O_DIRECT) == 0 ? 0 : -1;
#elif defined(__APPLE__)
    return fcntl(fd, F_NOCACHE, on ? 1 : 0) == 0 ? 0 : -1;
#else
    (void)fd;
    if (!on)
        return 0;
    errno = ENOTSUP; /* no switch: buffered, and not counted as a refusal */
    return -1;
#endif
}

int k3_os_fsync(int fd)
{
    return fsync(fd);
}

int k3_os_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int k3_os_replace(const char *from, const char *to)
{
    return rename(from, to);
}

int k3_os_unlink(const char *path)
{
    return unlink(path);
}

int k3_os_mkdir(const char *path)
{
    return mkdir(path, 0777);
}

int64_t k3_os_getline(char **line, size_t *cap, FILE *f)
{
    return (int64_t)getline(line, cap, f);
}

int k3_os_mkstemp(char *tmpl)
{
    return mkstemp(tmpl);
}

void k3_os_copy_mode(int fd, unsigned mode)
{
    (void)fchmod(fd, (mode_t)(mode & 07777)); /* best effort */
}

int64_t k3_os_readlink(const char *path, char *buf, size_t cap)
{
    struct stat st;
    if (cap == 0 || lstat(path, &st) != 0 || !S_ISLNK(st.st_mode))
        return 0;
    ssize_t n = readlink(path, buf, cap - 1);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return (int64_t)n;
}

int k3_os_lock_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY);
    if (fd < 0)
        return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        close(fd);
        errno = EWOULDBLOCK;
        return -1;
    }
    return fd; /* locked, or a file system without locks: unlocked */
}

void k3_os_close_lock(int lock)
{
    if (lock >= 0)
        close(lock);
}

uint64_t k3_os_free_bytes(const char *dir)
{
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0)
        return UINT64_MAX;
    return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* ---- processes and memory ---- */

void k3_os_die(void)
{
    raise(SIGKILL);
}

long k3_os_pid(void)
{
    return (long)getpid();
}

int k3_os_pid_alive(long pid)
{
    return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

void *k3_os_aligned_alloc(size_t align, size_t n)
{
    void *p = NULL;
    return posix_memalign(&p, align, n ? n : 1) == 0 ? p : NULL;
}

void k3_os_aligned_free(void *p)
{
    free(p);
}

static uint64_t read_u64_file(const char *path, int *is_max)
{
    char buf[64] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = 0;
    fclose(f);
    if (is_max)
        *is_max = !strncmp(buf, "max", 3);
    return strtoull(buf, NULL, 10);
}

/* Room left under our cgroup's memory limit, and the limit (0: none).
 * cgroup v2: "0::/path" in /proc/self/cgroup names our group; its
 * memory.max and memory.current. cgroup v1 (still common, e.g. in
 * containers): "N:memory:/path"; memory.limit_in_bytes (a huge value means
 * no limit) and memory.usage_in_bytes. */
static uint64_t cgroup_room(uint64_t *limit)
{
    char line[512], path[700];
    FILE *f = fopen("/proc/self/cgroup", "r");
    *limit = 0;
    if (!f)
        return 0;
    uint64_t room = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const char *dir, *max_file, *cur_file, *root;
        char *colon = strchr(line, ':');
        if (!colon || !strchr(colon + 1, ':'))
            continue;
        if (!strncmp(line, "0::", 3)) {
            dir = line + 3;
            root = "/sys/fs/cgroup";
            max_file = "memory.max";
            cur_file = "memory.current";
        } else if (!strncmp(strchr(line, ':'), ":memory:", 8)) {
            dir = strchr(line, ':') + 8;
            root = "/sys/fs/cgroup/memory";
            max_file = "memory.limit_in_bytes";
            cur_file = "memory.usage_in_bytes";
        } else {
            continue;
        }
        int is_max = 0;
        snprintf(path, sizeof path, "%s%s/%s", root, dir, max_file);
        uint64_t max = read_u64_file(path, &is_max);
        if (is_max || !max || max >= ((uint64_t)1 << 60))
            continue;
        snprintf(path, sizeof path, "%s%s/%s", root, dir, cur_file);
        uint64_t cur = read_u64_file(path, NULL);
        uint64_t r = max > cur ? max - cur : 0;
        if (!*limit || max < *limit) {
            *limit = max;
            room = r;
        }
    }
    fclose(f);
    return room;
}

uint64_t k3_os_mem_available(uint64_t *mem_available, uint64_t *cgroup_limit)
{
    uint64_t avail = 0, limit = 0;
    char line[256];
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "MemAvailable:", 13))
                avail = strtoull(line + 13, NULL, 10) * 1024;
        fclose(f);
    }
    uint64_t room = cgroup_room(&limit);
    if (mem_available)
        *mem_available = avail;
    if (cgroup_limit)
        *cgroup_limit = limit;
    if (limit && (!avail || room < avail))
        return room;
    return avail;
}

long long k3_os_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
#if defined(__APPLE__)
    return (long long)ru.ru_maxrss;
#else
    return (long long)ru.ru_maxrss * 1024;
#endif
}

/* ---- console, interruption, clock ---- */

void k3_os_console_init(void)
{
}

void k3_os_utf8_args(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
}

void k3_os_on_stop(void (*handler)(int sig))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error return, not a death */
}

void k3_os_on_interrupt(void (*handler)(int sig))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler ? handler : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

double k3_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- sockets ---- */

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SIGPIPE is ignored process-wide as well (k3_os_on_stop) */
#endif

int k3_sock_startup(void)
{
    return 0;
}

int k3_sock_accept(int lfd, struct sockaddr *sa, socklen_t *len)
{
    return accept(lfd, sa, len);
}

int k3_sock_close(int fd)
{
    return close(fd);
}

int k3_sock_shutdown_write(int fd)
{
    return shutdown(fd, SHUT_WR);
}

int k3_sock_pair(int fds[2])
{
    return socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
}

int k3_sock_set_nonblock(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) == 0 ? 0 : -1;
}

int k3_sock_set_send_timeout(int fd, double seconds)
{
    struct timeval tv;
    tv.tv_sec = (time_t)seconds;
    tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
    return setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int64_t k3_sock_send(int fd, const void *buf, size_t n, int dontwait)
{
    return (int64_t)send(fd, buf, n, MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0));
}

int64_t k3_sock_recv(int fd, void *buf, size_t n, int dontwait)
{
    return (int64_t)recv(fd, buf, n, dontwait ? MSG_DONTWAIT : 0);
}

int k3_sock_poll(struct pollfd *p, size_t n, int ms)
{
    return poll(p, (nfds_t)n, ms);
}

#else
typedef int k3_os_posix_unused; /* ISO C: a translation unit is never empty */
#endif
