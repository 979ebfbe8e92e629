/* os_ring.c - the platform layer's asynchronous read ring (util/os.h):
 * Linux io_uring through liburing when built with K3_HAVE_URING (make's
 * URING=1), else a stub that never opens, so callers read on threads. */
#if defined(K3_HAVE_URING) && !defined(_WIN32)
#define _GNU_SOURCE /* liburing's headers use GNU and Linux types */
#endif
#include "util/os.h"

#include <errno.h>
#include <stdio.h>

#if defined(K3_HAVE_URING) && !defined(_WIN32)
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define RING_MAX_SEGS 64

/* Each queued read owns a cell (its iovecs stay valid until its completion
 * is reaped); the cell's index is the SQE's user_data. */
typedef struct {
    struct iovec iov[RING_MAX_SEGS];
    uint64_t tag;
} ring_cell;

struct k3_os_ring {
    struct io_uring ring;
    int depth;
    ring_cell *cells;    /* [depth] */
    int *free_cells;     /* stack of free cell indices */
    int nfree;
};

k3_os_ring *k3_os_ring_open(int depth, char *why, size_t whylen)
{
    if (depth < 1 || depth > 256) {
        snprintf(why, whylen, "queue depth %d outside 1..256", depth);
        return NULL;
    }
    k3_os_ring *r = calloc(1, sizeof *r);
    if (r) {
        r->cells = calloc((size_t)depth, sizeof *r->cells);
        r->free_cells = calloc((size_t)depth, sizeof *r->free_cells);
    }
    if (!r || !r->cells || !r->free_cells) {
        snprintf(why, whylen, "out of memory");
        k3_os_ring_close(r);
        return NULL;
    }
    int rc = io_uring_queue_init((unsigned)depth, &r->ring, 0);
    if (rc < 0) {
        snprintf(why, whylen, "io_uring_queue_init: %s", strerror(-rc));
        r->depth = 0; /* nothing to tear down */
        k3_os_ring_close(r);
        return NULL;
    }
    r->depth = depth;
    for (int i = 0; i < depth; i++)
        r->free_cells[i] = depth - 1 - i;
    r->nfree = depth;
    return r;
}

void k3_os_ring_close(k3_os_ring *r)
{
    if (!r)
        return;
    if (r->depth)
        io_uring_queue_exit(&r->ring);
    free(r->cells);
    free(r->free_cells);
    free(r);
}

int k3_os_ring_read(k3_os_ring *r, int fd, const k3_os_iov *v, int niov, uint64_t off,
                    uint64_t tag)
{
    if (niov < 1 || niov > RING_MAX_SEGS || r->nfree == 0) {
        errno = niov < 1 || niov > RING_MAX_SEGS ? EINVAL : EBUSY;
        return -1;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    if (!sqe) {
        errno = EBUSY;
        return -1;
    }
    int c = r->free_cells[--r->nfree];
    ring_cell *cell = &r->cells[c];
    for (int i = 0; i < niov; i++) {
        cell->iov[i].iov_base = v[i].buf;
        cell->iov[i].iov_len = v[i].len;
    }
    cell->tag = tag;
    io_uring_prep_readv(sqe, fd, cell->iov, (unsigned)niov, (__u64)off);
    io_uring_sqe_set_data64(sqe, (__u64)c);
    return 0;
}

int k3_os_ring_wait(k3_os_ring *r, uint64_t *tag, int64_t *res)
{
    struct io_uring_cqe *cqe = NULL;
    int rc;
    do /* a signal interrupts a call, not the reads */
        rc = io_uring_submit(&r->ring);
    while (rc == -EINTR);
    if (rc >= 0)
        do
            rc = io_uring_wait_cqe(&r->ring, &cqe);
        while (rc == -EINTR);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    int c = (int)io_uring_cqe_get_data64(cqe);
    *res = cqe->res;
    io_uring_cqe_seen(&r->ring, cqe);
    *tag = r->cells[c].tag;
    r->free_cells[r->nfree++] = c;
    return 0;
}

#else

struct k3_os_ring {
    int unused;
};

k3_os_ring *k3_os_ring_open(int depth, char *why, size_t whylen)
{
    (void)depth;
    snprintf(why, whylen, "built without io_uring");
    return NULL;
}

void k3_os_ring_close(k3_os_ring *r) { (void)r; }

int k3_os_ring_read(k3_os_ring *r, int fd, const k3_os_iov *v, int niov, uint64_t off,
                    uint64_t tag)
{
    (void)r, (void)fd, (void)v, (void)niov, (void)off, (void)tag;
    errno = ENOSYS;
    return -1;
}

int k3_os_ring_wait(k3_os_ring *r, uint64_t *tag, int64_t *res)
{
    (void)r, (void)tag, (void)res;
    errno = ENOSYS;
    return -1;
}

#endif
