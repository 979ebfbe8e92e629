/* server.c - see server.h: the listening socket, the worker thread, and
 * starting and shutting down (the accept loop is intake.c). */
#include "server/server.h"

#include <errno.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/answer.h"
#include "server/conn.h"
#include "server/engine.h"
#include "server/intake.h"
#include "server/slots.h"
#include "structured/constrain.h"
#include "util/error.h"
#include "util/os.h"
#include "util/os_net.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

int k3_server_listen(const k3_server_config *cfg, int *bound, k3_err *e)
{
    struct addrinfo hints, *ai = NULL;
    char port[16];
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port, sizeof port, "%d", cfg->port);
    if (k3_sock_startup() != 0) {
        k3_fail(e, K3_ERUNTIME, "cannot start the socket library");
        return -1;
    }
    int rc = getaddrinfo(cfg->host, port, &hints, &ai);
    if (rc != 0) {
        k3_fail(e, K3_EINPUT, "--host %s: not an address this machine resolves (%s)", cfg->host,
                gai_strerror(rc));
        return -1;
    }
    if (!k3_addr_is_loopback(ai->ai_addr))
        fprintf(stderr, "k3 serve: WARNING: --host %s is not a loopback address: anyone who "
                        "can reach it can use the server%s\n",
                cfg->host, cfg->api_key ? " (with the API key)"
                                        : ", which has no --api-key: set one (or K3_API_KEY)");
    int fd = (int)socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol), one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, (const void *)&one, sizeof one) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
        k3_fail(e, K3_ERUNTIME, "cannot listen on %s port %d: %s", cfg->host, cfg->port,
                strerror(errno));
        if (fd >= 0)
            k3_sock_close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    if (fd >= 0 && getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        *bound = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                : ((struct sockaddr_in *)&sa)->sin_port);
    return fd;
}

int k3_server_serves(const k3_server_config *cfg, const char *name, size_t n)
{
    if (strlen(cfg->model_name) == n && !memcmp(cfg->model_name, name, n))
        return 1;
    for (size_t i = 0; i < cfg->naliases; i++)
        if (strlen(cfg->aliases[i]) == n && !memcmp(cfg->aliases[i], name, n))
            return 1;
    return 0;
}

/* Whether the address host is a loopback one. */
static int host_is_loopback(const char *host)
{
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    if (k3_sock_startup() != 0 || getaddrinfo(host, NULL, &hints, &ai) != 0)
        return 0;
    int yes = k3_addr_is_loopback(ai->ai_addr);
    freeaddrinfo(ai);
    return yes;
}

/* Runs the worker and the accept loop, then shuts down: refuses what
 * waits, cancels what runs, and lets every connection thread finish (each
 * of their waits is bounded). Closes *lfd as soon as accepting ends. */
static void serve(k3_server *s, k3_answerer *a, int *lfd, int port, k3_err *e)
{
    const k3_server_config *cfg = s->cfg;
    k3_slots_arg wa = { s, a, (size_t)cfg->parallel };
    pthread_t wt;
    k3_os_on_stop(on_signal); /* also: a client gone mid-write is an error return */
    if (pthread_create(&wt, NULL, k3_slots_worker, &wa) != 0) {
        k3_fail(e, K3_ERUNTIME, "cannot start the worker thread");
        return;
    }
    fprintf(stderr, "k3 serve: listening on http://%s%s%s:%d (model %s, context %lld, "
                    "max tokens %ld, slots %d, queue %zu)\n",
            strchr(cfg->host, ':') ? "[" : "", cfg->host, strchr(cfg->host, ':') ? "]" : "", port,
            cfg->model_name, (long long)cfg->context, cfg->max_tokens, cfg->parallel,
            cfg->max_queue);
    k3_intake_run(s, *lfd, &stop_signal);
    k3_sock_close(*lfd); /* new clients are refused by the system from here */
    *lfd = -1;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_mutex_unlock(&s->mu);
    k3_queue_stop(&s->queue);
    pthread_join(wt, NULL);
    pthread_mutex_lock(&s->mu);
    while (s->conns > 0)
        pthread_cond_wait(&s->idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

/* The slots' shared prefix cache, when cfg asks for one. Not under an op
 * stream's leader (k3-mpi serve, engine.h): a restore is a copy into a
 * state that the followers' replicas would not see. */
static int open_prefix_cache(const k3_server_config *cfg, k3_model *m, const k3_tokenizer *tok,
                             k3_prefix_cache **out, k3_err *e)
{
    *out = NULL;
    if (!(cfg->prefix_bytes > 0) && !cfg->prefix_dir)
        return K3_OK;
    if (k3_engine_is_leader()) {
        fprintf(stderr, "k3 serve: no prefix cache across ranks (k3-mpi): prompts are "
                        "computed from the slots' own states\n");
        return K3_OK;
    }
    k3_prefix_opts po;
    memset(&po, 0, sizeof po);
    po.ram_bytes = cfg->prefix_bytes > 0 ? (uint64_t)cfg->prefix_bytes : 0;
    po.dir = cfg->prefix_dir;
    po.disk_bytes = cfg->prefix_disk_bytes > 0 ? (uint64_t)cfg->prefix_disk_bytes : 0;
    po.ns = k3_prefix_namespace(tok);
    po.log = stderr;
    if (k3_prefix_cache_open(out, m, &po, e))
        return e->code;
    if (!cfg->quiet) {
        k3_prefix_stats st;
        k3_prefix_cache_stats(*out, &st);
        fprintf(stderr, "k3 serve: prefix cache: %.2f GiB RAM%s%s",
                cfg->prefix_bytes / 1073741824.0, cfg->prefix_dir ? ", disk tier " : "",
                cfg->prefix_dir ? cfg->prefix_dir : "");
        if (cfg->prefix_dir)
            fprintf(stderr, " (%.2f GiB; %llu snapshots found)",
                    cfg->prefix_disk_bytes / 1073741824.0, (unsigned long long)st.disk_entries);
        fputc('\n', stderr);
    }
    return K3_OK;
}

int k3_server_run(const k3_server_config *cfg, int lfd, int port, k3_model *m,
                  const k3_tokenizer *tok, k3_err *e)
{
    k3_server s;
    size_t na = 0, n = cfg->parallel > 0 ? (size_t)cfg->parallel : 1;
    memset(&s, 0, sizeof s);
    s.cfg = cfg;
    s.tok = tok;
    s.started = (long long)time(NULL);
    s.wake = -1;
    /* Built once (a trie of the vocabulary), read by every connection thread. */
    if (k3_constrain_vocab_new(tok, k3_model_vocab(m), &s.gvocab, e))
        return e->code;
    const char *origin = cfg->cors;
    if (!origin && host_is_loopback(cfg->host))
        origin = "*";
    if (origin && *origin)
        snprintf(s.cors, sizeof s.cors, "Access-Control-Allow-Origin: %.256s\r\n", origin);
    k3_metrics_init(&s.metrics);
    k3_server_vision_init(&s.vision, cfg->vision_dir, cfg->image_room, cfg->no_mem_check, tok);
    /* A text-only checkpoint is normal, not a failure: said as what the
     * server does (the reason in brackets, for a tower that should be there). */
    if (!cfg->quiet && cfg->vision_dir && s.vision.ok)
        fputs("k3 serve: image_url parts: accepted (the vision tower is read per request)\n",
              stderr);
    else if (!cfg->quiet && cfg->vision_dir)
        fprintf(stderr, "k3 serve: text only: image_url parts are refused (%s)\n",
                s.vision.why);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.idle, NULL);
    k3_answerer *a = k3_malloc(e, n * sizeof *a, "the slots");
    k3_prefix_cache *cache = NULL;
    while (a && na < n &&
           k3_answerer_init(&a[na], m, tok, cfg->context, cfg->spec, cfg->draft,
                            cfg->draft_topk, e) == K3_OK)
        na++;
    if (na == n && open_prefix_cache(cfg, m, tok, &cache, e) == K3_OK) {
        for (size_t i = 0; i < n; i++)
            a[i].cache = cache;
        if (k3_clients_init(&s.clients, cfg->max_per_client, e) == K3_OK) {
            if (k3_queue_init(&s.queue, cfg->max_queue, n, e) == K3_OK) {
                serve(&s, a, &lfd, port, e);
                k3_queue_destroy(&s.queue);
            }
            k3_clients_free(&s.clients);
        }
    }
    k3_prefix_cache_close(cache); /* after the worker: spills RAM to the disk tier */
    while (na > 0)
        k3_answerer_free(&a[--na]);
    free(a);
    if (s.failed && !e->code)
        k3_fail(e, K3_EINVALID, "a run failed while serving: %s", s.failure);
    if (lfd >= 0)
        k3_sock_close(lfd);
    pthread_cond_destroy(&s.idle);
    pthread_mutex_destroy(&s.mu);
    k3_metrics_destroy(&s.metrics);
    k3_constrain_vocab_free(s.gvocab);
    return e->code;
}
