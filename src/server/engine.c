/* engine.c - see engine.h.
 *
 * A command is a header of HDR int64s {op, a, b, words}, broadcast first,
 * then (words > 0) a payload of `words` uint32s. A forward's payload is,
 * per sequence, {state id, n, logits: 0 none, 1 last row, 2 every row},
 * then every sequence's ids in order. A speculative step's begin carries
 * {state id, max ids}, its end {state id, keep}: a follower ends it with the
 * row the replica's own verify call gave (the leader's row, bit for bit).
 * Ids of states and marks are indexes
 * into a table (the leader's pointers by id, a follower's replicas by the
 * same id), given out in creation order and never reused. */
#include "server/engine.h"

#include <stdlib.h>
#include <string.h>

#include "util/ckd.h"
#include "util/error.h"

enum {
    OP_NEW = 1, OP_FREE, OP_RESET, OP_MARK, OP_MFREE, OP_REWIND, OP_FORWARD, OP_STOP,
    OP_SPEC_BEGIN, OP_SPEC_END
};
enum { HDR = 4 };
/* The most payload words one command may carry (a forward's ids). */
#define MAX_WORDS ((uint64_t)1 << 28)

static const k3_engine_relay *relay;

/* A table of handles by id (states or marks). */
typedef struct {
    void **p;
    size_t n, cap;
} table;

static table states, marks;
/* Follower: per state id, its rows' logits in the last forward that wanted
 * every row (a verify call), or NULL; for OP_SPEC_END. */
static table rows;

void k3_engine_set_relay(const k3_engine_relay *r)
{
    relay = r;
}

int k3_engine_is_follower(void)
{
    return relay && relay->follower;
}

int k3_engine_is_leader(void)
{
    return relay && !relay->follower;
}

static int leading(void)
{
    return k3_engine_is_leader();
}

/* The id of p in t, or -1. */
static int64_t id_of(const table *t, const void *p)
{
    for (size_t i = 0; p && i < t->n; i++)
        if (t->p[i] == p)
            return (int64_t)i;
    return -1;
}

/* A new id in t holding p (grown as needed); -1 out of memory. */
static int64_t add(table *t, void *p, k3_err *e)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        void **q = realloc(t->p, cap * sizeof *q);
        if (!q)
            return k3_fail(e, K3_ERUNTIME, "out of memory for the engine's handles"), -1;
        t->p = q;
        t->cap = cap;
    }
    t->p[t->n] = p;
    return (int64_t)t->n++;
}

static void table_free(table *t)
{
    free(t->p);
    memset(t, 0, sizeof *t);
}

/* Leader: broadcasts one command (errors end the job in the relay). */
static int send(int64_t op, int64_t a, int64_t b, uint32_t *pay, size_t words, k3_err *e)
{
    int64_t h[HDR] = { op, a, b, (int64_t)words };
    if (relay->bcast(relay->ctx, h, sizeof h, 0, e))
        return e->code;
    return words ? relay->bcast(relay->ctx, pay, words * sizeof *pay, 0, e) : K3_OK;
}

int k3_engine_agree(int64_t *v, k3_err *e)
{
    return relay ? relay->bcast(relay->ctx, v, sizeof *v, 0, e) : K3_OK;
}

int k3_engine_state_new(k3_state **out, const k3_model *m, k3_err *e)
{
    *out = NULL;
    if (leading() && send(OP_NEW, (int64_t)states.n, 0, NULL, 0, e))
        return e->code;
    if (k3_state_new(out, m, e) == K3_OK && leading() && add(&states, *out, e) < 0) {
        k3_state_free(*out);
        *out = NULL;
    }
    return e->code;
}

void k3_engine_state_free(k3_state *s)
{
    int64_t id = leading() ? id_of(&states, s) : -1;
    k3_err e = { 0, "" };
    if (id >= 0) {
        send(OP_FREE, id, 0, NULL, 0, &e);
        states.p[id] = NULL;
    }
    k3_state_free(s);
}

void k3_engine_state_reset(k3_state *s)
{
    k3_err e = { 0, "" };
    if (leading())
        send(OP_RESET, id_of(&states, s), 0, NULL, 0, &e);
    k3_state_reset(s);
}

int k3_engine_mark_take(const k3_state *s, k3_state_mark **mark, k3_err *e)
{
    if (!leading())
        return k3_state_mark_take(s, mark, e);
    int64_t mid = *mark ? id_of(&marks, *mark) : (int64_t)marks.n;
    if (send(OP_MARK, id_of(&states, s), mid, NULL, 0, e))
        return e->code;
    int fresh = !*mark;
    if (k3_state_mark_take(s, mark, e) == K3_OK && fresh && add(&marks, *mark, e) < 0) {
        k3_state_mark_free(*mark);
        *mark = NULL;
    }
    return e->code;
}

void k3_engine_mark_free(k3_state_mark *mark)
{
    int64_t id = leading() ? id_of(&marks, mark) : -1;
    k3_err e = { 0, "" };
    if (id >= 0) {
        send(OP_MFREE, id, 0, NULL, 0, &e);
        marks.p[id] = NULL;
    }
    k3_state_mark_free(mark);
}

int k3_engine_rewind(k3_state *s, k3_state_mark *mark, k3_err *e)
{
    if (leading() && send(OP_REWIND, id_of(&states, s), id_of(&marks, mark), NULL, 0, e))
        return e->code;
    return k3_state_rewind(s, mark, e);
}

/* Leader: the forward command of seqs[0..n). */
static int send_forward(const k3_seq *seqs, size_t n, k3_err *e)
{
    uint64_t words = k3_sat_mul(3, n);
    for (size_t i = 0; i < n; i++) {
        if (seqs[i].embeds) /* the server refuses image requests first (server/images.h) */
            return k3_fail(e, K3_EINPUT, "image rows are not relayed to the other ranks");
        words = k3_sat_add(words, seqs[i].n);
    }
    if (words > MAX_WORDS)
        return k3_fail(e, K3_EINPUT, "a forward call of %llu ids is too large to relay",
                       (unsigned long long)words);
    uint32_t *pay = k3_malloc(e, (size_t)words * sizeof *pay, "a forward command");
    if (!pay)
        return e->code;
    size_t at = 3 * n;
    for (size_t i = 0; i < n; i++) {
        pay[3 * i] = (uint32_t)id_of(&states, seqs[i].state);
        pay[3 * i + 1] = (uint32_t)seqs[i].n;
        pay[3 * i + 2] = !seqs[i].logits ? 0 : seqs[i].all_positions ? 2 : 1;
        memcpy(pay + at, seqs[i].ids, seqs[i].n * sizeof *pay);
        at += seqs[i].n;
    }
    send(OP_FORWARD, (int64_t)n, 0, pay, (size_t)words, e);
    free(pay);
    return e->code;
}

int k3_engine_forward_multi(k3_model *m, const k3_seq *seqs, size_t n, k3_err *e)
{
    if (leading() && send_forward(seqs, n, e))
        return e->code;
    if (k3_forward_multi(m, seqs, n, e) != K3_OK && leading() && e->code != K3_EINPUT)
        relay->fatal(relay->ctx, e);
    return e->code;
}

/* The speculative step's operations are local to each process (no
 * collective): the leader runs one first and relays it only when it
 * succeeded, so a refused one changes no replica either. */
int k3_engine_spec_begin(k3_state *s, size_t max_tokens, k3_err *e)
{
    if (k3_state_spec_begin(s, max_tokens, e) == K3_OK && leading())
        send(OP_SPEC_BEGIN, id_of(&states, s), (int64_t)max_tokens, NULL, 0, e);
    return e->code;
}

int k3_engine_spec_end(k3_state *s, size_t keep, const float *last_row, k3_err *e)
{
    if (k3_state_spec_end(s, keep, last_row, e) == K3_OK && leading())
        send(OP_SPEC_END, id_of(&states, s), (int64_t)keep, NULL, 0, e);
    return e->code;
}

int k3_engine_stop(k3_err *e)
{
    if (!leading())
        return K3_OK;
    send(OP_STOP, 0, 0, NULL, 0, e);
    table_free(&marks);
    table_free(&states);
    return e->code;
}

/* ---- the follower ---- */

/* The follower's replica of state id (NULL when there is none). */
static k3_state *replica(int64_t id)
{
    return id >= 0 && (uint64_t)id < states.n ? states.p[id] : NULL;
}

/* Runs a forward command: its sequences over the replicas, the logits
 * each wants into *lg (grown; discarded). */
static int follow_forward(k3_model *m, int64_t ns, const uint32_t *pay, size_t words,
                          float **lg, size_t *lg_cap, k3_err *e)
{
    uint64_t V = k3_model_vocab(m), floats = 0, ids = 0;
    if (ns < 1 || k3_sat_mul(3, (uint64_t)ns) > words)
        return k3_fail(e, K3_ERUNTIME, "the op stream: a malformed forward command");
    for (int64_t i = 0; i < ns; i++) {
        uint64_t n = pay[3 * i + 1];
        ids = k3_sat_add(ids, n);
        floats = k3_sat_add(floats, pay[3 * i + 2] == 2 ? k3_sat_mul(n, V)
                                    : pay[3 * i + 2] == 1 ? V : 0);
    }
    if (k3_sat_add(ids, 3 * (uint64_t)ns) != words || floats > SIZE_MAX / sizeof(float))
        return k3_fail(e, K3_ERUNTIME, "the op stream: a malformed forward command");
    if (floats > *lg_cap) {
        free(*lg);
        *lg_cap = 0;
        if (!(*lg = k3_malloc(e, (size_t)floats * sizeof **lg, "a follower's logits")))
            return e->code;
        *lg_cap = (size_t)floats;
    }
    k3_seq *seqs = k3_malloc(e, (size_t)ns * sizeof *seqs, "a follower's sequences");
    if (!seqs)
        return e->code;
    size_t at = 3 * (size_t)ns, fl = 0;
    for (size_t i = 0; i < rows.n; i++)
        rows.p[i] = NULL;
    while (rows.n < states.n && add(&rows, NULL, e) >= 0)
        ;
    for (int64_t i = 0; i < ns && !e->code; i++) {
        uint32_t n = pay[3 * i + 1], mode = pay[3 * i + 2];
        seqs[i].state = replica(pay[3 * i]);
        seqs[i].ids = pay + at;
        seqs[i].n = n;
        seqs[i].logits = mode ? *lg + fl : NULL;
        seqs[i].all_positions = mode == 2;
        seqs[i].embeds = NULL;
        if (mode == 2 && seqs[i].state)
            rows.p[pay[3 * i]] = seqs[i].logits;
        at += n;
        fl += mode == 2 ? (size_t)n * V : mode == 1 ? V : 0;
        if (!seqs[i].state)
            k3_fail(e, K3_ERUNTIME, "the op stream: a forward of state %u, which is not there",
                    pay[3 * i]);
    }
    /* Refused in the checks: the leader's call was refused alike. */
    if (!e->code && k3_forward_multi(m, seqs, (size_t)ns, e) == K3_EINPUT)
        e->code = 0;
    free(seqs);
    return e->code;
}

/* Runs one non-forward command (*stop set by the stop). */
static int follow_one(k3_model *m, const int64_t *h, int *stop, k3_err *e)
{
    k3_state *s = replica(h[1]);
    k3_state_mark **mk = h[2] >= 0 && (uint64_t)h[2] < marks.n ? (k3_state_mark **)&marks.p[h[2]]
                                                                 : NULL;
    k3_err ignore = { 0, "" };
    switch (h[0]) {
    case OP_NEW:
        if (h[1] != (int64_t)states.n)
            return k3_fail(e, K3_ERUNTIME, "the op stream: state %lld out of order",
                           (long long)h[1]);
        if (add(&states, NULL, e) < 0 || k3_state_new((k3_state **)&states.p[h[1]], m, e))
            return e->code;
        return K3_OK;
    case OP_FREE:
        k3_state_free(s);
        if (s)
            states.p[h[1]] = NULL;
        return K3_OK;
    case OP_RESET:
        if (s)
            k3_state_reset(s);
        return K3_OK;
    case OP_MARK:
        if (h[2] == (int64_t)marks.n) {
            if (add(&marks, NULL, e) < 0)
                return e->code;
            mk = (k3_state_mark **)&marks.p[h[2]];
        }
        if (!s || !mk)
            return k3_fail(e, K3_ERUNTIME, "the op stream: a mark of a missing state");
        k3_state_mark_take(s, mk, &ignore); /* as the leader's: a failure leaves it unused */
        return K3_OK;
    case OP_MFREE:
        if (mk) {
            k3_state_mark_free(*mk);
            *mk = NULL;
        }
        return K3_OK;
    case OP_REWIND:
        if (s && mk && *mk)
            k3_state_rewind(s, *mk, &ignore); /* refused alike on the leader (a stale mark) */
        return K3_OK;
    case OP_SPEC_BEGIN: /* as the leader's, which succeeded */
        if (!s || k3_state_spec_begin(s, (size_t)h[2], e))
            return e->code ? e->code
                           : k3_fail(e, K3_ERUNTIME, "the op stream: a step of a missing state");
        return K3_OK;
    case OP_SPEC_END: {
        const float *row = h[1] >= 0 && (uint64_t)h[1] < rows.n ? rows.p[h[1]] : NULL;
        if (!s || !row || h[2] < 1)
            return k3_fail(e, K3_ERUNTIME, "the op stream: a step's end without its verify call");
        return k3_state_spec_end(s, (size_t)h[2], row + (size_t)(h[2] - 1) * k3_model_vocab(m),
                                 e);
    }
    case OP_STOP:
        *stop = 1;
        return K3_OK;
    default:
        return k3_fail(e, K3_ERUNTIME, "the op stream: unknown command %lld", (long long)h[0]);
    }
}

int k3_engine_follow(k3_model *m, k3_err *e)
{
    uint32_t *pay = NULL;
    size_t pay_cap = 0, lg_cap = 0;
    float *lg = NULL;
    int stop = 0;
    while (!stop && !e->code) {
        int64_t h[HDR];
        if (relay->bcast(relay->ctx, h, sizeof h, 1, e))
            break;
        if (h[3] < 0 || (uint64_t)h[3] > MAX_WORDS) {
            k3_fail(e, K3_ERUNTIME, "the op stream: a command of %lld words", (long long)h[3]);
            break;
        }
        size_t words = (size_t)h[3];
        if (words > pay_cap) {
            free(pay);
            pay_cap = 0;
            if (!(pay = k3_malloc(e, words * sizeof *pay, "a command")))
                break;
            pay_cap = words;
        }
        if (words && relay->bcast(relay->ctx, pay, words * sizeof *pay, 0, e))
            break;
        if (h[0] == OP_FORWARD)
            follow_forward(m, h[1], pay, words, &lg, &lg_cap, e);
        else
            follow_one(m, h, &stop, e);
    }
    for (size_t i = 0; i < marks.n; i++)
        k3_state_mark_free(marks.p[i]);
    for (size_t i = 0; i < states.n; i++)
        k3_state_free(states.p[i]);
    table_free(&marks);
    table_free(&states);
    table_free(&rows);
    free(pay);
    free(lg);
    return e->code;
}
