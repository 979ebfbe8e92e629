/* engine.h - the server's model operations, and their stream to replicas.
 *
 * Every operation `k3 serve` performs on the model and its states goes
 * through these functions: creating, freeing, resetting and rewinding a
 * state, taking and freeing a mark, and k3_forward_multi. Without a relay
 * (the default, bin/k3) each is the library call it names and nothing
 * else. With a relay (k3_engine_set_relay; bin/k3-mpi, src/mpi/serve.c)
 * the leader process (the one that serves HTTP) first broadcasts each
 * operation as a small command, then runs it; every follower process runs
 * k3_engine_follow instead of a server: it receives the same commands in
 * the same order and runs them on its own replicas of the states, so every
 * collective forward pass (the MPI row split) is entered by every process
 * with the same inputs. Followers have no HTTP, tokenizer use or sampler:
 * what they compute is the forward passes' share, and the logits they get
 * are discarded.
 *
 * A command names states and marks by small ids (the order the leader
 * created them), never by address. A forward command carries, per
 * sequence, its state id, its ids and whether it wants no logits, the last
 * row or every row (the logits' product is itself a collective).
 *
 * A speculative step's begin and end (k3_state_spec_begin/end) are
 * operations too: the leader alone decides a step's drafts (its cost gate,
 * its drafter); the followers replay its verify call and its cut. The
 * drafter must then be one that runs no forward of its own (ngram): a
 * self drafter's passes would be the leader's alone.
 *
 * Failures: a forward the library refuses in its checks (K3_EINPUT: no
 * state changed) is refused on every process alike and serving goes on. A
 * forward failing past the checks on the leader (a weight read, say) may
 * have left the others inside a collective: the relay's `fatal` ends the
 * whole job. A follower whose command fails past the checks returns that
 * error from k3_engine_follow (its command then ends the job).
 *
 * Threading: the operations are issued one at a time (the server's main
 * thread creates and frees the states while the worker thread is not
 * running; the worker issues the rest); the relay is set before serving. */
#ifndef K3_SERVER_ENGINE_H
#define K3_SERVER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "k3/k3.h"

typedef struct k3_engine_relay {
    void *ctx;
    int follower; /* this process follows (k3 serve runs k3_engine_follow, no server) */
    /* Broadcasts bytes[0..n) from the leader to every follower (the same n
     * on every process). idle: a follower waiting for its next command
     * (may wait without bound: the server may be idle); else bounded. */
    int (*bcast)(void *ctx, void *bytes, size_t n, int idle, k3_err *e);
    /* Leader: a forward failed past the checks (e); ends the job. */
    void (*fatal)(void *ctx, const k3_err *e);
} k3_engine_relay;

/* Sets (or with NULL clears) the relay; before serving starts. */
void k3_engine_set_relay(const k3_engine_relay *r);
/* 1 when this process is a follower (a relay is set with follower = 1). */
int k3_engine_is_follower(void);
/* 1 when this process leads followers (a relay is set with follower = 0):
 * a forward with image rows (k3_seq.embeds) is then refused, K3_EINPUT,
 * as the op stream carries ids only. */
int k3_engine_is_leader(void);

/* *v becomes the leader's value on every process (no relay: unchanged);
 * the serve command agrees on its slot count this way, as each process's
 * own memory plan might afford a different one. */
int k3_engine_agree(int64_t *v, k3_err *e);

int k3_engine_state_new(k3_state **out, const k3_model *m, k3_err *e);
void k3_engine_state_free(k3_state *s);
void k3_engine_state_reset(k3_state *s);
int k3_engine_mark_take(const k3_state *s, k3_state_mark **mark, k3_err *e);
void k3_engine_mark_free(k3_state_mark *mark);
int k3_engine_rewind(k3_state *s, k3_state_mark *mark, k3_err *e);
int k3_engine_forward_multi(k3_model *m, const k3_seq *seqs, size_t n, k3_err *e);
/* k3_state_spec_begin and k3_state_spec_end (k3/k3.h), relayed: the turn
 * driver's spec_begin/spec_end (chat/turn.h) when serving. */
int k3_engine_spec_begin(k3_state *s, size_t max_tokens, k3_err *e);
int k3_engine_spec_end(k3_state *s, size_t keep, const float *last_row, k3_err *e);

/* Leader: tells the followers that serving is over (their
 * k3_engine_follow returns K3_OK); no relay: nothing. */
int k3_engine_stop(k3_err *e);

/* Follower: runs the leader's commands on m until its stop; K3_OK, or the
 * error of a command that failed past the checks (or of the relay). */
int k3_engine_follow(k3_model *m, k3_err *e);

#endif
