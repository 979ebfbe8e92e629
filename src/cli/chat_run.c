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
 * gives the same bits however a sequence is split. */
#include "cli/chat_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/generate.h"
#include "cli/history.h"
#include "cli/textout.h"
#include "k3/chat.h"
#include "server/reply.h"
#include "tokenizer/utf8.h"
#include "util/clock.h"
#include "util/error.h"

/* Reply length when --gen is not given. */
#define DEFAULT_REPLY_TOKENS 8192

typedef struct chat {
    const k3_options *o;
    k3_model *m;
    const k3_tokenizer *tok;
    k3_chat *conv;
    k3_state *st;
    k3_state_mark *mark;   /* where the current reply began */
    k3_sampler smp;
    k3_history hist;
    int thinking, dim;
    int64_t end_ids[2];    /* <|end_of_msg|> and [EOS]: a reply ends at either */
    int64_t markup[3];     /* <|open|> <|close|> <|sep|>, as K3_REPLY_OPEN.. */
    /* The turn being generated. */
    k3_reply reply;
    k3_buf reasoning, content;
    k3_textout thought, said; /* what is shown of each channel */
    int thought_open;         /* the thinking display is open (dimmed) */
    double t_start, t_first;
} chat;

/* Ends the thinking display (if open) before the reply text or the end. */
static int close_thought(chat *c, k3_err *e)
{
    if (!c->thought_open)
        return K3_OK;
    c->thought_open = 0;
    if (k3_textout_end(&c->thought, e))
        return e->code;
    fputs(c->dim ? "\033[0m\n" : "\n", stdout);
    return K3_OK;
}

/* k3_reply's text sink: collects both channels and shows them. */
static int on_text(void *ctx, int channel, const char *s, size_t n, k3_err *e)
{
    chat *c = ctx;
    if (channel == K3_REPLY_REASONING) {
        if (k3_buf_put(&c->reasoning, s, n, e) || !c->o->conv.show_thinking)
            return e->code;
        if (!c->thought_open && c->dim)
            fputs("\033[2m", stdout);
        c->thought_open = 1;
        return k3_textout_put(&c->thought, s, n, e);
    }
    if (k3_buf_put(&c->content, s, n, e) || close_thought(c, e))
        return e->code;
    return k3_textout_put(&c->said, s, n, e);
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

/* The decode loop's callback: routes each id to the reply reader. */
static int on_token(void *user, uint32_t id, const float *logits, k3_err *e)
{
    chat *c = user;
    (void)logits;
    if (!c->t_first)
        c->t_first = k3_seconds();
    if ((int64_t)id == c->end_ids[0] || (int64_t)id == c->end_ids[1] || k3_model_is_eos(c->m, id))
        return 1;
    for (int k = 0; k < 3; k++)
        if ((int64_t)id == c->markup[k])
            return k3_reply_markup(&c->reply, k, e) ? 1 : c->said.stopped;
    const unsigned char *b;
    size_t n;
    if (k3_tok_piece(c->tok, id, &b, &n, e) || k3_reply_text(&c->reply, (const char *)b, n, e))
        return 1;
    return c->said.stopped;
}

/* s[0..n) as valid UTF-8: each byte that starts no valid character
 * becomes U+FFFD (a reply may end inside a character, or a random model
 * may emit anything; the renderer and the history accept only text). */
static int valid_utf8(const char *s, size_t n, k3_buf *out, k3_err *e)
{
    out->len = 0;
    if (k3_buf_put(out, "", 0, e))
        return e->code;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = k3_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (k3_buf_put(out, len ? s + i : "\xEF\xBF\xBD", len ? len : 3, e))
            return e->code;
        i += len ? len : 1;
    }
    return K3_OK;
}

/* Renders the conversation (with or without the generation prompt) and
 * brings the state to it, reporting what was reused on stderr. */
static int sync_context(chat *c, const char *what, int gen_prompt, k3_err *e)
{
    const k3_options *o = c->o;
    k3_chat_segments segs = { 0 };
    uint32_t *ids = NULL;
    size_t n = 0, reused = 0;
    k3_chat_set_generation_prompt(c->conv, gen_prompt);
    if (k3_chat_render(c->conv, &segs, e) || k3_chat_encode(c->tok, &segs, &ids, &n, e))
        goto done;
    if ((long long)n > (long long)o->memory.max_context) {
        k3_fail(e, K3_EINPUT, "%s: the conversation is %zu tokens, more than --max-context %ld",
                what, n, o->memory.max_context);
        goto done;
    }
    size_t had = (size_t)k3_state_pos(c->st), common = 0;
    const uint32_t *old = k3_state_ids(c->st);
    while (common < had && common < n && old[common] == ids[common])
        common++;
    if (o->conv.no_reuse)
        k3_state_reset(c->st);
    if (k3_state_sync(c->m, c->st, c->mark, ids, n, &reused, e))
        goto done;
    if (common < had && !o->conv.no_reuse && !o->quiet)
        fprintf(stderr, "chat: %s: the cached sequence (%zu tokens) departs from the rendering "
                        "at token %zu; resumed from token %zu\n", what, had, common, reused);
    if (!o->quiet)
        fprintf(stderr, "%s: prefilled %zu new tokens, reused %zu\n", what, n - reused, reused);
done:
    free(ids);
    k3_chat_segments_free(&segs);
    return e->code;
}

static const char *end_name(k3_gen_end end, const chat *c)
{
    if (c->said.stopped)
        return "stop string";
    switch (end) {
    case K3_GEN_EOS: case K3_GEN_CALLER: return "end of message";
    case K3_GEN_CONTEXT: return "--max-context reached";
    default: return "token limit";
    }
}

/* Generates the reply to the user's line[0..len), shows it, and adds it
 * to the conversation and (with the line) to the history. */
static int reply(chat *c, const char *what, const char *line, size_t len, k3_err *e)
{
    const k3_options *o = c->o;
    k3_reply_sink sink = { c, on_text, on_call };
    k3_gen_params gp;
    k3_gen_end end;
    size_t ngen = 0;
    k3_buf text = { 0 }, thought = { 0 };
    k3_cli_gen_params(&gp, o, o->gen_given ? (size_t)o->gen : DEFAULT_REPLY_TOKENS);
    gp.ignore_eos = 0;
    c->reasoning.len = c->content.len = 0;
    k3_reply_init(&c->reply, c->thinking, &sink);
    k3_textout_init(&c->thought, stdout, NULL, 0);
    k3_textout_init(&c->said, stdout, o->stop, o->nstop);
    c->t_first = 0;
    if (k3_state_mark_take(c->st, &c->mark, e) ||
        k3_generate(c->m, c->st, &c->smp, &gp, on_token, c, &end, &ngen, e) ||
        close_thought(c, e) || k3_textout_end(&c->said, e))
        goto done;
    fputc('\n', stdout);
    fflush(stdout);
    if (!o->quiet) {
        double t = k3_seconds(), first = c->t_first ? c->t_first - c->t_start : 0;
        fprintf(stderr, "%s: generated %zu tokens (%s), first token after %.4f s, %.2f tok/s\n",
                what, ngen, end_name(end, c), first,
                ngen > 1 && t > c->t_first ? (double)(ngen - 1) / (t - c->t_first) : 0.0);
    }
    /* The message is what was shown: content up to a stop string. */
    size_t clen = c->said.stopped ? c->said.released : c->content.len;
    if (valid_utf8(c->content.data ? c->content.data : "", clen, &text, e) ||
        valid_utf8(c->reasoning.data ? c->reasoning.data : "", c->reasoning.len, &thought, e) ||
        k3_chat_add_assistant(c->conv, text.data, text.len, c->thinking ? thought.data : NULL,
                              thought.len, e))
        goto done;
    if (o->conv.history) {
        k3_history_msg msgs[2] = {
            { "user", line, len, NULL, 0 },
            { "assistant", text.data, text.len, c->thinking ? thought.data : NULL, thought.len },
        };
        k3_history_add(&c->hist, msgs, 2, e);
    }
done:
    k3_reply_free(&c->reply);
    k3_textout_free(&c->thought);
    k3_textout_free(&c->said);
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
    c->t_start = k3_seconds();
    if (k3_chat_add_message(c->conv, "user", line, len, e) || sync_context(c, what, 1, e))
        return e->code;
    return reply(c, what, line, len, e);
}

/* Reads user lines until "/exit" or the end of input. */
static int loop(chat *c, k3_err *e)
{
    char *line = NULL;
    size_t cap = 0;
    int tty = isatty(STDIN_FILENO), number = 0;
    for (;;) {
        if (tty)
            fputs("> ", stderr);
        ssize_t got = getline(&line, &cap, stdin);
        if (got < 0)
            break;
        size_t len = (size_t)got;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        if (len == 5 && !memcmp(line, "/exit", 5))
            break;
        if (len == 0)
            continue;
        if (turn(c, ++number, line, len, e))
            break;
    }
    free(line);
    return e->code;
}

int k3_run_chat(k3_model *m, const k3_options *o, const k3_tokenizer *tok, k3_err *e)
{
    chat c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.m = m;
    c.tok = tok;
    c.thinking = !o->conv.no_thinking;
    c.dim = o->conv.show_thinking && isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
    c.end_ids[0] = k3_tok_special_id(tok, "<|end_of_msg|>");
    c.end_ids[1] = k3_tok_special_id(tok, "[EOS]");
    c.markup[K3_REPLY_OPEN] = k3_tok_special_id(tok, "<|open|>");
    c.markup[K3_REPLY_CLOSE] = k3_tok_special_id(tok, "<|close|>");
    c.markup[K3_REPLY_SEP] = k3_tok_special_id(tok, "<|sep|>");
    int have_sampler = 0;
    if (c.markup[0] < 0 || c.markup[1] < 0 || c.markup[2] < 0 || c.end_ids[0] < 0) {
        k3_fail(e, K3_EINPUT, "the tokenizer lacks the chat format's special tokens "
                              "(<|open|> <|close|> <|sep|> <|end_of_msg|>): not a K3 tokenizer");
        goto done;
    }
    if (k3_chat_new(&c.conv, e) ||
        k3_chat_set_thinking(c.conv, c.thinking,
                             c.thinking ? (o->conv.effort ? o->conv.effort : "max") : NULL, e) ||
        (o->conv.system &&
         k3_chat_add_message(c.conv, "system", o->conv.system, strlen(o->conv.system), e)) ||
        (o->conv.history && k3_history_open(&c.hist, o->conv.history, c.conv, e)) ||
        k3_state_new(&c.st, m, e) || (o->load_state && k3_state_load(c.st, o->load_state, e)) ||
        k3_cli_sampler(&c.smp, o, k3_model_vocab(m), e))
        goto done;
    have_sampler = 1;
    if (sync_context(&c, "start", 0, e) || loop(&c, e))
        goto done;
    if (o->save_state && sync_context(&c, "saved state", 0, e) == K3_OK)
        k3_state_save(c.st, o->save_state, e);
done:
    if (have_sampler)
        k3_sampler_free(&c.smp);
    k3_history_free(&c.hist);
    k3_state_mark_free(c.mark);
    k3_state_free(c.st);
    k3_chat_free(c.conv);
    k3_buf_free(&c.reasoning);
    k3_buf_free(&c.content);
    return e->code;
}
