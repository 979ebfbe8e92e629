/* front.c - see front.h. */
#include "mpi/front.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "k3/error.h"

#define RELAY_CHUNK 65536
#define TAG_DATA    1 /* a chunk of stdin; 0 bytes: end of input */
#define TAG_STOP    2 /* rank 0 is done: stop relaying */

static struct {
    MPI_Comm comm;
    int rank, size;
    int pipe_w;  /* write end of this rank's stdin pipe */
    int orig_in; /* rank 0: the job's stdin */
    pthread_t thread;
    int started;
    pthread_mutex_t mu; /* rank 0: stopping vs. the reader's sends */
    int stopping, eof_sent;
    FILE *err_keep; /* followers: stderr kept here */
    FILE *out_keep; /* followers (and rank 0 with keep_out): stdout kept here */
    int out_real;   /* rank 0 with keep_out: the real stdout */
    int err_real;   /* followers: the real stderr */
    char dir[4096]; /* followers: private directory ("" if none) */
    char **argv;
} F = { .mu = PTHREAD_MUTEX_INITIALIZER, .pipe_w = -1, .orig_in = -1, .err_real = -1,
        .out_real = -1 };

static void nap(void)
{
    struct timespec ts = { 0, 2000000 }; /* 2 ms: stdin is human- or pipe-paced */
    nanosleep(&ts, NULL);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Rank 0: read the job's stdin, send each chunk to every follower, then
 * into this rank's own pipe. A write to the own pipe may block (the
 * command does not read stdin); it happens outside the lock, so stopping
 * never waits for it. */
static void *reader(void *arg)
{
    static char buf[RELAY_CHUNK];
    (void)arg;
    for (;;) {
        ssize_t n = read(F.orig_in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            n = 0;
        pthread_mutex_lock(&F.mu);
        if (F.stopping) {
            pthread_mutex_unlock(&F.mu);
            return NULL;
        }
        for (int r = 1; r < F.size; r++)
            MPI_Send(buf, (int)n, MPI_BYTE, r, TAG_DATA, F.comm);
        if (n == 0)
            F.eof_sent = 1;
        pthread_mutex_unlock(&F.mu);
        if (n == 0 || write_all(F.pipe_w, buf, (size_t)n) != 0)
            break;
    }
    close(F.pipe_w);
    F.pipe_w = -1;
    return NULL;
}

/* Followers: receive chunks from rank 0 into the own pipe (non-blocking,
 * what does not fit is kept in memory), until end of input or stop. */
static void *follower(void *arg)
{
    static char buf[RELAY_CHUNK];
    char *pend = NULL;
    size_t plen = 0, pcap = 0;
    int eof = 0;
    (void)arg;
    for (;;) {
        while (plen) {
            ssize_t w = write(F.pipe_w, pend, plen);
            if (w <= 0)
                break;
            memmove(pend, pend + w, plen - (size_t)w);
            plen -= (size_t)w;
        }
        if (eof && !plen)
            break;
        int flag = 0;
        MPI_Status st;
        if (!eof)
            MPI_Iprobe(0, MPI_ANY_TAG, F.comm, &flag, &st);
        if (!flag) {
            nap();
            continue;
        }
        int n = 0;
        MPI_Get_count(&st, MPI_BYTE, &n);
        MPI_Recv(buf, n, MPI_BYTE, 0, st.MPI_TAG, F.comm, MPI_STATUS_IGNORE);
        if (st.MPI_TAG == TAG_STOP)
            break;
        if (n == 0) {
            eof = 1;
            continue;
        }
        if (plen + (size_t)n > pcap) {
            size_t nc = (plen + (size_t)n) * 2;
            char *np = realloc(pend, nc);
            if (!np)
                break; /* this rank's stdin ends short; its reads see EOF */
            pend = np;
            pcap = nc;
        }
        memcpy(pend + plen, buf, (size_t)n);
        plen += (size_t)n;
    }
    free(pend);
    close(F.pipe_w);
    F.pipe_w = -1;
    return NULL;
}

/* Followers: the value of an output option, moved into the private
 * directory as dir/NAME. */
static char *private_path(const char *name)
{
    size_t n = strlen(F.dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", F.dir, name);
    return s;
}

static int copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY), rc = 0;
    if (in < 0)
        return errno == ENOENT ? 0 : -1;
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char buf[65536];
    ssize_t n;
    if (out < 0)
        rc = -1;
    while (!rc && (n = read(in, buf, sizeof buf)) != 0)
        rc = n < 0 ? -1 : write_all(out, buf, (size_t)n);
    close(in);
    if (out >= 0 && close(out) != 0)
        rc = -1;
    return rc;
}

static const char *const OUTPUT_OPTS[] = {
    "--out",        "--dump-logits", "--dump-prompt-logits", "--dump-cache-trace",
    "--save-state", "--history"
};
#define N_OUTPUT_OPTS (sizeof OUTPUT_OPTS / sizeof OUTPUT_OPTS[0])

/* The private directory, made on first use (most runs write no file). */
static int make_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    if (F.dir[0])
        return 0;
    if ((size_t)snprintf(F.dir, sizeof F.dir, "%s/k3-mpi-r%d-XXXXXX", tmp && *tmp ? tmp : "/tmp",
                         F.rank) >= sizeof F.dir ||
        !mkdtemp(F.dir)) {
        fprintf(stderr, "k3-mpi: rank %d: error: cannot create a private directory: %s\n", F.rank,
                strerror(errno));
        F.dir[0] = '\0';
        return K3_ERUNTIME;
    }
    return 0;
}

static int rewrite_argv(int argc, char **argv)
{
    F.argv = calloc((size_t)argc + 1, sizeof *F.argv);
    if (!F.argv)
        return K3_ERUNTIME;
    for (int i = 0; i < argc; i++)
        F.argv[i] = argv[i];
    for (int i = 1; i + 1 < argc; i++)
        for (size_t k = 0; k < N_OUTPUT_OPTS; k++) {
            if (strcmp(argv[i], OUTPUT_OPTS[k]))
                continue;
            if (make_dir())
                return K3_ERUNTIME;
            F.argv[i + 1] = private_path(OUTPUT_OPTS[k] + 2);
            if (!F.argv[i + 1])
                return K3_ERUNTIME;
            if (k == N_OUTPUT_OPTS - 1 && copy_file(argv[i + 1], F.argv[i + 1]) != 0) {
                fprintf(stderr, "k3-mpi: rank %d: error: --history %s: cannot copy: %s\n", F.rank,
                        argv[i + 1], strerror(errno));
                return K3_ERUNTIME;
            }
            i++;
            break;
        }
    return 0;
}

static int redirect_follower(void)
{
    F.out_keep = tmpfile();
    if (!F.out_keep || dup2(fileno(F.out_keep), STDOUT_FILENO) < 0)
        return K3_ERUNTIME;
    F.err_keep = tmpfile();
    F.err_real = dup(STDERR_FILENO);
    if (!F.err_keep || F.err_real < 0 || dup2(fileno(F.err_keep), STDERR_FILENO) < 0)
        return K3_ERUNTIME;
    return 0;
}

FILE *k3_mpi_front_real_stdout(void)
{
    static FILE *out;
    if (F.rank != 0)
        return NULL;
    if (F.out_real < 0)
        return stdout;
    if (!out)
        out = fdopen(F.out_real, "w");
    return out;
}

/* Rank 0's kept stdout onto the real one (a --plan that failed). */
static void show_kept_out(void)
{
    size_t n;
    char *t = F.rank == 0 && F.out_real >= 0 ? k3_mpi_front_kept_stdout(1 << 20, &n) : NULL;
    FILE *out = t ? k3_mpi_front_real_stdout() : NULL;
    if (out) {
        fwrite(t, 1, n, out);
        fflush(out);
    }
    free(t);
}

int k3_mpi_front_begin(MPI_Comm comm, int argc, char **argv, int keep_out, char ***argv_out)
{
    int fds[2];
    *argv_out = argv;
    if (MPI_Comm_dup(comm, &F.comm) != MPI_SUCCESS)
        return K3_ERUNTIME;
    MPI_Comm_rank(F.comm, &F.rank);
    MPI_Comm_size(F.comm, &F.size);
    if (F.rank == 0 && (F.orig_in = dup(STDIN_FILENO)) < 0)
        F.orig_in = open("/dev/null", O_RDONLY);
    if (F.orig_in < 0 && F.rank == 0)
        return K3_ERUNTIME;
    if (pipe(fds) != 0 || dup2(fds[0], STDIN_FILENO) < 0) {
        fprintf(stderr, "k3-mpi: rank %d: error: stdin relay: %s\n", F.rank, strerror(errno));
        return K3_ERUNTIME;
    }
    close(fds[0]);
    F.pipe_w = fds[1];
    fcntl(F.pipe_w, F_SETFD, FD_CLOEXEC);
    if (F.rank == 0 && keep_out) {
        fflush(stdout);
        F.out_keep = tmpfile();
        F.out_real = dup(STDOUT_FILENO);
        if (!F.out_keep || F.out_real < 0 || dup2(fileno(F.out_keep), STDOUT_FILENO) < 0) {
            fprintf(stderr, "k3-mpi: rank 0: error: cannot keep stdout\n");
            return K3_ERUNTIME;
        }
    }
    if (F.rank != 0) {
        fcntl(F.pipe_w, F_SETFL, O_NONBLOCK);
        if (rewrite_argv(argc, argv) || redirect_follower()) {
            fprintf(stderr, "k3-mpi: rank %d: error: cannot set up the follower's outputs\n",
                    F.rank);
            return K3_ERUNTIME;
        }
        *argv_out = F.argv;
    }
    if (pthread_create(&F.thread, NULL, F.rank == 0 ? reader : follower, NULL) != 0) {
        fprintf(stderr, "k3-mpi: rank %d: error: cannot start the stdin relay\n", F.rank);
        return K3_ERUNTIME;
    }
    F.started = 1;
    return 0;
}

char *k3_mpi_front_kept_stdout(size_t max, size_t *n)
{
    *n = 0;
    fflush(stdout);
    if (!F.out_keep)
        return NULL;
    char *text = malloc(max + 1);
    if (!text)
        return NULL;
    rewind(F.out_keep);
    *n = fread(text, 1, max, F.out_keep);
    text[*n] = 0;
    return text;
}

/* The kept stderr, each line prefixed, onto the real one. */
static void show_kept(void)
{
    char line[4096];
    fflush(stderr);
    if (!F.err_keep || F.err_real < 0)
        return;
    FILE *out = fdopen(F.err_real, "w");
    if (!out)
        return;
    rewind(F.err_keep);
    int bol = 1;
    while (fgets(line, sizeof line, F.err_keep)) {
        if (bol)
            fprintf(out, "k3-mpi: rank %d: ", F.rank);
        fputs(line, out);
        bol = strchr(line, '\n') != NULL;
    }
    fflush(out);
}

/* Removes the private directory: the files the redirected options name
 * (--dump-cache-trace's is a directory holding trace.txt), then itself. */
static void remove_dir(void)
{
    if (!F.dir[0])
        return;
    char *trace = private_path("dump-cache-trace/trace.txt");
    if (trace)
        (void)unlink(trace);
    free(trace);
    for (size_t k = 0; k < N_OUTPUT_OPTS; k++) {
        char *p = private_path(OUTPUT_OPTS[k] + 2);
        if (p && unlink(p) != 0)
            (void)rmdir(p);
        free(p);
    }
    (void)rmdir(F.dir);
}

void k3_mpi_front_end(int rc)
{
    if (F.rank != 0 && rc != 0)
        show_kept();
    if (F.rank == 0 && rc != 0)
        show_kept_out();
    if (F.started && rc == 0) {
        if (F.rank == 0) {
            pthread_mutex_lock(&F.mu);
            F.stopping = 1;
            if (!F.eof_sent)
                for (int r = 1; r < F.size; r++)
                    MPI_Send(NULL, 0, MPI_BYTE, r, TAG_STOP, F.comm);
            pthread_mutex_unlock(&F.mu);
            /* The reader may sit in read() of a terminal: not joined; it
             * checks `stopping` before any further MPI call. */
        } else {
            pthread_join(F.thread, NULL);
        }
    }
    remove_dir();
}
