/* options.c - see options.h. */
#include "cli/options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

void k3_options_usage(void)
{
    fputs("usage: k3 MODEL_DIR --ids 1,2,3 [--gen N] [options]\n"
          "\n"
          "Generation:\n"
          "  --ids LIST              prompt token ids, comma-separated\n"
          "  --gen N                 tokens to generate (default 16)\n"
          "  --ignore-eos            keep generating past an end-of-message token\n"
          "  --recompute             rerun the whole sequence every step (verification)\n"
          "  --incremental           incremental decoding with caches (the default)\n"
          "  --threads N             worker threads (default: all cores)\n"
          "\n"
          "Output:\n"
          "  --out FILE              JSON report: ids, per-step seconds, peak RSS\n"
          "  --dump-logits FILE      float32 logits, one row per generated token\n"
          "  --dump-prompt-logits F  float32 logits, one row per prompt position\n"
          "  --quiet                 print only the generated ids\n"
          "\n"
          "Diagnostics:\n"
          "  --layers N              bind and run only the first N layers\n"
          "  --help, --version\n"
          "\n"
          "Exit codes: 0 ok, 1 runtime or I/O failure, 2 bad usage or input,\n"
          "3 does not fit the memory budget, 4 run invalid (a weight read failed).\n",
          stdout);
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
