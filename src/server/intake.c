/* intake.c - see intake.h. */
#include "server/intake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/os_net.h"

/* The longest poll wait: how often signals and the clock are looked at. */
#define TICK_MS 200

typedef struct {
    int fd;
    k3_client_key key;
    char *buf; /* K3_CONN_MAX_HEAD bytes once the first byte arrives */
    size_t len;
    double t0;    /* accepted, or (kept) given back or its next request's first byte */
    int requests; /* requests answered on it (> 0: a kept-alive connection) */
    int idle;     /* kept alive and no byte of its next request yet */
} pending;

/* A kept-alive connection handed back by its thread, not taken yet
 * (k3_server.kept, under its mu). */
struct k3_kept {
    pending p;
    struct k3_kept *next;
};

typedef struct {
    k3_server *s;
    pthread_attr_t detached;
    pending p[K3_INTAKE_MAX_PENDING];
    size_t n;
    int wake[2];                                 /* k3_sock_pair, or -1 */
    struct pollfd pf[K3_INTAKE_MAX_PENDING + 2]; /* the listening socket, wake[0] if any,
                                                  * then p[] */
} intake;

static void log_refusal(const k3_server *s, const k3_client_key *k, int status, const char *why)
{
    char who[64];
    if (s->cfg->quiet)
        return;
    k3_client_key_format(k, who, sizeof who);
    fprintf(stderr, "k3 serve: %s: %d %s\n", who, status, why);
}

/* Ends connection i, which leaves its client's count; the last pending
 * connection takes its place. */
static void drop(intake *in, size_t i, int close_fd)
{
    pending *p = &in->p[i];
    if (close_fd)
        k3_sock_close(p->fd);
    free(p->buf);
    k3_clients_leave(&in->s->clients, &p->key);
    *p = in->p[--in->n];
}

static void refuse(intake *in, size_t i, int status, const char *code, const char *why)
{
    log_refusal(in->s, &in->p[i].key, status, why);
    k3_conn_refuse(in->p[i].fd, status, code, why);
    drop(in, i, 0);
}

typedef struct {
    k3_server *s;
    pending p;
} conn_arg;

/* Gives the kept connection p back to the accept thread: 0, or -1 when it
 * no longer takes connections (p is then closed). */
static int hand_back(k3_server *s, const pending *p)
{
    struct k3_kept *k = malloc(sizeof *k);
    pthread_mutex_lock(&s->mu);
    if (k && s->accepting) {
        k->p = *p;
        k->next = s->kept;
        s->kept = k;
        if (s->wake >= 0)
            k3_sock_send(s->wake, "k", 1, 1); /* a full pipe is already a wake-up */
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    pthread_mutex_unlock(&s->mu);
    free(k);
    free(p->buf);
    k3_sock_close(p->fd);
    return -1;
}

static void *connection(void *arg)
{
    conn_arg c = *(conn_arg *)arg;
    k3_server *s = c.s;
    free(arg);
    int kept = k3_conn_serve(s, c.p.fd, &c.p.buf, &c.p.len, c.p.t0, &c.p.requests);
    if (!kept || hand_back(s, &c.p))
        k3_clients_leave(&s->clients, &c.p.key);
    pthread_mutex_lock(&s->mu);
    s->conns--;
    pthread_cond_signal(&s->idle);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Hands connection i (its head complete, or refused by the parser) to a
 * thread of its own, or answers 503 when all allowed threads run. */
static void dispatch(intake *in, size_t i)
{
    k3_server *s = in->s;
    size_t most = s->cfg->max_queue + 1 + K3_INTAKE_SLACK;
    conn_arg *c = NULL;
    pthread_t t;
    pthread_mutex_lock(&s->mu);
    int room = (size_t)s->conns < most;
    if (room)
        s->conns++;
    pthread_mutex_unlock(&s->mu);
    if (room && (c = malloc(sizeof *c))) {
        c->s = s;
        c->p = in->p[i];
        if (pthread_create(&t, &in->detached, connection, c) == 0) {
            in->p[i] = in->p[--in->n]; /* the thread owns fd, buf and the count now */
            return;
        }
        free(c);
    }
    if (room) {
        pthread_mutex_lock(&s->mu);
        s->conns--;
        pthread_mutex_unlock(&s->mu);
    }
    refuse(in, i, 503, "server_busy", "Too many connections. Try again later.");
}

/* Reads what connection i sent and acts once its head is complete. */
static void read_head(intake *in, size_t i)
{
    pending *p = &in->p[i];
    k3_http_limits lim;
    k3_http_request req;
    if (!p->buf && !(p->buf = malloc(K3_CONN_MAX_HEAD))) {
        refuse(in, i, 503, "server_busy", "Out of memory for the request.");
        return;
    }
    int64_t r = k3_sock_recv(p->fd, p->buf + p->len, K3_CONN_MAX_HEAD - p->len, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (r <= 0) { /* the client left */
        drop(in, i, 1);
        return;
    }
    if (p->idle) { /* a kept connection's next request starts: its head deadline runs */
        p->idle = 0;
        p->t0 = k3_seconds();
    }
    p->len += (size_t)r;
    k3_conn_limits(in->s, &lim);
    int rc = k3_http_parse_request(p->buf, p->len, &req, &lim);
    if (rc == K3_HTTP_NEED_HEAD)
        return;
    if (rc == K3_HTTP_OK && k3_conn_is_health(&req)) {
        k3_conn_health(in->s, p->fd, &req, p->t0);
        drop(in, i, 0);
        return;
    }
    dispatch(in, i);
}

/* Closes the idle kept-alive connection that waited longest (of client k
 * only, when k is not NULL) to make room: whether there was one. */
static int evict_idle(intake *in, const k3_client_key *k)
{
    size_t best = in->n;
    for (size_t i = 0; i < in->n; i++)
        if (in->p[i].idle && (!k || !memcmp(&in->p[i].key, k, sizeof *k)) &&
            (best == in->n || in->p[i].t0 < in->p[best].t0))
            best = i;
    if (best == in->n)
        return 0;
    drop(in, best, 1);
    return 1;
}

/* Takes the connections handed back since the last look into the pending
 * set, idle (or with the start of their next request), their deadline
 * counted from now; when the set is full, an idle one that waited longer
 * is closed for it, else it is closed. */
static void take_back(intake *in)
{
    k3_server *s = in->s;
    pthread_mutex_lock(&s->mu);
    struct k3_kept *k = s->kept;
    s->kept = NULL;
    pthread_mutex_unlock(&s->mu);
    while (k) {
        struct k3_kept *next = k->next;
        k->p.t0 = k3_seconds();
        k->p.idle = k->p.len == 0;
        k3_sock_set_nonblock(k->p.fd, 1); /* this thread never blocks */
        if (in->n < K3_INTAKE_MAX_PENDING || evict_idle(in, NULL)) {
            in->p[in->n++] = k->p;
        } else {
            k3_sock_close(k->p.fd);
            free(k->p.buf);
            k3_clients_leave(&s->clients, &k->p.key);
        }
        free(k);
        k = next;
    }
}

/* Accepts one connection into the pending set, or refuses it. An idle
 * kept-alive connection never keeps a new client out: at the pending
 * set's bound, or at the client's --max-per-client, the idle one that
 * waited longest is closed instead. 0, or -1 when accept failed for good. */
static int accept_one(intake *in, int lfd)
{
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    memset(&sa, 0, sizeof sa);
    int fd = k3_sock_accept(lfd, (struct sockaddr *)&sa, &sl);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE)
            k3_sock_poll(NULL, 0, TICK_MS); /* out of descriptors: wait for connections to end */
        else if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN &&
                 errno != EWOULDBLOCK)
            return -1;
        return 0;
    }
    k3_sock_set_nonblock(fd, 1); /* this thread never blocks */
    pending p;
    memset(&p, 0, sizeof p);
    p.fd = fd;
    p.t0 = k3_seconds();
    k3_client_key_of((struct sockaddr *)&sa, &p.key);
    int full = in->n == K3_INTAKE_MAX_PENDING && !evict_idle(in, NULL), over = 0;
    if (!full && k3_clients_enter(&in->s->clients, &p.key))
        over = !evict_idle(in, &p.key) || k3_clients_enter(&in->s->clients, &p.key);
    if (full) {
        log_refusal(in->s, &p.key, 503, "too many connections sending their request");
        k3_conn_refuse(fd, 503, "server_busy", "Too many connections. Try again later.");
    } else if (over) {
        log_refusal(in->s, &p.key, 503, "over --max-per-client");
        k3_conn_refuse(fd, 503, "too_many_connections",
                       "Too many connections from your address (--max-per-client).");
    } else {
        in->p[in->n++] = p;
    }
    return 0;
}

/* Reads and drops the wake-up bytes. */
static void drain_wake(int fd)
{
    char sink[64];
    while (k3_sock_recv(fd, sink, sizeof sink, 1) > 0)
        ;
}

/* Closes every connection the accept loop holds or is handed: heads
 * still arriving get 503, idle kept-alive ones are just closed. From here
 * connection threads close what they would have handed back. */
static void close_all(intake *in)
{
    k3_server *s = in->s;
    pthread_mutex_lock(&s->mu);
    s->accepting = 0;
    s->wake = -1;
    pthread_mutex_unlock(&s->mu);
    take_back(in); /* those handed back just before: into p[] (evicting idle ones) */
    while (in->n) {
        if (in->p[in->n - 1].idle)
            drop(in, in->n - 1, 1);
        else
            refuse(in, in->n - 1, 503, "server_stopping", "The server is shutting down.");
    }
}

void k3_intake_run(k3_server *s, int lfd, volatile sig_atomic_t *stop)
{
    const k3_server_config *cfg = s->cfg;
    intake *in = calloc(1, sizeof *in);
    double start = k3_seconds();
    if (!in) {
        fprintf(stderr, "k3 serve: out of memory for the accept loop: stopping\n");
        return;
    }
    struct pollfd *pf = in->pf;
    in->s = s;
    pthread_attr_init(&in->detached);
    pthread_attr_setdetachstate(&in->detached, PTHREAD_CREATE_DETACHED);
    k3_sock_set_nonblock(lfd, 1);
    if (k3_sock_pair(in->wake) != 0) {
        in->wake[0] = in->wake[1] = -1; /* kept connections are looked at every tick */
    } else {
        k3_sock_set_nonblock(in->wake[0], 1);
        k3_sock_set_nonblock(in->wake[1], 1);
    }
    size_t base = in->wake[0] >= 0 ? 2 : 1; /* pf[base + i] is p[i] */
    pthread_mutex_lock(&s->mu);
    s->accepting = 1;
    s->wake = in->wake[1];
    pthread_mutex_unlock(&s->mu);
    while (!*stop) {
        double now = k3_seconds(), next = now + TICK_MS / 1000.0;
        if (cfg->exit_after > 0 && now - start >= cfg->exit_after) {
            fprintf(stderr, "k3 serve: --exit-after %g s reached: stopping\n", cfg->exit_after);
            break;
        }
        take_back(in);
        for (size_t i = in->n; i-- > 0;) {
            /* An idle kept connection has --keep-alive-s, then is closed without a
             * word (RFC 9112 9.6); a head has --header-timeout, then 408. */
            int idle = in->p[i].idle;
            double due = in->p[i].t0 + (idle ? cfg->keep_alive_s : cfg->header_timeout);
            if (due <= now && idle)
                drop(in, i, 1);
            else if (due <= now)
                refuse(in, i, 408, NULL, "The request head did not arrive in time "
                                         "(--header-timeout).");
            else if (due < next)
                next = due;
        }
        pf[0].fd = lfd;
        pf[0].events = POLLIN;
        pf[0].revents = 0;
        if (base == 2) {
            pf[1].fd = in->wake[0];
            pf[1].events = POLLIN;
            pf[1].revents = 0;
        }
        for (size_t i = 0; i < in->n; i++) {
            pf[i + base].fd = in->p[i].fd;
            pf[i + base].events = POLLIN;
            pf[i + base].revents = 0;
        }
        size_t n = in->n;
        int rc = k3_sock_poll(pf, n + base, (int)((next - now) * 1000) + 1);
        if (rc <= 0)
            continue;
        if (base == 2 && pf[1].revents)
            drain_wake(in->wake[0]);
        /* Backwards: drop() moves the last connection, already looked at, into i. */
        for (size_t i = n; i-- > 0;)
            if (pf[i + base].revents)
                read_head(in, i);
        if ((pf[0].revents & POLLIN) && accept_one(in, lfd))
            break;
    }
    if (*stop)
        fprintf(stderr, "k3 serve: signal %d: stopping\n", (int)*stop);
    close_all(in);
    if (in->wake[0] >= 0) {
        k3_sock_close(in->wake[0]);
        k3_sock_close(in->wake[1]);
    }
    pthread_attr_destroy(&in->detached);
    free(in);
}
