/* turn.c - see turn.h.
 *
 * A k3_turn owns the reply reader, the stop matcher and one UTF-8
 * holdback per channel. Text flows through them in
 * the order the ids arrive, so a front end's output depends only on the
 * ids, never on how it batches its writes. */
#include "chat/turn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat/xtml.h"
#include "util/clock.h"
#include "util/error.h"

const char *k3_turn_end_name(k3_turn_end end)
{
    switch (end) {
    case K3_TURN_END_ID: return "end id";
    case K3_TURN_STOP_STRING: return "stop string";
    case K3_TURN_CONTEXT: return "context";
    case K3_TURN_CALLER: return "caller";
    default: return "length";
    }
}

const char *k3_turn_finish_reason(k3_turn_end end, size_t ncalls)
{
    switch (end) {
    case K3_TURN_END_ID: case K3_TURN_STOP_STRING: return ncalls ? "tool_calls" : "stop";
    case K3_TURN_CALLER: return "cancelled";
    default: return "length";
    }
}

void k3_turn_end_ids(const k3_tokenizer *tok, int chat, uint32_t ids[K3_TURN_MAX_END_IDS],
                     size_t *n)
{
    const char *names[K3_TURN_MAX_END_IDS] = { "[EOS]", K3_XTML_END_OF_MSG };
    *n = 0;
    for (int i = 0; tok && i < (chat ? 2 : 1); i++) {
        int64_t id = k3_tok_special_id(tok, names[i]);
        if (id >= 0)
            ids[(*n)++] = (uint32_t)id;
    }
}

/* Whether the rendered prompt ends by opening the think element:
 * ... <|open|> "think" <|sep|>. */
static int opens_think(const k3_chat_segments *s)
{
    return s->n >= 2 && s->seg[s->n - 2].len == 5 &&
           !memcmp(s->text + s->seg[s->n - 2].off, "think", 5);
}

int k3_turn_chat_prompt(const k3_chat *c, const k3_tokenizer *tok, uint32_t **ids, size_t *n,
                        int *thinking, k3_err *e)
{
    k3_chat_segments segs;
    memset(&segs, 0, sizeof segs);
    *ids = NULL;
    *n = 0;
    *thinking = 0;
    if (k3_chat_render(c, &segs, e) == K3_OK && k3_chat_encode(tok, &segs, ids, n, e) == K3_OK)
        *thinking = opens_think(&segs);
    k3_chat_segments_free(&segs);
    return e->code;
}

int k3_turn_feed(k3_model *m, k3_state *s, k3_state_mark *mark, const uint32_t *ids, size_t n,
                 int (*cancelled)(void *ctx), void *ctx, size_t *common, size_t *reused,
                 int *was_cancelled, k3_err *e)
{
    return k3_turn_feed_embeds(m, s, mark, ids, NULL, n, NULL, 0, cancelled, ctx, common,
                               reused, was_cancelled, e);
}

int k3_turn_feed_embeds(k3_model *m, k3_state *s, k3_state_mark *mark, const uint32_t *ids,
                        const float *const *embeds, size_t n, const k3_image_span *img,
                        size_t nimg, int (*cancelled)(void *ctx), void *ctx, size_t *common,
                        size_t *reused, int *was_cancelled, k3_err *e)
{
    size_t same = k3_state_common(s, ids, n, img, nimg), kept = 0;
    *common = same;
    *reused = 0;
    *was_cancelled = 0;
    for (size_t to = same + K3_PREFILL_CHUNK;; to += K3_PREFILL_CHUNK) {
        if (k3_state_sync_embeds(m, s, mark, ids, embeds, to < n ? to : n, img, nimg, &kept,
                                 e))
            return e->code;
        if (to == same + K3_PREFILL_CHUNK)
            *reused = kept;
        if (to >= n)
            return K3_OK;
        if (cancelled && cancelled(ctx)) {
            *was_cancelled = 1;
            return K3_OK;
        }
    }
}

typedef k3_turn turn;

/* Releases the complete characters of s[0..n) on channel ch to the sink;
 * at the end (flush) also the held incomplete tail. */
static int show(turn *t, int ch, const char *s, size_t n, int flush, k3_err *e)
{
    size_t need = n + 8; /* push may add 4 held bytes, flush 4 more */
    if (need > t->out_cap) {
        unsigned char *p = realloc(t->out, need);
        if (!p)
            return k3_fail(e, K3_ERUNTIME, "out of memory routing the generated text");
        t->out = p;
        t->out_cap = need;
    }
    size_t m = k3_utf8_stream_push(&t->utf8[ch], (const unsigned char *)s, n, t->out);
    if (flush)
        m += k3_utf8_stream_flush(&t->utf8[ch], t->out + m);
    if (m && t->sink->text)
        return t->sink->text(t->sink->ctx, ch, (const char *)t->out, m, e);
    return K3_OK;
}

/* Text of one channel from the reader (or, outside chat, every id's
 * bytes as content). The other channel's holdback is flushed first: its
 * element has ended, so a character it holds in part will not complete. */
static int on_text(void *ctx, int ch, const char *s, size_t n, k3_err *e)
{
    turn *t = ctx;
    if (t->stopped || n == 0)
        return K3_OK;
    if (t->last_channel >= 0 && t->last_channel != ch && show(t, t->last_channel, "", 0, 1, e))
        return e->code;
    t->last_channel = ch;
    if (ch != K3_REPLY_CONTENT)
        return show(t, ch, s, n, 0, e);
    t->released.len = 0;
    if (k3_stop_push(&t->stop, s, n, &t->released, &t->stopped, e))
        return e->code;
    return show(t, ch, t->released.data, t->released.len, 0, e);
}

static int on_call(void *ctx, const char *name, size_t nl, const char *args, size_t al, k3_err *e)
{
    turn *t = ctx;
    if (t->stopped)
        return K3_OK;
    t->res.ncalls++;
    return t->sink->call ? t->sink->call(t->sink->ctx, name, nl, args, al, e) : K3_OK;
}

int k3_turn_step(k3_turn *t, uint32_t id, const float *logits, int *done, k3_err *e)
{
    return k3_turn_step_at(t, id, logits, k3_state_pos(t->s), done, e);
}

int k3_turn_step_at(k3_turn *t, uint32_t id, const float *logits, int64_t pos, int *done,
                    k3_err *e)
{
    const k3_turn_params *p = t->p;
    int is_end = k3_gen_is_end(t->m, &t->gen, id), stop = 0;
    *done = 1;
    if (p->constraint && !is_end) {
        int ok = 0;
        if (p->constraint->accept(p->constraint->ctx, id, &ok, e))
            return e->code;
        if (!ok) /* a masked id was drawn: never go on unconstrained */
            return k3_fail(e, K3_ERUNTIME, "id %u was drawn although the grammar refuses it",
                           id);
    }
    t->res.generated++;
    if (!is_end && p->chat && k3_reply_thinking(&t->reply))
        t->res.reasoning++;
    if (!is_end && p->tok) {
        int k = 0, hidden = 0;
        while (k < 3 && t->markup[k] != (int64_t)id)
            k++;
        if (k == 3 && !p->show_special && k3_tok_is_special(p->tok, id))
            hidden = 1; /* a special id outside the markup: no text */
        if (k < 3) {
            if (k3_reply_markup(&t->reply, k, e))
                return e->code;
        } else if (!hidden) {
            const unsigned char *b;
            size_t n;
            if (k3_tok_piece(p->tok, id, &b, &n, e) ||
                (p->chat ? k3_reply_text(&t->reply, (const char *)b, n, e)
                         : on_text(t, K3_REPLY_CONTENT, (const char *)b, n, e)))
                return e->code;
        }
    }
    if (t->sink->token && t->sink->token(t->sink->ctx, id, logits, is_end, &stop, e))
        return e->code;
    int ends = k3_gen_ends_after(t->m, &t->gen, id, t->res.generated, pos);
    if (t->stopped) {
        t->res.end = K3_TURN_STOP_STRING;
        t->res.stop_index = t->stop.matched;
    } else if (stop)
        t->res.end = K3_TURN_CALLER;
    else if (ends)
        t->res.end = ends == K3_GEN_EOS      ? K3_TURN_END_ID
                     : ends == K3_GEN_LENGTH ? K3_TURN_LENGTH
                                             : K3_TURN_CONTEXT;
    else
        *done = 0;
    return K3_OK;
}

/* The end of the text: what the stop matcher holds, then both holdbacks. */
static int flush_text(turn *t, k3_err *e)
{
    t->released.len = 0;
    if (!t->stopped && k3_stop_flush(&t->stop, &t->released, e))
        return e->code;
    if (show(t, K3_REPLY_CONTENT, t->released.data ? t->released.data : "", t->released.len, 1,
             e))
        return e->code;
    return show(t, K3_REPLY_REASONING, "", 0, 1, e);
}

/* A constrained turn's scratch row and its end ids (every id of the
 * vocabulary k3_gen_is_end says ends it: a handful). */
static int constraint_begin(turn *t, k3_err *e)
{
    size_t V = k3_model_vocab(t->m), n = 0;
    if (t->gen.ignore_eos)
        return k3_fail(e, K3_EINPUT, "a grammar cannot be combined with ignore_eos (the text "
                                     "could never end)");
    for (size_t id = 0; id < V; id++)
        n += (size_t)k3_gen_is_end(t->m, &t->gen, (uint32_t)id);
    if (!(t->masked = k3_malloc(e, V * sizeof *t->masked, "the masked logits")) ||
        !(t->ends = k3_malloc(e, (n ? n : 1) * sizeof *t->ends, "the end ids")))
        return e->code;
    for (size_t id = 0; id < V; id++)
        if (k3_gen_is_end(t->m, &t->gen, (uint32_t)id))
            t->ends[t->nends++] = (uint32_t)id;
    return K3_OK;
}

int k3_turn_begin(k3_turn *t, const k3_model *m, const k3_state *s, const k3_turn_params *p,
                  const k3_turn_sink *sink, k3_err *e)
{
    static const char *const markup[3] = { K3_XTML_OPEN, K3_XTML_CLOSE, K3_XTML_SEP };
    memset(t, 0, sizeof *t);
    t->p = p;
    t->sink = sink;
    t->m = m;
    t->s = s;
    t->last_channel = -1;
    t->res.end = K3_TURN_LENGTH;
    t->res.stop_index = -1;
    t->gen = p->gen;
    k3_turn_end_ids(p->tok, p->chat, t->end_ids, &t->gen.n_end_ids);
    t->gen.end_ids = t->end_ids;
    for (int k = 0; k < 3; k++)
        t->markup[k] = p->chat && p->tok ? k3_tok_special_id(p->tok, markup[k]) : -1;
    k3_reply_sink rs = { t, on_text, on_call };
    k3_reply_init(&t->reply, p->thinking, &rs);
    k3_stop_init(&t->stop, p->stop, p->nstop);
    if (p->chat && (!p->tok || t->markup[0] < 0 || t->markup[1] < 0 || t->markup[2] < 0))
        return k3_fail(e, K3_EINPUT, "the tokenizer lacks the chat format's special tokens "
                                     "(<|open|> <|close|> <|sep|>): not a K3 tokenizer");
    return p->constraint ? constraint_begin(t, e) : K3_OK;
}

int k3_turn_finish(k3_turn *t, k3_turn_result *res, k3_err *e)
{
    if (!e->code)
        flush_text(t, e);
    *res = t->res;
    k3_reply_free(&t->reply);
    k3_stop_free(&t->stop);
    k3_buf_free(&t->released);
    free(t->out);
    free(t->logits);
    free(t->seq);
    free(t->masked);
    free(t->ends);
    t->out = NULL;
    t->logits = NULL;
    t->seq = NULL;
    t->masked = NULL;
    t->ends = NULL;
    return e->code;
}

/* Steps without drafting after which one is tried anyway, so acceptance
 * and the cost of rows keep being measured. */
#define SPEC_PROBE_EVERY 16

/* The cost model: per call and per row, from the means (a prior that a
 * pass costs far more than a row until both kinds were seen). */
static k3_spec_cost fitted(const k3_turn_costs *c)
{
    k3_spec_cost k = { 1.0, 0.05 };
    if (c->one_n == 0 || c->many_n == 0)
        return k;
    double t1 = c->one_s / (double)c->one_n, tm = c->many_s / (double)c->many_n;
    double rm = c->many_rows / (double)c->many_n;
    double b = rm > 1.0 ? (tm - t1) / (rm - 1.0) : 0.0;
    if (b < 0)
        b = 0;
    k.per_row = b;
    k.per_call = t1 - b > 0 ? t1 - b : 0;
    if (k.per_call + k.per_row <= 0)
        k.per_call = 1e-9;
    return k;
}

/* How many drafts this step may verify, 0..max: what pays, by the measured
 * acceptance and costs, with a probe every SPEC_PROBE_EVERY plain steps. */
static size_t choose_drafts(k3_turn *t, size_t max)
{
    size_t n = max;
    if (!t->spec_always) {
        k3_spec_stats st = { t->res.drafted, t->res.accepted };
        k3_spec_cost k = fitted(&t->costs);
        n = k3_spec_choose(&st, &k, max, 0.03);
    }
    /* The gate reads this process's own timings: processes that must issue
     * the same forward calls (k3-mpi's ranks) use one choice (gen/draft.h).
     * The probe below then depends on agreed counts only. */
    n = k3_spec_agreed(n);
    if (n > max)
        n = max;
    if (n == 0 && ++t->costs.plain_run >= SPEC_PROBE_EVERY)
        n = 1;
    if (n)
        t->costs.plain_run = 0;
    return n;
}

/* The drafter's pick (gen/draft.h): this turn's sampler and parameters. */
typedef struct {
    k3_sampler *smp;
    const k3_gen_params *gen;
    const k3_model *m;
} turn_pick;

static uint32_t pick_as_sampled(void *ctx, const uint32_t *ids, size_t pos, const float *row)
{
    const turn_pick *tp = ctx;
    return k3_gen_sample_at(tp->smp, tp->gen, tp->m, ids, pos, row);
}

/* The id for sequence position pos after ids[0..pos), drawn from row as
 * a plain run draws it: under a constraint, from the row masked by it
 * (the end ids as they are where it may end, masked elsewhere). */
static int draw(k3_turn *t, const uint32_t *ids, size_t pos, const float *row, uint32_t *id,
                k3_err *e)
{
    const k3_constraint *c = t->p->constraint;
    size_t V = k3_model_vocab(t->m), left = t->gen.max_tokens - t->res.generated;
    if (!c) {
        *id = k3_gen_sample_at(t->smp, &t->gen, t->m, ids, pos, row);
        return K3_OK;
    }
    /* The end budget counts what the context leaves too (k3_gen_ends_after:
     * the id at max_context - 1 is the last). */
    if (t->p->open_ended)
        left = SIZE_MAX;
    else if (t->gen.max_context > 0 && (int64_t)pos < t->gen.max_context &&
        (size_t)(t->gen.max_context - (int64_t)pos) < left)
        left = (size_t)(t->gen.max_context - (int64_t)pos);
    memcpy(t->masked, row, V * sizeof *t->masked);
    if (c->mask(c->ctx, t->masked, V, left, e))
        return e->code;
    int can_end = c->can_end(c->ctx);
    for (size_t i = 0; i < t->nends; i++)
        t->masked[t->ends[i]] = can_end ? row[t->ends[i]] : -INFINITY;
    size_t open = 0;
    while (open < V && !(t->masked[open] > -INFINITY))
        open++;
    if (open == V)
        return k3_fail(e, K3_ERUNTIME, "the grammar allows no next token at position %zu "
                                       "(a model whose every allowed logit is -inf, or a grammar "
                                       "that cannot go on)", pos);
    *id = k3_gen_sample_at(t->smp, &t->gen, t->m, ids, pos, t->masked);
    return K3_OK;
}

int k3_turn_decode_begin(k3_turn *t, k3_state *s, k3_sampler *smp, int *done, k3_err *e)
{
    const k3_turn_params *p = t->p;
    size_t V = k3_model_vocab(t->m);
    t->smp = smp;
    t->nfeed = 0;
    t->spec = p->drafter && !p->gen.recompute ? p->spec : 0;
    /* Tests only: drafting decided by the drafter alone, not by timings,
     * so that a gate's mix of verify rows is the same on any machine. */
    const char *always = getenv("K3_SPEC_ALWAYS");
    t->spec_always = always && !strcmp(always, "1");
    if (t->spec > K3_TURN_MAX_SPEC)
        t->spec = K3_TURN_MAX_SPEC;
    *done = 1;
    if (p->gen.max_tokens == 0)
        return K3_OK;
    if (!k3_state_logits(s))
        return k3_fail(e, K3_EINPUT, "nothing to continue from: the sequence is empty");
    if (!(t->logits = k3_malloc(e, (t->spec + 1) * V * sizeof *t->logits, "logits")))
        return e->code;
    memcpy(t->logits, k3_state_logits(s), V * sizeof *t->logits);
    if (draw(t, k3_state_ids(s), (size_t)k3_state_pos(s), t->logits, &t->feed[0], e))
        return e->code;
    return k3_turn_step(t, t->feed[0], t->logits, done, e);
}

/* Of the nd drafts in t->feed[1..], the longest run the constraint
 * accepts after the pending id (which it has accepted), stopping before
 * an end id: the rest is cut, never verified. The constraint is rolled
 * back to where it was; verification then advances it id by id. */
static size_t grammar_cut(k3_turn *t, size_t nd, k3_err *e)
{
    const k3_constraint *c = t->p->constraint;
    size_t good = 0;
    if (!c)
        return nd;
    while (good < nd && !k3_gen_is_end(t->m, &t->gen, t->feed[1 + good])) {
        int ok = 0;
        if (c->accept(c->ctx, t->feed[1 + good], &ok, e))
            return 0;
        if (!ok)
            break;
        good++;
    }
    if (good && c->rollback(c->ctx, good, e))
        return 0;
    t->res.cut += nd - good;
    return good;
}

/* Drafts after the pending id, within what the turn may still generate and
 * never at a position a plain run would not feed (max_context): into
 * t->feed[1..], their count returned. */
static size_t draft(k3_turn *t, const k3_state *s, k3_err *e)
{
    const k3_turn_params *p = t->p;
    size_t pos = (size_t)k3_state_pos(s), left = p->gen.max_tokens - t->res.generated;
    size_t want = t->spec && left > 1 ? choose_drafts(t, t->spec) : 0;
    if (!want)
        return 0;
    want = want < left - 1 ? want : left - 1;
    if (p->gen.max_context > 0)
        want = (int64_t)(pos + 2 + want) <= p->gen.max_context ? want
               : (int64_t)pos + 2 < p->gen.max_context
                   ? (size_t)(p->gen.max_context - (int64_t)pos - 2)
                   : 0;
    if (!want)
        return 0;
    if (pos + 1 > t->seq_cap) { /* the drafter's view: the sequence, then the id */
        uint32_t *grown = realloc(t->seq, 2 * (pos + 1) * sizeof *t->seq);
        if (!grown) {
            k3_fail(e, K3_ERUNTIME, "out of memory for the drafter's context");
            return 0;
        }
        t->seq = grown;
        t->seq_cap = 2 * (pos + 1);
    }
    memcpy(t->seq, k3_state_ids(s), pos * sizeof *t->seq);
    t->seq[pos] = t->feed[0];
    turn_pick tpk = { t->smp, &t->gen, t->m };
    k3_draft_pick pick = { pick_as_sampled, &tpk };
    size_t nd = p->drafter->propose(p->drafter->ctx, t->seq, pos + 1, t->feed + 1, want, &pick,
                                    e);
    return e->code ? 0 : grammar_cut(t, nd, e);
}

int k3_turn_decode_want(k3_turn *t, k3_model *m, k3_state *s, k3_seq *seq, k3_err *e)
{
    (void)m;
    size_t nd = draft(t, s, e);
    if (e->code)
        return e->code;
    t->nfeed = nd + 1;
    memset(seq, 0, sizeof *seq);
    seq->state = s;
    seq->ids = t->feed;
    seq->n = nd + 1;
    seq->logits = t->logits;
    seq->all_positions = nd > 0;
    seq->embeds = NULL;
    if (t->sink->forward)
        t->sink->forward(t->sink->ctx);
    t->res.forwards++;
    if (nd && (t->p->spec_begin ? t->p->spec_begin : k3_state_spec_begin)(s, nd + 1, e))
        return e->code;
    t->call_t0 = k3_seconds(); /* proposing excluded: a plain step does not propose */
    return K3_OK;
}

/* A plain step's end: the next id from the fed id's row. */
static int took_one(k3_turn *t, k3_state *s, int *done, k3_err *e)
{
    t->costs.one_s += k3_seconds() - t->call_t0;
    t->costs.one_n++;
    if (draw(t, k3_state_ids(s), (size_t)k3_state_pos(s), t->logits, &t->feed[0], e))
        return e->code;
    return k3_turn_step(t, t->feed[0], t->logits, done, e);
}

/* A speculative step's end: the call fed [y, d...] = feed[0..nfeed) from
 * position pos0 = the state's before it. Each row's id is sampled as a
 * plain run would and reported while it equals the next draft; the state
 * keeps y and the accepted drafts (k3_state_spec_end). The next pending
 * id is the model's own after the last accepted draft. */
static int took_drafts(k3_turn *t, k3_model *m, k3_state *s, int *done, k3_err *e)
{
    size_t V = k3_model_vocab(m), nd = t->nfeed - 1, keep = t->nfeed;
    int64_t pos0 = k3_state_pos(s) - (int64_t)t->nfeed;
    const uint32_t *d = t->feed + 1;
    uint32_t z = 0;
    t->res.drafted += nd;
    for (size_t i = 0; i <= nd; i++) {
        const float *row = t->logits + i * V;
        if (draw(t, k3_state_ids(s), (size_t)pos0 + 1 + i, row, &z, e) ||
            k3_turn_step_at(t, z, row, pos0 + 1 + (int64_t)i, done, e))
            return e->code;
        if (*done || i == nd || z != d[i]) {
            keep = i + 1;
            break;
        }
        t->res.accepted++;
    }
    if (t->p->drafter->observe)
        t->p->drafter->observe(t->p->drafter->ctx, nd, keep - 1);
    int (*end)(k3_state *, size_t, const float *, k3_err *) =
        t->p->spec_end ? t->p->spec_end : k3_state_spec_end;
    if (end(s, keep, t->logits + (keep - 1) * V, e))
        return e->code;
    t->feed[0] = z;
    t->costs.many_s += k3_seconds() - t->call_t0; /* the replay and the rows' sampling too */
    t->costs.many_rows += (double)t->nfeed;
    t->costs.many_n++;
    return K3_OK;
}

int k3_turn_decode_took(k3_turn *t, k3_model *m, k3_state *s, int *done, k3_err *e)
{
    *done = 1;
    if (t->nfeed == 0)
        return k3_fail(e, K3_EINPUT, "a turn's rows were taken without being asked for");
    int rc = t->nfeed == 1 ? took_one(t, s, done, e) : took_drafts(t, m, s, done, e);
    t->nfeed = 0;
    return rc;
}

int k3_turn_generate(k3_model *m, k3_state *s, k3_sampler *smp, const k3_turn_params *p,
                     const k3_turn_sink *sink, k3_turn_result *res, k3_err *e)
{
    k3_turn t;
    int done = 0;
    if (k3_turn_begin(&t, m, s, p, sink, e) == K3_OK)
        k3_turn_decode_begin(&t, s, smp, &done, e);
    while (!e->code && !done) {
        k3_seq seq;
        if (k3_turn_decode_want(&t, m, s, &seq, e))
            break;
        /* one id under recompute: k3_gen_feed re-runs the whole sequence */
        if ((seq.n == 1 ? k3_gen_feed(m, s, &t.gen, seq.ids[0], seq.logits, e)
                        : k3_forward_multi(m, &seq, 1, e)) != K3_OK)
            break;
        k3_turn_decode_took(&t, m, s, &done, e);
    }
    return k3_turn_finish(&t, res, e);
}
