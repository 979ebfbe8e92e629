/* conn.c - see conn.h.
 *
 * Every wait here is bounded: the body must keep up a minimum rate
 * (MIN_BODY_RATE after a grace of --header-timeout) and the whole request
 * must be in within --timeout of the accept, a write that stalls --timeout
 * fails (SO_SNDTIMEO), and waiting on a job wakes every POLL_SLICE_MS to
 * look whether the client went away, which cancels the job. */
#include "server/conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "server/api.h"
#include "server/emit.h"
#include "server/http.h"
#include "server/messages.h"
#include "server/responses.h"
#include "server/tokenize.h"
#include "structured/constrain.h"
#include "server/webui.h"
#include "chat/jtext.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/os_net.h"


/* Bytes per second a request body must average once the grace of
 * --header-timeout after its head is over: 2 Mbit/s, so the largest
 * default body (8 MiB) takes 32 s at that pace. A client trickling its
 * body is cut off after a few seconds instead of holding a connection
 * thread until --timeout. */
#define MIN_BODY_RATE 262144.0
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
        int64_t w = k3_sock_send(fd, buf, n, 0);
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
    int rc = k3_sock_poll(&p, 1, ms);
    if (rc < 0)
        return errno == EINTR ? 0 : -1;
    return rc;
}

/* Whether the client closed or reset its connection. Bytes it sends after
 * its request are the next request's (pipelined): kept in c's buffer
 * while the answer keeps the connection and there is room (the buffer is
 * never moved: the request being answered points into it), else read and
 * dropped, and then the answer closes the connection. */
static int client_gone(k3_conn *c)
{
    char sink[4096];
    for (int i = 0; i < 16; i++) {
        int rc = wait_input(c->fd, 0);
        if (rc <= 0)
            return rc < 0;
        int store = c->keep && c->len < c->cap;
        int64_t r = store ? k3_sock_recv(c->fd, c->buf + c->len, c->cap - c->len, 0)
                          : k3_sock_recv(c->fd, sink, sizeof sink, 0);
        if (r == 0)
            return 1;
        if (r < 0)
            return errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK;
        if (store)
            c->len += (size_t)r;
        else
            c->keep = 0; /* bytes of a next request were lost: no next request */
    }
    return 0;
}

/* The extra head lines of s's answers on c (NULL: an answer that closes):
 * the CORS line, the Keep-Alive hint, then extra. */
static const char *head_extra(const k3_server *s, const k3_conn *c, const char *extra,
                              char *buf, size_t cap)
{
    char hint[80] = "";
    if (c && c->keep)
        snprintf(hint, sizeof hint, "Keep-Alive: timeout=%d, max=%d\r\n",
                 (int)s->cfg->keep_alive_s, s->cfg->keep_alive_requests - c->requests - 1);
    snprintf(buf, cap, "%s%s%s", s ? s->cors : "", hint, extra ? extra : "");
    return buf;
}

/* Writes n bytes of an answer's body (or head) on c; -1 (and c broken)
 * when the client is gone or stalled. */
static int conn_send(k3_conn *c, const char *buf, size_t n)
{
    if (!c->broken && send_all(c->fd, buf, n))
        c->broken = 1;
    return c->broken ? -1 : 0;
}

/* One chunk of a chunked body (k3_http_chunk): its line, data, CRLF. */
static int send_chunk(k3_conn *c, const char *data, size_t n)
{
    char line[32];
    size_t ln = k3_http_chunk(line, sizeof line, n);
    if (conn_send(c, line, ln))
        return -1;
    return n ? conn_send(c, data, n) || conn_send(c, K3_HTTP_CHUNK_END, 2) : 0;
}

static int respond(k3_server *s, k3_conn *c, int status, const char *type, const char *body,
                   size_t n, const char *extra)
{
    char head[1024], more[640];
    size_t hn = k3_http_head(head, sizeof head, status, type, (long long)n,
                             head_extra(s, c, extra, more, sizeof more), c->keep);
    if (!hn)
        c->broken = 1;
    return hn && !conn_send(c, head, hn) && !conn_send(c, body, n) ? 0 : -1;
}

int k3_conn_respond(k3_server *s, k3_conn *c, int status, const char *type, const char *body,
                    size_t n, const char *extra)
{
    return respond(s, c, status, type, body, n, extra);
}

/* err in the shape of api's errors. */
static void respond_error_as(k3_server *s, k3_conn *c, k3_api_kind api, const k3_api_error *err,
                             const char *extra)
{
    k3_buf b = { 0 };
    k3_err e = { 0, "" };
    if (k3_emit_error_as(api, err, 0, &b, &e) == K3_OK)
        respond(s, c, err->status, "application/json", b.data, b.len, extra);
    k3_buf_free(&b);
}

static void respond_error(k3_server *s, k3_conn *c, const k3_api_error *err, const char *extra)
{
    respond_error_as(s, c, K3_API_CHAT, err, extra);
}

static void http_error(k3_server *s, k3_conn *c, int status, const char *why, const char *extra)
{
    k3_api_error err;
    k3_api_fail(&err, status, NULL, NULL, "%s", why);
    respond_error(s, c, &err, extra);
}

/* Ends the connection: no more output, then input dropped until the
 * client closes (bounded by LINGER_MS), then close. */
static void linger_close(int fd)
{
    char sink[4096];
    double end = k3_seconds() + LINGER_MS / 1000.0;
    k3_sock_shutdown_write(fd);
    for (double left; (left = end - k3_seconds()) > 0;) {
        int rc = wait_input(fd, (int)(left * 1000) + 1);
        if (rc < 0 || (rc > 0 && k3_sock_recv(fd, sink, sizeof sink, 0) <= 0))
            break;
    }
    k3_sock_close(fd);
}

void k3_conn_limits(const k3_server *s, k3_http_limits *lim)
{
    lim->max_head = K3_CONN_MAX_HEAD;
    lim->max_headers = K3_CONN_MAX_HEADERS;
    lim->max_target = K3_CONN_MAX_TARGET;
    lim->max_body = s->cfg->max_body;
}

/* Reads the rest of a request into c->buf (c->len read so far;
 * reallocated as needed, also on failure, always with K3_CONN_MAX_HEAD
 * bytes of room past the body for the start of a next request). t0: the
 * accept, or the request's first byte. Returns K3_HTTP_OK (c->used set),
 * the status of an error response to send, or -1 when the client left (or
 * the server stops) before finishing it. */
static int read_request(k3_server *s, k3_conn *c, double t0, k3_http_request *req)
{
    char **buf = &c->buf;
    size_t *len = &c->len;
    int fd = c->fd;
    k3_http_limits lim;
    double deadline = t0 + s->cfg->timeout, body_t0 = k3_seconds();
    int continued = 0;
    k3_conn_limits(s, &lim);
    for (;;) {
        int rc = k3_http_parse_request(*buf ? *buf : "", *len, req, &lim);
        if (rc == K3_HTTP_OK)
            c->used = req->head_len + req->content_length;
        if (rc == K3_HTTP_OK || rc >= 400)
            return rc;
        if (rc == K3_HTTP_NEED_BODY && req->expect_continue && !continued) {
            static const char go_on[] = "HTTP/1.1 100 Continue\r\n\r\n";
            continued = 1;
            if (send_all(c->fd, go_on, sizeof go_on - 1))
                return -1;
        }
        size_t want = rc == K3_HTTP_NEED_BODY ? req->head_len + req->content_length
                                              : K3_CONN_MAX_HEAD;
        want += K3_CONN_MAX_HEAD; /* room for a pipelined request's start */
        if (c->cap < want) {
            char *grown = realloc(*buf, want);
            if (!grown) {
                req->error = "out of memory for the request";
                return 500;
            }
            *buf = grown;
            c->cap = want;
        }
        double now = k3_seconds(), left = deadline - now;
        double late = now - body_t0 - s->cfg->header_timeout;
        if (left <= 0) {
            req->error = "the request did not arrive in time (--timeout)";
            return 408;
        }
        if (rc == K3_HTTP_NEED_BODY && late > 0 &&
            (double)(*len - req->head_len) < late * MIN_BODY_RATE) {
            req->error = "the request body arrives too slowly (under 256 KiB/s)";
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
        int64_t r = k3_sock_recv(fd, *buf + *len, c->cap - *len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        *len += (size_t)r;
    }
}

/* The endpoint a request is counted under (metrics.h). */
static int endpoint_of(const k3_http_request *req)
{
    static const char *const paths[] = { "/v1/chat/completions", "/v1/completions", "/tokenize",
                                         "/detokenize", "/v1/models", "/health", "/metrics",
                                         "/v1/messages", "/v1/responses" };
    for (int i = 0; i < (int)(sizeof paths / sizeof *paths); i++)
        if (strlen(paths[i]) <= req->path_len &&
            !memcmp(req->path, paths[i], strlen(paths[i])) &&
            (req->path_len == strlen(paths[i]) || req->path[strlen(paths[i])] == '/'))
            return i;
    return K3_EP_OTHER;
}

/* Counts the answered request and logs it (unless --quiet): method, path,
 * status, and for a generation its tokens, finish and speeds. */
static void log_line(k3_server *s, const k3_http_request *req, int status, const k3_job *job,
                     double t0)
{
    k3_metrics_request(&s->metrics, endpoint_of(req), status);
    if (s->cfg->quiet)
        return;
    char what[320] = "", images[64] = "";
    if (job && job->answer.nspan)
        snprintf(images, sizeof images, " images=%zu encode=%.3fs", job->answer.nspan,
                 job->answer.encode_seconds);
    if (job && job->stats.finish) {
        const k3_answer_stats *st = &job->stats;
        size_t fed = job->answer.n - st->reused;
        snprintf(what, sizeof what,
                 "%s prompt=%zu reused=%zu generated=%zu finish=%s prompt_tok/s=%.2f "
                 "gen_tok/s=%.2f", images, job->answer.n, st->reused, st->generated, st->finish,
                 st->prompt_seconds > 0 ? (double)fed / st->prompt_seconds : 0.0,
                 st->gen_seconds > 0 ? (double)st->generated / st->gen_seconds : 0.0);
    }
    fprintf(stderr, "k3 serve: %.*s %.*s %d%s %.3f s\n", (int)req->method_len, req->method,
            (int)req->path_len, req->path, status, what, k3_seconds() - t0);
    if (job && job->answer.req && job->answer.req->ignored[0])
        fprintf(stderr, "k3 serve: ignored fields (accepted, no effect): %s\n",
                job->answer.req->ignored);
}

/* Why the server refuses to (go on to) answer: a failed run, or stopping. */
static void refusal(k3_server *s, k3_api_error *err)
{
    pthread_mutex_lock(&s->mu);
    if (s->failed)
        k3_api_fail(err, 503, "run_invalid", NULL,
                    "The server cannot answer: a run was invalid (%s). Restart it.", s->failure);
    else
        k3_api_fail(err, 503, "server_stopping", NULL, "The server is shutting down.");
    pthread_mutex_unlock(&s->mu);
}

static int server_failed(k3_server *s)
{
    pthread_mutex_lock(&s->mu);
    int v = s->failed;
    pthread_mutex_unlock(&s->mu);
    return v;
}

/* Sends bytes of a stream's body: as a chunk when chunked. */
static int stream_send(k3_conn *c, int chunked, const char *data, size_t n)
{
    if (!n)
        return 0; /* an empty chunk would end the body */
    return chunked ? send_chunk(c, data, n) : conn_send(c, data, n);
}

/* Streams or collects what the worker publishes for job until it is done
 * or the client is gone (which cancels it). Returns the response's
 * status, or 499 when the client left. */
static int pump(k3_server *s, k3_conn *c, k3_job *job, int stream, k3_api_kind api)
{
    k3_buf chunk = { 0 }, body = { 0 };
    k3_err e = { 0, "" };
    int alive = 1;
    if (stream && c->http10)
        c->keep = 0; /* no chunked bodies in HTTP/1.0: the stream ends at the close */
    int chunked = stream && c->keep;
    if (stream) {
        char head[1024], more[640];
        size_t hn = k3_http_head(head, sizeof head, 200, "text/event-stream", -1,
                                 head_extra(s, c, NULL, more, sizeof more), c->keep);
        alive = hn && conn_send(c, head, hn) == 0;
    }
    for (;;) {
        if (!alive && k3_queue_cancel(&s->queue, job))
            break;
        int done = k3_queue_wait(&s->queue, job, POLL_SLICE_MS, &chunk);
        if (alive && chunk.len)
            alive = stream ? stream_send(c, chunked, chunk.data, chunk.len) == 0
                           : k3_buf_put(&body, chunk.data, chunk.len, &e) == K3_OK;
        if (done)
            break;
        if (alive && client_gone(c))
            alive = 0;
    }
    /* Cut short by the server (stopping, or a failed run refusing what
     * waits), not by the client: the client still gets a proper end. */
    int cut = alive && (job->status == 503 ||
                        (job->stats.finish && !strcmp(job->stats.finish, "cancelled")));
    int status = !alive ? 499 : cut ? 503 : job->status;
    if (cut) {
        k3_api_error err;
        k3_buf b = { 0 };
        refusal(s, &err);
        if (!stream)
            respond_error_as(s, c, api, &err, NULL);
        else if (k3_emit_error_as(api, &err, 1, &b, &e) == K3_OK)
            stream_send(c, chunked, b.data, b.len);
        k3_buf_free(&b);
    } else if (alive && !stream) {
        respond(s, c, job->status, "application/json", body.data ? body.data : "", body.len,
                NULL);
    }
    /* A stream that ends in an error event ends with [DONE] as well. */
    if (stream && alive && (cut || job->status != 200) && k3_emit_has_done(api)) {
        static const char done_event[] = "data: [DONE]\n\n";
        stream_send(c, chunked, done_event, sizeof done_event - 1);
    }
    if (chunked && alive)
        send_chunk(c, NULL, 0); /* the last chunk: the stream ends, the connection stays */
    if (!alive)
        c->broken = 1;
    k3_buf_free(&chunk);
    k3_buf_free(&body);
    return status;
}

/* The body of a request to the API kind, parsed (count: Anthropic's
 * count_tokens). */
static int parse_body(k3_server *s, const k3_http_request *hreq, const char *body,
                      k3_api_kind kind, int count, k3_api_request *req, k3_api_error *err)
{
    k3_api_limits lim = { s->cfg->max_tokens };
    size_t n = hreq->content_length;
    switch (kind) {
    case K3_API_CHAT: return k3_api_parse_chat_request(body, n, &lim, req, err);
    case K3_API_COMPLETION: return k3_api_parse_completion_request(body, n, &lim, req, err);
    case K3_API_MESSAGES: return k3_messages_parse(body, n, &lim, count, req, err);
    default: return k3_responses_parse(body, n, &lim, req, err);
    }
}

/* POST /v1/messages/count_tokens: the prompt's ids, rendered as
 * /v1/messages would render it: {"input_tokens": N}. */
static int count_tokens(k3_server *s, k3_conn *c, const k3_http_request *hreq, const char *body)
{
    k3_api_request req;
    k3_api_error err;
    k3_answer_job job;
    char out[64];
    memset(&job, 0, sizeof job);
    int status = parse_body(s, hreq, body, K3_API_MESSAGES, 1, &req, &err);
    if (!status && req.model && !k3_server_serves(s->cfg, req.model, req.model_len))
        status = k3_api_fail(&err, 404, "model_not_found", "model",
                             "The model '%.200s' does not exist: this server serves '%s'.",
                             req.model, s->cfg->model_name);
    if (!status)
        status = k3_answer_prompt(s->tok, &s->vision, &req, s->cfg->context,
                                  s->cfg->default_tokens, &job, &err);
    if (status) {
        respond_error_as(s, c, K3_API_MESSAGES, &err, NULL);
    } else {
        snprintf(out, sizeof out, "{\"input_tokens\":%zu}", job.n);
        respond(s, c, 200, "application/json", out, strlen(out), NULL);
        status = 200;
    }
    k3_server_images_free(&job);
    free(job.ids);
    k3_api_request_free(&req);
    return status;
}

/* POST /v1/chat/completions, /v1/completions, /v1/messages and /v1/responses. */
static void generate(k3_server *s, k3_conn *c, const k3_http_request *hreq, const char *body,
                     k3_api_kind kind, double t0)
{
    static const char *const prefix[] = { "chatcmpl-", "cmpl-", "msg_", "resp_" };
    k3_api_request req;
    k3_api_error err;
    k3_err e = { 0, "" };
    k3_job *job = NULL;
    int answered = 0; /* pump wrote the response */
    int status = parse_body(s, hreq, body, kind, 0, &req, &err);
    if (!status && req.model && !k3_server_serves(s->cfg, req.model, req.model_len))
        status = k3_api_fail(&err, 404, "model_not_found", "model",
                             "The model '%.200s' does not exist: this server serves '%s'.",
                             req.model, s->cfg->model_name);
    if (!status && (!(job = k3_malloc(&e, sizeof *job, "job")) || k3_job_init(job, &e))) {
        free(job);
        job = NULL;
        status = k3_api_fail(&err, 500, NULL, NULL, "%s", e.msg);
    }
    if (!status)
        status = k3_answer_prompt(s->tok, &s->vision, &req, s->cfg->context, s->cfg->default_tokens,
                                  &job->answer, &err);
    if (!status)
        status = k3_answer_constrain(s->gvocab, &req, &job->answer, &err);
    if (!status && job->answer.warnings && !s->cfg->quiet)
        fprintf(stderr, "k3 serve: warning: structured output not fully enforced: %s\n",
                job->answer.warnings);
    if (!status) {
        pthread_mutex_lock(&s->mu);
        snprintf(job->id, sizeof job->id, "%s%llx%06llx", prefix[kind],
                 (unsigned long long)s->started,
                 (unsigned long long)++s->serial);
        pthread_mutex_unlock(&s->mu);
        job->answer.id = job->id;
        job->answer.created = (long long)time(NULL);
        job->answer.model_name = s->cfg->model_name;
        if (server_failed(s)) {
            refusal(s, &err);
            status = 503;
        } else if (k3_queue_submit(&s->queue, job)) {
            status = k3_api_fail(&err, 503, "server_busy", NULL,
                                 "The server is busy: %zu requests are already waiting "
                                 "(--max-queue). Try again later.", s->cfg->max_queue);
        } else {
            answered = 1;
        }
        if (answered)
            status = pump(s, c, job, req.stream, kind);
    }
    if (!answered)
        respond_error_as(s, c, kind, &err, NULL);
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

int k3_conn_is_health(const k3_http_request *req)
{
    return is_path(req, "/health") && is_method(req, "GET");
}

/* Sends head and body in one send that never blocks: 0, or -1. */
static int send_once(const k3_server *s, int fd, int status, const char *body, size_t n)
{
    char msg[2048], more[640];
    size_t hn = k3_http_head(msg, sizeof msg, status, "application/json", (long long)n,
                             head_extra(s, NULL, NULL, more, sizeof more), 0);
    if (!hn || n > sizeof msg - hn)
        return -1;
    memcpy(msg + hn, body, n);
    return k3_sock_send(fd, msg, hn + n, 1) == (int64_t)(hn + n) ? 0 : -1;
}

/* GET /health: 200 {"status":"ok",...}, or 503 {"status":"error","reason":...}
 * once a run was invalid, so that a load balancer stops sending work.
 * Sent on c, or (c NULL: the accept thread) in one write on fd that never
 * blocks. */
static void health(k3_server *s, k3_conn *c, int fd, const k3_http_request *req, double t0)
{
    size_t waiting;
    int running;
    k3_buf b = { 0 };
    k3_err e = { 0, "" };
    k3_queue_load(&s->queue, &waiting, &running);
    pthread_mutex_lock(&s->mu);
    int failed = s->failed;
    if (failed && !k3_buf_puts(&b, "{\"status\":\"error\",\"reason\":", &e))
        k3_jtext_put(&b, s->failure, strlen(s->failure), &e);
    pthread_mutex_unlock(&s->mu);
    char tail[96];
    snprintf(tail, sizeof tail, "%s\"running\":%d,\"waiting\":%zu}",
             failed ? "," : "{\"status\":\"ok\",", running, waiting);
    k3_buf_puts(&b, tail, &e);
    if (!e.code && c)
        respond(s, c, failed ? 503 : 200, "application/json", b.data, b.len, NULL);
    else if (!e.code)
        send_once(s, fd, failed ? 503 : 200, b.data, b.len);
    k3_buf_free(&b);
    log_line(s, req, failed ? 503 : 200, NULL, t0);
}

/* Reads and drops what input is already here (a close with unread input
 * resets the connection, which can destroy the response in flight). */
static void drain(int fd)
{
    char sink[4096];
    for (int i = 0; i < 16 && k3_sock_recv(fd, sink, sizeof sink, 1) > 0; i++)
        ;
}

void k3_conn_health(k3_server *s, int fd, const k3_http_request *req, double t0)
{
    health(s, NULL, fd, req, t0);
    k3_sock_shutdown_write(fd);
    drain(fd);
    k3_sock_close(fd);
}

/* GET /v1/models, or /v1/models/{id} (the served model, else 404). */
static int models(k3_server *s, k3_conn *c, const k3_http_request *req)
{
    k3_buf b = { 0 };
    k3_err e = { 0, "" };
    size_t base = strlen("/v1/models");
    int one = req->path_len > base, status = 200;
    if (one && !k3_server_serves(s->cfg, req->path + base + 1, req->path_len - base - 1)) {
        k3_api_error err;
        k3_api_fail(&err, 404, "model_not_found", "model",
                    "The model '%.*s' does not exist: this server serves '%s'.",
                    (int)(req->path_len - base - 1), req->path + base + 1, s->cfg->model_name);
        respond_error(s, c, &err, NULL);
        return 404;
    }
    char id[256];
    snprintf(id, sizeof id, "%.*s", one ? (int)(req->path_len - base - 1) : 0,
             req->path + base + 1);
    if ((one ? k3_emit_model(id, s->started, &b, &e)
             : k3_emit_models_list(s->cfg->model_name, (const char *const *)s->cfg->aliases,
                                   s->cfg->naliases, s->started, &b, &e)) == K3_OK)
        respond(s, c, 200, "application/json", b.data, b.len, NULL);
    else
        http_error(s, c, status = 500, e.msg, NULL);
    k3_buf_free(&b);
    return status;
}

/* POST /tokenize and /detokenize: answered on the connection's thread (the
 * tokenizer is read-only and shared). */
static int tokenize(k3_server *s, k3_conn *c, const k3_http_request *req, const char *body,
                    int detokenize)
{
    k3_buf b = { 0 };
    k3_api_error err;
    int status = detokenize
                     ? k3_detokenize_answer(s->tok, body, req->content_length, &b, &err)
                     : k3_tokenize_answer(s->tok, body, req->content_length, &b, &err);
    if (status)
        respond_error(s, c, &err, NULL);
    else
        respond(s, c, 200, "application/json", b.data, b.len, NULL);
    k3_buf_free(&b);
    return status ? status : 200;
}

/* GET /metrics. */
static int metrics(k3_server *s, k3_conn *c)
{
    k3_buf b = { 0 };
    k3_err e = { 0, "" };
    size_t waiting;
    int running, status = 200;
    k3_queue_load(&s->queue, &waiting, &running);
    if (k3_metrics_text(&s->metrics, waiting, running, &b, &e) == K3_OK)
        respond(s, c, 200, "text/plain; version=0.0.4", b.data, b.len, NULL);
    else
        http_error(s, c, status = 500, e.msg, NULL);
    k3_buf_free(&b);
    return status;
}

/* OPTIONS: a CORS preflight, answered for every path a route knows. */
static void preflight(k3_server *s, k3_conn *c, const char *methods)
{
    char extra[256];
    snprintf(extra, sizeof extra,
             "Access-Control-Allow-Methods: %s, OPTIONS\r\n"
             "Access-Control-Allow-Headers: Content-Type, Authorization, X-Api-Key, "
             "Anthropic-Version, Anthropic-Beta\r\n"
             "Access-Control-Max-Age: 86400\r\n",
             methods);
    respond(s, c, 204, "text/plain", "", 0, s->cors[0] ? extra : NULL);
}

enum {
    R_CHAT, R_COMPLETIONS, R_MESSAGES, R_COUNT, R_RESPONSES, R_MODELS, R_MODEL, R_HEALTH,
    R_TOKENIZE, R_DETOKENIZE, R_METRICS
};

/* Whether v[0..n) equals key, in a time that does not depend on where
 * they first differ. */
static int same_key(const char *v, size_t n, const char *key)
{
    size_t kn = strlen(key);
    unsigned char diff = 0;
    if (!v || n != kn)
        return 0;
    for (size_t i = 0; i < kn; i++)
        diff |= (unsigned char)(v[i] ^ key[i]);
    return diff == 0;
}

/* With --api-key: whether the request carries "Authorization: Bearer KEY"
 * or (Anthropic's clients) "X-Api-Key: KEY". */
static int authorized(const k3_server *s, const k3_http_request *req)
{
    const char *key = s->cfg->api_key;
    if (!key)
        return 1;
    if (req->api_key && same_key(req->api_key, req->api_key_len, key))
        return 1;
    return req->authorization && req->authorization_len > 7 &&
           strncasecmp(req->authorization, "Bearer ", 7) == 0 &&
           same_key(req->authorization + 7, req->authorization_len - 7, key);
}

/* Answers a complete request. */
static void route(k3_server *s, k3_conn *c, const k3_http_request *req, const char *body, double t0)
{
    static const struct {
        const char *path, *method;
        int endpoint, prefix; /* prefix: the path is "PATH/{id}" */
    } routes[] = {
        { "/v1/chat/completions", "POST", R_CHAT, 0 },
        { "/v1/completions", "POST", R_COMPLETIONS, 0 },
        { "/v1/messages", "POST", R_MESSAGES, 0 },
        { "/v1/messages/count_tokens", "POST", R_COUNT, 0 },
        { "/v1/responses", "POST", R_RESPONSES, 0 },
        { "/v1/models", "GET", R_MODELS, 0 },
        { "/v1/models/", "GET", R_MODEL, 1 },
        { "/health", "GET", R_HEALTH, 0 },
        { "/tokenize", "POST", R_TOKENIZE, 0 },
        { "/detokenize", "POST", R_DETOKENIZE, 0 },
        { "/metrics", "GET", R_METRICS, 0 },
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        size_t pl = strlen(routes[i].path);
        if (routes[i].prefix ? !(req->path_len > pl && !memcmp(req->path, routes[i].path, pl))
                             : !is_path(req, routes[i].path))
            continue;
        int status = 200, open = routes[i].endpoint == R_HEALTH ||
                                 routes[i].endpoint == R_MODELS || is_method(req, "OPTIONS");
        if (is_method(req, "OPTIONS")) {
            preflight(s, c, routes[i].method);
            status = 204;
        } else if (!open && !authorized(s, req)) {
            k3_api_error err;
            int anthropic = routes[i].endpoint == R_MESSAGES || routes[i].endpoint == R_COUNT;
            k3_api_fail(&err, 401, "invalid_api_key", NULL,
                        "Invalid API key: send \"Authorization: Bearer KEY\" (or \"X-Api-Key: "
                        "KEY\") with the server's --api-key.");
            err.type = "authentication_error";
            respond_error_as(s, c, anthropic ? K3_API_MESSAGES : K3_API_CHAT, &err,
                             "WWW-Authenticate: Bearer\r\n");
            status = 401;
        } else if (!is_method(req, routes[i].method)) {
            char allow[40];
            snprintf(allow, sizeof allow, "Allow: %s, OPTIONS\r\n", routes[i].method);
            http_error(s, c, 405, "method not allowed on this path", allow);
            status = 405;
        } else {
            switch (routes[i].endpoint) {
            case R_CHAT: generate(s, c, req, body, K3_API_CHAT, t0); return;
            case R_COMPLETIONS: generate(s, c, req, body, K3_API_COMPLETION, t0); return;
            case R_MESSAGES: generate(s, c, req, body, K3_API_MESSAGES, t0); return;
            case R_RESPONSES: generate(s, c, req, body, K3_API_RESPONSES, t0); return;
            case R_COUNT: status = count_tokens(s, c, req, body); break;
            case R_HEALTH: health(s, c, c->fd, req, t0); return;
            case R_MODELS: case R_MODEL: status = models(s, c, req); break;
            case R_TOKENIZE: status = tokenize(s, c, req, body, 0); break;
            case R_DETOKENIZE: status = tokenize(s, c, req, body, 1); break;
            default: status = metrics(s, c); break;
            }
        }
        log_line(s, req, status, NULL, t0);
        return;
    }
    int page = k3_webui_route(s, c, req); /* GET / and /chat (webui.h) */
    if (page) {
        log_line(s, req, page, NULL, t0);
        return;
    }
    http_error(s, c, 404, "no such endpoint (POST /v1/chat/completions, POST /v1/completions, "
                           "POST /v1/messages, POST /v1/messages/count_tokens, "
                           "POST /v1/responses, GET /v1/models, POST /tokenize, "
                           "POST /detokenize, GET /metrics, "
                           "GET /health)", NULL);
    log_line(s, req, 404, NULL, t0);
}

/* Whether the answer to req may keep c open (conn.h), decided before it is
 * written (its head says so); a stream on HTTP/1.0 or a failed write
 * still closes. */
static int may_keep(k3_server *s, const k3_conn *c, const k3_http_request *req)
{
    return s->cfg->keep_alive_s > 0 && c->requests + 1 < s->cfg->keep_alive_requests &&
           !req->conn_close && (req->minor == 1 || req->conn_keep_alive) && !server_stopping(s);
}

int k3_conn_serve(k3_server *s, int fd, char **buf, size_t *len, double t0, int *requests)
{
    k3_conn c;
    memset(&c, 0, sizeof c);
    c.fd = fd;
    c.buf = *buf;
    c.len = *len;
    c.cap = K3_CONN_MAX_HEAD;
    c.requests = *requests;
    k3_sock_set_nonblock(fd, 0); /* the accept thread's reads */
    k3_sock_set_send_timeout(fd, s->cfg->timeout);
    for (;;) {
        k3_http_request req;
        k3_http_limits lim;
        int rc = read_request(s, &c, t0, &req);
        c.keep = 0;
        if (rc == K3_HTTP_OK) {
            c.keep = may_keep(s, &c, &req);
            c.http10 = req.minor == 0;
            route(s, &c, &req, c.buf + req.head_len, t0);
        } else if (rc > 0) {
            http_error(s, &c, rc, req.error, NULL); /* the body, if any, is unread: close */
        }
        if (!c.keep || c.broken || server_stopping(s))
            break;
        /* Kept: what follows the request is the next one's start. */
        c.requests++;
        c.len -= c.used;
        memmove(c.buf, c.buf + c.used, c.len);
        c.used = 0;
        k3_conn_limits(s, &lim);
        t0 = k3_seconds();
        if (c.len && k3_http_parse_request(c.buf, c.len, &req, &lim) != K3_HTTP_NEED_HEAD)
            continue; /* pipelined: its head is here (or is bad): answer it now */
        /* Idle: back to the accept thread, with a head-sized buffer or none. */
        char *small = c.len ? realloc(c.buf, K3_CONN_MAX_HEAD) : NULL;
        if (c.len && !small)
            break;
        if (!c.len)
            free(c.buf);
        *buf = small;
        *len = c.len;
        *requests = c.requests;
        return 1;
    }
    free(c.buf);
    *buf = NULL;
    linger_close(fd);
    return 0;
}

void k3_conn_refuse(int fd, int status, const char *code, const char *why)
{
    k3_api_error err;
    k3_buf b = { 0 };
    k3_err e = { 0, "" };
    k3_api_fail(&err, status, code, NULL, "%s", why);
    if (k3_emit_error(&err, 0, &b, &e) == K3_OK)
        send_once(NULL, fd, status, b.data, b.len);
    k3_buf_free(&b);
    k3_sock_shutdown_write(fd);
    drain(fd);
    k3_sock_close(fd);
}
