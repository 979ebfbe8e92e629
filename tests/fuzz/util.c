/* util.c - the helpers of fuzz.h. */
#include "fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void fz_abort(const char *file, int line, const char *cond, const char *fmt, ...)
{
    fprintf(stderr, "%s:%d: FZ_ASSERT(%s) failed: ", file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void fz_check_refusal(const k3_err *e, int rc)
{
    FZ_ASSERT(rc == e->code, "returned %d but recorded %d (%s)", rc, e->code, e->msg);
    FZ_ASSERT(rc >= K3_ERUNTIME && rc <= K3_EINVALID, "unknown error code %d", rc);
    FZ_ASSERT(e->msg[0] != '\0', "error %d without a message", rc);
    if (getenv("K3_FUZZ_VERBOSE"))
        fprintf(stderr, "refused (%d): %s\n", rc, e->msg);
}

void fz_check_input_refusal(const k3_err *e, int rc)
{
    fz_check_refusal(e, rc);
    FZ_ASSERT(rc == K3_EINPUT, "input refused with code %d: %s", rc, e->msg);
}

/* The files fz_write made, for the exit-time cleanup. */
#define MAX_FILES 16
static char tmpdir[256];
static char files[MAX_FILES][64];
static int nfiles;

static void cleanup(void)
{
    char path[1024];
    for (int i = 0; i < nfiles; i++) {
        snprintf(path, sizeof path, "%.255s/%.63s", tmpdir, files[i]);
        unlink(path);
    }
    rmdir(tmpdir);
}

const char *fz_tmpdir(void)
{
    if (tmpdir[0])
        return tmpdir;
    struct stat st;
    const char *base = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                       : getenv("TMPDIR")                                         ? getenv("TMPDIR")
                                                                                  : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/k3fuzz-%ld", base, (long)getpid());
    if (mkdir(tmpdir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz: cannot create %s: %s\n", tmpdir, strerror(errno));
        abort();
    }
    atexit(cleanup);
    return tmpdir;
}

/* fz_tmpdir()/name in path, remembered for the cleanup. */
static void own(const char *name, char path[1024])
{
    int known = 0;
    for (int i = 0; i < nfiles; i++)
        known |= !strcmp(files[i], name);
    if (!known) {
        if (nfiles == MAX_FILES || strlen(name) >= sizeof files[0])
            abort();
        strcpy(files[nfiles++], name);
    }
    snprintf(path, 1024, "%s/%s", fz_tmpdir(), name);
}

const char *fz_write(const char *name, const void *data, size_t n)
{
    static char path[1024];
    own(name, path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    size_t done = 0;
    while (fd >= 0 && done < n) {
        ssize_t w = write(fd, (const char *)data + done, n - done);
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    if (fd < 0 || done != n || close(fd) != 0) {
        fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
        abort();
    }
    return path;
}

void fz_link(const char *name, const char *target)
{
    char path[1024], cwd[512], abs[1024];
    own(name, path);
    if (target[0] != '/' && getcwd(cwd, sizeof cwd))
        snprintf(abs, sizeof abs, "%s/%s", cwd, target);
    else
        snprintf(abs, sizeof abs, "%s", target);
    unlink(path);
    if (access(abs, R_OK) != 0 || symlink(abs, path) != 0) {
        fprintf(stderr, "fuzz: cannot link %s to %s (run tests/fuzz/make_seeds.py?)\n", path,
                abs);
        abort();
    }
}

const char *fz_data_dir(void)
{
    const char *d = getenv("K3_FUZZ_DATA");
    if (!d || !*d) {
        fprintf(stderr, "fuzz: set K3_FUZZ_DATA to the directory tests/fuzz/make_seeds.py "
                        "filled (make fuzz and the gate do)\n");
        abort();
    }
    return d;
}

const char *fz_tokenizer_dir(void)
{
    static char path[1024];
    const char *d = getenv("K3_FUZZ_TOK");
    if (d && *d)
        return d;
    if (access("../shared/k3-release/tiktoken.model", R_OK) == 0)
        return "../shared/k3-release";
    snprintf(path, sizeof path, "%s/tok", fz_data_dir());
    return path;
}
