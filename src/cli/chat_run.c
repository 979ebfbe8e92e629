/* chat_run.c - see chat_run.h.
 *
 * Every turn renders the WHOLE conversation with the XTML renderer and
 * lets k3_state_sync find how much of it the state already holds: the
 * renderer stays the only authority on the format, and reuse falls out of
 * comparing ids. Normally everything consumed so far is a prefix of the
 * new rendering and only the new tokens are fed. When it is not - the
 * model's own tokens for its reply differ from how the reply re-encodes
 * (a non-canonical tokenization, a reply cut by a limit or a stop
 * string) - the state rewinds to the mark taken where the reply began (so
 * the cost is the reply plus the new message, not the conversation) and
 * says so on stderr. Results are bit-identical either way: k3_forward
 * gives the same bits however a sequence is split.
 *
 * Ctrl-C (SIGINT, handled for the whole chat): during a reply it stops the
 * reply after the id being computed, and what was shown of it is KEPT as
 * the assistant's message (in the conversation, the history file and the
 * --out report, finish_reason "cancelled"), so the next prompt renders
 * exactly what the user saw; during the prompt's feed it stops the feed
 * and the reply is an empty message. At the prompt it ends the chat
 * (exit 0), unless continuation lines are pending: then it drops them.
 *
 * On a terminal (stderr) a reply that is still thinking with the thinking
 * hidden shows a dimmed counter "thinking... N tokens" on stderr, redrawn
 * in place and erased when the content starts or the reply ends. */
#include "cli/chat_run.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/jtext.h"
#include "chat/turn.h"
#include "chat/xtml.h"
#include "chat/images.h"
#include "cli/chat_images.h"
#include "cli/generate.h"
#include "cli/history.h"
#include "model/prefix_cache.h"
#include "server/prefix_hook.h"
#include "cli/line_input.h"
#include "k3/chat.h"
#include "structured/constrain.h"
#include "tokenizer/utf8.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/file.h"
#include "util/os.h"
#include "vision/image.h"
#include "vision/vmodel.h"

/* Reply length when --gen is not given: for a person at a terminal, a
 * length the real model reaches in minutes, not hours (the thinking shows
 * as it comes, and a reply cut inside it says how to go on); for a script,
 * the length it always had (its output stays byte for byte). */
#define TERMINAL_REPLY_TOKENS 1024
#define SCRIPT_REPLY_TOKENS 8192
/* The thinking effort when --effort is not given, likewise. */
#define TERMINAL_EFFORT "low"
#define SCRIPT_EFFORT "max"

/* Seconds between redraws of the thinking counter. */
#define THINKING_REDRAW 0.1

/* Set by the SIGINT handler, cleared by the chat when it has acted on it. */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* The feed's cancel check (chat/turn.h k3_turn_feed). */
static int feed_cancelled(void *ctx)
{
    (void)ctx;
    return interrupted != 0;
}

typedef struct chat {
    const k3_options *o;
    k3_model *m;
    const k3_tokenizer *tok;
    k3_chat *conv;
    k3_state *st;
    k3_state_mark *mark;   /* where the current reply began */
    k3_state_mark *start;  /* after the start's rendering (--system): /reset goes back here */
    k3_sampler smp;
    k3_drafter drafter;    /* --spec: the context-lookup drafter */
    k3_history hist;
    k3_prefix_cache *cache; /* --prefix-cache-dir, or NULL */
    k3_chat_rows rows;     /* the conversation's images as prompt rows */
    size_t pending[K3_CHAT_MAX_IMAGES]; /* --image: images of the first message */
    size_t npending;
    k3_line_input *input;  /* the user's lines (cli/line_input.h) */
    int terminal;          /* stdin is a terminal: the terminal defaults apply */
    int show_thinking;     /* the thinking is printed (else the counter, on a terminal) */
    int thinking, dim;
    int fresh;             /* /reset could not go back to the start mark: the next
                            * sync recomputes, and says so without blaming a reply */
    FILE *report;          /* --out: the turns as JSON (NULL: none) */
    int nreported;         /* turns written to it */
    /* The turn being generated. */
    uint32_t *prompt;      /* [nprompt] the rendering the reply continues */
    size_t nprompt, reused;
    uint32_t *gen;         /* [max_tokens] the ids generated */
    size_t ngen;
    k3_buf reasoning, content; /* what was shown of each channel */
    int thought_open;      /* the thinking display is open (dimmed) */
    int counter;           /* stderr is a terminal: the thinking counter may show */
    int counting;          /* this reply is thinking with nothing shown yet */
    int counter_shown;     /* the counter is on the screen */
    double counter_last;   /* when it was last drawn */
    double t_start, t_first;
    k3_constrain_vocab *gv; /* --grammar / --json-schema: the vocabulary they match */
    char *gtext;           /* the file's text, put into every new conversation */
    size_t gtext_len;
} chat;

static int write_out(const char *s, size_t n, k3_err *e)
{
    if ((n && fwrite(s, 1, n, stdout) != n) || fflush(stdout) != 0)
        return k3_fail(e, K3_ERUNTIME, "writing the reply: write error on stdout");
    return K3_OK;
}

/* Erases the thinking counter (if shown) and stops counting. */
static void end_counter(chat *c)
{
    c->counting = 0;
    if (c->counter_shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        c->counter_shown = 0;
    }
}

/* Ends the thinking display (if open) before the reply text or the end. */
static int close_thought(chat *c, k3_err *e)
{
    if (!c->thought_open)
        return K3_OK;
    c->thought_open = 0;
    return write_out(c->dim ? "\033[0m\n" : "\n", c->dim ? 5 : 1, e);
}

/* The turn's text sink: collects both channels and shows them. */
static int on_text(void *ctx, int channel, const char *s, size_t n, k3_err *e)
{
    chat *c = ctx;
    if (channel == K3_REPLY_REASONING) {
        if (k3_buf_put(&c->reasoning, s, n, e) || !c->show_thinking)
            return e->code;
        if (!c->thought_open && c->dim && write_out("\033[2m", 4, e))
            return e->code;
        c->thought_open = 1;
        return write_out(s, n, e);
    }
    end_counter(c);
    if (k3_buf_put(&c->content, s, n, e) || close_thought(c, e))
        return e->code;
    return write_out(s, n, e);
}

/* The CLI chat declares no tools: a call the model makes anyway is noted and dropped. */
static int on_call(void *ctx, const char *name, size_t nlen, const char *args, size_t alen,
                   k3_err *e)
{
    (void)ctx;
    (void)args;
    (void)alen;
    (void)e;
    fprintf(stderr, "chat: the reply calls a tool \"%.*s\"; this chat has no tools (dropped)\n",
            (int)nlen, name);
    return K3_OK;
}

static int on_token(void *ctx, uint32_t id, const float *logits, int is_end, int *stop,
                    k3_err *e)
{
    chat *c = ctx;
    (void)logits;
    (void)is_end;
    (void)e;
    double now = k3_seconds();
    if (!c->t_first)
        c->t_first = now;
    c->gen[c->ngen++] = id;
    if (interrupted)
        *stop = 1;
    else if (c->counting && now - c->counter_last >= THINKING_REDRAW) {
        fprintf(stderr, "\r\033[2mthinking\xe2\x80\xa6 %zu tokens\033[0m\033[K", c->ngen);
        fflush(stderr);
        c->counter_shown = 1;
        c->counter_last = now;
    }
    return K3_OK;
}

/* Renders the conversation (with or without the generation prompt) into
 * c->prompt and brings the state to it, reporting what was reused on
 * stderr. *thinking: the rendering opened the think element. cancelled
 * NULL: the feed runs to the end; else Ctrl-C may stop it (*cancelled = 1,
 * the state then holds a prefix of the rendering). */
static int sync_context(chat *c, const char *what, int gen_prompt, int *thinking,
                        int *cancelled, k3_err *e)
{
    const k3_options *o = c->o;
    size_t n = 0, common = 0;
    free(c->prompt);
    c->prompt = NULL;
    k3_chat_set_generation_prompt(c->conv, gen_prompt);
    if (k3_turn_chat_prompt(c->conv, c->tok, &c->prompt, &n, thinking, e) ||
        k3_chat_rows_prompt(&c->rows, o, c->tok, c->conv, &c->prompt, &n, e))
        return e->code;
    c->nprompt = n;
    if ((long long)n > (long long)o->memory.max_context)
        return k3_fail(e, K3_EINPUT,
                       "%s: the conversation is %zu tokens, more than --max-context %ld", what,
                       n, o->memory.max_context);
    size_t had = (size_t)k3_state_pos(c->st), same_ids = 0;
    if (o->conv.no_reuse)
        k3_state_reset(c->st);
    /* The ids alone: where the reuse stops before this, an image differs. */
    const uint32_t *have = k3_state_ids(c->st);
    while (same_ids < had && same_ids < n && have[same_ids] == c->prompt[same_ids])
        same_ids++;
    int stopped = 0;
    /* Past what the state keeps: the longest snapshot (the spans again, as
     * the feed below gives them to the state only when it keeps nothing). */
    if (c->cache &&
        k3_prefix_cache_restore(c->cache, c->st, c->prompt, n, c->rows.span, c->rows.nspan,
                                k3_state_common(c->st, c->prompt, n, c->rows.span,
                                                c->rows.nspan)) > 0 &&
        k3_state_set_images(c->st, c->rows.span, c->rows.nspan, e))
        return e->code;
    if (k3_turn_feed_embeds(c->m, c->st, c->mark, c->prompt, c->rows.embeds, n,
                            c->rows.span, c->rows.nspan, cancelled ? feed_cancelled : NULL,
                            NULL, &common, &c->reused, &stopped, e))
        return e->code;
    if (c->cache && !stopped)
        k3_prefix_cache_put(c->cache, c->st);
    if (cancelled)
        *cancelled = stopped;
    if (common < same_ids && !o->conv.no_reuse && !o->quiet)
        fprintf(stderr, "%s: an image differs from the one the state holds at token %zu, so "
                        "the context is recomputed from token %zu\n", what, common, c->reused);
    else if (common < had && !o->conv.no_reuse && !o->quiet && !c->fresh)
        fprintf(stderr, "%s: the last reply re-encodes to other tokens than the model wrote "
                        "(from token %zu of %zu), so the context is recomputed from token %zu\n",
                what, common, had, c->reused);
    c->fresh = 0;
    if (!o->quiet)
        fprintf(stderr, "%s: prefilled %zu new tokens, reused %zu\n", what, n - c->reused,
                c->reused);
    return K3_OK;
}

/* --prefix-cache-dir: the cache, its snapshots kept in RAM until the end
 * (a chat's own: one per turn) and then written to DIR. */
static int open_cache(chat *c, k3_err *e)
{
    if (!c->o->prefix_dir)
        return K3_OK;
    k3_prefix_opts po;
    memset(&po, 0, sizeof po);
    po.ram_bytes = (uint64_t)1 << 32;
    po.dir = c->o->prefix_dir;
    po.disk_bytes = (uint64_t)16 << 30;
    po.ns = k3_prefix_namespace(c->tok);
    po.log = c->o->quiet ? NULL : stderr;
    return k3_prefix_cache_open(&c->cache, c->m, &po, e);
}

static void report_ids(FILE *f, const char *key, const uint32_t *ids, size_t n)
{
    fprintf(f, "\"%s\": [", key);
    k3_cli_write_ids(f, ids, n);
    fputs("]", f);
}

/* --out: one turn's ids and end, as an element of the "turns" array. */
static void report_turn(chat *c, const k3_turn_result *res)
{
    FILE *f = c->report;
    if (!f)
        return;
    fprintf(f, "%s\n    {", c->nreported++ ? "," : "{\n  \"turns\": [");
    report_ids(f, "prompt_ids", c->prompt, c->nprompt);
    fputs(", ", f);
    report_ids(f, "generated_ids", c->gen, c->ngen);
    fprintf(f, ", \"reused\": %zu, \"end\": \"%s\", \"finish_reason\": \"%s\"}", c->reused,
            k3_turn_end_name(res->end), k3_turn_finish_reason(res->end, res->ncalls));
}

/* Generates the reply to the user's line[0..len), shows it, and adds it
 * to the conversation and (with the line) to the history. fed 0: Ctrl-C
 * stopped the prompt's feed, the reply is empty (finish_reason
 * "cancelled"). */
static int reply(chat *c, const char *what, int thinking, int fed, const char *line, size_t len,
                 k3_err *e)
{
    const k3_options *o = c->o;
    k3_turn_params tp;
    k3_turn_result res;
    k3_buf text = { 0 }, thought = { 0 };
    k3_constrain *cons = NULL;
    size_t max_tokens = o->gen_given  ? (size_t)o->gen
                        : c->terminal ? TERMINAL_REPLY_TOKENS
                                      : SCRIPT_REPLY_TOKENS;
    memset(&tp, 0, sizeof tp);
    if (c->gv && k3_constrain_chat(c->gv, c->conv, thinking, &cons, NULL, e))
        return e->code;
    tp.constraint = cons ? k3_constrain_get(cons) : NULL;
    k3_cli_gen_params(&tp.gen, o, max_tokens);
    tp.tok = c->tok;
    tp.show_special = o->show_special;
    tp.spec = (size_t)o->spec;
    tp.drafter = o->spec ? &c->drafter : NULL;
    tp.chat = 1;
    tp.thinking = thinking;
    tp.stop = o->stop;
    tp.nstop = o->nstop;
    k3_turn_sink sink = { c, on_text, on_call, on_token, NULL };
    c->reasoning.len = c->content.len = 0;
    c->t_first = 0;
    c->ngen = 0;
    c->counting = c->counter && thinking && !c->show_thinking;
    c->counter_last = 0;
    memset(&res, 0, sizeof res);
    res.end = K3_TURN_CALLER;
    free(c->gen);
    if (!(c->gen = k3_malloc(e, (max_tokens + 1) * sizeof *c->gen, "generated ids")) ||
        (fed && (k3_state_mark_take(c->st, &c->mark, e) ||
                 k3_turn_generate(c->m, c->st, &c->smp, &tp, &sink, &res, e))))
        goto done;
    end_counter(c);
    if (close_thought(c, e) || write_out("\n", 1, e))
        goto done;
    if (res.end == K3_TURN_CALLER && !o->quiet)
        fprintf(stderr, "%s: interrupted (Ctrl-C); the reply so far is kept\n", what);
    /* Cut by the length while still thinking: no answer came, say why and
     * what to do (a silent end looked like a hang or an empty answer). */
    if ((res.end == K3_TURN_LENGTH || res.end == K3_TURN_CONTEXT) && thinking &&
        c->content.len == 0 && !o->quiet)
        fprintf(stderr, "%s: the reply ended inside its thinking (%zu tokens, the %s): give "
                        "--gen N for longer replies or --effort low for shorter thinking%s\n",
                what, res.generated, res.end == K3_TURN_LENGTH ? "--gen limit" : "--max-context",
                c->show_thinking ? "" : "; drop --hide-thinking (or give --show-thinking) to "
                                       "see it");
    interrupted = 0; /* acted on: it stopped this reply */
    if (!o->quiet) {
        double t = k3_seconds(), first = c->t_first ? c->t_first - c->t_start : 0;
        fprintf(stderr, "%s: generated %zu tokens (%s), first token after %.4f s, %.2f tok/s\n",
                what, res.generated, k3_turn_end_name(res.end), first,
                res.generated > 1 && t > c->t_first
                    ? (double)(res.generated - 1) / (t - c->t_first)
                    : 0.0);
    }
    report_turn(c, &res);
    /* The message is what was shown, as text the renderer accepts. */
    if (k3_buf_puts(&text, "", e) || k3_buf_puts(&thought, "", e) ||
        k3_jtext_clean(c->content.data ? c->content.data : "", c->content.len, &text, e) ||
        k3_jtext_clean(c->reasoning.data ? c->reasoning.data : "", c->reasoning.len, &thought,
                       e) ||
        k3_chat_add_assistant(c->conv, text.data, text.len, c->thinking ? thought.data : NULL,
                              thought.len, e))
        goto done;
    if (o->conv.history) {
        const k3_chat_image *imgs[K3_CHAT_MAX_IMAGES];
        size_t ni = 0;
        const k3_msg *um = c->conv->n >= 2 ? &c->conv->msgs[c->conv->n - 2] : NULL;
        for (size_t i = 0; um && um->role == K3_ROLE_USER && i < um->nparts; i++)
            if (um->parts[i].image >= 0)
                imgs[ni++] = &c->conv->images[um->parts[i].image];
        k3_history_msg msgs[2] = {
            { "user", line, len, NULL, 0, imgs, ni },
            { "assistant", text.data, text.len, c->thinking ? thought.data : NULL, thought.len,
              NULL, 0 },
        };
        k3_history_add(&c->hist, msgs, 2, e);
    }
done:
    end_counter(c);
    k3_constrain_free(cons);
    k3_buf_free(&text);
    k3_buf_free(&thought);
    return e->code;
}

/* One user line: add it, prefill what is new, reply. */
static int turn(chat *c, int number, const char *line, size_t len, k3_err *e)
{
    char what[32];
    snprintf(what, sizeof what, "turn %d", number);
    uint32_t cp;
    for (size_t i = 0; i < len;) {
        size_t n = k3_utf8_decode((const unsigned char *)line + i, len - i, &cp);
        if (!n)
            return k3_fail(e, K3_EINPUT, "%s: the message is not valid UTF-8 (byte %zu)", what, i);
        i += n;
    }
    int thinking, cancelled;
    c->t_start = k3_seconds();
    /* --image: the first message carries the images, before its text. */
    if ((c->npending ? k3_chat_add_user_parts(c->conv, c->pending, c->npending, line, len, e)
                     : k3_chat_add_message(c->conv, "user", line, len, e)) ||
        sync_context(c, what, 1, &thinking, &cancelled, e))
        return e->code;
    c->npending = 0;
    return reply(c, what, thinking, !cancelled, line, len, e);
}

/* The file's bytes become an image of the conversation (decoded once to
 * check it), attached to the next message typed, before its text. */
static int add_pending(chat *c, const char *path, k3_err *e)
{
    size_t len = 0;
    if (c->npending >= K3_CHAT_MAX_IMAGES)
        return k3_fail(e, K3_EINPUT, "%s: a message holds at most %d images", path,
                       K3_CHAT_MAX_IMAGES);
    char *data = k3_read_small_file(e, path, K3_IMAGE_MAX_FILE, &len);
    if (!data)
        return e->code;
    k3_chat_add_image(c->conv, (const unsigned char *)data, len, path, &c->pending[c->npending],
                      e);
    free(data);
    if (e->code)
        return e->code;
    c->npending++;
    return K3_OK;
}

/* --image FILE...: the first message typed carries them. */
static int pending_images(chat *c, k3_err *e)
{
    for (size_t i = 0; i < c->o->nimage; i++)
        if (add_pending(c, c->o->image[i], e))
            return e->code;
    return K3_OK;
}

/* A fresh conversation with the chat's settings: thinking, effort and the
 * --system message (what /reset and the start share). */
static int new_conversation(chat *c, k3_err *e)
{
    const k3_options *o = c->o;
    k3_chat_free(c->conv);
    c->conv = NULL;
    k3_chat_rows_reset(&c->rows); /* its images went with it */
    c->npending = 0;
    if (k3_chat_new(&c->conv, e) ||
        k3_chat_set_thinking(c->conv, c->thinking,
                             !c->thinking ? NULL
                             : o->conv.effort ? o->conv.effort
                             : c->terminal    ? TERMINAL_EFFORT
                                              : SCRIPT_EFFORT,
                             e))
        return e->code;
    if (o->conv.system &&
        k3_chat_add_message(c->conv, "system", o->conv.system, strlen(o->conv.system), e))
        return e->code;
    /* The reply is constrained as a request's response_format or grammar
     * would constrain it (structured/constrain.h). */
    k3_err why = { 0, "" };
    if (c->gtext && (o->grammar_file
                         ? k3_chat_set_grammar(c->conv, c->gtext, c->gtext_len, &why)
                         : k3_chat_set_json_schema(c->conv, c->gtext, c->gtext_len, 1, &why)))
        return k3_fail(e, why.code, "%s: %s",
                       o->grammar_file ? o->grammar_file : o->json_schema_file, why.msg);
    return K3_OK;
}

static const char chat_help[] =
    "commands:\n"
    "  /exit         end the chat (so does the end of input)\n"
    "  /reset        start a new conversation (the --system message is kept;\n"
    "                a --history file keeps every turn)\n"
    "  /save FILE    save the model's state of the conversation (--load-state FILE)\n"
    "  /image FILE   a PNG or JPEG for the next message (before its text; repeatable)\n"
    "  /help         this list\n"
    "a line ending in \\ continues on the next line\n"
    "Ctrl-C stops a reply (what it said so far is kept); at the prompt, it ends\n"
    "the chat\n";

/* A line that is a command: runs it. *quit: /exit. Returns 1 when the line
 * was a command (0: it is a message). */
static int command(chat *c, const char *line, size_t len, int *quit, k3_err *e)
{
    int thinking;
    if (len == 0 || line[0] != '/')
        return 0;
    if (len == 5 && !memcmp(line, "/exit", 5)) {
        *quit = 1;
    } else if (len == 5 && !memcmp(line, "/help", 5)) {
        fputs(chat_help, stderr);
    } else if (len == 6 && !memcmp(line, "/reset", 6)) {
        /* The new conversation renders the same start: the state goes back
         * to its mark, so the next turn feeds only its own message. A mark
         * made stale by a rewind since (a reply that re-encoded) leaves the
         * state as it is: the next turn then recomputes from token 0. */
        k3_err stale = { 0, "" };
        int kept = c->start && k3_state_rewind(c->st, c->start, &stale) == K3_OK;
        if (new_conversation(c, e) == K3_OK && !c->o->quiet)
            fprintf(stderr, "chat: a new conversation%s\n",
                    kept || c->o->conv.no_reuse ? "" : " (the start is recomputed)");
        c->fresh = !kept;
    } else if (len > 6 && !memcmp(line, "/save ", 6)) {
        char path[4096];
        snprintf(path, sizeof path, "%.*s", (int)(len - 6), line + 6);
        if (sync_context(c, "save", 0, &thinking, NULL, e) == K3_OK &&
            k3_state_save(c->st, path, e) == K3_OK && !c->o->quiet)
            fprintf(stderr, "chat: saved the state to %s\n", path);
    } else if (len > 7 && !memcmp(line, "/image ", 7)) {
        /* A file that is not a usable image, or a model without a vision
         * tower, is said and the chat goes on. */
        char path[4096];
        snprintf(path, sizeof path, "%.*s", (int)(len - 7), line + 7);
        if (k3_vision_probe(c->o->model_dir, e) != K3_OK || add_pending(c, path, e) != K3_OK) {
            fprintf(stderr, "chat: %s\n", e->msg);
            e->code = K3_OK;
            e->msg[0] = '\0';
        } else if (!c->o->quiet) {
            const k3_chat_image *im = &c->conv->images[c->pending[c->npending - 1]];
            fprintf(stderr, "chat: image %s (%dx%d) goes with the next message\n", path,
                    im->width, im->height);
        }
    } else {
        fprintf(stderr, "chat: unknown command %.*s (/help lists them)\n", (int)len, line);
    }
    return 1;
}

/* Reads user messages until /exit or the end of input: a line, or lines
 * joined while each ends in a backslash (the backslash becomes a newline);
 * on a terminal with the line editor a pasted block is one line already. */
static int loop(chat *c, k3_err *e)
{
    k3_buf msg = { 0 };
    int number = 0, quit = 0;
    while (!quit && !e->code) {
        const char *line = NULL;
        int64_t got = k3_line_input_read(c->input, msg.len ? "... " : "> ", &line);
        if (got < 0 && interrupted) {
            /* Ctrl-C at the prompt: drops pending continuation lines, else ends. */
            interrupted = 0;
            clearerr(stdin);
            fputc('\n', stderr);
            if (msg.len) {
                msg.len = 0;
                continue;
            }
            break;
        }
        if (got < 0)
            break;
        size_t len = (size_t)got;
        if (len && line[len - 1] == '\\') {
            if (k3_buf_put(&msg, line, len - 1, e) || k3_buf_put(&msg, "\n", 1, e))
                break;
            continue;
        }
        if (k3_buf_put(&msg, line, len, e))
            break;
        k3_line_input_remember(c->input, msg.data, msg.len);
        if (!command(c, msg.data, msg.len, &quit, e) && msg.len)
            turn(c, ++number, msg.data, msg.len, e);
        msg.len = 0;
    }
    k3_buf_free(&msg);
    return e->code;
}

int k3_run_chat(k3_model *m, const k3_options *o, const k3_tokenizer *tok, k3_outputs *out,
                k3_err *e)
{
    static const char *const needed[] = { K3_XTML_OPEN, K3_XTML_CLOSE, K3_XTML_SEP,
                                          K3_XTML_END_OF_MSG };
    chat c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.m = m;
    c.tok = tok;
    c.thinking = !o->conv.no_thinking;
    c.terminal = isatty(STDIN_FILENO);
    /* On a terminal the thinking shows as it comes (as other CLIs show
     * reasoning); in a pipe only when asked, as before. */
    /* (Only for a person at both ends: a script that reads its input from a
     * file keeps its bytes even where stdout is a pty, as under mpirun.) */
    c.show_thinking = o->conv.show_thinking ||
                      (c.terminal && isatty(STDOUT_FILENO) && !o->conv.hide_thinking);
    c.dim = c.show_thinking && isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
    c.report = out->report.f;
    c.counter = isatty(STDERR_FILENO) && !getenv("NO_COLOR") && !o->quiet;
    int have_sampler = 0, thinking;
    /* A Ctrl-C at the prompt also ends the blocked read (k3_os_on_interrupt). */
    interrupted = 0;
    k3_os_on_interrupt(on_sigint);
    for (size_t i = 0; i < sizeof needed / sizeof *needed; i++)
        if (k3_tok_special_id(tok, needed[i]) < 0) {
            k3_fail(e, K3_EINPUT, "the tokenizer has no %s token: not a K3 tokenizer",
                    needed[i]);
            goto done;
        }
    if (o->grammar_file || o->json_schema_file) {
        const char *path = o->grammar_file ? o->grammar_file : o->json_schema_file;
        if (!(c.gtext = k3_read_small_file(e, path, (size_t)16 << 20, &c.gtext_len)) ||
            k3_constrain_vocab_new(tok, k3_model_vocab(m), &c.gv, e))
            goto done;
    }
    char line_history[4096] = "";
    if (!o->conv.no_history_file)
        k3_line_input_default_path(line_history, sizeof line_history);
    if (k3_line_input_open(&c.input, line_history, &interrupted, e) ||
        new_conversation(&c, e) ||
        (o->conv.history && k3_history_open(&c.hist, o->conv.history, c.conv, e)) ||
        pending_images(&c, e) ||
        k3_state_new(&c.st, m, e) || (o->load_state && k3_state_load(c.st, o->load_state, e)) ||
        open_cache(&c, e) ||
        k3_cli_sampler(&c.smp, o, k3_model_vocab(m), e))
        goto done;
    have_sampler = 1;
    if (o->spec &&
        k3_drafter_make(&c.drafter, o->draft, m, (int)o->draft_topk, (size_t)o->spec, NULL,
                        e))
        goto done;
    if (sync_context(&c, "start", 0, &thinking, NULL, e) ||
        (!o->conv.no_reuse && k3_state_mark_take(c.st, &c.start, e)) || loop(&c, e))
        goto done;
    if ((o->save_state || c.cache) &&
        sync_context(&c, "saved state", 0, &thinking, NULL, e) == K3_OK && o->save_state)
        k3_state_save(c.st, o->save_state, e);
    if (c.report && !e->code) {
        fputs(c.nreported ? "\n  ]\n}\n" : "{\n  \"turns\": []\n}\n", c.report);
        if (ferror(c.report))
            k3_fail(e, K3_ERUNTIME, "%s: write failed", o->output.out_json);
    }
done:
    k3_os_on_interrupt(NULL);
    if (have_sampler)
        k3_sampler_free(&c.smp);
    k3_history_free(&c.hist);
    k3_prefix_cache_close(c.cache); /* its snapshots to the directory */
    k3_line_input_close(c.input);
    k3_chat_rows_reset(&c.rows);
    k3_drafter_free(&c.drafter);
    k3_state_mark_free(c.mark);
    k3_state_mark_free(c.start);
    k3_state_free(c.st);
    k3_chat_free(c.conv);
    k3_constrain_vocab_free(c.gv);
    free(c.gtext);
    k3_buf_free(&c.reasoning);
    k3_buf_free(&c.content);
    free(c.prompt);
    free(c.gen);
    return e->code;
}
