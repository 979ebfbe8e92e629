/* read_queue.h - independent aligned reads with several in flight: the one
 * way the batched expert reads (io/read_batch.h) and the streamed trunk runs
 * (io/read_hashed.h, and io/read_coded.h's stages of compressed runs) issue
 * their reads, by one of two readers:
 *
 *   uring    one thread, up to K3_IO_DEPTH reads queued in the kernel at
 *            once (util/os.h's read ring: Linux io_uring);
 *   threads  the calling thread and threads - 1 it starts, each doing one
 *            read at a time (k3_file_readv), as k3 always has.
 *
 * Which one: K3_IO=uring|threads in the environment (read once; anything
 * else is a usage error, exit 2 at open through k3_read_queue_check), else
 * uring where it can be had. A ring the kernel refuses (too old, seccomp, a
 * container's policy) or a build without io_uring (make URING=0, Windows,
 * the cross builds) silently gives threads; k3_read_queue_reader says which
 * ran and why. Both readers run every read through the same retry and
 * fault policy (io/direct.h k3_read_op): a read that fails, comes back
 * short or (under the test shim) corrupt ends exactly as k3_file_readv's.
 *
 * The uring reader's depth: K3_IO_DEPTH (1..256) in the environment, else
 * K3_IO_DEPTH_DEFAULT: on this machine's virtual disk depths 4-32 read at
 * the same rate within noise, 8 the best or close to it (docs/PERFORMANCE.md,
 * "Deeper reads"); scripts/k3-doctor.sh measures a disk's best count of
 * parallel readers. */
#ifndef K3_IO_READ_QUEUE_H
#define K3_IO_READ_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "io/direct.h"
#include "k3/error.h"

#define K3_IO_DEPTH_DEFAULT 8
/* The uring reader cuts one long range into reads of at most this size
 * (4 MiB: the reads scripts/odirect-bw.sh measures the disk with), and of
 * at least K3_IO_PIECE_MIN, so that up to its depth of them are in flight. */
#define K3_IO_PIECE (4u << 20)
#define K3_IO_PIECE_MIN (64u << 10)

typedef struct k3_read_req {
    k3_file *file;
    uint64_t off;          /* as k3_file_readv: aligned offset, buffers and lengths */
    const k3_iov *iov;
    int niov;
    uint64_t need;
} k3_read_req;

/* Called once per read when it has ended: rc K3_OK, or its failure with e
 * (K3_EINVALID "RUN INVALID ..."). Under the threads reader several calls
 * may run at once on different threads; under uring they run on the
 * caller's thread. Returning nonzero asks for no further reads to be
 * started (those in flight still end and are reported). */
typedef int (*k3_read_done_fn)(void *ctx, size_t i, int rc, const k3_err *e);

/* Runs reqs[0..n), started in index order: under uring up to the depth at
 * once, under threads on up to `threads` threads (1..16). Returns when every
 * started read has ended. The started threads touch only the requests'
 * files and buffers and ctx through done, and are joined before return. */
void k3_read_queue_run(const k3_read_req *reqs, size_t n, int threads, k3_read_done_fn done,
                       void *ctx);

/* The size to cut a range of len bytes into, a multiple of K3_IO_PIECE_MIN
 * (or len itself): under uring len / depth rounded up, within K3_IO_PIECE_MIN
 * .. K3_IO_PIECE; under threads `whole` (the caller's chunk, one large read
 * the kernel splits into requests in flight at once: what the threads
 * reader always did). Learning which may open a ring once, to see whether
 * the kernel gives one. */
uint64_t k3_read_queue_piece(uint64_t len, uint64_t whole);

/* k3_read_span (io/direct.h) through the queue: the aligned superset of
 * [off, off + len) cut into k3_read_queue_piece pieces (under threads one
 * read, as k3_read_span; under uring up to the depth in flight), read into
 * buf (K3_IO_ALIGN-aligned, cap >= k3_span_cap(off, len)); *data points at
 * byte off inside buf. A failed piece fails the span with the lowest failed
 * piece's message. For ranges read one after another by one caller (the
 * compressed runs' stages, io/read_coded.c). */
int k3_read_queue_span(k3_file *f, void *buf, size_t cap, uint64_t off, uint64_t len,
                       const uint8_t **data, k3_err *e);

/* Checks K3_IO and K3_IO_DEPTH (K3_EINPUT naming the bad one). */
int k3_read_queue_check(k3_err *e);

/* Chooses the reader ("uring", "threads" or NULL for either) and the uring
 * depth (1..256) in place of the environment, and forgets what ran so far
 * (tests and benchmarks compare the two in one process). -1 for a bad
 * name or depth. Not to be called while reads run. */
int k3_read_queue_select(const char *reader, int depth);

/* Which reader the runs so far used: "uring", "threads", or "none" before
 * the first; *depth the uring depth (0 under threads); *why, when threads
 * ran without being asked for, the reason (else ""). */
const char *k3_read_queue_reader(int *depth, const char **why);

#endif
