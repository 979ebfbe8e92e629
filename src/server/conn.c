/* conn.c - see conn.h.
 *
 * Every wait here is bounded: reading the request has a deadline
 * (--timeout), a write that stalls that long fails (SO_SNDTIMEO), and
 * waiting on a job wakes every POLL_SLICE_MS to look whether the client
 * went away, which cancels the job. */
#include "server/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "server/api.h"
#include "server/emit.h"
#include "server/http.h"
#include "util/clock.h"
#include "util/error.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SIGPIPE is ignored process-wide as well (server.c) */
#endif

#define MAX_HEAD 16384
#define MAX_HEADERS 64
#define MAX_TARGET 4096
/* How often waits look at the client and at the server's state. */
#define POLL_SLICE_MS 100
/* After answering, input is read and dropped for up to this long, so a
 * client still sending (a body the server refused) gets the response
 * rather than a connection reset. */
#define LINGER_MS 1000

static int server_stopping(k3_server *s)
{
    pthread_mutex_lock(&s->mu);
    int v = s->stopping;
    pthread_mutex_unlock(&s->mu);
    return v;
}

/* Writes all of buf: 0, or -1 when the client is gone or stalled. */
static int send_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Waits up to ms for input; > 0 readable, 0 not yet, < 0 error. */
static int wait_input(int fd, int ms)
{
    struct pollfd p;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    int rc = poll(&p, 1, ms);
    if (rc < 0)
        return errno == EINTR ? 0 : -1;
    return rc;
}

/* Whether the client closed or reset its connection. Bytes it sends after
 * its request are read and dropped (the answer closes the connection). */
static int client_gone(int fd)
{
    char sink[4096];
    for (int i = 0; i < 16; i++) {
        int rc = wait_input(fd, 0);
        if (rc <= 0)
            return rc < 0;
        ssize_t r = recv(fd, sink, sizeof sink, 0);
        if (r == 0)
            return 1;
        if (r < 0)
            return errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK;
    }
    return 0;
}

static int respond(int fd, int status, const char *type, const char *body, size_t n,
                   const char *extra)
{
    char head[512];
    size_t hn = k3_http_head(head, sizeof head, status, type, (long long)n, extra);
    return hn && !send_all(fd, head, hn) && !send_all(fd, body, n) ? 0 : -1;
}

static void respond_error(int fd, const k3_api_error *err, const char *extra)
{
    k3_buf b = { 0 };
    k3_err e = { 0, "" };
    if (k3_emit_error(err, 0, &b, &e) == K3_OK)
        respond(fd, err->status, "application/json", b.data, b.len, extra);
    k3_buf_free(&b);
}

static void http_error(int fd, int status, const char *why, const char *extra)
{
    k3_api_error err;
    k3_api_fail(&err, status, NULL, NULL, "%s", why);
    respond_error(fd, &err, extra);
}

/* Ends the connection: no more output, then input dropped until the
 * client closes (bounded by LINGER_MS), then close. */
static void linger_close(int fd)
{
    char sink[4096];
    double end = k3_seconds() + LINGER_MS / 1000.0;
    shutdown(fd, SHUT_WR);
    for (double left; (left = end - k3_seconds()) > 0;) {
        int rc = wait_input(fd, (int)(left * 1000) + 1);
        if (rc < 0 || (rc > 0 && recv(fd, sink, sizeof sink, 0) <= 0))
            break;
    }
    close(fd);
}

/* Reads one request into *buf (malloc'd, also on failure). Returns
 * K3_HTTP_OK, the status of an error response to send, or -1 when the
 * client left (or the server stops) before finishing it. */
static int read_request(k3_server *s, int fd, char **buf, size_t *len, k3_http_request *req)
{
    k3_http_limits lim = { MAX_HEAD, MAX_HEADERS, MAX_TARGET, s->cfg->max_body };
    double deadline = k3_seconds() + s->cfg->timeout;
    size_t cap = 0;
    int continued = 0;
    *buf = NULL;
    *len = 0;
    for (;;) {
        int rc = k3_http_parse_request(*buf ? *buf : "", *len, req, &lim);
        if (rc == K3_HTTP_OK || rc >= 400)
            return rc;
        if (rc == K3_HTTP_NEED_BODY && req->expect_continue && !continued) {
            static const char go_on[] = "HTTP/1.1 100 Continue\r\n\r\n";
            continued = 1;
            if (send_all(fd, go_on, sizeof go_on - 1))
                return -1;
        }
        size_t want = rc == K3_HTTP_NEED_BODY ? req->head_len + req->content_length : MAX_HEAD;
        if (cap < want) {
            char *grown = realloc(*buf, want);
            if (!grown) {
                req->error = "out of memory for the request";
                return 500;
            }
            *buf = grown;
            cap = want;
        }
        double left = deadline - k3_seconds();
        if (left <= 0) {
            req->error = "the request did not arrive in time (--timeout)";
            return 408;
        }
        if (server_stopping(s))
            return -1;
        int ready = wait_input(fd, left * 1000 < POLL_SLICE_MS ? (int)(left * 1000) + 1
                                                                : POLL_SLICE_MS);
        if (ready < 0)
            return -1;
        if (ready == 0)
            continue;
        ssize_t r = recv(fd, *buf + *len, cap - *len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        *len += (size_t)r;
    }
}

static void log_line(k3_server *s, const k3_http_request *req, int status, const k3_job *job,
                     double t0)
{
    if (s->cfg->quiet)
        return;
    char what[160] = "";
    if (job && job->stats.finish)
        snprintf(what, sizeof what, " prompt=%zu reused=%zu generated=%zu finish=%s",
                 job->answer.n, job->stats.reused, job->stats.generated, job->stats.finish);
    fprintf(stderr, "k3 serve: %.*s %.*s %d%s %.3f s\n", (int)req->method_len, req->method,
            (int)req->path_len, req->path, status, what, k3_seconds() - t0);
}

/* Streams or collects what the worker publishes for job until it is done
 * or the client is gone (which cancels it). Returns the response's
 * status, or 499 when the client left. */
static int pump(k3_server *s, int fd, k3_job *job, int stream)
{
    k3_buf chunk = { 0 }, body = { 0 };
    k3_err e = { 0, "" };
    int alive = 1;
    if (stream) {
        char head[256];
        size_t hn = k3_http_head(head, sizeof head, 200, "text/event-stream", -1, NULL);
        alive = send_all(fd, head, hn) == 0;
    }
    for (;;) {
        if (!alive && k3_queue_cancel(&s->queue, job))
            break;
        int done = k3_queue_wait(&s->queue, job, POLL_SLICE_MS, &chunk);
        if (alive && chunk.len)
            alive = stream ? send_all(fd, chunk.data, chunk.len) == 0
                           : k3_buf_put(&body, chunk.data, chunk.len, &e) == K3_OK;
        if (done)
            break;
        if (alive && client_gone(fd))
            alive = 0;
    }
    int status = alive ? job->status : 499;
    if (alive && job->status == 503) { /* the server stopped before the job ran */
        k3_api_error err;
        k3_buf b = { 0 };
        k3_api_fail(&err, 503, "server_stopping", NULL, "The server is shutting down.");
        if (!stream)
            respond_error(fd, &err, NULL);
        else if (k3_emit_error(&err, 1, &b, &e) == K3_OK)
            send_all(fd, b.data, b.len);
        k3_buf_free(&b);
    } else if (alive && !stream) {
        respond(fd, job->status, "application/json", body.data ? body.data : "", body.len, NULL);
    }
    k3_buf_free(&chunk);
    k3_buf_free(&body);
    return status;
}

/* POST /v1/chat/completions and /v1/completions. */
static void generate(k3_server *s, int fd, const k3_http_request *hreq, const char *body,
                     k3_api_kind kind, double t0)
{
    k3_api_limits lim = { s->cfg->max_tokens };
    k3_api_request req;
    k3_api_error err;
    k3_err e = { 0, "" };
    k3_job *job = NULL;
    int answered = 0; /* pump wrote the response */
    int status = kind == K3_API_CHAT
                     ? k3_api_parse_chat_request(body, hreq->content_length, &lim, &req, &err)
                     : k3_api_parse_completion_request(body, hreq->content_length, &lim, &req,
                                                       &err);
    if (!status && (!(job = k3_malloc(&e, sizeof *job, "job")) || k3_job_init(job, &e))) {
        free(job);
        job = NULL;
        status = k3_api_fail(&err, 500, NULL, NULL, "%s", e.msg);
    }
    if (!status)
        status = k3_answer_prompt(s->tok, &req, s->cfg->context, s->cfg->max_tokens,
                                  &job->answer, &err);
    if (!status) {
        pthread_mutex_lock(&s->mu);
        snprintf(job->id, sizeof job->id, "%s-%llx%06llx",
                 kind == K3_API_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)s->started,
                 (unsigned long long)++s->serial);
        pthread_mutex_unlock(&s->mu);
        job->answer.id = job->id;
        job->answer.created = (long long)time(NULL);
        job->answer.model_name = s->cfg->model_name;
        if (k3_queue_submit(&s->queue, job))
            status = k3_api_fail(&err, 503, "server_busy", NULL,
                                 "The server is busy: %zu requests are already waiting "
                                 "(--max-queue). Try again later.", s->cfg->max_queue);
        else
            answered = 1;
        if (answered)
            status = pump(s, fd, job, req.stream);
    }
    if (!answered)
        respond_error(fd, &err, NULL);
    log_line(s, hreq, status, job, t0);
    if (job) {
        k3_job_free(job);
        free(job);
    }
    k3_api_request_free(&req);
}

static int is_path(const k3_http_request *r, const char *p)
{
    return strlen(p) == r->path_len && !memcmp(r->path, p, r->path_len);
}

static int is_method(const k3_http_request *r, const char *m)
{
    return strlen(m) == r->method_len && !memcmp(r->method, m, r->method_len);
}

static void health(k3_server *s, int fd)
{
    size_t waiting;
    int running;
    char body[128];
    k3_queue_load(&s->queue, &waiting, &running);
    int n = snprintf(body, sizeof body, "{\"status\":\"ok\",\"running\":%d,\"waiting\":%zu}",
                     running, waiting);
    respond(fd, 200, "application/json", body, (size_t)n, NULL);
}

static void models(k3_server *s, int fd)
{
    k3_buf b = { 0 };
    k3_err e = { 0, "" };
    if (k3_emit_models(s->cfg->model_name, s->started, &b, &e) == K3_OK)
        respond(fd, 200, "application/json", b.data, b.len, NULL);
    else
        http_error(fd, 500, e.msg, NULL);
    k3_buf_free(&b);
}

/* Answers a complete request. */
static void route(k3_server *s, int fd, const k3_http_request *req, const char *body, double t0)
{
    static const struct {
        const char *path, *method;
        int endpoint;
    } routes[] = {
        { "/v1/chat/completions", "POST", 0 },
        { "/v1/completions", "POST", 1 },
        { "/v1/models", "GET", 2 },
        { "/health", "GET", 3 },
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (!is_path(req, routes[i].path))
            continue;
        if (!is_method(req, routes[i].method)) {
            char allow[32];
            snprintf(allow, sizeof allow, "Allow: %s\r\n", routes[i].method);
            http_error(fd, 405, "method not allowed on this path", allow);
            log_line(s, req, 405, NULL, t0);
            return;
        }
        switch (routes[i].endpoint) {
        case 0: generate(s, fd, req, body, K3_API_CHAT, t0); return;
        case 1: generate(s, fd, req, body, K3_API_COMPLETION, t0); return;
        case 2: models(s, fd); break;
        default: health(s, fd); break;
        }
        log_line(s, req, 200, NULL, t0);
        return;
    }
    http_error(fd, 404, "no such endpoint (POST /v1/chat/completions, POST /v1/completions, "
                        "GET /v1/models, GET /health)", NULL);
    log_line(s, req, 404, NULL, t0);
}

void k3_conn_serve(k3_server *s, int fd)
{
    struct timeval tv;
    tv.tv_sec = (time_t)s->cfg->timeout;
    tv.tv_usec = (suseconds_t)((s->cfg->timeout - (double)tv.tv_sec) * 1e6);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    double t0 = k3_seconds();
    char *buf = NULL;
    size_t len = 0;
    k3_http_request req;
    int rc = read_request(s, fd, &buf, &len, &req);
    if (rc == K3_HTTP_OK)
        route(s, fd, &req, buf + req.head_len, t0);
    else if (rc > 0)
        http_error(fd, rc, req.error, NULL);
    free(buf);
    linger_close(fd);
}

void k3_conn_refuse(int fd)
{
    static const char body[] = "{\"error\":{\"message\":\"Too many connections.\","
                               "\"type\":\"server_error\",\"param\":null,"
                               "\"code\":\"server_busy\"}}";
    char msg[512];
    size_t hn = k3_http_head(msg, sizeof msg, 503, "application/json", sizeof body - 1, NULL);
    if (hn && hn + sizeof body <= sizeof msg) {
        memcpy(msg + hn, body, sizeof body - 1);
        /* Never block the accepting thread on this client. */
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        send(fd, msg, hn + sizeof body - 1, MSG_NOSIGNAL);
    }
    close(fd);
}
