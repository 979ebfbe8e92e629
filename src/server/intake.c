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
    double t0; /* accepted (k3_seconds) */
} pending;

typedef struct {
    k3_server *s;
    pthread_attr_t detached;
    pending p[K3_INTAKE_MAX_PENDING];
    size_t n;
    struct pollfd pf[K3_INTAKE_MAX_PENDING + 1]; /* the listening socket, then p[] */
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

static void *connection(void *arg)
{
    conn_arg c = *(conn_arg *)arg;
    k3_server *s = c.s;
    free(arg);
    k3_conn_serve(s, c.p.fd, c.p.buf, c.p.len, K3_CONN_MAX_HEAD, c.p.t0);
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

/* Accepts one connection into the pending set, or refuses it. 0, or -1
 * when accept failed for good. */
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
    pending *p = &in->p[in->n];
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->t0 = k3_seconds();
    k3_client_key_of((struct sockaddr *)&sa, &p->key);
    if (in->n == K3_INTAKE_MAX_PENDING) {
        log_refusal(in->s, &p->key, 503, "too many connections sending their request");
        k3_conn_refuse(fd, 503, "server_busy", "Too many connections. Try again later.");
    } else if (k3_clients_enter(&in->s->clients, &p->key)) {
        log_refusal(in->s, &p->key, 503, "over --max-per-client");
        k3_conn_refuse(fd, 503, "too_many_connections",
                       "Too many connections from your address (--max-per-client).");
    } else {
        in->n++;
    }
    return 0;
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
    while (!*stop) {
        double now = k3_seconds(), next = now + TICK_MS / 1000.0;
        if (cfg->exit_after > 0 && now - start >= cfg->exit_after) {
            fprintf(stderr, "k3 serve: --exit-after %g s reached: stopping\n", cfg->exit_after);
            break;
        }
        for (size_t i = in->n; i-- > 0;) {
            double due = in->p[i].t0 + cfg->header_timeout;
            if (due <= now)
                refuse(in, i, 408, NULL, "The request head did not arrive in time "
                                         "(--header-timeout).");
            else if (due < next)
                next = due;
        }
        pf[0].fd = lfd;
        pf[0].events = POLLIN;
        pf[0].revents = 0;
        for (size_t i = 0; i < in->n; i++) {
            pf[i + 1].fd = in->p[i].fd;
            pf[i + 1].events = POLLIN;
            pf[i + 1].revents = 0;
        }
        size_t n = in->n;
        int rc = k3_sock_poll(pf, n + 1, (int)((next - now) * 1000) + 1);
        if (rc <= 0)
            continue;
        /* Backwards: drop() moves the last connection, already looked at, into i. */
        for (size_t i = n; i-- > 0;)
            if (pf[i + 1].revents)
                read_head(in, i);
        if ((pf[0].revents & POLLIN) && accept_one(in, lfd))
            break;
    }
    if (*stop)
        fprintf(stderr, "k3 serve: signal %d: stopping\n", (int)*stop);
    while (in->n)
        refuse(in, in->n - 1, 503, "server_stopping", "The server is shutting down.");
    pthread_attr_destroy(&in->detached);
    free(in);
}
