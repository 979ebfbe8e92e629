/* conn.h - one client connection once its request head is complete: read
 * the body, answer, close; and the answers the accept thread gives by
 * itself without blocking (intake.h).
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
    char failure[1024];    /* when failed: why (the k3_err message) */
} k3_server;

/* Sends one whole answer (status, Content-Type type, body[0..n), extra
 * head lines or NULL; the CORS line added) on fd; -1 when the write failed. */
int k3_conn_respond(k3_server *s, int fd, int status, const char *type, const char *body,
                    size_t n, const char *extra);

/* The request limits of server s. */
void k3_conn_limits(const k3_server *s, k3_http_limits *lim);

/* Handles the connection fd whose request starts with buf[0..len) (the
 * parser said: complete, or head complete and body to come, or an error
 * status): reads the rest, answers, closes fd and frees buf (malloc'd,
 * cap bytes). t0: when the connection was accepted (k3_seconds). */
void k3_conn_serve(k3_server *s, int fd, char *buf, size_t len, size_t cap, double t0);

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
