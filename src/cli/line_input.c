/* line_input.c - see line_input.h. */
#include "cli/line_input.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/os.h"

#ifdef K3_HAVE_EDIT
#include <histedit.h>
#include <locale.h>
#include <wchar.h>
#endif

/* Entries the history keeps. */
#define HISTORY_SIZE 1000

/* The terminal's bracketed-paste markers (xterm; every common terminal). */
#define PASTE_ON "\033[?2004h"
#define PASTE_OFF "\033[?2004l"
#define PASTE_END L"\033[201~"

struct k3_line_input {
    volatile sig_atomic_t *interrupted;
    char *line; /* the plain reader's buffer */
    size_t cap;
    char history[4096]; /* "" none */
    int warned;         /* a history write failure was said */
#ifdef K3_HAVE_EDIT
    EditLine *el;       /* NULL: plain lines */
    History *hist;
    const char *prompt;
    char *copy;         /* the edited line, its end of line removed */
    size_t copy_cap;
    char *old_locale;   /* LC_CTYPE before editing (restored at close) */
#endif
};

void k3_line_input_default_path(char *out, size_t cap)
{
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (state && *state)
        snprintf(out, cap, "%s/k3/history", state);
    else if (home && *home)
        snprintf(out, cap, "%s/.local/state/k3/history", home);
    else
        out[0] = '\0';
}

#ifdef K3_HAVE_EDIT
/* mkdir -p of path's directory (errors are left to the file's write). */
static void make_parents(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        k3_os_mkdir(dir);
        *p = '/';
    }
}
#endif

#ifdef K3_HAVE_EDIT
static const char *prompt_fn(EditLine *el)
{
    k3_line_input *in = NULL;
    el_get(el, EL_CLIENTDATA, &in);
    return in && in->prompt ? in->prompt : "> ";
}

/* libedit's character reader: one character from stdin, ending the read
 * (0, as at the end of input) when Ctrl-C interrupted it. */
static int read_char(EditLine *el, wchar_t *wc)
{
    k3_line_input *in = NULL;
    el_get(el, EL_CLIENTDATA, &in);
    char buf[MB_LEN_MAX];
    size_t n = 0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    for (;;) {
        if (*in->interrupted)
            return 0;
        ssize_t got = read(STDIN_FILENO, buf + n, 1);
        if (got < 0 && errno == EINTR)
            continue; /* the flag decides */
        if (got <= 0)
            return (int)got;
        n++;
        mbstate_t try = st;
        size_t r = mbrtowc(wc, buf, n, &try);
        if (r == (size_t)-2 && n < sizeof buf)
            continue; /* more bytes of this character */
        if (r == (size_t)-1 || r == (size_t)-2)
            *wc = (unsigned char)buf[0]; /* not valid here: the byte itself */
        return 1;
    }
}

/* Bound to the paste start marker: reads until the end marker and inserts
 * the block as it is (newlines kept), so Enter sends it as one message. */
static unsigned char paste(EditLine *el, int ch)
{
    (void)ch;
    wchar_t buf[4096];
    size_t n = 0, end = wcslen(PASTE_END), matched = 0;
    wchar_t c;
    while (el_wgetc(el, &c) == 1) {
        if (c == PASTE_END[matched]) {
            if (++matched == end)
                break;
            continue;
        }
        /* a partial marker was text after all */
        for (size_t i = 0; i < matched && n + 1 < sizeof buf / sizeof *buf; i++)
            buf[n++] = PASTE_END[i];
        matched = 0;
        if (c == L'\r')
            c = L'\n';
        if (n + 2 >= sizeof buf / sizeof *buf) {
            buf[n] = L'\0';
            el_winsertstr(el, buf);
            n = 0;
        }
        buf[n++] = c;
    }
    /* a trailing newline of the paste is not part of the message */
    while (n && buf[n - 1] == L'\n')
        n--;
    buf[n] = L'\0';
    if (n)
        el_winsertstr(el, buf);
    return CC_REDISPLAY;
}

static int open_editor(k3_line_input *in)
{
    const char *loc = setlocale(LC_CTYPE, NULL);
    in->old_locale = loc ? strdup(loc) : NULL;
    setlocale(LC_CTYPE, ""); /* UTF-8 input as the terminal sends it */
    in->el = el_init("k3", stdin, stderr, stderr);
    in->hist = history_init();
    if (!in->el || !in->hist)
        return -1;
    HistEvent ev;
    history(in->hist, &ev, H_SETSIZE, HISTORY_SIZE);
    history(in->hist, &ev, H_SETUNIQUE, 1);
    if (in->history[0])
        history(in->hist, &ev, H_LOAD, in->history); /* none yet: fine */
    el_set(in->el, EL_CLIENTDATA, in);
    el_set(in->el, EL_EDITOR, "emacs");
    el_set(in->el, EL_PROMPT, prompt_fn);
    el_set(in->el, EL_HIST, history, in->hist);
    el_set(in->el, EL_GETCFN, read_char);
    el_set(in->el, EL_SIGNAL, 0); /* the chat's own SIGINT handler stays */
    el_set(in->el, EL_BIND, "^R", "em-inc-search-prev", NULL);
    el_set(in->el, EL_ADDFN, "k3-paste", "bracketed paste: the block is one message", paste);
    el_set(in->el, EL_BIND, "\033[200~", "k3-paste", NULL);
    return 0;
}
#endif

int k3_line_input_open(k3_line_input **out, const char *history,
                       volatile sig_atomic_t *interrupted, k3_err *e)
{
    k3_line_input *in = k3_calloc(e, 1, sizeof *in, "the line reader");
    *out = in;
    if (!in)
        return e->code;
    in->interrupted = interrupted;
    if (history && *history) {
        if (strlen(history) >= sizeof in->history)
            return k3_fail(e, K3_EINPUT, "the history file's path is too long: %s", history);
        snprintf(in->history, sizeof in->history, "%s", history);
    }
#ifdef K3_HAVE_EDIT
    if (isatty(STDIN_FILENO) && isatty(STDERR_FILENO)) {
        if (in->history[0])
            make_parents(in->history); /* only where it will be written */
        if (open_editor(in) != 0)
            return k3_fail(e, K3_ERUNTIME, "the line editor (libedit) failed to start");
    }
#endif
    return K3_OK;
}

int k3_line_input_editing(const k3_line_input *in)
{
#ifdef K3_HAVE_EDIT
    return in->el != NULL;
#else
    (void)in;
    return 0;
#endif
}

int64_t k3_line_input_read(k3_line_input *in, const char *prompt, const char **line)
{
#ifdef K3_HAVE_EDIT
    if (in->el) {
        int n = 0;
        in->prompt = prompt;
        fputs(PASTE_ON, stderr);
        fflush(stderr);
        const char *got = el_gets(in->el, &n);
        fputs(PASTE_OFF, stderr);
        fflush(stderr);
        if (!got || n <= 0 || *in->interrupted)
            return -1;
        size_t len = (size_t)n;
        while (len && (got[len - 1] == '\n' || got[len - 1] == '\r'))
            len--;
        if (len + 1 > in->copy_cap) {
            char *c = realloc(in->copy, len + 1);
            if (!c)
                return -1;
            in->copy = c;
            in->copy_cap = len + 1;
        }
        memcpy(in->copy, got, len);
        in->copy[len] = '\0';
        *line = in->copy;
        return (int64_t)len;
    }
#endif
    if (isatty(STDIN_FILENO))
        fputs(prompt, stderr);
    errno = 0;
    int64_t got = *in->interrupted ? -1 : k3_os_getline(&in->line, &in->cap, stdin);
    if (got < 0)
        return -1;
    size_t len = (size_t)got;
    while (len && (in->line[len - 1] == '\n' || in->line[len - 1] == '\r'))
        len--;
    in->line[len] = '\0';
    *line = in->line;
    return (int64_t)len;
}

void k3_line_input_remember(k3_line_input *in, const char *msg, size_t len)
{
#ifdef K3_HAVE_EDIT
    if (!in->hist || !len)
        return;
    char *s = malloc(len + 1);
    if (!s)
        return;
    memcpy(s, msg, len);
    s[len] = '\0';
    HistEvent ev;
    history(in->hist, &ev, H_ENTER, s);
    free(s);
    if (!in->history[0])
        return;
    k3_atomic_file af;
    k3_err e = { 0, "" };
    if (k3_atomic_begin(&af, in->history, &e) == K3_OK) {
        if (history(in->hist, &ev, H_SAVE_FP, af.f) < 0)
            k3_fail(&e, K3_ERUNTIME, "%s: writing the history failed", in->history);
        if (e.code)
            k3_atomic_abort(&af);
        else
            k3_atomic_commit(&af, &e);
    }
    if (e.code && !in->warned) {
        fprintf(stderr, "chat: the line history is not kept: %s\n", e.msg);
        in->warned = 1;
    }
#else
    (void)in;
    (void)msg;
    (void)len;
#endif
}

void k3_line_input_close(k3_line_input *in)
{
    if (!in)
        return;
#ifdef K3_HAVE_EDIT
    if (in->el)
        el_end(in->el);
    if (in->hist)
        history_end(in->hist);
    if (in->old_locale) {
        setlocale(LC_CTYPE, in->old_locale);
        free(in->old_locale);
    }
    free(in->copy);
#endif
    free(in->line);
    free(in);
}
