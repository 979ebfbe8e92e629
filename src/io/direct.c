/* direct.c - see direct.h. The system calls are the platform layer's
 * (util/os.h). */
#include "io/direct.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/fault.h"
#include "io/pread_all.h"
#include "util/error.h"
#include "util/file.h"
#include "util/os.h"

/* ---- process-wide counters ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void lock_take(void) { pthread_mutex_lock(&lock); }
static void lock_give(void) { pthread_mutex_unlock(&lock); }

static k3_io_counts counts;

static void count_read(void)
{
    lock_take();
    counts.reads++;
    lock_give();
}

static void count_bytes(uint64_t n)
{
    lock_take();
    counts.bytes += n;
    lock_give();
}

static void count_fallback(void)
{
    lock_take();
    counts.fallbacks++;
    lock_give();
}

void k3_io_counts_get(k3_io_counts *c)
{
    lock_take();
    *c = counts;
    lock_give();
}

/* ---- files ---- */

int k3_file_open(k3_file *f, const char *path, int direct, k3_err *e)
{
    memset(f, 0, sizeof *f);
    size_t n = strlen(path) + 1;
    if (!(f->path = k3_malloc(e, n, "file name")))
        return e->code;
    memcpy(f->path, path, n);
    f->fd = k3_open_input(path, e);
    if (f->fd < 0) {
        k3_file_close(f);
        return e->code;
    }
    /* Direct I/O is switched on the open descriptor; a file system that
     * refuses it (EINVAL) is read through the page cache instead. */
    if (direct) {
        f->direct = k3_os_set_direct(f->fd, 1) == 0;
        if (!f->direct && errno == EINVAL)
            count_fallback();
    }
    return K3_OK;
}

void k3_file_close(k3_file *f)
{
    if (f->path && f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    free(f->path);
    f->path = NULL;
}

int k3_file_is_direct(const k3_file *f)
{
    int on = f->direct;
    lock_take();
    on = on && !f->dropped;
    lock_give();
    return on;
}

/* The file system refused a direct read: switch the descriptor to buffered
 * reads, so this and every later read is buffered. Several threads may get
 * here at once; the first one switches the file. */
static int drop_direct(k3_file *f)
{
    if (!f->direct)
        return 0;
    lock_take(); /* so that one switch is counted once */
    int ok = 1;
    if (!f->dropped) {
        ok = k3_os_set_direct(f->fd, 0) == 0;
        f->dropped = ok;
        counts.fallbacks += (uint64_t)ok;
    }
    lock_give();
    return ok;
}

/* ---- memory ---- */

void *k3_io_alloc(size_t n, const char *what, k3_err *e)
{
    size_t len = (size_t)k3_io_align_up(n ? n : 1);
    void *p = NULL;
    if (!k3_fault_alloc()) {
        p = k3_os_aligned_alloc(K3_IO_ALIGN, len);
    }
    if (!p)
        k3_fail(e, K3_ERUNTIME, "out of memory allocating %zu aligned bytes for %s", len, what);
    return p;
}

void k3_io_free(void *p)
{
    k3_os_aligned_free(p);
}

/* ---- reads ---- */

/* One read request of the whole range, looping over partial transfers;
 * returns the bytes read (fewer only at end of file) or -1 with errno. */
static int64_t read_once(k3_file *f, uint64_t off, const k3_iov *iov, int niov)
{
    uint64_t done = 0;
    k3_os_iov v[K3_IO_MAX_SEGS];
    for (int i = 0; i < niov; i++) {
        v[i].buf = iov[i].buf;
        v[i].len = iov[i].len;
    }
    k3_os_iov *p = v;
    int n = niov;
    while (n > 0) {
        int64_t r = k3_os_preadv(f->fd, p, n, off + done);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        done += (uint64_t)r;
        for (; n > 0 && (uint64_t)r >= p->len; p++, n--)
            r -= (int64_t)p->len;
        if (n > 0) {
            p->buf = (char *)p->buf + r;
            p->len -= (size_t)r;
        }
    }
    return (int64_t)done;
}

int k3_read_op_init(k3_read_op *op, k3_file *f, uint64_t off, const k3_iov *iov, int niov,
                    uint64_t need, k3_err *e)
{
    memset(op, 0, sizeof *op);
    op->f = f;
    op->off = off;
    op->iov = iov;
    op->niov = niov;
    op->need = need;
    int ok = off % K3_IO_ALIGN == 0 && niov >= 1 && niov <= K3_IO_MAX_SEGS;
    for (int i = 0; ok && i < niov; i++) {
        ok = (uintptr_t)iov[i].buf % K3_IO_ALIGN == 0 && iov[i].len % K3_IO_ALIGN == 0;
        op->total += iov[i].len;
    }
    if (!ok || need > op->total)
        return k3_fail(e, K3_ERUNTIME, "internal: misaligned read of %s at %llu", f->path,
                       (unsigned long long)off);
    return K3_OK;
}

/* Counted, with the fault shim's say: fail and einval end the attempt
 * before it reads. */
int k3_read_op_begin(k3_read_op *op, int *err)
{
    count_read();
    op->mode = k3_fault_read();
    if (op->mode == K3_FAULT_FAIL || op->mode == K3_FAULT_EINVAL) {
        *err = op->mode == K3_FAULT_FAIL ? EIO : EINVAL;
        return 0;
    }
    return 1;
}

int k3_read_op_end(k3_read_op *op, int64_t got, int err, k3_err *e)
{
    if (got > 0) {
        count_bytes((uint64_t)got);
        if (op->mode == K3_FAULT_SHORT && (uint64_t)got >= op->need)
            got = (int64_t)op->need - 1;
        if (op->mode == K3_FAULT_CORRUPT) {
            uint64_t left = (uint64_t)got;
            for (int i = 0; i < op->niov && left; i++) {
                size_t n = left < op->iov[i].len ? (size_t)left : op->iov[i].len;
                k3_fault_invert(op->iov[i].buf, n);
                left -= n;
            }
        }
    }
    if (got >= 0 && (uint64_t)got >= op->need)
        return K3_READ_DONE;
    if (got >= 0)
        err = 0;
    if (err == EINVAL && !op->fell_back && drop_direct(op->f)) {
        op->fell_back = 1; /* not an attempt: the same read again, buffered */
        return K3_READ_AGAIN;
    }
    if (got < 0)
        snprintf(op->why, sizeof op->why, "%s", strerror(err));
    else
        snprintf(op->why, sizeof op->why, "short read: %lld of %llu bytes", (long long)got,
                 (unsigned long long)op->need);
    if (++op->tries < K3_READ_ATTEMPTS)
        return K3_READ_AGAIN;
    k3_fail(e, K3_EINVALID,
            "RUN INVALID: reading bytes %llu..%llu of %s failed after %d attempts (%s)",
            (unsigned long long)op->off, (unsigned long long)(op->off + op->need), op->f->path,
            K3_READ_ATTEMPTS, op->why);
    return K3_READ_FAILED;
}

int k3_file_readv(k3_file *f, uint64_t off, const k3_iov *iov, int niov, uint64_t need,
                  k3_err *e)
{
    k3_read_op op;
    if (k3_read_op_init(&op, f, off, iov, niov, need, e) != K3_OK)
        return e->code;
    for (;;) {
        int err = 0;
        int64_t got = -1;
        if (k3_read_op_begin(&op, &err)) {
            got = read_once(f, off, iov, niov);
            err = errno;
        }
        int next = k3_read_op_end(&op, got, err, e);
        if (next == K3_READ_DONE)
            return K3_OK;
        if (next == K3_READ_FAILED)
            return e->code;
    }
}

int k3_span_prepare(const k3_file *f, const void *buf, size_t cap, uint64_t off, uint64_t len,
                    const uint8_t **data, uint64_t *start, k3_err *e)
{
    *start = k3_io_align_down(off);
    *data = (const uint8_t *)buf + (off - *start);
    if (len && cap < k3_span_cap(off, len))
        return k3_fail(e, K3_ERUNTIME, "internal: %zu-byte buffer for a %zu-byte span of %s", cap,
                       k3_span_cap(off, len), f->path);
    return K3_OK;
}

int k3_read_span(k3_file *f, void *buf, size_t cap, uint64_t off, uint64_t len,
                 const uint8_t **data, k3_err *e)
{
    uint64_t start;
    if (k3_span_prepare(f, buf, cap, off, len, data, &start, e) != K3_OK || len == 0)
        return e->code;
    k3_iov v = { buf, k3_span_cap(off, len) };
    return k3_file_readv(f, start, &v, 1, off + len - start, e);
}
