/* pread_all.h - positioned reads that survive EINTR and short reads. */
#ifndef K3_IO_PREAD_ALL_H
#define K3_IO_PREAD_ALL_H

#include <stddef.h>
#include <sys/types.h>

/* How many times a weight read is tried before the run is declared invalid. */
#define K3_READ_ATTEMPTS 3

/* Reads up to n bytes at offset off, looping over partial reads. Returns the
 * bytes read (less than n only at end of file) or -1 with errno set. */
ssize_t k3_pread_all(int fd, void *buf, size_t n, off_t off);

#endif
