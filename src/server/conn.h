/* conn.h - one client connection: read the request, answer it, close.
 * What a connection thread sees of the server is k3_server (server.c owns
 * it; every field but the counters is read-only while connections run). */
#ifndef K3_SERVER_CONN_H
#define K3_SERVER_CONN_H

#include <pthread.h>
#include <stdint.h>

#include "k3/tokenizer.h"
#include "server/queue.h"
#include "server/server.h"

typedef struct k3_server {
    const k3_server_config *cfg;
    const k3_tokenizer *tok;
    k3_queue queue;
    long long started;     /* time(NULL) at start: /v1/models "created" */
    pthread_mutex_t mu;    /* guards the fields below */
    pthread_cond_t idle;   /* signalled when conns drops */
    int conns;             /* connection threads alive */
    uint64_t serial;       /* responses numbered so far */
    int stopping;          /* the server is shutting down */
} k3_server;

/* Handles the connection fd from the first byte to close(fd). */
void k3_conn_serve(k3_server *s, int fd);

/* Refuses a connection the server has no thread for: a best-effort 503
 * that never blocks, then close(fd). */
void k3_conn_refuse(int fd);

#endif
