/* test_files.c - the file contracts every input and output relies on
 * (util/file.h, util/atomic_file.h):
 *  - inputs: a FIFO or a directory is refused at once (never a hang), a
 *    file of exactly the size limit is read whole and one byte more is
 *    refused;
 *  - outputs: a commit replaces the file whole, an abort leaves it as it
 *    was, a symbolic link is written through to its target (the link
 *    stays a link), temporary files of a dead process are removed by the
 *    next begin (and a live one's are not), a directory in the path's
 *    place or a missing directory is refused by the probe. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/file.h"

static char dir[256];

static const char *at(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void write_file(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(text, 1, n, f) == n && fclose(f) == 0, "writing %s", path);
}

static char *slurp(const char *path)
{
    k3_err e = { 0, "" };
    size_t len;
    return k3_read_small_file(&e, path, 1 << 20, &len);
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static void test_inputs(void)
{
    k3_err e = { 0, "" };
    size_t len = 0;
    /* Exactly the limit is read; one byte over is not. */
    char text[64];
    memset(text, 'x', sizeof text);
    write_file(at("exact"), text, 64);
    char *got = k3_read_small_file(&e, at("exact"), 64, &len);
    CHECK(got && len == 64 && e.code == K3_OK, "a 64-byte file at a 64-byte limit: %s", e.msg);
    free(got);
    write_file(at("over"), text, 64);
    e = (k3_err){ 0, "" };
    got = k3_read_small_file(&e, at("over"), 63, &len);
    CHECK(!got && e.code == K3_EINPUT && strstr(e.msg, "limit"), "64 bytes at a 63 limit: %s",
          e.msg);
    /* Growing buffers: a limit far above the size, and an empty file. */
    e = (k3_err){ 0, "" };
    got = k3_read_small_file(&e, at("exact"), 1 << 20, &len);
    CHECK(got && len == 64, "a small file under a large limit: %s", e.msg);
    free(got);
    write_file(at("empty"), "", 0);
    e = (k3_err){ 0, "" };
    got = k3_read_small_file(&e, at("empty"), 16, &len);
    CHECK(got && len == 0 && got[0] == '\0', "an empty file: %s", e.msg);
    free(got);

    /* A FIFO with no writer: refused at once (a blocking open would hang
     * this test; alarm() turns a hang into a failure). */
    CHECK(mkfifo(at("fifo"), 0600) == 0, "mkfifo: %s", strerror(errno));
    alarm(10);
    e = (k3_err){ 0, "" };
    CHECK(k3_open_input(at("fifo"), &e) < 0 && e.code == K3_EINPUT && strstr(e.msg, "FIFO"),
          "a FIFO: %s", e.msg);
    e = (k3_err){ 0, "" };
    CHECK(!k3_read_small_file(&e, at("fifo"), 16, &len) && e.code == K3_EINPUT,
          "reading a FIFO: %s", e.msg);
    alarm(0);
    e = (k3_err){ 0, "" };
    CHECK(k3_open_input(dir, &e) < 0 && e.code == K3_EINPUT && strstr(e.msg, "directory"),
          "a directory: %s", e.msg);
    e = (k3_err){ 0, "" };
    CHECK(k3_open_input(at("missing"), &e) < 0 && e.code == K3_EINPUT &&
              strstr(e.msg, "No such file"),
          "a missing file names the errno: %s", e.msg);
    e = (k3_err){ 0, "" };
    int fd = k3_open_input(at("exact"), &e);
    CHECK(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK), "a regular file opens blocking");
    if (fd >= 0)
        close(fd);
}

/* Writes text to path through the atomic file; commit or abort. */
static int replace(const char *path, const char *text, int commit, k3_err *e)
{
    k3_atomic_file a;
    if (k3_atomic_begin(&a, path, e) != K3_OK)
        return e->code;
    fputs(text, a.f);
    if (!commit) {
        k3_atomic_abort(&a);
        return K3_OK;
    }
    return k3_atomic_commit(&a, e);
}

/* A PID that is certainly not running: a child that has been reaped. */
static long dead_pid(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    waitpid(p, NULL, 0);
    return (long)p;
}

static void test_outputs(void)
{
    k3_err e = { 0, "" };
    char *got;
    CHECK(replace(at("out"), "old", 1, &e) == K3_OK, "commit: %s", e.msg);
    CHECK(replace(at("out"), "new!", 0, &e) == K3_OK, "abort: %s", e.msg);
    got = slurp(at("out"));
    CHECK(got && !strcmp(got, "old"), "an abort leaves the old content: %s", got);
    free(got);

    /* Through a link: the target changes, the link stays a link. */
    write_file(at("target"), "t0", 2);
    CHECK(symlink("target", at("link")) == 0, "symlink: %s", strerror(errno));
    CHECK(replace(at("link"), "t1", 1, &e) == K3_OK, "commit through a link: %s", e.msg);
    struct stat st;
    CHECK(lstat(at("link"), &st) == 0 && S_ISLNK(st.st_mode), "the link is still a link");
    got = slurp(at("target"));
    CHECK(got && !strcmp(got, "t1"), "the target holds the new content: %s", got);
    free(got);
    /* A dangling link gets its target created. */
    CHECK(symlink("born", at("dangling")) == 0, "symlink: %s", strerror(errno));
    CHECK(replace(at("dangling"), "b", 1, &e) == K3_OK, "commit through a dangling link: %s",
          e.msg);
    got = slurp(at("born"));
    CHECK(got && !strcmp(got, "b"), "the dangling link's target was created: %s", got);
    free(got);

    /* Stale temporary files: a dead PID's go, a live one's (ours: the
     * parent of this test is alive) stay. */
    char stale[512], live[512];
    snprintf(stale, sizeof stale, "%s.tmp-%ld-AbC123", at("out"), dead_pid());
    snprintf(live, sizeof live, "%s.tmp-%ld-AbC123", at("out"), (long)getppid());
    write_file(stale, "x", 1);
    write_file(live, "x", 1);
    CHECK(replace(at("out"), "newer", 1, &e) == K3_OK, "commit: %s", e.msg);
    CHECK(!exists(stale), "a dead process's temporary file was removed");
    CHECK(exists(live), "a live process's temporary file was kept");
    unlink(live);

    /* Probes: a directory in the path's place, a missing directory. */
    e = (k3_err){ 0, "" };
    CHECK(k3_atomic_probe(dir, &e) == K3_EINPUT, "probe of a directory: %s", e.msg);
    e = (k3_err){ 0, "" };
    CHECK(k3_atomic_probe(at("no/such/file"), &e) == K3_EINPUT &&
              strstr(e.msg, "No such file"),
          "probe of a missing directory names the errno: %s", e.msg);
    e = (k3_err){ 0, "" };
    CHECK(k3_atomic_probe(at("fresh"), &e) == K3_OK && !exists(at("fresh")),
          "a probe leaves nothing behind: %s", e.msg);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/k3-test-files-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_inputs();
    test_outputs();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_report("test_files");
}
