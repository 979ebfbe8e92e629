/* options.c - see options.h. */
#include "cli/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

void k3_options_usage(void)
{
    fputs("usage: k3 MODEL_DIR (--prompt TEXT | --prompt-file FILE | --ids 1,2,3) [--gen N] [options]\n"
          "       k3 --tok DIR (--prompt TEXT | --prompt-file FILE) --tokenize\n"
          "       k3 --tok DIR --detokenize 1,2,3\n"
          "       k3 --tok DIR --render-chat CONVERSATION.json [--tokenize]\n"
          "       k3 pack-trunk MODEL_DIR TRUNK_DIR [--layers N] [--force] [--verify]\n"
          "\n"
          "Prompt and tokenizer:\n"
          "  --prompt TEXT           prompt text (special-token text stays ordinary text)\n"
          "  --prompt-file FILE      prompt text from a file (must be UTF-8)\n"
          "  --prompt-special        let special-token text in the prompt become its ids\n"
          "  --ids LIST              prompt token ids, comma-separated (output: ids)\n"
          "  --tok DIR               tokenizer directory (default: MODEL_DIR)\n"
          "  --tokenize              print the prompt's token ids and exit (no model needed)\n"
          "  --detokenize LIST       print the text of token ids and exit\n"
          "  --render-chat FILE      print a conversation rendered in the chat format\n"
          "                          ({\"messages\", \"tools\", \"options\"}); with --tokenize its ids\n"
          "\n"
          "Generation:\n"
          "  --gen N                 tokens to generate (default 16)\n"
          "  --ignore-eos            keep generating past an end-of-message token\n"
          "  --recompute             rerun the whole sequence every step (verification)\n"
          "  --incremental           incremental decoding with caches (the default)\n"
          "  --threads N             worker threads (default: all cores)\n"
          "\n"
          "Memory (never changes the answer, only the speed; GB = 2^30 bytes):\n"
          "  --preset NAME           ultra|laptop|desktop|workstation|server|max|auto\n"
          "  --list-presets          show the presets and exit\n"
          "  --trunk-gb X            pin layers up to X GB; the rest stream from disk\n"
          "  --trunk-ring N          ring slots for streamed layers (default 2)\n"
          "  --cache-gb X            expert cache size (default: every expert resident)\n"
          "  --stream-embed          read embedding rows from disk per token\n"
          "  --stream-lm-head        stream lm_head through the ring\n"
          "  --max-context N         positions to plan the KV cache for (default 4096)\n"
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
          "Exit codes: 0 ok, 1 runtime or I/O failure, 2 bad usage or input,\n"
          "3 does not fit the memory budget, 4 run invalid (a weight read failed).\n",
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

int k3_options_parse(k3_options *o, int argc, char **argv, k3_err *e)
{
    memset(o, 0, sizeof *o);
    o->gen = 16;
    o->trunk_gb = -1;
    o->cache_gb = -1;
    o->trunk_layers = -1;
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
    if ((o->prompt != NULL) + (o->prompt_file != NULL) + (o->ids_csv != NULL) > 1)
        return k3_fail(e, K3_EINPUT, "give one prompt: --prompt, --prompt-file or --ids");
    return K3_OK;
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
            return k3_fail(e, K3_EINPUT, "token id list: entry %zu \"%.*s\" is not a token id", k + 1,
                           len > 40 ? 40 : len, start);
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
