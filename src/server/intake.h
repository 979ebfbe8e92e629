/* intake.h - the accept loop of `k3 serve`: accepts connections and reads
 * every request head itself, in one thread, with poll.
 *
 * Why not a thread per connection from the start: a thread (and a slot of
 * the connection limit) per client that has sent nothing useful is what a
 * slow-header attack (slowloris) exhausts. Here a connection still sending
 * its head costs a descriptor and a K3_CONN_MAX_HEAD buffer, and it has
 * --header-timeout from its accept (a deadline that sending more bytes
 * does not move) to complete the head, else 408. Then:
 *   - GET /health is answered right here, whatever the load;
 *   - every other request gets a connection thread (conn.h) when one of
 *     the max_queue + 1 + K3_INTAKE_SLACK allowed is free, else 503.
 * Kept-alive connections (conn.h) come back here after their answer and
 * wait without a thread: --keep-alive-s for the first byte of their next
 * request (then closed without an answer), and from that byte
 * --header-timeout for its head, as a new connection. They count among the
 * K3_INTAKE_MAX_PENDING and the client's --max-per-client, but never keep
 * a new connection out: at either bound the idle one that waited longest
 * is closed to make room (nginx does the same with its keep-alive
 * connections when it runs out).
 * Limits: K3_INTAKE_MAX_PENDING heads at once, and --max-per-client
 * connections per client address (clients.h), heads and threads together;
 * a connection beyond either is answered 503 at once and closed. */
#ifndef K3_SERVER_INTAKE_H
#define K3_SERVER_INTAKE_H

#include <signal.h>

#include "server/conn.h"

/* Connection threads beyond the queue's capacity: room for the requests
 * being read or refused and the cheap endpoints. */
#define K3_INTAKE_SLACK 8
/* Connections whose head is still arriving. */
#define K3_INTAKE_MAX_PENDING 256

/* Runs until *stop is set, --exit-after passes, or accept fails for good;
 * then answers the heads still pending 503 and returns. Connection
 * threads may still run (s->conns counts them). */
void k3_intake_run(k3_server *s, int lfd, volatile sig_atomic_t *stop);

#endif
