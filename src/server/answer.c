/* answer.c - see answer.h.
 *
 * The decode loop is the engine's shared one (k3/generate.h); this file
 * routes each generated id: the chat markup ids to the reply reader
 * (reply.h), everything else as bytes, which then pass the stop strings
 * (content only), a UTF-8 holdback (so no event splits a character) and
 * the emitter (emit.h). Output is published after every id, so a stream
 * carries each piece of text as soon as it is certain. */
#include "server/answer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/stop.h"
#include "k3/chat.h"
#include "k3/generate.h"
#include "server/emit.h"
#include "server/reply.h"
#include "util/error.h"

/* Prompt ids sent through one k3_state_sync call between cancellation
 * checks. */
#define PREFILL_CHUNK 512

int k3_answerer_init(k3_answerer *a, k3_model *m, const k3_tokenizer *tok, int64_t context,
                     k3_err *e)
{
    const char *markup[3] = { "<|open|>", "<|close|>", "<|sep|>" };
    int64_t id[3];
    memset(a, 0, sizeof *a);
    a->model = m;
    a->tok = tok;
    a->context = context;
    for (int i = 0; i < 3; i++)
        if ((id[i] = k3_tok_special_id(tok, markup[i])) < 0)
            return k3_fail(e, K3_EINPUT, "the tokenizer has no %s token: not a K3 tokenizer",
                           markup[i]);
    a->open = (uint32_t)id[0];
    a->close = (uint32_t)id[1];
    a->sep = (uint32_t)id[2];
    a->eos_text = k3_tok_special_id(tok, "[EOS]");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    a->seeds = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec;
    if (k3_sampler_init(&a->sampler, k3_model_vocab(m), e) ||
        k3_state_new(&a->state, m, e))
        k3_answerer_free(a);
    return e->code;
}

void k3_answerer_free(k3_answerer *a)
{
    k3_state_mark_free(a->mark);
    k3_state_free(a->state);
    k3_sampler_free(&a->sampler);
    memset(a, 0, sizeof *a);
}

/* Whether the rendered prompt ends by opening the think element. */
static int opens_think(const k3_chat_segments *s)
{
    return s->n >= 2 && s->seg[s->n - 2].len == 5 && !memcmp(s->text + s->seg[s->n - 2].off,
                                                             "think", 5);
}

int k3_answer_prompt(const k3_tokenizer *tok, const k3_api_request *req, int64_t context,
                     long limit, k3_answer_job *job, k3_api_error *err)
{
    k3_err e = { 0, "" };
    size_t *n = &job->n;
    job->req = req;
    job->ids = NULL;
    job->n = 0;
    job->thinking = 0;
    if (req->kind == K3_API_CHAT) {
        k3_chat_segments segs;
        memset(&segs, 0, sizeof segs);
        if (k3_chat_render(req->chat, &segs, &e) == K3_OK &&
            k3_chat_encode(tok, &segs, &job->ids, n, &e) == K3_OK)
            job->thinking = opens_think(&segs);
        k3_chat_segments_free(&segs);
    } else {
        k3_tok_encode(tok, req->prompt, req->prompt_len, 0, &job->ids, n, &e);
    }
    if (e.code)
        return k3_api_fail(err, e.code == K3_EINPUT ? 400 : 500, NULL,
                           req->kind == K3_API_CHAT ? "messages" : "prompt", "%s", e.msg);
    if (*n == 0)
        return k3_api_fail(err, 400, "invalid_value", "prompt",
                           "The prompt is empty: there is nothing to continue from.");
    size_t room = (size_t)context > *n ? (size_t)context - *n : 0;
    if (room == 0)
        return k3_api_fail(err, 400, "context_length_exceeded",
                           req->kind == K3_API_CHAT ? "messages" : "prompt",
                           "This model's maximum context length is %lld tokens. However, your "
                           "prompt is %zu tokens, which leaves no room for an answer.",
                           (long long)context, *n);
    if (req->max_tokens >= 0 && (size_t)req->max_tokens > room)
        return k3_api_fail(err, 400, "context_length_exceeded", "max_tokens",
                           "This model's maximum context length is %lld tokens. However, you "
                           "requested %zu tokens (%zu in the prompt, %ld for the answer).",
                           (long long)context, *n + (size_t)req->max_tokens, *n,
                           req->max_tokens);
    size_t dflt = req->kind == K3_API_CHAT ? (size_t)limit : 16;
    job->max_tokens = req->max_tokens >= 0 ? (size_t)req->max_tokens : room < dflt ? room : dflt;
    return 0;
}

/* One answer in progress. */
typedef struct {
    k3_answerer *a;
    const k3_answer_job *job;
    const k3_answer_io *io;
    k3_emit em;
    k3_reply reply;
    k3_stop stop;
    k3_utf8_stream utf8[2]; /* per channel: K3_REPLY_REASONING, K3_REPLY_CONTENT */
    k3_buf out;             /* bytes ready to publish */
    k3_buf scratch;
    int stopped;            /* a stop string or [EOS] ended the answer */
    int cancelled;
} answer;

/* Text that passed the stop strings: through the channel's UTF-8 holdback
 * to the emitter. */
static int emit_text(answer *w, int channel, const char *s, size_t n, k3_err *e)
{
    if (n == 0)
        return K3_OK;
    unsigned char *tmp = k3_malloc(e, n + 4, "text");
    if (!tmp)
        return e->code;
    size_t m = k3_utf8_stream_push(&w->utf8[channel], (const unsigned char *)s, n, tmp);
    k3_emit_text(&w->em, channel, (const char *)tmp, m, &w->out, e);
    free(tmp);
    return e->code;
}

/* Reply text (the reply reader's sink): content meets the stop strings. */
static int on_text(void *ctx, int channel, const char *s, size_t n, k3_err *e)
{
    answer *w = ctx;
    if (w->stopped)
        return K3_OK;
    if (channel != K3_REPLY_CONTENT)
        return emit_text(w, channel, s, n, e);
    w->scratch.len = 0;
    if (k3_stop_push(&w->stop, s, n, &w->scratch, &w->stopped, e))
        return e->code;
    return emit_text(w, channel, w->scratch.data, w->scratch.len, e);
}

static int on_call(void *ctx, const char *name, size_t nl, const char *args, size_t al, k3_err *e)
{
    answer *w = ctx;
    return w->stopped ? K3_OK : k3_emit_call(&w->em, name, nl, args, al, &w->out, e);
}

static int publish(answer *w, k3_err *e)
{
    if (w->out.len && w->io->publish(w->io->ctx, w->out.data, w->out.len, e))
        return e->code;
    w->out.len = 0;
    return K3_OK;
}

/* The decode loop's callback: one generated id. */
static int on_token(void *user, uint32_t id, const float *logits, k3_err *e)
{
    answer *w = user;
    k3_answerer *a = w->a;
    (void)logits;
    if (w->io->cancelled(w->io->ctx))
        return w->cancelled = 1;
    if (k3_model_is_eos(a->model, id))
        return 0; /* the loop ends here by itself */
    if ((int64_t)id == a->eos_text)
        return w->stopped = 1;
    int rc;
    if (w->job->req->kind == K3_API_CHAT && (id == a->open || id == a->close || id == a->sep)) {
        rc = k3_reply_markup(&w->reply, id == a->open    ? K3_REPLY_OPEN
                                        : id == a->close ? K3_REPLY_CLOSE
                                                         : K3_REPLY_SEP, e);
    } else {
        const unsigned char *bytes;
        size_t len;
        rc = k3_tok_piece(a->tok, id, &bytes, &len, e);
        if (rc == K3_OK)
            rc = w->job->req->kind == K3_API_CHAT
                     ? k3_reply_text(&w->reply, (const char *)bytes, len, e)
                     : on_text(w, K3_REPLY_CONTENT, (const char *)bytes, len, e);
    }
    if (rc || publish(w, e))
        return 1;
    return w->stopped;
}

/* Feeds the prompt, with a cancellation check between chunks. The first
 * call reaches past the part the state shares with the prompt, so it makes
 * the same reuse decision one call for the whole prompt would. */
static int prefill(answer *w, size_t *reused, k3_err *e)
{
    k3_answerer *a = w->a;
    const uint32_t *ids = w->job->ids, *have = k3_state_ids(a->state);
    size_t n = w->job->n, pos = (size_t)k3_state_pos(a->state), common = 0, done;
    while (common < pos && common < n && have[common] == ids[common])
        common++;
    for (size_t to = common + PREFILL_CHUNK;; to += PREFILL_CHUNK) {
        if (k3_state_sync(a->model, a->state, a->mark, ids, to < n ? to : n, &done, e))
            return e->code;
        if (to == common + PREFILL_CHUNK)
            *reused = done;
        if (to >= n)
            break;
        if (w->io->cancelled(w->io->ctx)) {
            w->cancelled = 1;
            return K3_OK;
        }
    }
    return k3_state_mark_take(a->state, &a->mark, e);
}

/* Sampler settings of the request. */
static int set_sampler(k3_answerer *a, const k3_api_request *r, k3_err *e)
{
    k3_sampler *s = &a->sampler;
    s->temperature = r->temperature;
    s->top_p = r->top_p;
    s->top_k = r->top_k;
    s->min_p = r->min_p;
    s->repeat_penalty = r->repeat_penalty;
    k3_sampler_seed(s, r->has_seed ? r->seed : a->seeds++ * 0x9E3779B97F4A7C15ull);
    return k3_sampler_check(s, e);
}

/* The end of the answer: what is held back, then the finish. */
static int finish(answer *w, const char *reason, const k3_usage *u, k3_err *e)
{
    w->scratch.len = 0;
    if (k3_stop_flush(&w->stop, &w->scratch, e) ||
        emit_text(w, K3_REPLY_CONTENT, w->scratch.data, w->scratch.len, e))
        return e->code;
    for (int ch = 0; ch < 2; ch++) {
        unsigned char tail[8];
        size_t m = k3_utf8_stream_flush(&w->utf8[ch], tail);
        if (k3_emit_text(&w->em, ch, (const char *)tail, m, &w->out, e))
            return e->code;
    }
    if (k3_emit_finish(&w->em, reason, u, &w->out, e))
        return e->code;
    return publish(w, e);
}

int k3_answer_run(k3_answerer *a, const k3_answer_job *job, const k3_answer_io *io,
                  k3_answer_stats *st)
{
    k3_err e = { 0, "" };
    const k3_api_request *r = job->req;
    answer w;
    memset(&w, 0, sizeof w);
    memset(st, 0, sizeof *st);
    w.a = a;
    w.job = job;
    w.io = io;
    k3_emit_init(&w.em, r->kind == K3_API_CHAT, r->stream, r->include_usage, job->id,
                 job->created, job->model_name);
    k3_reply_sink sink = { &w, on_text, on_call };
    k3_reply_init(&w.reply, job->thinking, &sink);
    k3_stop_init(&w.stop, (const char *const *)r->stop, r->nstop);
    k3_gen_params gp;
    memset(&gp, 0, sizeof gp);
    gp.max_tokens = job->max_tokens;
    gp.max_context = a->context;
    gp.repeat_last_n = 64;
    k3_gen_end end = K3_GEN_LENGTH;
    int status = 200;
    if (set_sampler(a, r, &e) == K3_OK && prefill(&w, &st->reused, &e) == K3_OK &&
        !w.cancelled)
        k3_generate(a->model, a->state, &a->sampler, &gp, on_token, &w, &end, &st->generated,
                    &e);
    k3_usage u = { job->n, st->generated, st->reused };
    if (w.cancelled) {
        st->finish = "cancelled";
    } else if (e.code) {
        /* The state may be part-way through a forward call: start afresh. */
        k3_state_reset(a->state);
        st->error = e;
        k3_api_error err;
        k3_api_fail(&err, 500, NULL, NULL, "generation failed: %s", e.msg);
        k3_err e2 = { 0, "" };
        w.out.len = 0;
        if (k3_emit_error(&err, r->stream, &w.out, &e2) == K3_OK)
            publish(&w, &e2);
        st->finish = "error";
        status = 500;
    } else {
        st->finish = w.stopped || end == K3_GEN_EOS
                         ? (w.em.ncalls ? "tool_calls" : "stop")
                         : "length";
        if (finish(&w, st->finish, &u, &e)) {
            st->finish = "error";
            status = 500;
        }
    }
    k3_reply_free(&w.reply);
    k3_stop_free(&w.stop);
    k3_emit_free(&w.em);
    k3_buf_free(&w.out);
    k3_buf_free(&w.scratch);
    return status;
}
