/* fault.h - the test-only fault shim of weight reads and aligned allocations.
 *
 * Compiled in only with -DK3_FAULT_INJECTION (tests/gates/72-fault-sweep.sh
 * builds such a bin/k3; POSIX only, it takes a pthread mutex); otherwise
 * every call says "no fault" and costs a return. The plan comes from the
 * environment variable K3_FAULT, read once:
 *   read:N:MODE[:COUNT]  weight-read attempts N .. N+COUNT-1 (COUNT defaults
 *                        to 1) misbehave: MODE fail (EIO), short (fewer bytes
 *                        than needed), corrupt (every byte read is inverted),
 *                        einval (EINVAL, as a file system without direct I/O
 *                        would answer).
 *   alloc:N              the Nth aligned allocation (k3_io_alloc) fails.
 * Attempts are numbered from 1 across the process and across both read paths
 * (io/direct.c for experts and packed trunk runs, io/pread_all.c for tensors
 * read from the shards), every retry counting. A malformed K3_FAULT aborts:
 * it is a broken test, not a condition to run on. */
#ifndef K3_IO_FAULT_H
#define K3_IO_FAULT_H

#include <stddef.h>

enum { K3_FAULT_NONE, K3_FAULT_FAIL, K3_FAULT_SHORT, K3_FAULT_CORRUPT, K3_FAULT_EINVAL };

/* Numbers the next weight-read attempt and returns what it must do. */
int k3_fault_read(void);

/* Numbers the next aligned allocation; 1 when it must fail. */
int k3_fault_alloc(void);

/* Inverts n bytes at p (what a "corrupt" read returns). */
void k3_fault_invert(void *p, size_t n);

#endif
