/* serve_cmd.c - see serve_cmd.h.
 *
 * The server's options are one table (cli/opt_table.h); the memory
 * options are the main command's table (k3_memory_opt_table), so they are
 * spelt, checked and documented once. */
#include "cli/serve_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/model_dir.h"
#include "cli/options.h"
#include "gen/draft.h"
#include "k3/k3.h"
#include "k3/tokenizer.h"
#include "model/model.h"
#include "model/prefix_cache.h"
#include "server/engine.h"
#include "server/server.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"
#include "util/os_net.h"

/* --alias may be given this many times. */
#define MAX_ALIASES 8

/* A chat answer's length when neither the request (max_tokens) nor the
 * model's generation_config.json (max_new_tokens) gives one. */
#define DEFAULT_ANSWER_TOKENS 2048

/* The default answer length: generation_config.json's max_new_tokens when
 * the file has one (a positive integer), else DEFAULT_ANSWER_TOKENS; at
 * most cap (--max-tokens). The file is optional (MODEL.md §2.1: its
 * max_length, the release's context, is already bounded by --max-context);
 * a file that is not JSON, or a max_new_tokens that is not a positive
 * integer, is exit 2. */
static int default_tokens(const char *model_dir, long cap, long *out, k3_err *e)
{
    char path[4096], jerr[256];
    size_t len;
    *out = DEFAULT_ANSWER_TOKENS;
    if (snprintf(path, sizeof path, "%s/generation_config.json", model_dir) >= (int)sizeof path)
        return k3_fail(e, K3_EINPUT, "%s: the path is too long", model_dir);
    if (access(path, F_OK) == 0) {
        char *text = k3_read_small_file(e, path, 1 << 20, &len);
        if (!text)
            return e->code;
        k3_json_doc *doc = k3_json_parse(text, len, jerr, sizeof jerr);
        free(text);
        if (!doc)
            return k3_fail(e, K3_EINPUT, "%s: not valid JSON (%s)", path, jerr);
        const k3_json *root = k3_json_root(doc);
        const k3_json *v = root->type == K3J_OBJECT ? k3_json_get(root, "max_new_tokens") : NULL;
        if (v && v->type != K3J_NULL) {
            if (v->type != K3J_NUMBER || !v->is_int || v->integer < 1)
                k3_fail(e, K3_EINPUT, "%s: max_new_tokens must be a positive integer", path);
            else
                *out = v->integer < (int64_t)cap ? (long)v->integer : cap;
        }
        k3_json_free(doc);
    }
    if (*out > cap)
        *out = cap;
    return e->code;
}

typedef struct {
    const char *model_dir, *host, *tok_dir, *api_key, *cors;
    const char *alias[MAX_ALIASES];
    size_t naliases;
    /* Whole numbers too are read as numbers (strtod): "1e6" is a size. */
    double port, max_body, max_tokens, max_queue, timeout, header_timeout, max_per_client;
    double exit_after, keep_alive_s, keep_alive_requests;
    double prefix_gb, prefix_disk_gb; /* < 0: the default */
    const char *prefix_dir;
    int port_given, threads, quiet, help, list_options, spec, draft_topk, parallel;
    int plan, no_webui;
    const char *draft;
    k3_memory_opts memory;
} serve_args;

#define S serve_args
#define WHOLE(N, M, f, L, U, H) K3_OPT_REAL_(N, M, S, f, L, U, K3_OPTF_WHOLE, H)

static const k3_opt serve_table[] = {
    K3_OPT_TEXT_("usage: k3 serve MODEL_DIR [--port N] [options]\n"
                 "\n"
                 "An OpenAI-compatible HTTP server for the model: POST /v1/chat/completions,\n"
                 "POST /v1/completions (both with \"stream\": true as server-sent events),\n"
                 "GET /v1/models, POST /tokenize, POST /detokenize, GET /metrics, GET /health.\n"
                 "Up to --parallel answers are generated together; the others wait in a\n"
                 "queue. Connections are kept alive (HTTP/1.1) between requests.\n"
                 "\n"),
    { .kind = K3_OPT_REAL, .name = "--port", .metavar = "N", .off = offsetof(S, port), .lo = 0,
      .hi = 65535, .flags = K3_OPTF_WHOLE | K3_OPTF_GIVEN, .off2 = offsetof(S, port_given),
      .help = "TCP port (default 8080; 0: any free port, the log\n"
              "line names it)" },
    K3_OPT_STR_("--host", "ADDR", S, host,
                "address or host name to listen on (default 127.0.0.1:\n"
                "this machine only; 0.0.0.0 or :: exposes the server)"),
    K3_OPT_STR_("--api-key", "KEY", S, api_key,
                "require \"Authorization: Bearer KEY\" on every request\n"
                "but /health and /v1/models (default: $K3_API_KEY)"),
    { .kind = K3_OPT_STRS, .name = "--alias", .metavar = "NAME", .off = offsetof(S, alias),
      .off2 = offsetof(S, naliases), .max = MAX_ALIASES,
      .help = "another name requests may give as \"model\" (the\n"
              "served name is MODEL_DIR's last part); repeatable" },
    K3_OPT_STR_("--cors", "ORIGIN", S, cors,
                "Access-Control-Allow-Origin of every answer (default *\n"
                "on a loopback host, none otherwise; \"\" for none)"),
    K3_OPT_STR_("--tok", "DIR", S, tok_dir, "tokenizer directory (default: MODEL_DIR)"),
    WHOLE("--max-body", "BYTES", max_body, 1, 1 << 30,
          "largest request body (default 8388608; more is 413)"),
    WHOLE("--max-tokens", "N", max_tokens, 1, 1 << 24,
          "largest max_tokens a request may ask for, and the\n"
          "chat default (default 4096; the context caps it too)"),
    WHOLE("--max-queue", "N", max_queue, 0, 4096,
          "requests that may wait behind the running one\n"
          "(default 16; more are answered 503)"),
    K3_OPT_REAL_("--timeout", "SECONDS", S, timeout, 0.01, 86400, 0,
                 "time a client has to send its request, and a write\n"
                 "to it may stall, before it is dropped (default 30)"),
    K3_OPT_REAL_("--header-timeout", "SECONDS", S, header_timeout, 0.01, 86400, 0,
                 "time from connecting to the end of the request head\n"
                 "(default 5, at most --timeout); a body must then keep\n"
                 "up 256 KiB/s on average"),
    WHOLE("--max-per-client", "N", max_per_client, 1, 4096,
          "connections one client address may hold at once\n"
          "(default 16; IPv6: per /64; more are answered 503)"),
    K3_OPT_REAL_("--keep-alive-s", "SECONDS", S, keep_alive_s, 0, 3600, 0,
                 "time a connection may wait idle for its next request\n"
                 "(HTTP keep-alive; default 5; 0: every answer closes\n"
                 "its connection)"),
    WHOLE("--keep-alive-requests", "N", keep_alive_requests, 1, 1000000,
          "requests one connection may carry (default 100)"),
    K3_OPT_REAL_("--exit-after", "SECONDS", S, exit_after, 0.01, 1e7, 0,
                 "stop by itself after this long (for tests)"),
    K3_OPT_INT_GIVEN("--max-context", "N", S, memory.max_context, memory.max_context_given, 1,
                     1L << 24, "prompt + answer tokens (default 4096)"),
    K3_OPT_INT_("--threads", "N", S, threads, 1, 4096, "worker threads (default: all cores)"),
    K3_OPT_INT_AUTO("--parallel", "N", S, parallel, 1, 256,
                    "slots: answers generated together, one pass over the\n"
                    "weights per step (default auto: what the memory plan\n"
                    "affords, up to 4); more than the plan allows is exit 3"),
    K3_OPT_INT_AUTO("--spec", "N", S, spec, 0, 16,
                    "speculative decoding: the most drafts per step a request\n"
                    "may ask for (\"spec\") and what one without gets; the\n"
                    "same answers. 0: off; default auto (up to 8, where it pays)"),
    K3_OPT_STR_("--draft", "NAME", S, draft, "the drafter: ngram (default) or self (k3 --help)"),
    K3_OPT_INT_("--draft-topk", "K", S, draft_topk, 1, 1024,
                "routed experts per token of --draft self"),
    K3_OPT_REAL_("--prefix-cache-gb", "GB", S, prefix_gb, 0, 1e6, 0,
                 "RAM for prompt snapshots that later prompts start\n"
                 "from (docs/SERVE.md); default: what --budget-gb\n"
                 "leaves after the plan, 2 without one; 0: none"),
    K3_OPT_STR_("--prefix-cache-dir", "DIR", S, prefix_dir,
                "snapshots evicted from RAM spill here, and are found\n"
                "again after a restart (and by k3 --chat)"),
    K3_OPT_REAL_("--prefix-cache-disk-gb", "GB", S, prefix_disk_gb, 0, 1e7, 0,
                 "bound of --prefix-cache-dir (default 16)"),
    K3_OPT_FLAG_AS("--quiet", "-q", S, quiet, "no per-request log lines"),
    K3_OPT_FLAG_("--no-webui", S, no_webui,
                 "no chat page at / and /chat (default: a chat page in\n"
                 "the browser, talking to /v1/chat/completions)"),
    K3_OPT_FLAG_("--plan", S, plan,
                 "print the slots and the memory plan (each slot's cost:\n"
                 "its \"per sequence\" line) and exit; 3 if it does not fit"),
    { .kind = K3_OPT_TABLE, .off = offsetof(S, memory), .sub = k3_memory_opt_table,
      .help = "memory:", .metavar = "(as for k3 MODEL_DIR; see k3 --help)" },
    K3_OPT_FLAG_AS("--help", "-h", S, help, NULL),
    K3_OPT_FLAG_("--list-options", S, list_options, NULL),
    K3_OPT_TEXT_("\n"
                 "Request fields, extensions (thinking, reasoning_effort, top_k, min_p,\n"
                 "repetition_penalty), responses and errors: docs/SERVE.md.\n"),
    { .kind = K3_OPT_END },
};

static const k3_opt_cmd serve_cmd = {
    .opts = serve_table,
    .col = 23,
    .prefix = "",
    .command = "k3 serve",
    .extra = ": only one MODEL_DIR",
    .pos = { offsetof(S, model_dir) },
    .npos = 1,
};

#undef WHOLE
#undef S

static int parse(serve_args *a, int argc, char **argv, k3_err *e)
{
    memset(a, 0, sizeof *a);
    a->max_body = 8 << 20;
    a->max_tokens = 4096;
    a->max_queue = 16;
    a->timeout = 30;
    a->header_timeout = 5;
    a->max_per_client = 16;
    a->keep_alive_s = 5;
    a->keep_alive_requests = 100;
    a->host = "127.0.0.1";
    a->port = 8080;
    k3_memory_opts_default(&a->memory);
    a->spec = K3_OPT_AUTO;
    a->draft_topk = -1;
    a->parallel = K3_OPT_AUTO;
    a->prefix_gb = -1;
    a->prefix_disk_gb = -1;
    if (k3_opt_parse(&serve_cmd, a, argc, argv, e))
        return e->code;
    if (a->prefix_disk_gb >= 0 && !a->prefix_dir)
        return k3_fail(e, K3_EINPUT, "serve: --prefix-cache-disk-gb goes with --prefix-cache-dir");
    /* draft_self.c: the self drafter's drafts are forward passes of its own
     * state, one answer at a time, outside the slots' shared pass: with N
     * slots that is N more passes a step, which cannot pay (and a second
     * state per slot). The ngram drafter costs no pass: it goes with any. */
    if (a->parallel > 1 && a->draft && !strcmp(a->draft, "self"))
        return k3_fail(e, K3_EINPUT, "serve: --draft self needs --parallel 1 (its drafts are "
                       "forward passes of each answer's own, outside the slots' shared pass, "
                       "so with several slots they cannot pay; --draft ngram goes with any)");
    if (a->draft && strcmp(a->draft, "ngram") != 0 && strcmp(a->draft, "self") != 0)
        return k3_fail(e, K3_EINPUT, "serve: --draft %s: the drafters are ngram and self",
                       a->draft);
    if (a->draft_topk >= 0 && !(a->draft && !strcmp(a->draft, "self")))
        return k3_fail(e, K3_EINPUT, "serve: --draft-topk goes with --draft self");
    if (a->memory.draft_trunk && !(a->draft && !strcmp(a->draft, "self")))
        return k3_fail(e, K3_EINPUT, "serve: --draft-trunk goes with --draft self");
    if (a->spec == K3_OPT_AUTO)
        a->spec = K3_SPEC_AUTO;
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

/* Slots when --parallel is auto: the most of 4, 2, 1 whose plan (each
 * slot's KDA state, MLA cache, speculative step and two marks counted)
 * fits; one with --draft self. Plans only: nothing is loaded. */
static int auto_parallel(const char *dir, k3_model_opts *mo, k3_err *e)
{
    for (int n = 4; n > 1 && !mo->self_draft; n /= 2) {
        k3_model_opts po = *mo;
        k3_model *pm = NULL;
        k3_err why = { 0, "" };
        po.sequences = n;
        po.plan_only = 1;
        if (k3_model_open(&pm, dir, &po, &why) == K3_OK) {
            k3_model_close(pm);
            return n;
        }
        k3_model_close(pm);
        if (why.code != K3_EBUDGET) {
            *e = why;
            return 0;
        }
    }
    return 1;
}

/* The prefix cache's RAM in bytes: --prefix-cache-gb (counted in the
 * plan's total as held bytes), else what the budget leaves after the plan,
 * else 2 GiB without a budget. */
static double prefix_bytes(const serve_args *a, const k3_model *m, const k3_model_opts *mo)
{
    if (a->prefix_gb >= 0)
        return a->prefix_gb * 1073741824.0;
    if (mo->budget_gb < 0)
        return 2 * 1073741824.0;
    double left = mo->budget_gb * 1073741824.0 - (double)m->plan.total;
    return left > 0 ? left : 0;
}

/* serve --plan's prefix cache lines: its RAM and what a snapshot costs. */
static void print_prefix_plan(const serve_args *a, const k3_model *m, const k3_model_opts *mo,
                              FILE *f)
{
    double b = prefix_bytes(a, m, mo);
    uint64_t per = k3_prefix_snapshot_bytes(m, mo->max_context > 0 ? mo->max_context
                                                                    : K3_DEFAULT_MAX_CONTEXT);
    fprintf(f, "prefix cache:   %.3f GiB RAM%s (%s); a snapshot of the full context "
               "takes %.3f GiB\n",
            b / 1073741824.0, a->prefix_dir ? " + disk tier" : "",
            a->prefix_gb > 0 ? "--prefix-cache-gb, in the total above"
            : a->prefix_gb == 0 ? "off"
            : mo->budget_gb < 0 ? "default without a budget"
                                : "what the budget leaves after the plan",
            (double)per / 1073741824.0);
}

static int serve(const serve_args *a, k3_err *e)
{
    k3_model_opts mo;
    k3_model *m = NULL;
    k3_tokenizer *tok = NULL;
    char name[256];
    base_name(a->model_dir, name, sizeof name);
    if (k3_cli_check_dir(a->model_dir, "serve: MODEL_DIR", e) ||
        (a->tok_dir && k3_cli_check_dir(a->tok_dir, "serve: --tok", e)))
        return e->code;
    k3_server_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.host = a->host;
    cfg.port = (int)a->port;
    cfg.model_name = name;
    cfg.aliases = a->alias;
    cfg.naliases = a->naliases;
    cfg.api_key = a->api_key ? a->api_key : getenv("K3_API_KEY");
    if (cfg.api_key && !*cfg.api_key)
        cfg.api_key = NULL;
    cfg.cors = a->cors;
    cfg.max_body = (size_t)a->max_body;
    cfg.max_tokens = (long)a->max_tokens;
    if (default_tokens(a->model_dir, cfg.max_tokens, &cfg.default_tokens, e))
        return e->code;
    cfg.max_queue = (size_t)a->max_queue;
    cfg.timeout = a->timeout;
    cfg.header_timeout = a->header_timeout < a->timeout ? a->header_timeout : a->timeout;
    cfg.max_per_client = (int)a->max_per_client;
    cfg.keep_alive_s = a->keep_alive_s;
    cfg.keep_alive_requests = (int)a->keep_alive_requests;
    cfg.exit_after = a->exit_after;
    cfg.context = a->memory.max_context;
    cfg.threads = a->threads;
    cfg.quiet = a->quiet;
    cfg.no_webui = a->no_webui;
    cfg.spec = a->spec;
    cfg.draft = a->draft;
    cfg.draft_topk = a->draft_topk;
    /* A follower of an op stream (k3-mpi's ranks but 0, server/engine.h)
     * serves nothing: it opens the model as the leader does and runs the
     * leader's model operations. --plan only prints the plan. */
    int follower = k3_engine_is_follower(), port = 0;
    int lfd = follower || a->plan ? -1 : k3_server_listen(&cfg, &port, e);
    if (lfd < 0 && !follower && !a->plan)
        return e->code;
    int64_t slots = 0;
    int self_draft = a->draft && !strcmp(a->draft, "self");
    if (k3_tok_load(&tok, a->tok_dir ? a->tok_dir : a->model_dir, e) == K3_OK &&
        k3_options_model(&a->memory, &mo, e) == K3_OK &&
        /* each slot: its state, a speculative step, a mark at the end of its
         * last prompt and one where that prompt departed (answer.h) */
        (mo.spec = a->spec, mo.self_draft = self_draft, mo.marks = 2, 1) &&
        /* an explicit prefix cache is the plan's to count (it never pushes
         * the trunk or the experts out); the default takes what is left */
        (mo.held_bytes = a->prefix_gb > 0 ? (uint64_t)(a->prefix_gb * 1073741824.0) : 0, 1) &&
        (cfg.parallel = a->parallel > 0 ? a->parallel : auto_parallel(a->model_dir, &mo, e)) >
            0 &&
        /* every process serves the leader's slot count (engine.h) */
        (slots = cfg.parallel, k3_engine_agree(&slots, e) == K3_OK) &&
        (cfg.parallel = (int)slots, mo.sequences = cfg.parallel, mo.plan_only = a->plan, 1) &&
        k3_model_open(&m, a->model_dir, &mo, e) == K3_OK &&
        k3_tok_vocab_size(tok) > k3_model_vocab(m))
        k3_fail(e, K3_EINPUT, "the tokenizer has %u ids but the model only %u: wrong --tok?",
                k3_tok_vocab_size(tok), k3_model_vocab(m));
    if (e->code) {
        if (lfd >= 0)
            k3_sock_close(lfd);
    } else if (follower) {
        k3_engine_follow(m, e);
    } else if (a->plan) {
        printf("k3 serve: %d slot%s; the memory plan:\n", cfg.parallel,
               cfg.parallel == 1 ? "" : "s");
        k3_model_print_plan(m, stdout);
        print_prefix_plan(a, m, &mo, stdout);
    } else {
        if (!cfg.quiet) { /* what the slots cost: the plan's "per sequence" line */
            fprintf(stderr, "k3 serve: %d slot%s; the memory plan:\n", cfg.parallel,
                    cfg.parallel == 1 ? "" : "s");
            k3_model_print_plan(m, stderr);
        }
        /* Image parts: encoded with the checkpoint's tower per request, which
         * may take what the budget leaves beside the text plan (server/images.h). */
        cfg.vision_dir = a->model_dir;
        cfg.prefix_bytes = prefix_bytes(a, m, &mo);
        cfg.prefix_dir = a->prefix_dir;
        cfg.prefix_disk_bytes = (a->prefix_disk_gb >= 0 ? a->prefix_disk_gb : 16) * 1073741824.0;
        /* (an explicit cache is in plan.total; the default one shares what
         * the budget leaves with an image request's transient encoding) */
        cfg.image_room = mo.budget_gb < 0 ? -1.0
                         : mo.budget_gb * 1073741824.0 - (double)m->plan.total;
        cfg.no_mem_check = a->memory.no_mem_check;
        k3_server_run(&cfg, lfd, port, m, tok, e);
        k3_err stop = { 0, "" };
        if (k3_engine_stop(&stop) && !e->code)
            *e = stop;
    }
    k3_model_close(m);
    k3_tok_free(tok);
    return e->code;
}

int k3_cmd_serve(int argc, char **argv)
{
    k3_err e = { 0, "" };
    serve_args a;
    if (parse(&a, argc, argv, &e) != K3_OK)
        ; /* reported below */
    else if (a.help)
        k3_opt_help(&serve_cmd, stdout);
    else if (a.list_options)
        k3_opt_list(&serve_cmd, stdout);
    else if (!a.model_dir)
        k3_fail(&e, K3_EINPUT, "no MODEL_DIR given (see k3 serve --help)");
    else
        serve(&a, &e);
    if (e.code)
        fprintf(stderr, "k3 serve: error: %s\n", e.msg);
    return e.code;
}
