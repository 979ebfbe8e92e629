/* serve_cmd.c - see serve_cmd.h.
 *
 * The server's own options are parsed here; the memory and tokenizer
 * options are the main command's, handed to k3_options_parse so they are
 * spelt, checked and documented once. */
#include "cli/serve_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/options.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"
#include "server/server.h"
#include "util/error.h"

static void usage(FILE *f)
{
    fputs("usage: k3 serve MODEL_DIR --port N [options]\n"
          "\n"
          "An OpenAI-compatible HTTP server for the model: POST /v1/chat/completions,\n"
          "POST /v1/completions (both with \"stream\": true as server-sent events),\n"
          "GET /v1/models, GET /health. One answer is generated at a time; the others\n"
          "wait in a queue. Every response closes its connection.\n"
          "\n"
          "  --port N             TCP port (0: any free port; the log line names it)\n"
          "  --host ADDR          numeric address to listen on (default 127.0.0.1: this\n"
          "                       machine only; 0.0.0.0 or :: exposes the server)\n"
          "  --tok DIR            tokenizer directory (default: MODEL_DIR)\n"
          "  --max-body BYTES     largest request body (default 8388608; more is 413)\n"
          "  --max-tokens N       largest max_tokens a request may ask for, and the\n"
          "                       chat default (default 4096; the context caps it too)\n"
          "  --max-queue N        requests that may wait behind the running one\n"
          "                       (default 16; more are answered 503)\n"
          "  --timeout SECONDS    time a client has to send its request, and a write\n"
          "                       to it may stall, before it is dropped (default 30)\n"
          "  --header-timeout SECONDS\n"
          "                       time from connecting to the end of the request head\n"
          "                       (default 5, at most --timeout); a body must then keep\n"
          "                       up 256 KiB/s on average\n"
          "  --max-per-client N   connections one client address may hold at once\n"
          "                       (default 16; IPv6: per /64; more are answered 503)\n"
          "  --exit-after SECONDS stop by itself after this long (for tests)\n"
          "  --max-context N      prompt + answer tokens (default 4096)\n"
          "  --threads N          worker threads (default: all cores)\n"
          "  --quiet              no per-request log lines\n"
          "  memory: --preset, --budget-gb, --trunk-gb, --cache-gb, --trunk-ring,\n"
          "          --trunk-layers, --cache-experts, --stream-embed, --stream-lm-head,\n"
          "          --no-mem-check,\n"
          "          --trunk, --layers (as for k3 MODEL_DIR; see k3 --help)\n"
          "\n"
          "Request fields, extensions (thinking, reasoning_effort, top_k, min_p,\n"
          "repetition_penalty), responses and errors: docs/SERVE.md.\n",
          f);
}

/* Options of the main command that make sense for a server: passed on to
 * k3_options_parse. value: it takes an argument. */
static const struct {
    const char *name;
    int value;
} shared[] = {
    { "--tok", 1 },         { "--preset", 1 },       { "--budget-gb", 1 },
    { "--trunk-gb", 1 },
    { "--cache-gb", 1 },    { "--trunk-ring", 1 },   { "--trunk-layers", 1 },
    { "--cache-experts", 1 }, { "--max-context", 1 }, { "--trunk", 1 },
    { "--threads", 1 },     { "--layers", 1 },       { "--stream-embed", 0 },
    { "--stream-lm-head", 0 }, { "--no-mem-check", 0 }, { "--quiet", 0 },
    { "-q", 0 },
};

typedef struct {
    int help, port_given;
    const char *host;
    double port, max_body, max_tokens, max_queue, timeout, header_timeout, max_per_client;
    double exit_after;
} serve_args;

/* The server's own numeric options: name, where the value goes, range,
 * and whether it must be a whole number. Returns -1 when name is none of
 * them, else a k3 status. */
static int own_number(serve_args *a, const char *name, const char *value, k3_err *e)
{
    const struct {
        const char *name;
        double *out, lo, hi;
        int whole;
    } own[] = {
        { "--port", &a->port, 0, 65535, 1 },
        { "--max-body", &a->max_body, 1, 1 << 30, 1 },
        { "--max-tokens", &a->max_tokens, 1, 1 << 24, 1 },
        { "--max-queue", &a->max_queue, 0, 4096, 1 },
        { "--timeout", &a->timeout, 0.01, 86400, 0 },
        { "--header-timeout", &a->header_timeout, 0.01, 86400, 0 },
        { "--max-per-client", &a->max_per_client, 1, 4096, 1 },
        { "--exit-after", &a->exit_after, 0.01, 1e7, 0 },
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        if (strcmp(name, own[i].name) != 0)
            continue;
        char *end;
        errno = 0;
        double v = value ? strtod(value, &end) : 0;
        if (!value || !*value || *end || errno || !(v >= own[i].lo && v <= own[i].hi) ||
            (own[i].whole && v != (double)(long long)v))
            return k3_fail(e, K3_EINPUT, "%s expects %s from %g to %g, got \"%s\"", name,
                           own[i].whole ? "an integer" : "a number", own[i].lo, own[i].hi,
                           value ? value : "(nothing)");
        *own[i].out = v;
        a->port_given |= own[i].out == &a->port;
        return K3_OK;
    }
    return -1;
}

/* Splits argv: the server's options into *a, the rest (MODEL_DIR and the
 * shared options) into pass[] for k3_options_parse (pass[0] = "k3"). */
static int parse(serve_args *a, int argc, char **argv, char **pass, int *npass, k3_err *e)
{
    memset(a, 0, sizeof *a);
    a->max_body = 8 << 20;
    a->max_tokens = 4096;
    a->max_queue = 16;
    a->timeout = 30;
    a->header_timeout = 5;
    a->max_per_client = 16;
    a->host = "127.0.0.1";
    pass[0] = "k3";
    *npass = 1;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        size_t k = 0, nshared = sizeof shared / sizeof shared[0];
        int rc;
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            a->help = 1;
            continue;
        }
        if (!strcmp(s, "--host")) {
            if (!next)
                return k3_fail(e, K3_EINPUT, "--host expects a value");
            a->host = argv[++i];
            continue;
        }
        if ((rc = own_number(a, s, next, e)) >= 0) {
            if (rc)
                return rc;
            i++;
            continue;
        }
        while (k < nshared && strcmp(shared[k].name, s) != 0)
            k++;
        if (k == nshared && s[0] == '-' && s[1])
            return k3_fail(e, K3_EINPUT, "serve: unknown option %s (see k3 serve --help)", s);
        pass[(*npass)++] = argv[i];
        if (k < nshared && shared[k].value && next)
            pass[(*npass)++] = argv[++i];
    }
    if (!a->help && !a->port_given)
        return k3_fail(e, K3_EINPUT, "serve: --port N is required (0 picks a free port)");
    return K3_OK;
}


/* "NAME" of MODEL_DIR ".../NAME/" */
static void base_name(const char *dir, char *out, size_t cap)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/')
        start--;
    snprintf(out, cap, "%.*s", (int)(n - start), dir + start);
}

static int serve(const serve_args *a, const k3_options *o, k3_err *e)
{
    k3_model_opts mo;
    k3_model *m = NULL;
    k3_tokenizer *tok = NULL;
    char name[256];
    base_name(o->model_dir, name, sizeof name);
    k3_server_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.host = a->host;
    cfg.port = (int)a->port;
    cfg.model_name = name;
    cfg.max_body = (size_t)a->max_body;
    cfg.max_tokens = (long)a->max_tokens;
    cfg.max_queue = (size_t)a->max_queue;
    cfg.timeout = a->timeout;
    cfg.header_timeout = a->header_timeout < a->timeout ? a->header_timeout : a->timeout;
    cfg.max_per_client = (int)a->max_per_client;
    cfg.exit_after = a->exit_after;
    cfg.context = o->max_context ? o->max_context : K3_DEFAULT_MAX_CONTEXT;
    cfg.threads = o->threads;
    cfg.quiet = o->quiet;
    int port, lfd = k3_server_listen(&cfg, &port, e);
    if (lfd < 0)
        return e->code;
    if (k3_tok_load(&tok, o->tok_dir ? o->tok_dir : o->model_dir, e) == K3_OK &&
        k3_options_model(o, &mo, e) == K3_OK && k3_model_open(&m, o->model_dir, &mo, e) == K3_OK &&
        k3_tok_vocab_size(tok) > k3_model_vocab(m))
        k3_fail(e, K3_EINPUT, "the tokenizer has %u ids but the model only %u: wrong --tok?",
                k3_tok_vocab_size(tok), k3_model_vocab(m));
    if (e->code)
        close(lfd);
    else
        k3_server_run(&cfg, lfd, port, m, tok, e);
    k3_model_close(m);
    k3_tok_free(tok);
    return e->code;
}

int k3_cmd_serve(int argc, char **argv)
{
    k3_err e = { 0, "" };
    serve_args a;
    k3_options o;
    char **pass = malloc(((size_t)argc + 1) * sizeof *pass);
    int npass = 0;
    if (!pass) {
        fprintf(stderr, "k3 serve: error: out of memory\n");
        return K3_ERUNTIME;
    }
    if (parse(&a, argc, argv, pass, &npass, &e) == K3_OK && !a.help &&
        k3_options_parse(&o, npass, pass, &e) == K3_OK) {
        if (!o.model_dir)
            k3_fail(&e, K3_EINPUT, "serve: no MODEL_DIR given (see k3 serve --help)");
        else
            serve(&a, &o, &e);
    }
    free(pass);
    if (a.help && !e.code) {
        usage(stdout);
        return 0;
    }
    if (e.code)
        fprintf(stderr, "k3 serve: error: %s\n", e.msg);
    return e.code;
}
