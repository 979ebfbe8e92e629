/* os_win.c - util/os.h and util/os_net.h on Windows (mingw-w64; tested
 * under Wine by `make test-windows`, tests/windows/run.sh).
 *
 * Files are C runtime descriptors (_wopen, binary mode) whose Win32 HANDLE
 * (_get_osfhandle) the positioned calls use: ReadFile/WriteFile with an
 * OVERLAPPED offset on a synchronous handle read or write at that offset
 * without any shared file position mattering. Paths arrive as UTF-8 and are
 * converted with MultiByteToWideChar for the W calls. */
#if defined(_WIN32)
#include "util/os.h"
#include "util/os_net.h"

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <windows.h>
#include <psapi.h>
#include <shellapi.h>

#include "util/clock.h"

/* UTF-8 path to a malloc'd UTF-16 string; NULL with errno (EINVAL: not
 * UTF-8, ENOMEM). */
static wchar_t *wide(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    if (n <= 0) {
        errno = EINVAL;
        return NULL;
    }
    wchar_t *w = malloc((size_t)n * sizeof *w);
    if (!w) {
        errno = ENOMEM;
        return NULL;
    }
    MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n);
    return w;
}

/* The last Win32 error as errno. */
static int errno_of(DWORD err)
{
    switch (err) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
        return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
    case ERROR_LOCK_VIOLATION:
        return EACCES;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
        return ENOMEM;
    case ERROR_INVALID_PARAMETER:
        return EINVAL;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
        return ENOSPC;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS:
        return EEXIST;
    default:
        return EIO;
    }
}

static int fail_win(void)
{
    errno = errno_of(GetLastError());
    return -1;
}

static int wopen(const char *path, int flags, int mode)
{
    wchar_t *w = wide(path);
    if (!w)
        return -1;
    int fd = _wopen(w, flags | _O_BINARY | _O_NOINHERIT, mode);
    int err = errno;
    free(w);
    errno = err;
    return fd;
}

/* ---- files ---- */

int k3_os_open_input(const char *path)
{
    /* Opening a named pipe with no writer does not block on Windows. */
    return wopen(path, _O_RDONLY, 0);
}

int k3_os_input_blocking(int fd)
{
    (void)fd;
    return 0;
}

int k3_os_open_output(const char *path, int direct)
{
    (void)direct; /* unbuffered writes: not used on Windows */
    return wopen(path, _O_WRONLY | _O_CREAT | _O_TRUNC, _S_IREAD | _S_IWRITE);
}

int k3_os_is_socket_mode(unsigned mode)
{
    (void)mode; /* the C runtime has no socket file type */
    return 0;
}

static HANDLE handle_of(int fd)
{
    return (HANDLE)_get_osfhandle(fd);
}

int64_t k3_os_pread(int fd, void *buf, size_t n, uint64_t off)
{
    HANDLE h = handle_of(fd);
    OVERLAPPED ov;
    DWORD got = 0, ask = n > 0x40000000u ? 0x40000000u : (DWORD)n;
    if (h == INVALID_HANDLE_VALUE) {
        errno = EBADF;
        return -1;
    }
    memset(&ov, 0, sizeof ov);
    ov.Offset = (DWORD)off;
    ov.OffsetHigh = (DWORD)(off >> 32);
    if (!ReadFile(h, buf, ask, &got, &ov)) {
        DWORD err = GetLastError();
        if (err == ERROR_HANDLE_EOF)
            return 0;
        errno = errno_of(err);
        return -1;
    }
    return (int64_t)got;
}

int64_t k3_os_preadv(int fd, const k3_os_iov *v, int niov, uint64_t off)
{
    /* One request per buffer (ReadFileScatter needs overlapped handles and
     * page-sized segments); a short transfer ends the call, as preadv. */
    int64_t done = 0;
    for (int i = 0; i < niov; i++) {
        int64_t r = k3_os_pread(fd, v[i].buf, v[i].len, off + (uint64_t)done);
        if (r < 0)
            return done ? done : -1;
        done += r;
        if ((size_t)r < v[i].len)
            break;
    }
    return done;
}

int64_t k3_os_pwrite(int fd, const void *buf, size_t n, uint64_t off)
{
    HANDLE h = handle_of(fd);
    OVERLAPPED ov;
    DWORD put = 0, ask = n > 0x40000000u ? 0x40000000u : (DWORD)n;
    if (h == INVALID_HANDLE_VALUE) {
        errno = EBADF;
        return -1;
    }
    memset(&ov, 0, sizeof ov);
    ov.Offset = (DWORD)off;
    ov.OffsetHigh = (DWORD)(off >> 32);
    if (!WriteFile(h, buf, ask, &put, &ov))
        return fail_win();
    return (int64_t)put;
}

int k3_os_set_direct(int fd, int on)
{
    /* FILE_FLAG_NO_BUFFERING is fixed when a handle is created: reopen the
     * file with or without it and put the new handle under the same
     * descriptor (_dup2 duplicates the handle, which keeps its flags). */
    HANDLE h = ReOpenFile(handle_of(fd), GENERIC_READ,
                          FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                          on ? FILE_FLAG_NO_BUFFERING : 0);
    if (h == INVALID_HANDLE_VALUE) {
        DWORD err = GetLastError();
        errno = err == ERROR_INVALID_PARAMETER ? EINVAL : errno_of(err);
        return -1;
    }
    int nfd = _open_osfhandle((intptr_t)h, _O_RDONLY | _O_BINARY);
    if (nfd < 0) {
        CloseHandle(h);
        return -1;
    }
    int rc = _dup2(nfd, fd);
    _close(nfd);
    return rc == 0 ? 0 : -1;
}

int k3_os_fsync(int fd)
{
    return FlushFileBuffers(handle_of(fd)) ? 0 : fail_win();
}

int k3_os_sync_dir(const char *dir)
{
    (void)dir; /* MOVEFILE_WRITE_THROUGH already made the rename durable */
    return 0;
}

int k3_os_replace(const char *from, const char *to)
{
    wchar_t *a = wide(from), *b = a ? wide(to) : NULL;
    int rc = -1;
    if (a && b)
        rc = MoveFileExW(a, b, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH) ? 0 : fail_win();
    free(a);
    free(b);
    return rc;
}

int k3_os_unlink(const char *path)
{
    wchar_t *w = wide(path);
    if (!w)
        return -1;
    int rc = _wunlink(w);
    int err = errno;
    free(w);
    errno = err;
    return rc;
}

int k3_os_mkdir(const char *path)
{
    wchar_t *w = wide(path);
    if (!w)
        return -1;
    int rc = CreateDirectoryW(w, NULL) ? 0 : fail_win();
    int err = errno;
    free(w);
    errno = err;
    return rc;
}

int64_t k3_os_getline(char **line, size_t *cap, FILE *f)
{
    size_t n = 0;
    int c;
    while ((c = getc(f)) != EOF) {
        if (n + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 128;
            char *nl = nc > *cap ? realloc(*line, nc) : NULL;
            if (!nl) {
                errno = ENOMEM;
                return -1;
            }
            *line = nl;
            *cap = nc;
        }
        (*line)[n++] = (char)c;
        if (c == '\n')
            break;
    }
    if (n == 0)
        return -1;
    (*line)[n] = '\0';
    return (int64_t)n;
}

int k3_os_mkstemp(char *tmpl)
{
    size_t n = strlen(tmpl);
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    if (n < 6 || strcmp(tmpl + n - 6, "XXXXXX")) {
        errno = EINVAL;
        return -1;
    }
    LARGE_INTEGER t;
    QueryPerformanceCounter(&t);
    uint64_t x = (uint64_t)t.QuadPart ^ ((uint64_t)GetCurrentProcessId() << 32);
    for (int tries = 0; tries < 100; tries++) {
        for (size_t i = n - 6; i < n; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            tmpl[i] = abc[(x >> 33) % (sizeof abc - 1)];
        }
        int fd = wopen(tmpl, _O_RDWR | _O_CREAT | _O_EXCL, _S_IREAD | _S_IWRITE);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

void k3_os_copy_mode(int fd, unsigned mode)
{
    (void)fd; /* Windows files have no POSIX mode bits to carry over */
    (void)mode;
}

int64_t k3_os_readlink(const char *path, char *buf, size_t cap)
{
    (void)path; /* symbolic links are replaced as files (not followed) */
    (void)buf;
    (void)cap;
    return 0;
}

int k3_os_lock_dir(const char *dir)
{
    (void)dir; /* directory handles cannot be locked: the pack runs unlocked */
    return INT_MAX;
}

void k3_os_close_lock(int lock)
{
    (void)lock;
}

uint64_t k3_os_free_bytes(const char *dir)
{
    wchar_t *w = wide(dir);
    ULARGE_INTEGER avail;
    int ok = w && GetDiskFreeSpaceExW(w, &avail, NULL, NULL);
    free(w);
    return ok ? (uint64_t)avail.QuadPart : UINT64_MAX;
}

/* ---- processes and memory ---- */

void k3_os_die(void)
{
    TerminateProcess(GetCurrentProcess(), 137);
}

long k3_os_pid(void)
{
    return (long)GetCurrentProcessId();
}

int k3_os_pid_alive(long pid)
{
    HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h)
        return GetLastError() != ERROR_INVALID_PARAMETER; /* no such process: 0 */
    DWORD code = 0;
    int alive = GetExitCodeProcess(h, &code) && code == STILL_ACTIVE;
    CloseHandle(h);
    return alive;
}

void *k3_os_aligned_alloc(size_t align, size_t n)
{
    return _aligned_malloc(n ? n : 1, align);
}

void k3_os_aligned_free(void *p)
{
    _aligned_free(p);
}

uint64_t k3_os_mem_available(uint64_t *mem_available, uint64_t *limit)
{
    MEMORYSTATUSEX ms;
    uint64_t avail = 0, lim = 0, room = 0;
    ms.dwLength = sizeof ms;
    if (GlobalMemoryStatusEx(&ms))
        avail = (uint64_t)ms.ullAvailPhys;
    /* A job object (a container, or a launcher's limit) caps this process
     * or the whole job; room is the cap minus what is used under it. */
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION jl;
    BOOL in_job = FALSE;
    memset(&jl, 0, sizeof jl);
    if (IsProcessInJob(GetCurrentProcess(), NULL, &in_job) && in_job &&
        QueryInformationJobObject(NULL, JobObjectExtendedLimitInformation, &jl, sizeof jl,
                                  NULL)) {
        DWORD f = jl.BasicLimitInformation.LimitFlags;
        if (f & JOB_OBJECT_LIMIT_PROCESS_MEMORY) {
            PROCESS_MEMORY_COUNTERS_EX pc;
            memset(&pc, 0, sizeof pc);
            pc.cb = sizeof pc;
            uint64_t used = GetProcessMemoryInfo(GetCurrentProcess(),
                                                 (PROCESS_MEMORY_COUNTERS *)&pc, sizeof pc)
                                ? (uint64_t)pc.PrivateUsage
                                : 0;
            lim = (uint64_t)jl.ProcessMemoryLimit;
            room = lim > used ? lim - used : 0;
        }
        if (f & JOB_OBJECT_LIMIT_JOB_MEMORY) {
            uint64_t jlim = (uint64_t)jl.JobMemoryLimit, used = (uint64_t)jl.PeakJobMemoryUsed;
            uint64_t r = jlim > used ? jlim - used : 0;
            if (!lim || jlim < lim) {
                lim = jlim;
                room = r;
            }
        }
    }
    if (mem_available)
        *mem_available = avail;
    if (limit)
        *limit = lim;
    if (lim && (!avail || room < avail))
        return room;
    return avail;
}

long long k3_os_peak_rss(void)
{
    PROCESS_MEMORY_COUNTERS pc;
    memset(&pc, 0, sizeof pc);
    pc.cb = sizeof pc;
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &pc, sizeof pc))
        return -1;
    return (long long)pc.PeakWorkingSetSize;
}

/* ---- arithmetic ---- */

/* fmaf, correctly rounded. mingw-w64's own (libmingwex, linked statically)
 * is not: on 10^6 random triples it disagreed with glibc's and with the
 * hardware FMA in about a third of the cases, which broke the summation
 * contract (core/kernels.h) of the scalar kernels and of kda.c. This
 * definition takes its place at link time (the static library is searched
 * first). Method: a*b is exact in double; the sum p + c is rounded to odd
 * (the TwoSum error e decides the last bit), after which one rounding to
 * float is correct (53 >= 2 * 24 + 2 bits). Only IEEE double + - * and bit
 * moves, so it is deterministic on every x86-64. */
float fmaf(float a, float b, float c)
{
    double p = (double)a * (double)b, s = p + (double)c;
    if (isfinite(s)) {
        double bv = s - p, e = (p - (s - bv)) + ((double)c - bv);
        uint64_t u;
        memcpy(&u, &s, sizeof u);
        if (e != 0 && !(u & 1)) {
            u += (e > 0) == (s > 0) ? 1 : (uint64_t)-1; /* to the odd neighbour toward e */
            memcpy(&s, &u, sizeof u);
        }
    }
    return (float)s;
}

/* ---- console, interruption, clock ---- */

void k3_os_console_init(void)
{
    SetConsoleOutputCP(CP_UTF8);
    _setmode(_fileno(stdin), _O_BINARY);
    _setmode(_fileno(stdout), _O_BINARY);
    _setmode(_fileno(stderr), _O_BINARY);
}

void k3_os_utf8_args(int *argc, char ***argv)
{
    int n = 0;
    wchar_t **w = CommandLineToArgvW(GetCommandLineW(), &n);
    char **v = w && n > 0 ? calloc((size_t)n + 1, sizeof *v) : NULL;
    for (int i = 0; v && i < n; i++) {
        int len = WideCharToMultiByte(CP_UTF8, 0, w[i], -1, NULL, 0, NULL, NULL);
        if (len <= 0 || !(v[i] = malloc((size_t)len)))
            v = NULL; /* keep the runtime's arguments (the copies leak: once, tiny) */
        else
            WideCharToMultiByte(CP_UTF8, 0, w[i], -1, v[i], len, NULL, NULL);
    }
    if (v) {
        *argc = n;
        *argv = v;
    }
    if (w)
        LocalFree(w);
}

static void (*volatile stop_handler)(int);

static BOOL WINAPI on_ctrl(DWORD type)
{
    void (*h)(int) = stop_handler;
    if (!h)
        return FALSE;
    switch (type) {
    case CTRL_C_EVENT:
    case CTRL_BREAK_EVENT:
    case CTRL_CLOSE_EVENT:
        h(SIGINT);
        return TRUE; /* handled: the process stops on its own, in order */
    default:
        return FALSE;
    }
}

void k3_os_on_stop(void (*handler)(int sig))
{
    stop_handler = handler;
    SetConsoleCtrlHandler(on_ctrl, TRUE);
    signal(SIGTERM, handler); /* raise(SIGTERM) inside the process */
}

void k3_os_on_interrupt(void (*handler)(int sig))
{
    stop_handler = handler;
    SetConsoleCtrlHandler(on_ctrl, handler != NULL);
}

double k3_seconds(void)
{
    static LARGE_INTEGER freq; /* constant after boot (Windows guarantees it) */
    LARGE_INTEGER t;
    if (!freq.QuadPart)
        QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&t);
    return (double)(t.QuadPart / freq.QuadPart) +
           (double)(t.QuadPart % freq.QuadPart) / (double)freq.QuadPart;
}

/* ---- sockets ---- */

static int sock_errno(void)
{
    int err = WSAGetLastError();
    switch (err) {
    case WSAEWOULDBLOCK:
        return EWOULDBLOCK;
    case WSAEINTR:
        return EINTR;
    case WSAEMFILE:
        return EMFILE;
    case WSAECONNABORTED:
        return ECONNABORTED;
    case WSAECONNRESET:
        return ECONNRESET;
    case WSAEADDRINUSE:
        return EADDRINUSE;
    case WSAEACCES:
        return EACCES;
    case WSAETIMEDOUT:
        return ETIMEDOUT;
    case WSAENOBUFS:
        return ENOBUFS;
    case WSAEINVAL:
        return EINVAL;
    default:
        return EIO;
    }
}

static int sock_fail(void)
{
    errno = sock_errno();
    return -1;
}

int k3_sock_startup(void)
{
    static volatile LONG done;
    WSADATA wd;
    if (InterlockedCompareExchange(&done, 1, 0) != 0)
        return 0;
    return WSAStartup(MAKEWORD(2, 2), &wd) == 0 ? 0 : -1;
}

int k3_sock_accept(int lfd, struct sockaddr *sa, socklen_t *len)
{
    SOCKET s = accept((SOCKET)lfd, sa, len);
    if (s == INVALID_SOCKET)
        return sock_fail();
    if (s > (SOCKET)INT_MAX) {
        closesocket(s);
        errno = EMFILE;
        return -1;
    }
    return (int)s;
}

int k3_sock_close(int fd)
{
    return closesocket((SOCKET)fd) == 0 ? 0 : sock_fail();
}

int k3_sock_shutdown_write(int fd)
{
    return shutdown((SOCKET)fd, SD_SEND) == 0 ? 0 : sock_fail();
}

int k3_sock_pair(int fds[2])
{
    fds[0] = fds[1] = -1;
    errno = ENOSYS;
    return -1;
}

int k3_sock_set_nonblock(int fd, int on)
{
    u_long v = on ? 1 : 0;
    return ioctlsocket((SOCKET)fd, (long)FIONBIO, &v) == 0 ? 0 : sock_fail();
}

int k3_sock_set_send_timeout(int fd, double seconds)
{
    DWORD ms = (DWORD)(seconds * 1000.0);
    return setsockopt((SOCKET)fd, SOL_SOCKET, SO_SNDTIMEO, (const char *)&ms, sizeof ms) == 0
               ? 0
               : sock_fail();
}

/* Whether fd is ready for events within zero time (the MSG_DONTWAIT stand-in). */
static int ready_now(int fd, short events)
{
    WSAPOLLFD p;
    p.fd = (SOCKET)fd;
    p.events = events;
    p.revents = 0;
    return WSAPoll(&p, 1, 0) > 0;
}

int64_t k3_sock_send(int fd, const void *buf, size_t n, int dontwait)
{
    if (dontwait && !ready_now(fd, POLLOUT)) {
        errno = EWOULDBLOCK;
        return -1;
    }
    int ask = n > INT_MAX ? INT_MAX : (int)n;
    int w = send((SOCKET)fd, buf, ask, 0);
    return w == SOCKET_ERROR ? sock_fail() : (int64_t)w;
}

int64_t k3_sock_recv(int fd, void *buf, size_t n, int dontwait)
{
    if (dontwait && !ready_now(fd, POLLIN)) {
        errno = EWOULDBLOCK;
        return -1;
    }
    int ask = n > INT_MAX ? INT_MAX : (int)n;
    int r = recv((SOCKET)fd, buf, ask, 0);
    return r == SOCKET_ERROR ? sock_fail() : (int64_t)r;
}

int k3_sock_poll(struct pollfd *p, size_t n, int ms)
{
    if (n == 0) {
        Sleep(ms < 0 ? INFINITE : (DWORD)ms);
        return 0;
    }
    int rc = WSAPoll(p, (ULONG)n, ms);
    return rc == SOCKET_ERROR ? sock_fail() : rc;
}

#else
typedef int k3_os_win_unused; /* ISO C: a translation unit is never empty */
#endif
