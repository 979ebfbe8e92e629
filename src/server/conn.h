/* conn.h - one client connection once its request head is complete: read
 * the body, answer, and either close or keep the connection for its next
 * request (HTTP/1.1 keep-alive); and the answers the accept thread gives
 * by itself without blocking (intake.h).
 *
 * Keep-alive: a connection is kept after an answer when the client did not
 * say "Connection: close" (HTTP/1.1) or said "Connection: keep-alive"
 * (HTTP/1.0), --keep-alive-s is not 0, the answer is not the connection's
 * --keep-alive-requests-th, its body's end is known to the client
 * (Content-Length, or a chunked stream: an HTTP/1.0 stream closes), every
 * write succeeded and the server is not stopping. A kept connection with
 * the next request already complete in its buffer (pipelined) is served on
 * at once by the same thread; otherwise it goes back to the accept thread
 * (intake.h), which holds it idle without a thread.
 * What a connection sees of the server is k3_server (server.c owns it;
 * every field but those under mu is read-only while connections run). */
#ifndef K3_SERVER_CONN_H
#define K3_SERVER_CONN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "k3/tokenizer.h"
#include "server/clients.h"
#include "server/http.h"
#include "server/images.h"
#include "server/metrics.h"
#include "server/queue.h"
#include "server/server.h"

/* Request head limits: bytes (431 beyond), header fields, target bytes. */
#define K3_CONN_MAX_HEAD 16384
#define K3_CONN_MAX_HEADERS 64
#define K3_CONN_MAX_TARGET 4096

typedef struct k3_server {
    const k3_server_config *cfg;
    const k3_tokenizer *tok;
    k3_queue queue;
    k3_clients clients;    /* connections per client address (--max-per-client) */
    long long started;     /* time(NULL) at start: /v1/models "created" */
    char cors[320];        /* "Access-Control-Allow-Origin: ...\r\n" on every answer, or "" */
    k3_metrics metrics;    /* its own mutex */
    k3_server_vision vision; /* image parts (images.h); fixed while serving */
    struct k3_constrain_vocab *gvocab; /* the vocabulary structured outputs match
                                        * (structured/constrain.h); fixed, shared */
    pthread_mutex_t mu;    /* guards the fields below */
    pthread_cond_t idle;   /* signalled when conns drops */
    int conns;             /* connection threads alive */
    uint64_t serial;       /* responses numbered so far */
    int stopping;          /* the server is shutting down */
    int failed;            /* a run was invalid (a weight read failed): no more answers */
    struct k3_kept *kept;  /* kept-alive connections handed back to the accept thread
                            * (intake.c), not taken yet */
    int accepting;         /* the accept thread runs and takes kept connections back */
    int wake;              /* a byte here wakes the accept thread (-1: none) */
    char failure[1024];    /* when failed: why (the k3_err message) */
} k3_server;

/* One connection while a thread serves it. buf[0..len) holds what was
 * read: the current request (its first used bytes) and any bytes of the
 * next one after it. */
typedef struct k3_conn {
    int fd;
    char *buf;       /* malloc'd, cap bytes (at least K3_CONN_MAX_HEAD) */
    size_t len, cap;
    size_t used;     /* bytes of the request being answered (head + body) */
    int requests;    /* requests answered on this connection before this one */
    int keep;        /* this answer keeps the connection (its head says keep-alive) */
    int http10;      /* the request was HTTP/1.0: no chunked streams */
    int broken;      /* a write failed or the client left: close */
} k3_conn;

/* Sends one whole answer (status, Content-Type type, body[0..n), extra
 * head lines or NULL; the CORS and connection lines added) on c; -1 when
 * the write failed (c is then closed after the answer). */
int k3_conn_respond(k3_server *s, k3_conn *c, int status, const char *type, const char *body,
                    size_t n, const char *extra);

/* The request limits of server s. */
void k3_conn_limits(const k3_server *s, k3_http_limits *lim);

/* Serves the connection fd whose request starts with (*buf)[0..*len) (the
 * parser said: complete, or head complete and body to come, or an error
 * status; *buf malloc'd, K3_CONN_MAX_HEAD bytes): reads the rest, answers,
 * then serves any complete pipelined request after it the same way.
 * *requests: requests answered on fd before (0 for a new connection),
 * updated. t0: when the request's first byte was read, or the accept
 * (k3_seconds). Returns 0 after closing fd (and freeing *buf), or 1 when
 * fd is kept idle for its next request: *buf (K3_CONN_MAX_HEAD bytes, or
 * NULL when *len is 0) holds the start of that request, not a complete
 * head; the caller hands fd back to the accept thread. */
int k3_conn_serve(k3_server *s, int fd, char **buf, size_t *len, double t0, int *requests);

/* Whether req is GET /health, the request the accept thread answers by
 * itself (k3_conn_health) whatever the load. */
int k3_conn_is_health(const k3_http_request *req);

/* Answers GET /health on fd with one write that never blocks (the answer
 * is far smaller than a socket buffer), logs it and closes fd. */
void k3_conn_health(k3_server *s, int fd, const k3_http_request *req, double t0);

/* Refuses a connection without a thread: a best-effort error response
 * (status, OpenAI error code, message) that never blocks, then close(fd). */
void k3_conn_refuse(int fd, int status, const char *code, const char *why);

#endif
