/* opt_table.h - one table per command line drives its parsing, its --help
 * text and its --list-options listing.
 *
 * A table is an array of k3_opt ending with an entry of kind K3_OPT_END.
 * Each option entry names where its value goes as an offset into the
 * command's options struct (offsetof), so one parser fills any struct.
 *
 * Syntax (the same for every command): "--name VALUE" (the next argument
 * is the value, whatever it starts with), "--name" for a flag, an alias
 * ("-q") for some; no "--name=VALUE", no bundling. An argument starting
 * with "-" (other than "-" alone) that no entry names is an unknown
 * option; anything else is a positional argument. Errors are K3_EINPUT
 * with a one-line message naming the option as typed:
 *   "--gen expects a value"
 *   "--gen expects an integer from 0 to 1073741824, got \"x\""
 *   "--top-p expects a number in (0, 1], got \"0\""
 *   "--budget-gb expects a number of GB >= 0, got \"lots\""
 *   "--seed expects an integer from 0 to 2^64-1, got \"-1\""
 *   "--stop expects a non-empty string", "--stop may be given at most 16 times"
 * "PREFIXunknown option --x (see COMMAND --help)" (with "did you mean
 * --y? " before "see" when an option name is close, cli/suggest.h) and
 * "PREFIXunexpected argument \"x\"EXTRA" (k3_opt_cmd). Parsing stops at the
 * first error; fields already stored keep their values. */
#ifndef K3_CLI_OPT_TABLE_H
#define K3_CLI_OPT_TABLE_H

#include <stddef.h>
#include <stdio.h>

#include "k3/error.h"

typedef enum {
    K3_OPT_END = 0,
    K3_OPT_TEXT,  /* help text printed as is (usage, headings); parses nothing */
    K3_OPT_FLAG,  /* no value: stores .set into an int */
    K3_OPT_INT,   /* decimal integer in [lo, hi] (strtol) into an int or a long (.size) */
    K3_OPT_REAL,  /* number in [lo, hi] (strtod) into a double; see K3_OPTF_* */
    K3_OPT_SEED,  /* decimal integer 0 .. 2^64-1 into an unsigned long long */
    K3_OPT_STR,   /* the argument itself into a const char * (not copied) */
    K3_OPT_STRS,  /* repeatable non-empty string: const char *[.max] at .off, a size_t
                   * count at .off2 */
    K3_OPT_TABLE, /* the entries of .sub, whose offsets are relative to .off */
    K3_OPT_ALIAS  /* another spelling: .name ("-p") is parsed as the entry named .metavar
                   * ("--prompt"), anywhere in the command's table; not listed by
                   * --list-options nor shown in --help (say so in a TEXT entry) */
} k3_opt_kind;

/* .flags */
#define K3_OPTF_LO_OPEN 1 /* REAL: (lo, hi], lo checked on the float the value becomes */
#define K3_OPTF_WHOLE 2   /* REAL: the value must be a whole number ("an integer") */
#define K3_OPTF_GB 4      /* REAL: the message says "a number of GB >= 0" (lo = 0) */
#define K3_OPTF_GIVEN 8   /* also set the int at .off2 to 1 when the option is given */
#define K3_OPTF_AUTO 16   /* INT: the word "auto" is accepted too, stored as K3_OPT_AUTO */

/* What an INT with K3_OPTF_AUTO holds for "auto" (below any lo it has). */
#define K3_OPT_AUTO (-1)

typedef struct k3_opt {
    k3_opt_kind kind;
    const char *name;    /* "--gen" (NULL for TEXT and TABLE) */
    const char *alias;   /* "-q", or NULL; not shown in --help */
    const char *metavar; /* "N" in "--gen N"; NULL for a flag. TABLE: see help */
    /* The help: lines separated by '\n', the first printed after the name
     * at the command's column, the others indented to it. NULL: the option
     * works and is listed by --list-options but not shown in --help.
     * TEXT: printed as is. TABLE: NULL prints the sub-table's entries; else
     * one summary, "  " help " " the sub-table's names " " metavar. */
    const char *help;
    size_t off;  /* the value's offset in the options struct */
    size_t size; /* INT: sizeof the field (int or long) */
    size_t off2; /* STRS: the count; K3_OPTF_GIVEN: the int set to 1 */
    double lo, hi;
    int flags; /* K3_OPTF_* */
    int set;   /* FLAG: the value stored */
    int max;   /* STRS: the most values */
    const struct k3_opt *sub; /* TABLE */
} k3_opt;

#define K3_OPT_SIZEOF(T, f) sizeof(((T *)0)->f)

/* Entries of options struct T; H is the help text (NULL: hidden). */
#define K3_OPT_TEXT_(H) { .kind = K3_OPT_TEXT, .help = H }
#define K3_OPT_FLAG_(N, T, f, H)                                                                  \
    { .kind = K3_OPT_FLAG, .name = N, .off = offsetof(T, f), .set = 1, .help = H }
#define K3_OPT_FLAG_AS(N, A, T, f, H)                                                             \
    { .kind = K3_OPT_FLAG, .name = N, .alias = A, .off = offsetof(T, f), .set = 1, .help = H }
#define K3_OPT_INT_(N, M, T, f, L, U, H)                                                          \
    { .kind = K3_OPT_INT, .name = N, .metavar = M, .off = offsetof(T, f),                         \
      .size = K3_OPT_SIZEOF(T, f), .lo = L, .hi = U, .help = H }
/* An INT that also sets the int field g when given. */
#define K3_OPT_INT_GIVEN(N, M, T, f, g, L, U, H)                                                  \
    { .kind = K3_OPT_INT, .name = N, .metavar = M, .off = offsetof(T, f),                         \
      .size = K3_OPT_SIZEOF(T, f), .lo = L, .hi = U, .flags = K3_OPTF_GIVEN,                      \
      .off2 = offsetof(T, g), .help = H }
/* An INT that also accepts "auto" (K3_OPT_AUTO). */
#define K3_OPT_INT_AUTO(N, M, T, f, L, U, H)                                                      \
    { .kind = K3_OPT_INT, .name = N, .metavar = M, .off = offsetof(T, f),                         \
      .size = K3_OPT_SIZEOF(T, f), .lo = L, .hi = U, .flags = K3_OPTF_AUTO, .help = H }
#define K3_OPT_REAL_(N, M, T, f, L, U, F, H)                                                      \
    { .kind = K3_OPT_REAL, .name = N, .metavar = M, .off = offsetof(T, f), .lo = L, .hi = U,    \
      .flags = F, .help = H }
/* A: another spelling of the option named N (K3_OPT_ALIAS). */
#define K3_OPT_ALIAS_(A, N) { .kind = K3_OPT_ALIAS, .name = A, .metavar = N }
#define K3_OPT_STR_(N, M, T, f, H)                                                                \
    { .kind = K3_OPT_STR, .name = N, .metavar = M, .off = offsetof(T, f), .help = H }

/* A command line: its table, the column its help text starts at, and
 * what to do with positional arguments (up to 4, stored in order at
 * pos[0..npos) as const char *). */
typedef struct k3_opt_cmd {
    const k3_opt *opts;
    int col;
    const char *prefix;  /* of the messages about arguments: "serve: " or "" */
    const char *command; /* "k3 serve": in "see k3 serve --help" */
    const char *extra;   /* after "unexpected argument \"x\"": ": only one MODEL_DIR" or "" */
    size_t pos[4];
    int npos;
} k3_opt_cmd;

/* Parses argv[1..argc) into the struct at dst (already holding the
 * defaults). Returns a k3 status. */
int k3_opt_parse(const k3_opt_cmd *c, void *dst, int argc, char **argv, k3_err *e);

/* k3_opt_parse, also listing the entries of the options given, in order
 * (repeats too), in seen[0..*nseen) (at most max_seen of them): what a
 * command checks its modes against (cli/options.c). */
int k3_opt_parse_seen(const k3_opt_cmd *c, void *dst, int argc, char **argv,
                      const k3_opt **seen, size_t max_seen, size_t *nseen, k3_err *e);

/* The --help text of the table (its TEXT entries and every shown option). */
void k3_opt_help(const k3_opt_cmd *c, FILE *f);

/* Every option name the parser accepts, hidden ones too, one per line. */
void k3_opt_list(const k3_opt_cmd *c, FILE *f);

#endif
