/* test_read_queue.c - the two readers of io/read_queue.h give the same
 * bytes and the same failures:
 *  - a file read whole as scattered aligned reads (two buffers each, the
 *    last one running past the end of the file) arrives byte for byte,
 *    under uring at depths 1, 4 and 64 and under threads at 1 and 4;
 *  - a read needing one byte past the end of the file ends in K3_EINVALID
 *    "RUN INVALID ... short read" with the same message from both (the
 *    uring reader must notice a completion that transferred less than
 *    asked and ask again: ignoring it would deliver a "full" read);
 *  - a done callback that asks to stop gets no read started after it
 *    (one read at a time);
 *  - a misaligned request is refused (K3_ERUNTIME) by both;
 *  - a verified read (io/read_hashed.h: chunks hashed in order as they
 *    arrive, several in flight under uring) gives the file's bytes and its
 *    XXH64 and format-3 block hashes under both, also when the chunks
 *    complete out of order (hashing up to the latest completed chunk
 *    instead of the arrived prefix fails this);
 *  - a span (k3_read_queue_span: an unaligned range through its aligned
 *    superset, cut into pieces under uring) gives the file's bytes from an
 *    unaligned start to the end of the file, a span one byte past the end
 *    is a short read, a buffer below the span's cap is refused.
 * Where the kernel refuses io_uring the uring cases run on threads and
 * say so. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "io/codec.h"
#include "io/direct.h"
#include "io/read_hashed.h"
#include "io/read_queue.h"
#include "util/error.h"
#include "util/xxh64.h"

#define PIECE (192u << 10) /* two buffers: 64 KiB + 128 KiB */
#define SIZE ((5u << 20) + 3000u)

typedef struct {
    size_t calls, failed_at;
    int stop_on_fail;
    int rc;
    char msg[1024];
} tally;

static int on_done(void *ctx, size_t i, int rc, const k3_err *e)
{
    tally *t = ctx;
    t->calls++;
    if (rc != K3_OK && t->rc == K3_OK) {
        t->rc = rc;
        t->failed_at = i;
        snprintf(t->msg, sizeof t->msg, "%s", e->msg);
    }
    return rc != K3_OK && t->stop_on_fail;
}

static uint8_t *pattern(void)
{
    uint8_t *p = malloc(SIZE);
    uint32_t x = 2463534242u;
    for (size_t i = 0; p && i < SIZE; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
    return p;
}

/* Reads the file whole into dst (k3_io_align_up(SIZE) bytes, zeroed
 * first); extra asks for that many bytes past the end in the last read. */
static tally read_whole(k3_file *f, uint8_t *dst, uint64_t extra, int threads)
{
    size_t n = (SIZE + PIECE - 1) / PIECE;
    static k3_read_req q[64];
    static k3_iov v[64][2];
    memset(dst, 0, k3_io_align_up(SIZE));
    for (size_t i = 0; i < n; i++) {
        uint64_t off = (uint64_t)i * PIECE;
        uint64_t left = SIZE - off < PIECE ? SIZE - off : PIECE;
        uint64_t room = k3_io_align_up(left);
        size_t a = room < (64u << 10) ? (size_t)room : 64u << 10;
        v[i][0].buf = dst + off;
        v[i][0].len = a;
        v[i][1].buf = dst + off + a;
        v[i][1].len = (size_t)(room - a);
        k3_read_req r = { f, off, v[i], room > a ? 2 : 1, left + (i == n - 1 ? extra : 0) };
        q[i] = r;
    }
    tally t;
    memset(&t, 0, sizeof t);
    k3_read_queue_run(q, n, threads, on_done, &t);
    return t;
}

int main(void)
{
    const char *build = getenv("K3_BUILD");
    char path[512];
    snprintf(path, sizeof path, "%s/read_queue.bin", build && *build ? build : "build");
    uint8_t *want = pattern();
    FILE *fp = fopen(path, "wb");
    CHECK(want && fp && fwrite(want, 1, SIZE, fp) == SIZE && fclose(fp) == 0, "writing %s",
          path);
    k3_err e = { 0, "" };
    k3_file f, fb;
    CHECK(k3_file_open(&f, path, 1, &e) == K3_OK, "%s", e.msg);
    CHECK(k3_file_open(&fb, path, 0, &e) == K3_OK && fsync(fb.fd) == 0, "%s", e.msg);
    uint8_t *dst = k3_io_alloc(SIZE, "test", &e);
    CHECK(dst != NULL, "%s", e.msg);
    if (!dst || !want)
        return check_report("test_read_queue");

    static const struct {
        const char *reader;
        int depth, threads;
    } runs[] = { { "uring", 1, 1 }, { "uring", 4, 1 }, { "uring", 64, 1 },
                 { "threads", 8, 1 }, { "threads", 8, 4 } };
    char short_msg[1024] = "";
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        const char *name = runs[r].reader;
        CHECK(k3_read_queue_select(name, runs[r].depth) == 0, "select %s", name);
        tally t = read_whole(&f, dst, 0, runs[r].threads);
        CHECK(t.rc == K3_OK, "%s: %s", name, t.msg);
        CHECK(memcmp(dst, want, SIZE) == 0, "%s depth %d: other bytes", name, runs[r].depth);
        int depth;
        const char *why, *ran = k3_read_queue_reader(&depth, &why);
        if (!strcmp(name, "uring") && strcmp(ran, "uring"))
            printf("test_read_queue: io_uring unavailable here (%s): ran on threads\n", why);
        else
            CHECK(!strcmp(ran, name), "asked for %s, ran %s", name, ran);

        /* One byte past the end: short, after every attempt. */
        t = read_whole(&f, dst, 1, runs[r].threads);
        CHECK(t.rc == K3_EINVALID && strstr(t.msg, "RUN INVALID") && strstr(t.msg, "short read"),
              "%s: a read past the end gave %d (%s)", name, t.rc, t.msg);
        if (!*short_msg)
            snprintf(short_msg, sizeof short_msg, "%s", t.msg);
        CHECK(!strcmp(t.msg, short_msg), "%s: \"%s\" against \"%s\"", name, t.msg, short_msg);

        /* A failure that stops: read 0 fails, and one read at a time (depth
         * 1, one thread) starts nothing after it. (With more in flight,
         * others start while read 0 is retried.) */
        k3_iov one = { dst, K3_IO_ALIGN };
        k3_read_req q[16];
        for (int i = 0; i < 16; i++) {
            k3_read_req ok = { &f, (uint64_t)i * K3_IO_ALIGN, &one, 1, K3_IO_ALIGN };
            q[i] = ok;
        }
        q[0].off = k3_io_align_down(SIZE);
        q[0].need = K3_IO_ALIGN; /* the file ends inside this block */
        tally s;
        memset(&s, 0, sizeof s);
        s.stop_on_fail = 1;
        k3_read_queue_run(q, 16, runs[r].threads, on_done, &s);
        int serial = !strcmp(ran, "uring") ? runs[r].depth == 1 : runs[r].threads == 1;
        size_t most = serial ? 1 : 16;
        CHECK(s.rc == K3_EINVALID && s.failed_at == 0 && s.calls <= most,
              "%s: stop: rc %d at %zu after %zu calls", name, s.rc, s.failed_at, s.calls);

        /* A verified read: the hash follows the chunks in order, also when
         * they complete out of order. Through the page cache with the first
         * 4 MiB dropped from it, the chunks after them arrive first under
         * uring (a cached read completes at once, the others wait for the
         * disk). */
        double exposed, hashing;
        for (int blocks = 0; blocks < 2; blocks++) {
            uint64_t got = 0, expect = 0;
            memset(dst, 0, k3_io_align_up(SIZE));
            posix_fadvise(fb.fd, 0, 4 << 20, POSIX_FADV_DONTNEED);
            if (blocks)
                CHECK(k3_codec_image_hash(want, SIZE, &expect) == 0, "block hashes");
            else
                expect = k3_xxh64(want, SIZE, 0);
            k3_err he = { 0, "" };
            CHECK(k3_read_hashed(&fb, 0, dst, SIZE, blocks, &got, &exposed, &hashing, &he) ==
                          K3_OK &&
                      got == expect && memcmp(dst, want, SIZE) == 0,
                  "%s: hashed read (blocks %d): %s, %016llx against %016llx", name, blocks,
                  he.msg, (unsigned long long)got, (unsigned long long)expect);
        }

        /* Spans: from an unaligned start to the end of the file (the last
         * piece ends inside an aligned block), several pieces under uring
         * at depth > 1; one byte past the end; too small a buffer. */
        {
            uint64_t at = 12345, len = SIZE - at;
            const uint8_t *p = NULL;
            size_t cap = k3_span_cap(at, len);
            k3_err se = { 0, "" };
            memset(dst, 0, k3_io_align_up(SIZE));
            CHECK(k3_read_queue_span(&f, dst, cap, at, len, &p, &se) == K3_OK &&
                      p == dst + (at - k3_io_align_down(at)) && memcmp(p, want + at, len) == 0,
                  "%s: span: %s", name, se.msg);
            if (!strcmp(ran, "uring") && runs[r].depth > 1)
                CHECK(k3_read_queue_piece(len, len) < len, "%s: a span in one piece", name);
            k3_err pe = { 0, "" };
            CHECK(k3_read_queue_span(&f, dst, k3_span_cap(at, len + 1), at, len + 1, &p, &pe) ==
                          K3_EINVALID &&
                      strstr(pe.msg, "short read"),
                  "%s: a span past the end: %s", name, pe.msg);
            k3_err ce = { 0, "" };
            CHECK(k3_read_queue_span(&f, dst, cap - 1, at, len, &p, &ce) == K3_ERUNTIME,
                  "%s: a span in too small a buffer: %s", name, ce.msg);
        }

        /* Misaligned: refused before any read. */
        q[1].off = 100;
        memset(&s, 0, sizeof s);
        k3_read_queue_run(q + 1, 1, runs[r].threads, on_done, &s);
        CHECK(s.rc == K3_ERUNTIME && strstr(s.msg, "misaligned"), "%s: misaligned: %d %s", name,
              s.rc, s.msg);
    }
    CHECK(k3_read_queue_select("bogus", 4) != 0 && k3_read_queue_select("uring", 0) != 0 &&
              k3_read_queue_select("uring", 257) != 0,
          "bad selections accepted");
    k3_io_free(dst);
    k3_file_close(&f);
    k3_file_close(&fb);
    unlink(path);
    free(want);
    return check_report("test_read_queue");
}
