/* pread_all.h - positioned reads that survive EINTR and short reads, and the
 * retry policy of weight reads from plain file descriptors (tensors read from
 * the shards; io/direct.c has the same policy for its aligned reads). */
#ifndef K3_IO_PREAD_ALL_H
#define K3_IO_PREAD_ALL_H

#include <stddef.h>
#include <sys/types.h>

/* How many times a weight read is tried before the run is declared invalid. */
#define K3_READ_ATTEMPTS 3

/* Reads up to n bytes at offset off, looping over partial reads. Returns the
 * bytes read (less than n only at end of file) or -1 with errno set. */
ssize_t k3_pread_all(int fd, void *buf, size_t n, off_t off);

/* Reads exactly n weight bytes at off, trying K3_READ_ATTEMPTS times (each
 * attempt passes the test-only fault shim, io/fault.h). Returns 0, or -1
 * with why (e.g. "Input/output error", "short read: 5 of 8 bytes") written
 * for the caller's "RUN INVALID" message. */
int k3_pread_weight(int fd, void *buf, size_t n, off_t off, char *why, size_t whylen);

#endif
