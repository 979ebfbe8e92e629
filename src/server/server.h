/* server.h - `k3 serve`: an OpenAI-compatible HTTP server for one model.
 *
 * Endpoints: POST /v1/chat/completions, POST /v1/completions (api.h for
 * the fields), POST /v1/messages and /v1/messages/count_tokens (messages.h),
 * POST /v1/responses (responses.h), GET /v1/models and /v1/models/{id}, POST /tokenize and
 * /detokenize (tokenize.h), GET /metrics (metrics.h), GET /health; OPTIONS
 * on any of them is a CORS preflight.
 *
 * Threads: the calling thread accepts connections and reads every request
 * head (intake.h: a deadline per head, a limit per client, /health
 * answered there); a request with a complete head gets a thread that reads
 * and checks its body, renders and tokenizes the prompt, queues the job
 * (queue.h) and writes what the worker publishes; one worker thread owns
 * the model and runs up to `parallel` jobs at once, one forward call over
 * all of them per step (slots.h, answer.h). After an answer a connection
 * is kept alive (conn.h) and goes back to the accepting thread, which
 * holds it idle without a thread until its next request. */
#ifndef K3_SERVER_SERVER_H
#define K3_SERVER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "k3/k3.h"
#include "k3/tokenizer.h"

typedef struct k3_server_config {
    const char *host;       /* numeric address to bind (IPv4 or IPv6) */
    int port;               /* 0: any free port (the log line names it) */
    const char *model_name; /* what /v1/models and every response call the model */
    const char *const *aliases; /* [naliases] other names a request's "model" may use */
    size_t naliases;
    const char *api_key;    /* non-NULL: every request but GET /health, GET /v1/models and
                             * OPTIONS needs "Authorization: Bearer KEY" (else 401) */
    size_t max_body;        /* request bodies above this are 413 */
    long max_tokens;        /* the largest max_tokens a request may ask for */
    long default_tokens;    /* a chat answer's length without max_tokens (<= max_tokens;
                             * capped by the context left) */
    size_t max_queue;       /* requests waiting behind a full set of slots; more are 503 */
    double timeout;         /* seconds a client may take to send its request, and a
                             * single write to it may stall */
    double header_timeout;  /* seconds from the accept to the end of the request head
                             * (<= timeout); also the grace before the body's rate is
                             * checked */
    int max_per_client;     /* connections one client address may hold (clients.h) */
    double keep_alive_s;    /* seconds a kept-alive connection may wait idle for its next
                             * request (0: every answer closes its connection; conn.h) */
    int keep_alive_requests; /* requests one connection may carry (>= 1); the last
                              * answer closes it */
    double exit_after;      /* > 0: stop by itself after this many seconds (tests) */
    int64_t context;        /* prompt + answer tokens */
    int threads;            /* worker threads for the model (0 = OpenMP's default) */
    int parallel;           /* slots: answers generated together (>= 1; the memory plan
                             * counted each one's state); spec needs 1 */
    int spec;               /* the most drafts per step; a request without "spec" gets it */
    const char *draft;      /* the drafter: "ngram" (NULL) or "self" (gen/draft.h) */
    int draft_topk;         /* the self drafter's experts per token (-1: default) */
    int quiet;              /* no per-request log lines */
    const char *vision_dir; /* the checkpoint whose vision tower encodes image_url parts
                             * (NULL: a request with one is a 400; server/images.h) */
    double image_room;      /* bytes an image request's encoding may take: the run's
                             * budget less the text plan (< 0: no budget) */
    int no_mem_check;       /* image requests are not checked against free memory */
    double prefix_bytes;    /* the prefix cache's RAM (model/prefix_cache.h); 0: none */
    const char *prefix_dir; /* its disk tier, or NULL */
    double prefix_disk_bytes; /* the disk tier's bound */
    const char *cors;       /* the Access-Control-Allow-Origin every answer carries (and
                             * OPTIONS preflights get): NULL = "*" when host is loopback,
                             * none otherwise; "" = none */
    int no_webui;           /* no chat page at / and /chat (webui.h): 404 there */
} k3_server_config;

/* A socket listening on cfg's host (a numeric address or a name such as
 * localhost) and port (returned), its port number in *port (the one picked
 * when cfg->port is 0); -1 and K3_EINPUT for a host that does not resolve,
 * K3_ERUNTIME when the address cannot be bound (in use, not allowed).
 * Separate from k3_server_run so that a busy port is reported before a
 * large model is loaded; connections wait in the
 * backlog until the server runs. An address that is not loopback (see
 * k3_addr_is_loopback) gets a WARNING line on stderr first, always, louder
 * without an api_key. */
int k3_server_listen(const k3_server_config *cfg, int *port, k3_err *e);

/* Whether name[0..n) is the model's name or one of its aliases. */
int k3_server_serves(const k3_server_config *cfg, const char *name, size_t n);

/* Serves on the listening socket lfd (closed on return) until SIGINT or
 * SIGTERM (or exit_after), then stops accepting, cancels what is queued or
 * running (each such client gets a 503, or a stream an error event and
 * [DONE]), waits for the connection threads and returns K3_OK, or
 * K3_EINVALID when a run was invalid while serving. */
int k3_server_run(const k3_server_config *cfg, int lfd, int port, k3_model *m,
                  const k3_tokenizer *tok, k3_err *e);

#endif
