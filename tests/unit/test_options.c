/* test_options.c - the option tables (cli/opt_table.h) and k3's own
 * (cli/options.h): every kind of entry parses what it should and refuses,
 * with its message, what it should not; --help lays out the table; the
 * command line's cross-option rules; "did you mean" for a mistyped option
 * and llama.cpp's short spellings (aliases). The CLI is not part of libk3.a, so
 * its three sources are compiled into this test. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli/opt_table.c"
#include "cli/options.c"
#include "cli/suggest.c"

typedef struct {
    int id;
} inner;

typedef struct {
    const char *pos1, *pos2;
    int flag, off_flag, i, i_given;
    long l;
    double real, open, whole, gb;
    unsigned long long seed;
    const char *str;
    const char *many[3];
    size_t nmany;
    inner sub;
} toy;

static const k3_opt toy_sub[] = {
    K3_OPT_INT_("--id", "N", inner, id, 1, 9, "an inner id"),
    { .kind = K3_OPT_END },
};

static const k3_opt toy_table[] = {
    K3_OPT_TEXT_("usage: toy A [B]\n"),
    K3_OPT_FLAG_AS("--flag", "-f", toy, flag, "a flag"),
    { .kind = K3_OPT_FLAG, .name = "--no-off", .off = offsetof(toy, off_flag), .set = 0,
      .help = "clears off_flag" },
    K3_OPT_INT_GIVEN("--int", "N", toy, i, i_given, -5, 5, "an int\nin [-5, 5]"),
    K3_OPT_INT_("--long", "N", toy, l, 0, 1L << 30, "a long"),
    K3_OPT_REAL_("--real", "X", toy, real, 0, 1, 0, "closed"),
    K3_OPT_REAL_("--open", "X", toy, open, 0, 1, K3_OPTF_LO_OPEN, "open below"),
    K3_OPT_REAL_("--whole", "N", toy, whole, 0, 65535, K3_OPTF_WHOLE, "whole"),
    K3_OPT_REAL_("--gb", "X", toy, gb, 0, 1e6, K3_OPTF_GB, "gigabytes"),
    { .kind = K3_OPT_SEED, .name = "--seed", .metavar = "N", .off = offsetof(toy, seed),
      .help = "a seed" },
    K3_OPT_STR_("--a-very-long-option-name", "VALUE", toy, str, "wraps to the next line"),
    { .kind = K3_OPT_STRS, .name = "--many", .metavar = "S", .off = offsetof(toy, many),
      .off2 = offsetof(toy, nmany), .max = 3, .help = "repeatable" },
    K3_OPT_FLAG_("--hidden", toy, flag, NULL),
    { .kind = K3_OPT_TABLE, .off = offsetof(toy, sub), .sub = toy_sub },
    { .kind = K3_OPT_TABLE, .off = offsetof(toy, sub), .sub = toy_sub, .help = "also:",
      .metavar = "(the tail)" },
    { .kind = K3_OPT_END },
};

static const k3_opt_cmd toy_cmd = {
    .opts = toy_table,
    .col = 12,
    .prefix = "toy: ",
    .command = "toy",
    .extra = ": two at most",
    .pos = { offsetof(toy, pos1), offsetof(toy, pos2) },
    .npos = 2,
};

/* Parses the words of line (split at spaces; "''" is an empty word) into
 * *t; returns the status, the message in msg. */
static int parse_line(toy *t, const char *line, char *msg, size_t cap)
{
    char buf[512], *argv[32];
    int argc = 0;
    argv[argc++] = "toy";
    snprintf(buf, sizeof buf, "%s", line);
    for (char *w = strtok(buf, " "); w && argc < 32; w = strtok(NULL, " "))
        argv[argc++] = strcmp(w, "''") ? w : "";
    memset(t, 0, sizeof *t);
    t->off_flag = 1;
    k3_err e = { 0, "" };
    int rc = k3_opt_parse(&toy_cmd, t, argc, argv, &e);
    snprintf(msg, cap, "%s", e.msg);
    return rc;
}

/* line is refused (exit 2) with exactly msg. */
static void refused(const char *line, const char *msg)
{
    toy t;
    char got[256];
    int rc = parse_line(&t, line, got, sizeof got);
    CHECK(rc == K3_EINPUT && !strcmp(got, msg), "\"%s\": rc %d, \"%s\", expected \"%s\"", line,
          rc, got, msg);
}

static void test_kinds(void)
{
    toy t;
    char msg[256];
    int rc = parse_line(&t,
                        "A -f --no-off --int -5 --long 1073741824 --real 1 --open 1e-30 "
                        "--whole 1e3 --gb 0 --seed 18446744073709551615 "
                        "--a-very-long-option-name -x --many a --many b --id 9 B",
                        msg, sizeof msg);
    CHECK(rc == K3_OK, "a good line: %s", msg);
    CHECK(!strcmp(t.pos1, "A") && !strcmp(t.pos2, "B"), "positionals in order");
    CHECK(t.flag == 1 && t.off_flag == 0, "flags: %d %d", t.flag, t.off_flag);
    CHECK(t.i == -5 && t.i_given == 1, "int %d given %d", t.i, t.i_given);
    CHECK(t.l == 1L << 30, "long %ld", t.l);
    CHECK(t.real == 1 && t.open == 1e-30 && t.whole == 1000 && t.gb == 0, "reals");
    CHECK(t.seed == 18446744073709551615ull, "seed %llu", t.seed);
    CHECK(!strcmp(t.str, "-x"), "a value may start with -: %s", t.str);
    CHECK(t.nmany == 2 && !strcmp(t.many[0], "a") && !strcmp(t.many[1], "b"), "repeatable");
    CHECK(t.sub.id == 9, "a sub-table's entry lands at its offset: %d", t.sub.id);
    rc = parse_line(&t, "-", msg, sizeof msg);
    CHECK(rc == K3_OK && !strcmp(t.pos1, "-") && !t.i_given, "\"-\" is positional, no given");

    refused("--nope", "toy: unknown option --nope (did you mean --open? see toy --help)");
    refused("--zzzzzz", "toy: unknown option --zzzzzz (see toy --help)");
    refused("--int=3", "toy: unknown option --int=3 (did you mean --int? see toy --help)");
    refused("--flg", "toy: unknown option --flg (did you mean --flag? see toy --help)");
    refused("--x", "toy: unknown option --x (see toy --help)");
    refused("A B C", "toy: unexpected argument \"C\": two at most");
    refused("--int", "--int expects a value");
    refused("--many", "--many expects a value");
    refused("--int 6", "--int expects an integer from -5 to 5, got \"6\"");
    refused("--int -6", "--int expects an integer from -5 to 5, got \"-6\"");
    refused("--int 1x", "--int expects an integer from -5 to 5, got \"1x\"");
    refused("--int ''", "--int expects an integer from -5 to 5, got \"\"");
    refused("--long 1073741825", "--long expects an integer from 0 to 1073741824, got "
                                 "\"1073741825\"");
    refused("--long 99999999999999999999", "--long expects an integer from 0 to 1073741824, "
                                           "got \"99999999999999999999\"");
    refused("--real 1.5", "--real expects a number in [0, 1], got \"1.5\"");
    refused("--real nan", "--real expects a number in [0, 1], got \"nan\"");
    refused("--open 0", "--open expects a number in (0, 1], got \"0\"");
    refused("--open 1e-300", "--open expects a number in (0, 1], got \"1e-300\"");
    refused("--whole 1.5", "--whole expects an integer from 0 to 65535, got \"1.5\"");
    refused("--whole 65536", "--whole expects an integer from 0 to 65535, got \"65536\"");
    refused("--gb -1", "--gb expects a number of GB >= 0, got \"-1\"");
    refused("--gb lots", "--gb expects a number of GB >= 0, got \"lots\"");
    refused("--seed -1", "--seed expects an integer from 0 to 2^64-1, got \"-1\"");
    refused("--seed 18446744073709551616",
            "--seed expects an integer from 0 to 2^64-1, got \"18446744073709551616\"");
    refused("--many ''", "--many expects a non-empty string");
    refused("--many a --many b --many c --many d", "--many may be given at most 3 times");
    refused("--id 0", "--id expects an integer from 1 to 9, got \"0\"");
}

static void test_help(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    k3_opt_help(&toy_cmd, f);
    fclose(f);
    const char *want = "usage: toy A [B]\n"
                       "  --flag    a flag\n"
                       "  --no-off  clears off_flag\n"
                       "  --int N   an int\n"
                       "            in [-5, 5]\n"
                       "  --long N  a long\n"
                       "  --real X  closed\n"
                       "  --open X  open below\n"
                       "  --whole N whole\n"
                       "  --gb X    gigabytes\n"
                       "  --seed N  a seed\n"
                       "  --a-very-long-option-name VALUE\n"
                       "            wraps to the next line\n"
                       "  --many S  repeatable\n"
                       "  --id N    an inner id\n"
                       "  also: --id (the tail)\n";
    CHECK(text && !strcmp(text, want), "help:\n%s\nexpected:\n%s", text ? text : "", want);
    free(text);

    text = NULL;
    f = open_memstream(&text, &len);
    k3_opt_list(&toy_cmd, f);
    fclose(f);
    CHECK(text && !strcmp(text, "--flag\n--no-off\n--int\n--long\n--real\n--open\n--whole\n--gb\n"
                                "--seed\n--a-very-long-option-name\n--many\n--hidden\n--id\n"
                                "--id\n"),
          "list:\n%s", text ? text : "");
    free(text);
}

/* No name is given twice in a table (the second would never be reached);
 * a valued entry has a metavar, a flag none. */
static void check_table(const k3_opt *t, const char *names[], size_t *n, size_t cap)
{
    for (; t->kind != K3_OPT_END; t++) {
        if (t->kind == K3_OPT_TABLE) {
            check_table(t->sub, names, n, cap);
            continue;
        }
        if (!t->name)
            continue;
        for (size_t i = 0; i < *n; i++)
            CHECK(strcmp(names[i], t->name), "%s is in the table twice", t->name);
        CHECK((t->kind == K3_OPT_FLAG) == (t->metavar == NULL), "%s: metavar", t->name);
        if (*n < cap)
            names[(*n)++] = t->name;
    }
}

/* Parses k3's argv (space-separated) into *o. */
static int k3_line(k3_options *o, const char *line, char *msg, size_t cap)
{
    char buf[512], *argv[32];
    int argc = 0;
    argv[argc++] = "k3";
    snprintf(buf, sizeof buf, "%s", line);
    for (char *w = strtok(buf, " "); w && argc < 32; w = strtok(NULL, " "))
        argv[argc++] = w;
    k3_err e = { 0, "" };
    int rc = k3_options_parse(o, argc, argv, &e);
    snprintf(msg, cap, "%s", e.msg);
    return rc;
}

static void test_k3_options(void)
{
    const char *names[128];
    size_t n = 0;
    check_table(main_table, names, &n, 128);
    CHECK(n > 50, "the main table has %zu options", n);

    k3_options o;
    char msg[256];
    int rc = k3_line(&o, "M", msg, sizeof msg);
    CHECK(rc == K3_OK && !strcmp(o.model_dir, "M") && o.gen == 16 &&
              o.memory.max_context == K3_DEFAULT_MAX_CONTEXT && o.memory.trunk_gb < 0 &&
              o.memory.trunk_layers == -1 && o.sampling.top_p == 1.0 &&
              o.sampling.repeat_last_n == 64 && !o.gen_given && !o.memory.max_context_given,
          "defaults: %s", msg);
    rc = k3_line(&o, "M --gen 5 --max-context 99 --top-k 3 --seed 7 --trunk-gb 1.5 -q "
                     "--dump-cache-trace D --stop x --layers 2",
                 msg, sizeof msg);
    CHECK(rc == K3_OK && o.gen == 5 && o.gen_given && o.memory.max_context == 99 &&
              o.memory.max_context_given && o.sampling.top_k == 3 && o.sampling.seed == 7 &&
              o.memory.trunk_gb == 1.5 && o.quiet && !strcmp(o.output.cache_trace_dir, "D") &&
              o.nstop == 1 && o.memory.layers == 2,
          "values land in their groups: %s", msg);
    rc = k3_line(&o, "M --recompute --incremental", msg, sizeof msg);
    CHECK(rc == K3_OK && !o.recompute, "--incremental clears --recompute");
    rc = k3_line(&o, "M --chat --ignore-eos --out r.json --system s", msg, sizeof msg);
    CHECK(rc == K3_OK && o.chat && o.ignore_eos && !strcmp(o.output.out_json, "r.json") &&
              !strcmp(o.conv.system, "s"),
          "--chat takes --ignore-eos and --out: %s", msg);
    rc = k3_line(&o, "M --chat --dump-logits f", msg, sizeof msg);
    CHECK(rc == K3_EINPUT && strstr(msg, "--dump-logits"), "--chat refuses dumps: %s", msg);
    rc = k3_line(&o, "M --chat --prompt p", msg, sizeof msg);
    CHECK(rc == K3_EINPUT && strstr(msg, "drop --prompt"), "--chat refuses a prompt: %s", msg);
    rc = k3_line(&o, "M --system s", msg, sizeof msg);
    CHECK(rc == K3_EINPUT && strstr(msg, "go with --chat"), "--system needs --chat: %s", msg);
    rc = k3_line(&o, "M N", msg, sizeof msg);
    CHECK(rc == K3_EINPUT && !strcmp(msg, "unexpected argument \"N\": only one MODEL_DIR"),
          "two MODEL_DIRs: %s", msg);
    rc = k3_line(&o, "M --frobnicate", msg, sizeof msg);
    CHECK(rc == K3_EINPUT && !strcmp(msg, "unknown option --frobnicate (see k3 --help)"),
          "unknown: %s", msg);
    rc = k3_line(&o, "M --promt x", msg, sizeof msg);
    CHECK(rc == K3_EINPUT &&
              !strcmp(msg, "unknown option --promt (did you mean --prompt? see k3 --help)"),
          "a typo is answered with the closest option: %s", msg);
    rc = k3_line(&o, "-m D -p hi -n 7 -c 99 -t 3 -s 5", msg, sizeof msg);
    CHECK(rc == K3_OK && !strcmp(o.model_dir, "D") && !strcmp(o.prompt, "hi") && o.gen == 7 &&
              o.gen_given && o.memory.max_context == 99 && o.memory.max_context_given &&
              o.threads == 3 && o.sampling.seed == 5,
          "llama.cpp's short options land where the long ones do: %s", msg);
    CHECK(k3_edit_distance("kitten", "sitting") == 3 && k3_edit_distance("", "ab") == 2 &&
              k3_edit_distance("ab", "ab") == 0,
          "edit distance");

    k3_model_opts mo;
    k3_err e = { 0, "" };
    rc = k3_line(&o, "M --preset laptop --budget-gb 3", msg, sizeof msg);
    CHECK(rc == K3_OK && k3_options_model(&o.memory, &mo, &e) == K3_EINPUT,
          "--preset with --budget-gb is refused by the mapping");
}

int main(void)
{
    test_kinds();
    test_help();
    test_k3_options();
    return check_report("test_options");
}
