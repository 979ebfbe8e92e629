/* direct.h - the platform layer for weight reads: files opened for direct
 * (uncached) I/O where allowed, aligned buffers, and reads of unaligned byte
 * ranges through aligned supersets.
 *
 * Why direct I/O: weights are read once per use and are far larger than
 * memory; through the page cache every byte would be copied twice and the
 * cache would evict what the engine keeps resident itself. Direct reads need
 * the file offset, the length and the buffer address aligned (K3_IO_ALIGN
 * covers 512-byte and 4 KiB devices), so every read here is of whole aligned
 * blocks, and callers find their (unaligned) bytes inside the buffer.
 *
 *   Linux    O_DIRECT. If the open, or a read, is refused with EINVAL (a file
 *            system without direct I/O), the file silently falls back to
 *            buffered reads for good; k3_io_counts_get counts fallbacks.
 *   macOS    F_NOCACHE (no alignment demands, so no fallback needed).
 *   Windows  FILE_FLAG_NO_BUFFERING (the file reopened with it; sector
 *            alignment, which K3_IO_ALIGN covers); refused: buffered.
 *   The switches are the platform layer's (util/os.h k3_os_set_direct).
 *
 * Every read is tried K3_READ_ATTEMPTS times (io/pread_all.h); if all fail or
 * come back short the call returns K3_EINVALID with "RUN INVALID: reading
 * ... from FILE failed after N attempts (why)": a weight that cannot be read
 * stops the run, it is never replaced.
 *
 * Thread safety: reads of one k3_file may run concurrently from several
 * threads (positioned reads, no shared offset); open and close may not.
 *
 * Every read attempt and aligned allocation passes the test-only fault shim
 * (io/fault.h). */
#ifndef K3_IO_DIRECT_H
#define K3_IO_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

#define K3_IO_ALIGN 4096u
/* Most buffers one read may scatter into (Linux and macOS take up to 1024). */
#define K3_IO_MAX_SEGS 64

static inline uint64_t k3_io_align_down(uint64_t x) { return x & ~(uint64_t)(K3_IO_ALIGN - 1); }
static inline uint64_t k3_io_align_up(uint64_t x) { return k3_io_align_down(x + K3_IO_ALIGN - 1); }

typedef struct k3_file {
    char *path;               /* for messages */
    int fd;
    int direct;               /* direct I/O granted at open */
    int dropped;              /* switched to buffered after a refused read (under a lock) */
} k3_file;

/* Opens path for reading; direct asks for direct I/O where allowed. A file
 * that cannot be opened is K3_EINPUT naming it. */
int k3_file_open(k3_file *f, const char *path, int direct, k3_err *e);
void k3_file_close(k3_file *f);
/* Whether reads of f currently bypass the page cache. */
int k3_file_is_direct(const k3_file *f);

/* n bytes (rounded up to K3_IO_ALIGN) aligned to K3_IO_ALIGN; K3_ERUNTIME
 * naming `what` on failure. Free with k3_io_free. */
void *k3_io_alloc(size_t n, const char *what, k3_err *e);
void k3_io_free(void *p);

/* One destination of a scattered read. */
typedef struct k3_iov {
    void *buf;
    size_t len;
} k3_iov;

/* Reads the file range [off, off + sum of lengths) into the buffers in
 * order. off, every address and every length must be multiples of
 * K3_IO_ALIGN, niov in 1..K3_IO_MAX_SEGS. The range may run past the end of
 * the file: the read succeeds once the first `need` bytes have arrived. */
int k3_file_readv(k3_file *f, uint64_t off, const k3_iov *iov, int niov, uint64_t need,
                  k3_err *e);

/* The same read and retry policy as steps, for a reader that keeps several
 * reads in flight (io/read_queue.c): k3_file_readv is
 *     k3_read_op_init; do got = begin ? TRANSFER : -1; while (end == K3_READ_AGAIN)
 * where TRANSFER reads [off, off + op->total) into the buffers, continuing
 * after partial transfers until all have arrived or the file ends, and gives
 * the bytes read or -1 with the error (the reader's retries of EINTR and
 * EAGAIN are not attempts). Steps of one op run on one thread at a time. */
typedef struct k3_read_op {
    k3_file *f;
    uint64_t off, need, total;
    const k3_iov *iov;
    int niov;
    int tries;          /* attempts ended so far (a buffered repeat not counted) */
    int fell_back;      /* repeated once buffered after direct I/O was refused */
    int mode;           /* the fault shim's say on the current attempt */
    char why[96];       /* why the last attempt failed */
} k3_read_op;

enum { K3_READ_DONE, K3_READ_AGAIN, K3_READ_FAILED };

/* Checks the alignment rules of k3_file_readv (K3_ERUNTIME otherwise). */
int k3_read_op_init(k3_read_op *op, k3_file *f, uint64_t off, const k3_iov *iov, int niov,
                    uint64_t need, k3_err *e);
/* Starts an attempt: 1 when its bytes are to be transferred, 0 when it has
 * failed already (the fault shim), with *err the errno to end it with. */
int k3_read_op_begin(k3_read_op *op, int *err);
/* Ends the attempt with got bytes transferred (or -1 and err): DONE (the
 * first need bytes are in), AGAIN (begin the next attempt) or FAILED (e
 * holds the RUN INVALID message, as k3_file_readv gives it). */
int k3_read_op_end(k3_read_op *op, int64_t got, int err, k3_err *e);

/* Buffer bytes k3_read_span needs for [off, off + len). */
static inline size_t k3_span_cap(uint64_t off, uint64_t len)
{
    return (size_t)(k3_io_align_up(off + len) - k3_io_align_down(off));
}

/* The common start of the span readers (k3_read_span, io/read_queue.h's
 * k3_read_queue_span): *start = the span's aligned start, *data = where
 * byte off lands in buf; K3_ERUNTIME when len > 0 and cap is below
 * k3_span_cap(off, len). */
int k3_span_prepare(const k3_file *f, const void *buf, size_t cap, uint64_t off, uint64_t len,
                    const uint8_t **data, uint64_t *start, k3_err *e);

/* Reads the unaligned range [off, off + len) through its aligned superset
 * into buf (K3_IO_ALIGN-aligned, cap >= k3_span_cap(off, len)); *data points
 * at byte off inside buf. */
int k3_read_span(k3_file *f, void *buf, size_t cap, uint64_t off, uint64_t len,
                 const uint8_t **data, k3_err *e);

/* Process-wide counters of this layer. */
typedef struct k3_io_counts {
    uint64_t reads;           /* read requests issued (every attempt) */
    uint64_t bytes;           /* bytes they returned */
    uint64_t fallbacks;       /* direct I/O refused, file switched to buffered */
} k3_io_counts;

void k3_io_counts_get(k3_io_counts *c);

#endif
