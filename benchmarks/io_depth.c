/* io_depth.c - the read rate of k3's own reader (io/read_queue.h) on one
 * file: the whole file (whole pieces of PIECE_MIB, default 4 = K3_IO_PIECE;
 * the tail past the last one is not read) read with O_DIRECT into one
 * buffer of RING_MIB (default 256) reused round-robin, as a streamed trunk
 * fills its ring slots. Not a test.
 *
 *   io_depth FILE THREADS [PIECE_MIB [RING_MIB]]
 *
 * The reader is the one K3_IO picks (uring at K3_IO_DEPTH, or THREADS
 * threads); benchmarks/io_bench.sh runs it once per depth. Prints
 *   reader NAME depth D threads T bytes N seconds S gbps G
 * GB is 10^9 bytes. Exit 1 if a read fails, 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/direct.h"
#include "io/read_queue.h"
#include "util/clock.h"

static int failed;

static int done(void *ctx, size_t i, int rc, const k3_err *e)
{
    (void)ctx;
    if (rc != K3_OK && !failed) {
        failed = 1;
        fprintf(stderr, "io_depth: read %zu: %s\n", i, e->msg);
    }
    return rc != K3_OK;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: io_depth FILE THREADS [PIECE_MIB [RING_MIB]]\n");
        return 2;
    }
    int threads = atoi(argv[2]);
    size_t piece = (size_t)(argc > 3 ? atoi(argv[3]) : (int)(K3_IO_PIECE >> 20)) << 20;
    size_t ring = (size_t)(argc > 4 ? atoi(argv[4]) : 256) << 20;
    k3_err e = { 0, "" };
    k3_file f;
    if (threads < 1 || !piece || ring < piece || k3_read_queue_check(&e) != K3_OK ||
        k3_file_open(&f, argv[1], 1, &e) != K3_OK) {
        fprintf(stderr, "io_depth: %s\n", e.code ? e.msg : "bad THREADS, PIECE_MIB or RING_MIB");
        return 2;
    }
    FILE *fp = fopen(argv[1], "rb");
    long long size = -1;
    if (fp && fseek(fp, 0, SEEK_END) == 0)
        size = ftell(fp);
    if (fp)
        fclose(fp);
    size_t n = size > 0 ? (size_t)((unsigned long long)size / piece) : 0;
    size_t slots = ring / piece;
    uint8_t *buf = k3_io_alloc(slots * piece, "read buffer", &e);
    k3_read_req *q = calloc(n + 1, sizeof *q);
    k3_iov *v = calloc(n + 1, sizeof *v);
    if (!n || !buf || !q || !v) {
        fprintf(stderr, "io_depth: %s\n", !n ? "the file holds no whole piece" : "out of memory");
        return 2;
    }
    memset(buf, 1, slots * piece);
    for (size_t i = 0; i < n; i++) {
        k3_iov one = { buf + i % slots * piece, piece };
        k3_read_req r = { &f, (uint64_t)i * piece, &v[i], 1, piece };
        v[i] = one;
        q[i] = r;
    }
    double t0 = k3_seconds();
    k3_read_queue_run(q, n, threads, done, NULL);
    double s = k3_seconds() - t0;
    int depth;
    const char *why, *name = k3_read_queue_reader(&depth, &why);
    double bytes = (double)n * (double)piece;
    printf("reader %s depth %d threads %d bytes %.0f seconds %.3f gbps %.3f\n", name, depth,
           threads, bytes, s, s > 0 ? bytes / s / 1e9 : 0.0);
    k3_io_free(buf);
    free(q);
    free(v);
    k3_file_close(&f);
    return failed;
}
