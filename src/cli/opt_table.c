/* opt_table.c - see opt_table.h. */
#include "cli/opt_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/suggest.h"
#include "util/error.h"

/* The summary line of a TABLE entry wraps before this column. */
#define SUMMARY_WIDTH 80

/* The entry named (or aliased) arg, searching sub-tables; *base is the
 * offset its own offsets are relative to. NULL when none is. */
static const k3_opt *find(const k3_opt *t, size_t at, const char *arg, size_t *base)
{
    for (; t->kind != K3_OPT_END; t++) {
        if (t->kind == K3_OPT_TABLE) {
            const k3_opt *o = find(t->sub, at + t->off, arg, base);
            if (o)
                return o;
        } else if (t->name && (!strcmp(t->name, arg) || (t->alias && !strcmp(t->alias, arg)))) {
            *base = at;
            return t;
        }
    }
    return NULL;
}

/* The option name (not an alias) closest to the mistyped arg. */
static void closest(const k3_opt *t, const char *arg, const char **best, size_t *dist)
{
    for (; t->kind != K3_OPT_END; t++) {
        if (t->kind == K3_OPT_TABLE)
            closest(t->sub, arg, best, dist);
        else if (t->name && t->kind != K3_OPT_ALIAS)
            k3_suggest_fold(arg, t->name, best, dist);
    }
}

static int parse_int(const k3_opt *o, const char *arg, const char *s, void *p, k3_err *e)
{
    long v = K3_OPT_AUTO;
    if (!(o->flags & K3_OPTF_AUTO) || strcmp(s, "auto") != 0) {
        char *end;
        errno = 0;
        v = strtol(s, &end, 10);
        if (!*s || *end || errno || v < (long)o->lo || v > (long)o->hi)
            return k3_fail(e, K3_EINPUT, "%s expects %san integer from %ld to %ld, got \"%s\"",
                           arg, o->flags & K3_OPTF_AUTO ? "auto or " : "", (long)o->lo,
                           (long)o->hi, s);
    }
    if (o->size == sizeof(int)) {
        int x = (int)v;
        memcpy(p, &x, sizeof x);
    } else {
        memcpy(p, &v, sizeof v);
    }
    return K3_OK;
}

/* An open lower bound is checked on the float the sampler will use
 * (1e-300 is above 0 but rounds to 0). */
static int parse_real(const k3_opt *o, const char *arg, const char *s, double *p, k3_err *e)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    int lo_ok = o->flags & K3_OPTF_LO_OPEN ? (float)v > o->lo : v >= o->lo;
    if (*s && !*end && !errno && v <= o->hi && lo_ok &&
        (!(o->flags & K3_OPTF_WHOLE) || v == (double)(long long)v)) {
        *p = v;
        return K3_OK;
    }
    if (o->flags & K3_OPTF_GB)
        return k3_fail(e, K3_EINPUT, "%s expects a number of GB >= 0, got \"%s\"", arg, s);
    if (o->flags & K3_OPTF_WHOLE)
        return k3_fail(e, K3_EINPUT, "%s expects an integer from %g to %g, got \"%s\"", arg, o->lo,
                       o->hi, s);
    return k3_fail(e, K3_EINPUT, "%s expects a number in %c%g, %g], got \"%s\"", arg,
                   o->flags & K3_OPTF_LO_OPEN ? '(' : '[', o->lo, o->hi, s);
}

static int parse_seed(const char *arg, const char *s, unsigned long long *p, k3_err *e)
{
    char *end;
    errno = 0;
    unsigned long long v = *s != '-' ? strtoull(s, &end, 10) : 0;
    if (!*s || *s == '-' || *end || errno)
        return k3_fail(e, K3_EINPUT, "%s expects an integer from 0 to 2^64-1, got \"%s\"", arg, s);
    *p = v;
    return K3_OK;
}

/* Stores value s of entry o (typed as arg) into the struct at base. */
static int store(const k3_opt *o, const char *arg, const char *s, char *base, k3_err *e)
{
    void *p = base + o->off;
    int rc = K3_OK;
    switch (o->kind) {
    case K3_OPT_FLAG:
        memcpy(p, &o->set, sizeof o->set);
        break;
    case K3_OPT_INT:
        rc = parse_int(o, arg, s, p, e);
        break;
    case K3_OPT_REAL:
        rc = parse_real(o, arg, s, p, e);
        break;
    case K3_OPT_SEED:
        rc = parse_seed(arg, s, p, e);
        break;
    case K3_OPT_STR:
        memcpy(p, &s, sizeof s);
        break;
    case K3_OPT_STRS: {
        size_t n;
        memcpy(&n, base + o->off2, sizeof n);
        if (!*s)
            return k3_fail(e, K3_EINPUT, "%s expects a non-empty string", arg);
        if (n >= (size_t)o->max)
            return k3_fail(e, K3_EINPUT, "%s may be given at most %d times", arg, o->max);
        memcpy((const char **)p + n, &s, sizeof s);
        n++;
        memcpy(base + o->off2, &n, sizeof n);
        break;
    }
    default:
        return k3_fail(e, K3_ERUNTIME, "%s: bad option table entry", arg);
    }
    if (rc == K3_OK && (o->flags & K3_OPTF_GIVEN)) {
        int one = 1;
        memcpy(base + o->off2, &one, sizeof one);
    }
    return rc;
}

int k3_opt_parse(const k3_opt_cmd *c, void *dst, int argc, char **argv, k3_err *e)
{
    return k3_opt_parse_seen(c, dst, argc, argv, NULL, 0, NULL, e);
}

int k3_opt_parse_seen(const k3_opt_cmd *c, void *dst, int argc, char **argv,
                      const k3_opt **seen, size_t max_seen, size_t *nseen, k3_err *e)
{
    char *base = dst;
    int npos = 0;
    if (nseen)
        *nseen = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            if (npos == c->npos)
                return k3_fail(e, K3_EINPUT, "%sunexpected argument \"%s\"%s", c->prefix, a,
                               c->extra);
            memcpy(base + c->pos[npos++], &a, sizeof a);
            continue;
        }
        size_t at = 0;
        const k3_opt *o = find(c->opts, 0, a, &at);
        if (o && o->kind == K3_OPT_ALIAS)
            o = find(c->opts, 0, o->metavar, &at);
        if (!o) {
            const char *best = NULL;
            size_t dist = 0;
            closest(c->opts, a, &best, &dist);
            return k3_fail(e, K3_EINPUT, "%sunknown option %s (%s%s%ssee %s --help)", c->prefix,
                           a, best ? "did you mean " : "", best ? best : "", best ? "? " : "",
                           c->command);
        }
        const char *value = NULL;
        if (o->kind != K3_OPT_FLAG) {
            if (i + 1 >= argc)
                return k3_fail(e, K3_EINPUT, "%s expects a value", a);
            value = argv[++i];
        }
        if (store(o, a, value, base + at, e) != K3_OK)
            return e->code;
        if (seen && *nseen < max_seen)
            seen[(*nseen)++] = o;
    }
    return K3_OK;
}

static void print_help(const k3_opt *o, int col, FILE *f)
{
    int w = fprintf(f, "  %s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    if (w + 1 > col) {
        fputc('\n', f);
        w = 0;
    }
    fprintf(f, "%*s", col - w, "");
    for (const char *h = o->help; *h; h++) {
        fputc(*h, f);
        if (*h == '\n')
            fprintf(f, "%*s", col, "");
    }
    fputc('\n', f);
}

/* Appends word to the summary line at column *w, wrapping to indent. */
static void summary_word(const char *word, size_t len, int indent, int *w, FILE *f)
{
    if (*w + 1 + (int)len >= SUMMARY_WIDTH) {
        *w = fprintf(f, "\n%*s", indent, "") - 1;
    } else {
        fputc(' ', f);
        (*w)++;
    }
    *w += (int)fwrite(word, 1, len, f);
}

static void summary_names(const k3_opt *t, int indent, int *w, int last, FILE *f)
{
    for (; t->kind != K3_OPT_END; t++) {
        if (t->kind == K3_OPT_TABLE) {
            summary_names(t->sub, indent, w, last && t[1].kind == K3_OPT_END, f);
        } else if (t->name && t->kind != K3_OPT_ALIAS) {
            char word[64];
            int n = snprintf(word, sizeof word, "%s%s", t->name,
                             last && t[1].kind == K3_OPT_END ? "" : ",");
            summary_word(word, n > 0 && (size_t)n < sizeof word ? (size_t)n : 0, indent, w, f);
        }
    }
}

static void help_table(const k3_opt *t, int col, FILE *f)
{
    for (; t->kind != K3_OPT_END; t++) {
        if (t->kind == K3_OPT_TEXT) {
            fputs(t->help, f);
        } else if (t->kind == K3_OPT_TABLE && !t->help) {
            help_table(t->sub, col, f);
        } else if (t->kind == K3_OPT_TABLE) {
            int w = fprintf(f, "  %s", t->help);
            summary_names(t->sub, w + 1, &w, 1, f);
            if (t->metavar)
                summary_word(t->metavar, strlen(t->metavar), (int)strlen(t->help) + 3, &w, f);
            fputc('\n', f);
        } else if (t->help && t->kind != K3_OPT_ALIAS) {
            print_help(t, col, f);
        }
    }
}

void k3_opt_help(const k3_opt_cmd *c, FILE *f)
{
    help_table(c->opts, c->col, f);
}

static void list_table(const k3_opt *t, FILE *f)
{
    for (; t->kind != K3_OPT_END; t++) {
        if (t->kind == K3_OPT_TABLE)
            list_table(t->sub, f);
        else if (t->name && t->kind != K3_OPT_ALIAS)
            fprintf(f, "%s\n", t->name);
    }
}

void k3_opt_list(const k3_opt_cmd *c, FILE *f)
{
    list_table(c->opts, f);
}
