/* slots.h - the worker's scheduler: N answers at once, one forward call
 * over all of them per step.
 *
 * Each slot is a k3_answerer (its own state, mark, sampler, drafter). A
 * step: admit queued jobs into free slots (each to the free slot whose
 * state keeps the longest part of its prompt, k3_answer_reusable), then
 * one k3_forward_multi call of every decoding slot's pending id (with the
 * drafts its cost gate chose to verify after it: chat/turn.h's decode
 * loop, the same verify/accept/rollback path as one answer alone), then what is
 * left of K3_PREFILL_CHUNK rows for the slots still in their prompts, the
 * fewest ids left first (a long prompt takes at most a chunk a step, so
 * it never holds the decodes back for longer than that); then each slot in the call
 * samples and publishes its next id, and finished or cancelled answers
 * leave their slot at once. Every answer's ids are those of serving it
 * alone: k3_forward_multi's rows equal k3_forward's, and a draw depends
 * only on the request's seed and the position (k3/sample.h). */
#ifndef K3_SERVER_SLOTS_H
#define K3_SERVER_SLOTS_H

#include <stddef.h>

#include "server/answer.h"
#include "server/conn.h"

typedef struct k3_slots_arg {
    k3_server *s;
    k3_answerer *a;  /* [n] one per slot */
    size_t n;
} k3_slots_arg;

/* The worker thread's body (arg: a k3_slots_arg): the only thread that
 * touches the model; returns when the queue stops and every slot is
 * empty. An invalid run (a weight read failed after its retries) latches
 * s->failed: no later request is run, /health says why, and the server's
 * exit status is K3_EINVALID. */
void *k3_slots_worker(void *arg);

#endif
