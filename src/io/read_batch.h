/* read_batch.h - many unaligned byte ranges read as few large aligned reads,
 * several in flight at once.
 *
 * Each request is a byte range of a file and an aligned destination that
 * receives the range's aligned superset (k3_span_cap bytes), so the range's
 * first byte lands at dst + off % K3_IO_ALIGN. The batch:
 *  1. sorts the requests by file and offset;
 *  2. coalesces requests whose aligned spans touch (the next starts at or
 *     inside the last block of the previous one) into one read, scattering
 *     it over the destinations with one vectored call; a block shared by two
 *     neighbours is read once, into the first, and copied into the second;
 *     a read stops growing at K3_IO_MAX_SEGS destinations or
 *     K3_BATCH_MAX_READ bytes so that a batch still splits into several reads;
 *  3. runs the reads, started in disk order, through io/read_queue.h: on the
 *     io_uring reader at its depth, or on up to `threads` threads (the
 *     caller's and threads-1 it starts and joins before returning).
 * Reads are retried by k3_file_readv. If any fails, the first failure in
 * disk order is reported (K3_EINVALID, "RUN INVALID ...") and *failed names
 * one request it covered; destinations then hold unspecified bytes.
 *
 * Threads: the started threads touch only the requests' files and
 * destinations (and, through k3_read_batch_each's arrived, its ctx), and
 * are joined before return, so the call is as safe as a serial function
 * for callers that run OpenMP regions before and after it. */
#ifndef K3_IO_READ_BATCH_H
#define K3_IO_READ_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "io/direct.h"

/* Reads beyond a few MB gain nothing from merging; capping them keeps large
 * batches spread over the threads. */
#define K3_BATCH_MAX_READ (64u << 20)

typedef struct k3_span_req {
    k3_file *file;
    uint64_t off, len;   /* the bytes wanted */
    uint8_t *dst;        /* K3_IO_ALIGN-aligned, k3_span_cap(off, len) bytes */
} k3_span_req;

typedef struct k3_batch_info {
    uint64_t reads;      /* reads issued (before retries) */
    uint64_t bytes;      /* bytes those reads covered, alignment included */
    size_t failed;       /* on failure: index of a request of the failed read */
} k3_batch_info;

int k3_read_batch(const k3_span_req *reqs, size_t n, int threads, k3_batch_info *info,
                  k3_err *e);

/* Called for request reqs[i] once its destination holds all its bytes
 * (its read succeeded and its shared block was copied); never for a
 * request whose read failed. Under the threads reader several calls may
 * run at once on different threads; under uring on the calling thread. */
typedef void (*k3_span_arrived_fn)(void *ctx, size_t i);

/* k3_read_batch, telling `arrived` (NULL: nobody) of each request as it
 * completes, in completion order, so a caller may use a request's bytes
 * before the whole batch ends (resid/expert_cache.h k3_ec_read). */
int k3_read_batch_each(const k3_span_req *reqs, size_t n, int threads, k3_span_arrived_fn arrived,
                       void *ctx, k3_batch_info *info, k3_err *e);

#endif
