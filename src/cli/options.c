/* options.c - see options.h. */
#include "cli/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

void k3_options_usage(void)
{
    fputs("usage: k3 MODEL_DIR (--prompt TEXT | --prompt-file FILE | --ids 1,2,3)"
          " [--gen N] [options]\n"
          "       k3 MODEL_DIR --chat [--system TEXT] [--history FILE.jsonl] [options]\n"
          "       k3 --tok DIR (--prompt TEXT | --prompt-file FILE) --tokenize\n"
          "       k3 --tok DIR --detokenize 1,2,3\n"
          "       k3 --tok DIR --render-chat CONVERSATION.json [--tokenize]\n"
          "       k3 pack-trunk MODEL_DIR TRUNK_DIR [--layers N] [--force] [--verify]\n"
          "\n"
          "Prompt and tokenizer:\n"
          "  --prompt TEXT           prompt text (special-token text stays ordinary text)\n"
          "  --prompt-file FILE      prompt text from a file (must be UTF-8; - reads stdin)\n"
          "  --prompt-special        let special-token text in the prompt become its ids\n"
          "  --ids LIST              prompt token ids, comma-separated (output: ids)\n"
          "  --tok DIR               tokenizer directory (default: MODEL_DIR)\n"
          "  --tokenize              print the prompt's token ids and exit (no model needed)\n"
          "  --detokenize LIST       print the text of token ids and exit\n"
          "  --render-chat FILE      print a conversation rendered in the chat format\n"
          "                          ({\"messages\", \"tools\", \"options\"});"
          " with --tokenize its ids\n"
          "\n"
          "Generation:\n"
          "  --gen N                 tokens to generate (default 16; in --chat, per reply,\n"
          "                          default 8192)\n"
          "  --stop STRING           stop when the text contains STRING (not printed);\n"
          "                          repeatable (up to 16); in --chat, on the reply text\n"
          "  --ignore-eos            keep generating past an end-of-message token\n"
          "  --max-context N         hard cap on prompt + generated tokens: a longer prompt,\n"
          "                          or --gen past it, is an error (exit 2); a chat reply\n"
          "                          stops at it. Also sizes the KV cache plan (default 4096)\n"
          "  --recompute             rerun the whole sequence every step (verification)\n"
          "  --incremental           incremental decoding with caches (the default)\n"
          "  --threads N             worker threads (default: all cores)\n"
          "\n"
          "Sampling (default greedy; the same --seed gives the same tokens on every\n"
          "machine, thread count and memory budget):\n"
          "  --temperature X         0 = greedy (default); > 0 samples\n"
          "  --top-k N               keep the N most likely tokens (0 = off, default)\n"
          "  --top-p X               keep the smallest set with probability >= X (1 = off)\n"
          "  --min-p X               drop tokens below X times the best one's probability\n"
          "                          (0 = off)\n"
          "  --repeat-penalty X      penalise the last --repeat-last-n tokens (1 = off)\n"
          "  --repeat-last-n N       the repeat-penalty window (default 64)\n"
          "  --seed N                random seed (default 0)\n"
          "\n"
          "State (the caches of a sequence, reusable across runs):\n"
          "  --load-state FILE       continue the sequence saved in FILE: the prompt (may be\n"
          "                          omitted) is appended to it; refused for another model\n"
          "  --save-state FILE       save the sequence after the run (prompt and every\n"
          "                          generated token); with --chat, the conversation\n"
          "\n"
          "Chat (reads user lines on stdin; \"/exit\" or end of input ends):\n"
          "  --chat                  interactive chat in the K3 chat format\n"
          "  --system TEXT           a system message first (not written to the history:\n"
          "                          give it again when replaying)\n"
          "  --history FILE.jsonl    replay the turns in FILE (if it exists), then append\n"
          "                          each new turn {\"role\",\"content\",\"reasoning_content\"}\n"
          "  --no-thinking           reply without a thinking channel\n"
          "  --effort LEVEL          thinking effort: low, high or max (default max)\n"
          "  --show-thinking         print the thinking (dimmed on a terminal)\n"
          "  --no-reuse              refeed the whole conversation every turn (verification\n"
          "                          and benchmarks: the replies must not change)\n"
          "\n"
          "Memory (never changes the answer, only the speed; GB = 2^30 bytes):\n"
          "  --preset NAME           ultra|laptop|desktop|workstation|server|max|auto\n"
          "  --budget-gb X           a total budget of X GB, split as a preset's is\n"
          "  --list-presets          show the presets and exit\n"
          "  --trunk-gb X            pin layers up to X GB; the rest stream from disk\n"
          "  --trunk-ring N          ring slots for streamed layers (default 2)\n"
          "  --cache-gb X            expert cache size (default: every expert resident)\n"
          "  --stream-embed          read embedding rows from disk per token\n"
          "  --stream-lm-head        stream lm_head through the ring\n"
          "  --no-mem-check          run even if the plan exceeds available memory\n"
          "  --plan                  print the memory plan (and index/bind timing) and exit\n"
          "  --trunk DIR             read layers and lm_head from DIR/trunk.bin, made by\n"
          "                          k3 pack-trunk MODEL_DIR DIR (one aligned read per layer)\n"
          "  --trunk-layers N        pin exactly the first N layers (diagnostics)\n"
          "  --cache-experts N       expert cache of exactly N experts (diagnostics)\n"
          "\n"
          "Output:\n"
          "  --out FILE              JSON report: ids, per-step seconds, peak RSS\n"
          "  --dump-logits FILE      float32 logits, one row per generated token\n"
          "  --dump-prompt-logits F  float32 logits, one row per prompt position\n"
          "  --dump-cache-trace DIR  write every expert request to DIR/trace.txt\n"
          "  --quiet                 print only the generated ids (no plan, no report)\n"
          "\n"
          "Diagnostics:\n"
          "  --layers N              bind and run only the first N layers\n"
          "  --help, --version\n"
          "\n"
          "Exit codes: 0 ok, 1 runtime or I/O failure, 2 bad usage or input (options,\n"
          "files, a malformed history line, a prompt over --max-context, a state file of\n"
          "another model), 3 does not fit the memory budget, 4 run invalid (a weight read\n"
          "failed).\n",
          stdout);
}

static int parse_gb(const char *opt, const char *s, double *out, k3_err *e)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !(v >= 0) || v > 1e6)
        return k3_fail(e, K3_EINPUT, "%s expects a number of GB >= 0, got \"%s\"", opt,
                       s ? s : "(nothing)");
    *out = v;
    return K3_OK;
}

static int parse_long(const char *opt, const char *s, long min, long max, long *out, k3_err *e)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < min || v > max)
        return k3_fail(e, K3_EINPUT, "%s expects an integer from %ld to %ld, got \"%s\"", opt, min,
                       max, s ? s : "(nothing)");
    *out = v;
    return K3_OK;
}

/* A number in [lo, hi], or (lo, hi] when lo_open. An open bound is checked on
 * the float the sampler will use (1e-300 is above 0 but rounds to 0). */
static int parse_real(const char *opt, const char *s, double lo, int lo_open, double hi,
                      double *out, k3_err *e)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !(v <= hi) || !(lo_open ? (float)v > lo : v >= lo))
        return k3_fail(e, K3_EINPUT, "%s expects a number in %c%g, %g], got \"%s\"", opt,
                       lo_open ? '(' : '[', lo, hi, s ? s : "(nothing)");
    *out = v;
    return K3_OK;
}

static int parse_seed(const char *opt, const char *s, unsigned long long *out, k3_err *e)
{
    char *end;
    errno = 0;
    unsigned long long v = s && *s != '-' ? strtoull(s, &end, 10) : 0;
    if (!s || !*s || *s == '-' || *end || errno)
        return k3_fail(e, K3_EINPUT, "%s expects an integer from 0 to 2^64-1, got \"%s\"", opt,
                       s ? s : "(nothing)");
    *out = v;
    return K3_OK;
}

/* Combinations that cannot work, found before anything is loaded. */
static int check_combinations(const k3_options *o, k3_err *e)
{
    if ((o->prompt != NULL) + (o->prompt_file != NULL) + (o->ids_csv != NULL) > 1)
        return k3_fail(e, K3_EINPUT, "give one prompt: --prompt, --prompt-file or --ids");
    if (o->chat && (o->prompt || o->prompt_file || o->ids_csv))
        return k3_fail(e, K3_EINPUT, "--chat reads the user's messages from stdin: drop "
                                     "--prompt, --prompt-file and --ids");
    if (!o->chat && (o->system || o->history || o->no_thinking || o->effort || o->show_thinking ||
                     o->no_reuse))
        return k3_fail(e, K3_EINPUT, "--system, --history, --no-thinking, --effort, "
                                     "--show-thinking and --no-reuse go with --chat");
    if (o->chat && (o->dump_logits || o->dump_prompt_logits))
        return k3_fail(e, K3_EINPUT, "--chat prints text: --dump-logits and "
                                     "--dump-prompt-logits do not apply");
    if (o->effort && strcmp(o->effort, "low") && strcmp(o->effort, "high") &&
        strcmp(o->effort, "max"))
        return k3_fail(e, K3_EINPUT, "--effort %s: expected low, high or max", o->effort);
    if (o->effort && o->no_thinking)
        return k3_fail(e, K3_EINPUT, "--effort sets the thinking effort: it cannot go with "
                                     "--no-thinking");
    if (o->recompute && (o->load_state || o->chat))
        return k3_fail(e, K3_EINPUT, "--recompute replays a sequence from scratch: it cannot "
                                     "go with --load-state or --chat");
    return K3_OK;
}

int k3_options_parse(k3_options *o, int argc, char **argv, k3_err *e)
{
    memset(o, 0, sizeof *o);
    o->gen = 16;
    o->max_context = K3_DEFAULT_MAX_CONTEXT;
    o->trunk_gb = -1;
    o->cache_gb = -1;
    o->budget_gb = -1;
    o->trunk_layers = -1;
    o->top_p = 1.0;
    o->repeat_penalty = 1.0;
    o->repeat_last_n = 64;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        long v;
#define VALUE()                                                                                  \
    do {                                                                                         \
        if (!next)                                                                               \
            return k3_fail(e, K3_EINPUT, "%s expects a value", a);                               \
        i++;                                                                                     \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            o->help = 1;
        } else if (!strcmp(a, "--version")) {
            o->version = 1;
        } else if (!strcmp(a, "--ids")) {
            VALUE();
            o->ids_csv = next;
        } else if (!strcmp(a, "--tok")) {
            VALUE();
            o->tok_dir = next;
        } else if (!strcmp(a, "--prompt")) {
            VALUE();
            o->prompt = next;
        } else if (!strcmp(a, "--prompt-file")) {
            VALUE();
            o->prompt_file = next;
        } else if (!strcmp(a, "--prompt-special")) {
            o->prompt_special = 1;
        } else if (!strcmp(a, "--tokenize")) {
            o->tokenize = 1;
        } else if (!strcmp(a, "--detokenize")) {
            VALUE();
            o->detokenize = next;
        } else if (!strcmp(a, "--tokenize-jsonl")) {
            VALUE();
            o->tokenize_jsonl = next;
        } else if (!strcmp(a, "--render-chat")) {
            VALUE();
            o->render_chat = next;
        } else if (!strcmp(a, "--gen")) {
            VALUE();
            if (parse_long(a, next, 0, 1L << 30, &v, e))
                return e->code;
            o->gen = v;
            o->gen_given = 1;
        } else if (!strcmp(a, "--temperature")) {
            VALUE();
            if (parse_real(a, next, 0, 0, 1e6, &o->temperature, e))
                return e->code;
        } else if (!strcmp(a, "--top-p")) {
            VALUE();
            if (parse_real(a, next, 0, 1, 1, &o->top_p, e))
                return e->code;
        } else if (!strcmp(a, "--min-p")) {
            VALUE();
            if (parse_real(a, next, 0, 0, 1, &o->min_p, e))
                return e->code;
        } else if (!strcmp(a, "--repeat-penalty")) {
            VALUE();
            if (parse_real(a, next, 0, 1, 1e6, &o->repeat_penalty, e))
                return e->code;
        } else if (!strcmp(a, "--top-k")) {
            VALUE();
            if (parse_long(a, next, 0, 1L << 30, &o->top_k, e))
                return e->code;
        } else if (!strcmp(a, "--repeat-last-n")) {
            VALUE();
            if (parse_long(a, next, 0, 1L << 30, &o->repeat_last_n, e))
                return e->code;
        } else if (!strcmp(a, "--seed")) {
            VALUE();
            if (parse_seed(a, next, &o->seed, e))
                return e->code;
        } else if (!strcmp(a, "--stop")) {
            VALUE();
            if (!*next)
                return k3_fail(e, K3_EINPUT, "--stop expects a non-empty string");
            if (o->nstop == K3_MAX_STOP)
                return k3_fail(e, K3_EINPUT, "--stop: at most %d stop strings", K3_MAX_STOP);
            o->stop[o->nstop++] = next;
        } else if (!strcmp(a, "--save-state")) {
            VALUE();
            o->save_state = next;
        } else if (!strcmp(a, "--load-state")) {
            VALUE();
            o->load_state = next;
        } else if (!strcmp(a, "--chat")) {
            o->chat = 1;
        } else if (!strcmp(a, "--system")) {
            VALUE();
            o->system = next;
        } else if (!strcmp(a, "--history")) {
            VALUE();
            o->history = next;
        } else if (!strcmp(a, "--no-thinking")) {
            o->no_thinking = 1;
        } else if (!strcmp(a, "--effort")) {
            VALUE();
            o->effort = next;
        } else if (!strcmp(a, "--show-thinking")) {
            o->show_thinking = 1;
        } else if (!strcmp(a, "--no-reuse")) {
            o->no_reuse = 1;
        } else if (!strcmp(a, "--recompute")) {
            o->recompute = 1;
        } else if (!strcmp(a, "--incremental")) {
            o->recompute = 0; /* the default; accepted for compatibility */
        } else if (!strcmp(a, "--ignore-eos")) {
            o->ignore_eos = 1;
        } else if (!strcmp(a, "--dump-logits")) {
            VALUE();
            o->dump_logits = next;
        } else if (!strcmp(a, "--dump-prompt-logits")) {
            VALUE();
            o->dump_prompt_logits = next;
        } else if (!strcmp(a, "--out")) {
            VALUE();
            o->out_json = next;
        } else if (!strcmp(a, "--layers")) {
            VALUE();
            if (parse_long(a, next, 1, 100000, &v, e))
                return e->code;
            o->layers = (int)v;
        } else if (!strcmp(a, "--threads")) {
            VALUE();
            if (parse_long(a, next, 1, 4096, &v, e))
                return e->code;
            o->threads = (int)v;
        } else if (!strcmp(a, "--preset")) {
            VALUE();
            o->preset = next;
        } else if (!strcmp(a, "--budget-gb")) {
            VALUE();
            if (parse_gb(a, next, &o->budget_gb, e))
                return e->code;
        } else if (!strcmp(a, "--list-presets")) {
            o->list_presets = 1;
        } else if (!strcmp(a, "--trunk-gb")) {
            VALUE();
            if (parse_gb(a, next, &o->trunk_gb, e))
                return e->code;
        } else if (!strcmp(a, "--cache-gb")) {
            VALUE();
            if (parse_gb(a, next, &o->cache_gb, e))
                return e->code;
        } else if (!strcmp(a, "--trunk-ring")) {
            VALUE();
            if (parse_long(a, next, 1, 64, &v, e))
                return e->code;
            o->trunk_ring = (int)v;
        } else if (!strcmp(a, "--trunk-layers")) {
            VALUE();
            if (parse_long(a, next, 0, 100000, &v, e))
                return e->code;
            o->trunk_layers = v;
        } else if (!strcmp(a, "--cache-experts")) {
            VALUE();
            if (parse_long(a, next, 1, 1L << 30, &v, e))
                return e->code;
            o->cache_experts = v;
        } else if (!strcmp(a, "--stream-embed")) {
            o->stream_embed = 1;
        } else if (!strcmp(a, "--stream-lm-head")) {
            o->stream_lm_head = 1;
        } else if (!strcmp(a, "--max-context")) {
            VALUE();
            if (parse_long(a, next, 1, 1L << 24, &v, e))
                return e->code;
            o->max_context = v;
            o->max_context_given = 1;
        } else if (!strcmp(a, "--no-mem-check")) {
            o->no_mem_check = 1;
        } else if (!strcmp(a, "--plan")) {
            o->plan_only = 1;
        } else if (!strcmp(a, "--trunk")) {
            VALUE();
            o->trunk_dir = next;
        } else if (!strcmp(a, "--dump-cache-trace")) {
            VALUE();
            o->cache_trace_dir = next;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            o->quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            return k3_fail(e, K3_EINPUT, "unknown option %s (see k3 --help)", a);
        } else if (!o->model_dir) {
            o->model_dir = a;
        } else {
            return k3_fail(e, K3_EINPUT, "unexpected argument \"%s\": only one MODEL_DIR", a);
        }
#undef VALUE
    }
    return check_combinations(o, e);
}

int k3_parse_ids(const char *csv, uint32_t **ids, size_t *n, k3_err *e)
{
    size_t cap = 1;
    for (const char *p = csv; *p; p++)
        cap += *p == ',';
    uint32_t *v = k3_malloc(e, cap * sizeof *v, "ids");
    if (!v)
        return e->code;
    size_t k = 0;
    const char *p = csv;
    for (;;) {
        const char *start = p;
        unsigned long long x = 0;
        while (*p >= '0' && *p <= '9' && x <= 0xFFFFFFFFull)
            x = x * 10 + (unsigned long long)(*p++ - '0');
        if (p == start || x > 0xFFFFFFFFull || (*p && *p != ',')) {
            const char *end = strchr(start, ',');
            int len = end ? (int)(end - start) : (int)strlen(start);
            free(v);
            return k3_fail(e, K3_EINPUT, "token id list: entry %zu \"%.*s\" is not a token id",
                           k + 1, len > 40 ? 40 : len, start);
        }
        v[k++] = (uint32_t)x;
        if (!*p)
            break;
        p++;
    }
    *ids = v;
    *n = k;
    return K3_OK;
}

int k3_options_model(const k3_options *o, k3_model_opts *mo, k3_err *e)
{
    k3_model_opts_default(mo);
    mo->n_layers = o->layers;
    if (o->preset && k3_preset_budget(o->preset, &mo->budget_gb) != 0)
        return k3_fail(e, K3_EINPUT, "--preset %s: expected ultra, laptop, desktop, workstation, "
                                     "server, max or auto", o->preset);
    if (o->preset && o->budget_gb >= 0)
        return k3_fail(e, K3_EINPUT, "--preset and --budget-gb both set a total budget: give one");
    if (o->budget_gb >= 0)
        mo->budget_gb = o->budget_gb;
    if (o->trunk_gb >= 0 || o->cache_gb >= 0)
        mo->budget_gb = -1; /* explicit sizes win over a preset */
    mo->trunk_gb = o->trunk_gb;
    mo->cache_gb = o->cache_gb;
    mo->trunk_layers = (int)o->trunk_layers;
    mo->cache_experts = o->cache_experts;
    mo->trunk_ring = o->trunk_ring;
    mo->stream_embed = o->stream_embed;
    mo->stream_lm_head = o->stream_lm_head;
    mo->max_context = o->max_context;
    mo->no_mem_check = o->no_mem_check;
    mo->trunk_dir = o->trunk_dir;
    return K3_OK;
}
