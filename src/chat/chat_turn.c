/* chat_turn.c - k3_chat_turn (k3/turn.h): the public face of the turn
 * driver (chat/turn.h) for one chat turn. It adds nothing to the rules:
 * the rendering, the reuse, the end ids and the reply reader are the ones
 * the CLI's chat and the server run; this file only collects the sink's
 * output into a k3_chat_reply. */
#include <stdlib.h>
#include <string.h>

#include "chat/turn.h"
#include "k3/turn.h"
#include "util/error.h"
#include "util/json_write.h"

typedef struct collect {
    k3_buf text[2];          /* K3_REPLY_REASONING, K3_REPLY_CONTENT */
    k3_chat_call *calls;
    size_t ncalls;
    int last_channel;        /* -1: no text yet */
    int stop;                /* on_text asked to end the turn */
    k3_chat_text_fn on_text;
    void *user;
} collect;

static int on_text(void *ctx, int channel, const char *s, size_t n, k3_err *e)
{
    collect *c = ctx;
    c->last_channel = channel;
    if (k3_buf_put(&c->text[channel], s, n, e))
        return e->code;
    if (c->on_text && c->on_text(c->user, channel == K3_REPLY_REASONING, s, n))
        c->stop = 1;
    return K3_OK;
}

static char *dup_n(const char *s, size_t n, k3_err *e)
{
    char *d = k3_malloc(e, n + 1, "a tool call");
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static int on_call(void *ctx, const char *name, size_t nl, const char *args, size_t al,
                   k3_err *e)
{
    collect *c = ctx;
    k3_chat_call *g = realloc(c->calls, (c->ncalls + 1) * sizeof *g);
    if (!g)
        return k3_fail(e, K3_ERUNTIME, "out of memory for the reply's tool calls");
    c->calls = g;
    g[c->ncalls].name = dup_n(name, nl, e);
    g[c->ncalls].arguments = g[c->ncalls].name ? dup_n(args, al, e) : NULL;
    if (!g[c->ncalls].arguments) {
        free(g[c->ncalls].name);
        return e->code;
    }
    c->ncalls++;
    return K3_OK;
}

static int on_token(void *ctx, uint32_t id, const float *logits, int is_end, int *stop,
                    k3_err *e)
{
    collect *c = ctx;
    (void)id;
    (void)logits;
    (void)is_end;
    (void)e;
    *stop = c->stop;
    return K3_OK;
}

/* b's bytes as a NUL-terminated malloc'd string (moved out of b). */
static char *take(k3_buf *b, size_t *len, k3_err *e)
{
    if (k3_buf_put(b, "", 1, e))
        return NULL;
    *len = b->len - 1;
    char *s = b->data;
    memset(b, 0, sizeof *b);
    return s;
}

int k3_chat_turn(k3_model *m, k3_state *s, const k3_tokenizer *tok, const k3_chat *c,
                 k3_sampler *smp, const k3_gen_params *p, k3_chat_text_fn text_fn, void *user,
                 k3_chat_reply *out, k3_err *e)
{
    uint32_t *ids = NULL;
    size_t n = 0, common = 0, reused = 0;
    int thinking = 0, cancelled = 0;
    collect col;
    k3_turn_params tp;
    k3_turn_result res;
    memset(out, 0, sizeof *out);
    memset(&col, 0, sizeof col);
    memset(&tp, 0, sizeof tp);
    memset(&res, 0, sizeof res);
    col.last_channel = -1;
    col.on_text = text_fn;
    col.user = user;
    tp.gen = *p;
    tp.gen.end_ids = NULL; /* k3_turn_generate sets the turn's own */
    tp.gen.n_end_ids = 0;
    tp.tok = tok;
    tp.chat = 1;
    k3_turn_sink sink = { &col, on_text, on_call, on_token, NULL };
    if (k3_turn_chat_prompt(c, tok, &ids, &n, &thinking, e))
        goto done;
    if (p->max_context > 0 && (int64_t)n > p->max_context) {
        k3_fail(e, K3_EINPUT, "the conversation is %zu tokens, more than max_context %lld", n,
                (long long)p->max_context);
        goto done;
    }
    tp.thinking = thinking;
    if (k3_turn_feed(m, s, NULL, ids, n, NULL, NULL, &common, &reused, &cancelled, e) ||
        k3_turn_generate(m, s, smp, &tp, &sink, &res, e))
        goto done;
    out->content = take(&col.text[K3_REPLY_CONTENT], &out->content_len, e);
    out->reasoning = out->content ? take(&col.text[K3_REPLY_REASONING], &out->reasoning_len, e)
                                  : NULL;
    if (!out->reasoning)
        goto done;
    out->calls = col.calls;
    out->ncalls = col.ncalls;
    col.calls = NULL;
    col.ncalls = 0;
    out->prompt_tokens = n;
    out->cached_tokens = reused;
    out->generated_tokens = res.generated;
    out->finish_reason = k3_turn_finish_reason(res.end, res.ncalls);
    out->ended_in_thinking = thinking && res.end != K3_TURN_END_ID &&
                             res.end != K3_TURN_STOP_STRING &&
                             col.last_channel != K3_REPLY_CONTENT && out->content_len == 0;
done:
    for (size_t i = 0; i < col.ncalls; i++) {
        free(col.calls[i].name);
        free(col.calls[i].arguments);
    }
    free(col.calls);
    k3_buf_free(&col.text[0]);
    k3_buf_free(&col.text[1]);
    free(ids);
    if (e->code)
        k3_chat_reply_free(out);
    return e->code;
}

void k3_chat_reply_free(k3_chat_reply *r)
{
    free(r->content);
    free(r->reasoning);
    for (size_t i = 0; i < r->ncalls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    free(r->calls);
    memset(r, 0, sizeof *r);
}
