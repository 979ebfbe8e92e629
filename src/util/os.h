/* os.h - the platform layer: everything k3 needs from the operating system
 * that C99 and POSIX do not give the same way everywhere, behind one header.
 *
 *   util/os_posix.c   Linux (tested), macOS (same POSIX calls plus F_NOCACHE
 *                     in io/direct.c; not built or tested here)
 *   util/os_win.c     Windows (mingw-w64; tested under Wine, `make test-windows`)
 *
 * Exactly one of the two files compiles to code (each is guarded by _WIN32 as
 * a whole); nothing else in src/ tests the platform. The layer never touches
 * numbers: it opens, reads, writes, times and talks to sockets.
 *
 * Conventions: paths are UTF-8 (Windows converts them to UTF-16 and uses the
 * wide-character calls); files are C runtime descriptors (int) everywhere,
 * opened in binary mode; functions returning int give 0 or -1 with errno set
 * unless stated otherwise. Every function may be called from any thread. */
#ifndef K3_UTIL_OS_H
#define K3_UTIL_OS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- files ---- */

/* Opens path read-only without blocking (a FIFO with no writer must not hang
 * the open), not inherited by child processes. -1 with errno. */
int k3_os_open_input(const char *path);
/* Makes an input descriptor blocking again (after the caller's checks). */
int k3_os_input_blocking(int fd);
/* Opens path write-only, created (mode 0644 where modes exist) and truncated.
 * direct asks for uncached writes (Linux O_DIRECT; refused quietly: buffered). */
int k3_os_open_output(const char *path, int direct);
/* Whether an fstat mode is a socket's (S_ISSOCK; never on Windows). */
int k3_os_is_socket_mode(unsigned mode);

/* One destination of a scattered read. */
typedef struct k3_os_iov {
    void *buf;
    size_t len;
} k3_os_iov;

/* Positioned reads: no shared file offset is used or moved, so several
 * threads may read one descriptor at once. Each returns the bytes one
 * request transferred (0 at end of file, possibly fewer than asked) or -1
 * with errno (EINTR possible on POSIX). */
int64_t k3_os_pread(int fd, void *buf, size_t n, uint64_t off);
int64_t k3_os_preadv(int fd, const k3_os_iov *v, int niov, uint64_t off);
/* Positioned write of one request; bytes written or -1 with errno. A
 * descriptor opened for direct writes that the file system refuses one of
 * (EINVAL) is switched to buffered writes and the request retried. */
int64_t k3_os_pwrite(int fd, const void *buf, size_t n, uint64_t off);

/* An asynchronous read ring: positioned scattered reads queued, submitted
 * together and reaped in any order (Linux io_uring through Debian's
 * liburing, util/os_ring.c; built with K3_HAVE_URING). Elsewhere, in a
 * build without it, or where the kernel refuses it (too old, seccomp, a
 * container's policy), k3_os_ring_open returns NULL and the caller reads
 * with k3_os_preadv on threads instead. One ring belongs to one thread. */
typedef struct k3_os_ring k3_os_ring;
/* A ring for up to depth reads in flight (1..256); NULL with why (a short
 * reason, e.g. "io_uring_queue_init: Operation not permitted") when none
 * can be had. */
k3_os_ring *k3_os_ring_open(int depth, char *why, size_t whylen);
void k3_os_ring_close(k3_os_ring *r);
/* Queues a read of the niov buffers (1..64, kept valid until it completes)
 * at off of fd; tag comes back with its completion. -1 when the queue is
 * full (more than depth queued and not yet reaped). */
int k3_os_ring_read(k3_os_ring *r, int fd, const k3_os_iov *v, int niov, uint64_t off,
                    uint64_t tag);
/* Submits what was queued, waits for one completion and returns its tag
 * and result: bytes transferred (0 at end of file, possibly fewer than
 * asked) or -errno. 0, or -1 with errno when the ring itself fails. */
int k3_os_ring_wait(k3_os_ring *r, uint64_t *tag, int64_t *res);

/* Direct (uncached) reads on an open input descriptor: on != 0 asks for
 * them, 0 drops them. Returns 0 when fd is now in the asked mode, -1 with
 * errno (EINVAL: the file system refuses direct I/O). Requires offsets,
 * lengths and buffer addresses aligned to 4096 bytes (io/direct.h).
 *   Linux O_DIRECT (fcntl F_SETFL); macOS F_NOCACHE; Windows reopens the
 *   file with FILE_FLAG_NO_BUFFERING onto the same descriptor. */
int k3_os_set_direct(int fd, int on);

/* Data and metadata of fd to stable storage. */
int k3_os_fsync(int fd);
/* The directory entry changes in dir to stable storage (best effort: a
 * file system without it, or Windows, where a rename is made durable by
 * k3_os_replace itself, returns 0). */
int k3_os_sync_dir(const char *dir);
/* Renames from onto to, replacing to atomically (POSIX rename; Windows
 * MoveFileExW with MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH). */
int k3_os_replace(const char *from, const char *to);
int k3_os_unlink(const char *path);
/* mkdir(path, 0777): -1 with errno (EEXIST when it exists). */
int k3_os_mkdir(const char *path);
/* getline(): the next line of f with its '\n' into *line (grown as needed,
 * NUL-terminated); its length, or -1 at end of file or on error. */
int64_t k3_os_getline(char **line, size_t *cap, FILE *f);
/* Creates and opens (read-write, binary) a new file from tmpl, whose last six
 * characters are "XXXXXX" and are replaced (mkstemp). */
int k3_os_mkstemp(char *tmpl);
/* Copies the mode bits of an existing file to fd where modes exist. */
void k3_os_copy_mode(int fd, unsigned mode);
/* If path is a symbolic link, its target into buf (NUL-terminated) and the
 * target's length; 0 when path is no link (or the system has none); -1 with
 * errno when the link cannot be read. */
int64_t k3_os_readlink(const char *path, char *buf, size_t cap);
/* An exclusive advisory lock on directory dir, held until the returned
 * handle (>= 0) is given to k3_os_close_lock. A file system without locks
 * (or Windows, where directories are not locked) also returns a handle,
 * holding nothing. -1 with errno: EWOULDBLOCK when someone else holds the
 * lock, anything else when dir cannot be opened. */
int k3_os_lock_dir(const char *dir);
void k3_os_close_lock(int lock);
/* Bytes free to this user on the file system holding dir, or UINT64_MAX
 * when unknown. */
uint64_t k3_os_free_bytes(const char *dir);

/* ---- processes and memory ---- */

/* Ends the process at once, as a kill would (tests of interrupted work). */
void k3_os_die(void);
long k3_os_pid(void);
/* Whether process pid may still run (1), certainly does not (0). */
int k3_os_pid_alive(long pid);
/* Bytes aligned to align (a power of two, >= sizeof(void *)); NULL when out
 * of memory. Free only with k3_os_aligned_free (Windows has no
 * posix_memalign whose result free() accepts). */
void *k3_os_aligned_alloc(size_t align, size_t n);
void k3_os_aligned_free(void *p);
/* Memory the plan may use now, in bytes: the system's available memory,
 * or the room under a container/job limit when that is smaller. The parts
 * go to *mem_available and *limit (either may be NULL; 0: unknown / none).
 *   Linux   MemAvailable (/proc/meminfo); cgroup v2 memory.max/current or
 *           v1 memory.limit_in_bytes/usage_in_bytes
 *   Windows GlobalMemoryStatusEx ullAvailPhys; a job object's process or
 *           job memory limit (JOBOBJECT_EXTENDED_LIMIT_INFORMATION)
 *   macOS   0 (unknown: the plan then needs an explicit budget) */
uint64_t k3_os_mem_available(uint64_t *mem_available, uint64_t *limit);
/* Peak resident set (working set) of this process in bytes, -1 unknown. */
long long k3_os_peak_rss(void);

/* ---- console and interruption ---- */

/* Standard streams as bytes: Windows sets stdin/stdout/stderr to binary
 * mode (no CRLF translation, so output is byte-identical to POSIX) and the
 * console's output code page to UTF-8. Nothing on POSIX. */
void k3_os_console_init(void);
/* The command line as UTF-8: Windows hands main its arguments in the ANSI
 * code page, which cannot hold every path; this replaces *argv by the
 * UTF-8 form of the wide-character command line (CommandLineToArgvW; kept
 * for the process's lifetime). Nothing on POSIX, where arguments are bytes. */
void k3_os_utf8_args(int *argc, char ***argv);
/* Calls handler(sig) when the user asks the process to stop (SIGINT,
 * SIGTERM; Windows: Ctrl-C, Ctrl-Break and console close via
 * SetConsoleCtrlHandler, reported as SIGINT). handler runs in a signal
 * handler or another thread: it may only store to a volatile sig_atomic_t.
 * Also makes a write to a closed socket an error return (SIGPIPE ignored). */
void k3_os_on_stop(void (*handler)(int sig));
/* Calls handler(SIGINT) on Ctrl-C only (an interactive "stop this", not a
 * request to end: SIGTERM keeps its default), interrupting a blocked read
 * of stdin (POSIX: no SA_RESTART, the read fails with EINTR). NULL puts the
 * default back. Same handler rules as k3_os_on_stop. */
void k3_os_on_interrupt(void (*handler)(int sig));

/* Sockets for k3 serve: util/os_net.h (it brings the system's socket
 * headers, which this header keeps out of the rest of the engine). */

#endif
