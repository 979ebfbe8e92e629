/* answer.c - see answer.h.
 *
 * A request is one turn of the engine's turn driver (chat/turn.h), which
 * owns the end rules, the stop strings and the UTF-8 holdback; this file
 * is its sink: text and tool calls go to the emitter (emit.h), and what
 * they made is published after every id, so a stream carries each piece
 * of text as soon as it is certain. */
#include "server/answer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/turn.h"
#include "chat/xtml.h"
#include "k3/chat.h"
#include "server/emit.h"
#include "server/engine.h"
#include "server/images.h"
#include "structured/constrain.h"
#include "util/clock.h"
#include "util/error.h"

int k3_answerer_init(k3_answerer *a, k3_model *m, const k3_tokenizer *tok, int64_t context,
                     int spec, const char *draft, int draft_topk, k3_err *e)
{
    const char *markup[3] = { K3_XTML_OPEN, K3_XTML_CLOSE, K3_XTML_SEP };
    memset(a, 0, sizeof *a);
    a->model = m;
    a->tok = tok;
    a->context = context;
    for (int i = 0; i < 3; i++)
        if (k3_tok_special_id(tok, markup[i]) < 0)
            return k3_fail(e, K3_EINPUT, "the tokenizer has no %s token: not a K3 tokenizer",
                           markup[i]);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    a->seeds = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec;
    a->spec = spec;
    a->eom = k3_tok_special_id(tok, K3_XTML_END_OF_MSG);
    if (k3_sampler_init(&a->sampler, k3_model_vocab(m), e) ||
        k3_engine_state_new(&a->state, m, e) ||
        k3_drafter_make(&a->drafter, spec ? draft : NULL, m, draft_topk,
                        spec > 0 ? (size_t)spec : 1, NULL, e))
        k3_answerer_free(a);
    return e->code;
}

void k3_answerer_free(k3_answerer *a)
{
    k3_engine_mark_free(a->mark);
    k3_engine_mark_free(a->pmark);
    k3_engine_state_free(a->state);
    k3_sampler_free(&a->sampler);
    k3_drafter_free(&a->drafter);
    memset(a, 0, sizeof *a);
}

int k3_answer_prompt(const k3_tokenizer *tok, const struct k3_server_vision *vision,
                     const k3_api_request *req, int64_t context, long limit,
                     k3_answer_job *job, k3_api_error *err)
{
    k3_err e = { 0, "" };
    size_t *n = &job->n;
    job->req = req;
    job->ids = NULL;
    job->n = 0;
    job->thinking = 0;
    job->nspan = 0;
    job->rows = NULL;
    job->embeds = NULL;
    job->encode_seconds = 0;
    if (k3_api_is_chat(req)) {
        k3_turn_chat_prompt(req->chat, tok, &job->ids, n, &job->thinking, &e);
    } else if (req->prompt_ids) {
        size_t vocab = k3_tok_vocab_size(tok);
        for (size_t i = 0; i < req->nprompt_ids; i++)
            if (req->prompt_ids[i] >= vocab)
                return k3_api_fail(err, 400, "invalid_value", "prompt",
                                   "prompt[%zu]: id %lu is outside the vocabulary (%zu ids).", i,
                                   (unsigned long)req->prompt_ids[i], vocab);
        if ((job->ids = k3_malloc(&e, req->nprompt_ids * sizeof *job->ids, "prompt ids")))
            memcpy(job->ids, req->prompt_ids, req->nprompt_ids * sizeof *job->ids);
        *n = job->ids ? req->nprompt_ids : 0;
    } else {
        k3_tok_encode(tok, req->prompt, req->prompt_len, 0, &job->ids, n, &e);
    }
    if (e.code)
        return k3_api_fail(err, e.code == K3_EINPUT ? 400 : 500, NULL,
                           k3_api_is_chat(req) ? "messages" : "prompt", "%s", e.msg);
    if (k3_api_is_chat(req) && vision &&
        k3_server_images_prompt(vision, tok, req->chat, job, err))
        return err->status;
    if (*n == 0)
        return k3_api_fail(err, 400, "invalid_value", "prompt",
                           "The prompt is empty: there is nothing to continue from.");
    size_t room = (size_t)context > *n ? (size_t)context - *n : 0;
    if (room == 0)
        return k3_api_fail(err, 400, "context_length_exceeded",
                           k3_api_is_chat(req) ? "messages" : "prompt",
                           "This model's maximum context length is %lld tokens. However, your "
                           "prompt is %zu tokens, which leaves no room for an answer.",
                           (long long)context, *n);
    /* A max_tokens over what the context leaves is clamped (api.h): the
     * turn ends "length" there. */
    size_t dflt = k3_api_is_chat(req) ? (size_t)limit : 16;
    size_t asked = req->max_tokens >= 0 ? (size_t)req->max_tokens : dflt;
    job->max_tokens = asked < room ? asked : room;
    return 0;
}

/* The request field a structured-output error names: its message starts
 * with it (structured/constrain.h: "response_format...", "tools[2]...",
 * "tool_choice...", "grammar..."). */
static void structured_param(const char *msg, char *param, size_t cap)
{
    static const char *const fields[] = { "response_format", "tool_choice", "tools", "grammar",
                                          NULL };
    snprintf(param, cap, "%s", "response_format");
    for (size_t i = 0; fields[i]; i++)
        if (!strncmp(msg, fields[i], strlen(fields[i]))) {
            snprintf(param, cap, "%s", fields[i]);
            return;
        }
}

int k3_answer_constrain(const struct k3_constrain_vocab *gv, const k3_api_request *req,
                        k3_answer_job *job, k3_api_error *err)
{
    k3_err e = { 0, "" };
    k3_buf warn = { 0 };
    job->cons = NULL;
    job->warnings = NULL;
    if (k3_api_is_chat(req)) /* chat, messages and responses: one conversation */
        k3_constrain_chat(gv, req->chat, job->thinking, &job->cons, &warn, &e);
    else if (req->constraint)
        k3_constrain_new(gv,
                         !strcmp(req->constraint, "gbnf")          ? K3_CONSTRAIN_GBNF
                         : !strcmp(req->constraint, "json_object") ? K3_CONSTRAIN_JSON_OBJECT
                                                                   : K3_CONSTRAIN_JSON_SCHEMA,
                         req->constraint_text ? req->constraint_text : "",
                         req->constraint_text ? strlen(req->constraint_text) : 0,
                         req->constraint_strict, &job->cons, &warn, &e);
    if (!e.code && warn.len && k3_buf_put(&warn, "", 1, &e) == K3_OK) {
        job->warnings = warn.data; /* NUL-terminated by the put */
        warn.data = NULL;
    }
    k3_buf_free(&warn);
    if (!e.code)
        return 0;
    char param[32];
    structured_param(e.msg, param, sizeof param);
    return k3_api_fail(err, e.code == K3_EINPUT ? 400 : 500,
                       e.code == K3_EINPUT ? "invalid_grammar" : NULL, param, "%s", e.msg);
}

/* One answer in progress: the turn driver's sink. */
typedef struct {
    k3_answerer *a;
    const k3_answer_job *job;
    const k3_answer_io *io;
    k3_emit em;
    k3_buf out;             /* bytes ready to publish */
    uint32_t *ids;          /* [job->max_tokens] the generated ids (for return_token_ids) */
    size_t nids;
    int cancelled;
    k3_answer_stats *st;
    k3_turn_params tp;
    k3_turn_sink sink;
    k3_turn turn;           /* from the end of the prompt (begun) to finish */
    int begun, done, failed;
    k3_turn_result res;
    size_t fed;             /* prompt ids the state holds */
    size_t split;           /* > fed: take the answerer's pmark when fed reaches it */
    size_t *points, npoints; /* the prompt's snapshot points (prefix_hook.h), with a cache */
    float *logits;          /* [vocab] the prompt's last logits */
    double t0, t1;          /* begin; the end of the prompt */
    k3_err error;
} answer;

struct k3_answer {
    answer w;
};

static int publish(answer *w, k3_err *e)
{
    if (w->out.len && w->io->publish(w->io->ctx, w->out.data, w->out.len, e))
        return e->code;
    w->out.len = 0;
    return K3_OK;
}

static int on_text(void *ctx, int channel, const char *s, size_t n, k3_err *e)
{
    answer *w = ctx;
    return k3_emit_text(&w->em, channel, s, n, &w->out, e);
}

static int on_call(void *ctx, const char *name, size_t nl, const char *args, size_t al, k3_err *e)
{
    answer *w = ctx;
    return k3_emit_call(&w->em, name, nl, args, al, &w->out, e);
}

/* The most alternatives a request may ask for (chat's top_logprobs). */
#define MAX_TOP 20

/* The logprobs entry of id, drawn from logits[0..V): the log-softmax of
 * the model's logits themselves (before temperature, penalties or any
 * filter), in double: m = the largest logit, then the sum of exp(l - m)
 * over the ids in ascending order, logprob = l - m - log(sum). The top
 * list: the ntop largest logits, ties to the lower id. libm's exp and log
 * (in double) only shape this report, never an id. */
static int add_logprob(answer *w, uint32_t id, const float *logits, k3_err *e)
{
    const k3_tokenizer *tok = w->a->tok;
    size_t V = k3_model_vocab(w->a->model), ntop = (size_t)w->job->req->top_logprobs;
    uint32_t best[MAX_TOP];
    size_t nbest = 0;
    double m = logits[0], sum = 0;
    if (ntop > MAX_TOP)
        ntop = MAX_TOP;
    for (size_t i = 1; i < V; i++)
        if (logits[i] > m)
            m = logits[i];
    for (size_t i = 0; i < V; i++) {
        sum += exp((double)logits[i] - m);
        if (ntop == 0 || (nbest == ntop && !(logits[i] > logits[best[nbest - 1]])))
            continue;
        size_t at = nbest < ntop ? nbest++ : ntop - 1; /* the last one goes */
        while (at > 0 && logits[i] > logits[best[at - 1]]) {
            best[at] = best[at - 1];
            at--;
        }
        best[at] = (uint32_t)i;
    }
    double lse = m + log(sum);
    k3_emit_alt chosen, top[MAX_TOP];
    if (k3_tok_piece(tok, id, &chosen.bytes, &chosen.len, e))
        return e->code;
    chosen.logprob = (double)logits[id] - lse;
    for (size_t k = 0; k < nbest; k++) {
        if (k3_tok_piece(tok, best[k], &top[k].bytes, &top[k].len, e))
            return e->code;
        top[k].logprob = (double)logits[best[k]] - lse;
    }
    return k3_emit_logprob(&w->em, &chosen, top, nbest, e);
}

/* After each id: what it made is published at once; a client that went
 * away ends the answer. An end id gets no logprobs entry (OpenAI's
 * answers list the content's ids). */
static int on_token(void *ctx, uint32_t id, const float *logits, int is_end, int *stop,
                    k3_err *e)
{
    answer *w = ctx;
    if (w->job->req->logprobs && !is_end && add_logprob(w, id, logits, e))
        return e->code;
    if (w->nids < w->job->max_tokens)
        w->ids[w->nids++] = id;
    if (w->io->cancelled(w->io->ctx))
        *stop = w->cancelled = 1;
    return publish(w, e);
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
    s->frequency_penalty = r->frequency_penalty;
    s->presence_penalty = r->presence_penalty;
    k3_sampler_seed(s, r->has_seed ? r->seed : a->seeds++ * 0x9E3779B97F4A7C15ull);
    return k3_sampler_check(s, e);
}

/* Positions the state holds in common with job's prompt: equal ids, and
 * no image the two do not share before them (k3_state_common). */
static size_t common_ids(const k3_state *s, const k3_answer_job *job)
{
    return k3_state_common(s, job->ids, job->n, job->span, job->nspan);
}

/* Of marks x and y (either may be NULL), the later one at most at. */
static k3_state_mark *mark_within(k3_state_mark *x, k3_state_mark *y, size_t at)
{
    int xo = x && k3_state_mark_pos(x) <= (int64_t)at;
    int yo = y && k3_state_mark_pos(y) <= (int64_t)at;
    if (xo && yo)
        return k3_state_mark_pos(x) >= k3_state_mark_pos(y) ? x : y;
    return xo ? x : yo ? y : NULL;
}

size_t k3_answer_reusable(const k3_answerer *a, const k3_answer_job *job)
{
    size_t same = common_ids(a->state, job);
    if (same == (size_t)k3_state_pos(a->state))
        return same;
    k3_state_mark *mk = mark_within(a->mark, a->pmark, same);
    return mk ? (size_t)k3_state_mark_pos(mk) : 0;
}

/* Brings a's state back to the most of job's prompt it can keep (without
 * feeding: the scheduler feeds the rest a chunk per step), and gives it
 * the prompt's image spans; *split: where the prompt departs from what the
 * state held, when past that. */
static int rewind_for(k3_answerer *a, const k3_answer_job *job, size_t *split, k3_err *e)
{
    size_t n = job->n, same = common_ids(a->state, job);
    *split = 0;
    if (same < (size_t)k3_state_pos(a->state)) {
        k3_err stale = { 0, "" };
        k3_state_mark *mk = mark_within(a->mark, a->pmark, same);
        k3_state_mark *other = mk == a->mark ? a->pmark : a->mark;
        if (!(mk && k3_engine_rewind(a->state, mk, &stale) == K3_OK) &&
            !((other = mark_within(other, NULL, same)) &&
              k3_engine_rewind(a->state, other, &stale) == K3_OK))
            k3_engine_state_reset(a->state);
    }
    if (same > (size_t)k3_state_pos(a->state) && same < n)
        *split = same;
    /* From here the state's ids below its position are the prompt's. */
    return k3_state_set_images(a->state, job->span, job->nspan, e);
}

/* With a prefix cache: the prompt's snapshot points, and its longest
 * cached prefix when that is more than the state kept (the state then
 * holds it, with the prompt's image spans). */
static int from_cache(answer *w, k3_err *e)
{
    k3_answerer *a = w->a;
    const k3_answer_job *job = w->job;
    if (!a->cache)
        return K3_OK;
    if (k3_prefix_points(job->ids, job->n, a->eom, &w->points, &w->npoints, e))
        return e->code;
    if (k3_prefix_cache_restore(a->cache, a->state, job->ids, job->n, job->span, job->nspan,
                                (size_t)k3_state_pos(a->state)) == 0 &&
        k3_state_pos(a->state) > 0)
        return K3_OK;
    return k3_state_set_images(a->state, job->span, job->nspan, e);
}

/* The first snapshot point past fed (the prompt's end without a cache). */
static size_t next_point(const answer *w)
{
    for (size_t i = 0; i < w->npoints; i++)
        if (w->points[i] > w->fed)
            return w->points[i];
    return w->job->n;
}

/* Whether fed is a snapshot point. */
static int at_point(const answer *w)
{
    for (size_t i = 0; i < w->npoints; i++)
        if (w->points[i] == w->fed)
            return 1;
    return 0;
}

/* The turn's parameters of the request. */
static void turn_params(answer *w)
{
    k3_answerer *a = w->a;
    const k3_api_request *r = w->job->req;
    k3_turn_params *tp = &w->tp;
    memset(tp, 0, sizeof *tp);
    tp->gen.max_tokens = w->job->max_tokens;
    tp->gen.max_context = a->context;
    tp->gen.repeat_last_n = 64;
    tp->gen.ignore_eos = r->ignore_eos;
    tp->tok = a->tok;
    tp->chat = k3_api_is_chat(r);
    tp->thinking = w->job->thinking;
    tp->stop = (const char *const *)r->stop;
    tp->nstop = r->nstop;
    /* A request may ask for fewer drafts than the server planned, not more. */
    tp->spec = (size_t)(r->spec >= 0 && r->spec < a->spec ? r->spec : a->spec);
    tp->drafter = &a->drafter;
    tp->spec_begin = k3_engine_spec_begin; /* relayed to replicas (server/engine.h) */
    tp->spec_end = k3_engine_spec_end;
    tp->constraint = w->job->cons ? k3_constrain_get(w->job->cons) : NULL;
    k3_turn_sink sink = { w, on_text, on_call, on_token, NULL };
    w->sink = sink;
}

int k3_answer_begin(k3_answerer *a, const k3_answer_job *job, const k3_answer_io *io,
                    k3_answer_stats *st, k3_answer **out, k3_err *e)
{
    const k3_api_request *r = job->req;
    memset(st, 0, sizeof *st);
    *out = k3_malloc(e, sizeof **out, "an answer");
    if (!*out)
        return e->code;
    answer *w = &(*out)->w;
    memset(w, 0, sizeof *w);
    w->a = a;
    w->job = job;
    w->io = io;
    w->st = st;
    w->t0 = k3_seconds();
    k3_emit_init(&w->em, r->kind, r->stream, r->include_usage, job->id,
                 job->created, job->model_name);
    if (r->logprobs)
        k3_emit_want_logprobs(&w->em);
    k3_emit_warnings(&w->em, job->warnings);
    turn_params(w);
    w->ids = k3_malloc(e, (job->max_tokens + 1) * sizeof *w->ids, "generated ids");
    w->logits = w->ids ? k3_malloc(e, k3_model_vocab(a->model) * sizeof *w->logits, "logits")
                       : NULL;
    if (!w->logits || set_sampler(a, r, e) || rewind_for(a, job, &w->split, e) ||
        from_cache(w, e))
        return e->code;
    w->fed = st->reused = (size_t)k3_state_pos(a->state);
    k3_emit_prompt(&w->em, job->n, st->reused);
    if (w->fed == job->n)
        memcpy(w->logits, k3_state_logits(a->state), k3_model_vocab(a->model) * sizeof *w->logits);
    return K3_OK;
}

int k3_answer_want(k3_answer *x, size_t room, k3_seq *seq)
{
    answer *w = &x->w;
    memset(seq, 0, sizeof *seq);
    seq->state = w->a->state;
    if (w->done || room == 0)
        return 0;
    if (w->io->cancelled(w->io->ctx)) {
        w->cancelled = w->done = 1;
        return 0;
    }
    if (w->begun) { /* the pending id, and the drafts to verify after it */
        k3_err e = { 0, "" };
        if (k3_turn_decode_want(&w->turn, w->a->model, w->a->state, seq, &e) == K3_OK)
            return 1;
        k3_answer_fail(x, &e);
        return 0;
    }
    size_t left = w->job->n - w->fed;
    if (left == 0)
        return 0; /* the prompt is in: the next advance begins the turn */
    seq->ids = w->job->ids + w->fed;
    seq->embeds = w->job->embeds ? w->job->embeds + w->fed : NULL; /* image rows */
    if (w->split > w->fed && w->split - w->fed < left)
        left = w->split - w->fed; /* a piece ends there: pmark (advance) */
    if (next_point(w) - w->fed < left)
        left = next_point(w) - w->fed; /* and at a snapshot point (advance) */
    seq->n = left < room ? left : room;
    seq->logits = w->fed + seq->n == w->job->n ? w->logits : NULL;
    return 1;
}

int k3_answer_decoding(const k3_answer *x)
{
    return x->w.begun && !x->w.done;
}

size_t k3_answer_prompt_left(const k3_answer *x)
{
    return x->w.job->n - x->w.fed;
}

/* The prompt is in: mark its end, begin the turn and draw its first id. */
static int begin_turn(answer *w, k3_err *e)
{
    k3_answerer *a = w->a;
    int end = 0;
    w->t1 = k3_seconds();
    w->st->prompt_seconds = w->t1 - w->t0;
    if (a->cache)
        k3_prefix_cache_prefill_rate(a->cache, w->job->n - w->st->reused, w->st->prompt_seconds);
    if (k3_engine_mark_take(a->state, &a->mark, e) ||
        k3_turn_begin(&w->turn, a->model, a->state, &w->tp, &w->sink, e))
        return e->code;
    w->begun = 1;
    if (k3_turn_decode_begin(&w->turn, a->state, &a->sampler, &end, e))
        return e->code;
    if (end || w->cancelled)
        w->done = 1;
    return K3_OK;
}

int k3_answer_advance(k3_answer *x, int *done, k3_err *e)
{
    answer *w = &x->w;
    k3_answerer *a = w->a;
    if (!w->done && w->begun) {
        int end = 0;
        if (k3_turn_decode_took(&w->turn, a->model, a->state, &end, e))
            goto out;
        if (end || w->cancelled)
            w->done = 1;
    } else if (!w->done) {
        w->fed = (size_t)k3_state_pos(a->state);
        if (w->fed == w->split && k3_engine_mark_take(a->state, &a->pmark, e))
            goto out;
        if (a->cache && w->fed > w->st->reused && at_point(w))
            k3_prefix_cache_put(a->cache, a->state);
        if (w->fed == w->job->n)
            begin_turn(w, e);
    }
out:
    if (e->code)
        k3_answer_fail(x, e);
    *done = w->done;
    return e->code;
}

void k3_answer_fail(k3_answer *x, const k3_err *e)
{
    answer *w = &x->w;
    w->failed = w->done = 1;
    w->error = *e;
    /* The state may be part-way through a forward call: start afresh. */
    k3_engine_state_reset(w->a->state);
}

int k3_answer_finish(k3_answer *x)
{
    answer *w = &x->w;
    const k3_answer_job *job = w->job;
    const k3_api_request *r = job->req;
    k3_answer_stats *st = w->st;
    k3_err e = { 0, "" };
    if (w->begun) {
        k3_err ignore = { K3_ERUNTIME, "" };
        k3_turn_finish(&w->turn, &w->res, w->failed || w->cancelled ? &ignore : &e);
        if (e.code)
            k3_answer_fail(x, &e);
    }
    if (w->t1 > 0)
        st->gen_seconds = k3_seconds() - w->t1;
    st->generated = w->res.generated;
    st->drafted = w->res.drafted;
    st->accepted = w->res.accepted;
    k3_usage u = { job->n, w->res.generated, w->res.reasoning, st->reused, st->prompt_seconds,
                   st->gen_seconds };
    int status = 200;
    if (w->cancelled && !w->failed) {
        st->finish = "cancelled";
    } else if (w->failed) {
        st->error = w->error;
        k3_api_error err;
        k3_api_fail(&err, 500, NULL, NULL, "generation failed: %s", w->error.msg);
        k3_err e2 = { 0, "" };
        w->out.len = 0;
        if (k3_emit_error_as(r->kind, &err, r->stream, &w->out, &e2) == K3_OK)
            publish(w, &e2);
        st->finish = "error";
        status = 500;
    } else {
        st->finish = k3_turn_finish_reason(w->res.end, w->res.ncalls);
        w->em.stop_string = w->res.end == K3_TURN_STOP_STRING && w->res.stop_index >= 0
                                ? r->stop[w->res.stop_index]
                                : NULL;
        const k3_emit_ids ids = { job->ids, job->n, w->ids, w->nids };
        if (k3_emit_finish(&w->em, st->finish, &u, r->return_token_ids ? &ids : NULL, &w->out,
                           &e) ||
            publish(w, &e)) {
            st->finish = "error";
            status = 500;
        }
    }
    k3_emit_free(&w->em);
    k3_buf_free(&w->out);
    free(w->ids);
    free(w->logits);
    free(w->points);
    free(x);
    return status;
}

int k3_answer_run(k3_answerer *a, const k3_answer_job *job, const k3_answer_io *io,
                  k3_answer_stats *st)
{
    k3_err e = { 0, "" };
    k3_answer *w = NULL;
    if (k3_answer_begin(a, job, io, st, &w, &e)) {
        if (!w)
            return 500;
        k3_answer_fail(w, &e);
        return k3_answer_finish(w);
    }
    int done = 0;
    while (!done) {
        k3_seq seq;
        e.code = 0;
        if (k3_answer_want(w, K3_PREFILL_CHUNK, &seq) &&
            k3_engine_forward_multi(a->model, &seq, 1, &e) != K3_OK) {
            k3_answer_fail(w, &e);
            break;
        }
        if (k3_answer_advance(w, &done, &e))
            break;
    }
    return k3_answer_finish(w);
}
