/* clients.h - who is connected: a client's address as a key, whether an
 * address is loopback, and how many connections each client holds (for
 * the per-client limit of `k3 serve`, --max-per-client).
 *
 * A client is an IPv4 address, or an IPv6 /64 (one host's allocation is a
 * /64 at least, so counting /128s would let one attacker open a fresh
 * address per connection). An IPv4-mapped IPv6 address is its IPv4. */
#ifndef K3_SERVER_CLIENTS_H
#define K3_SERVER_CLIENTS_H

#include <pthread.h>
#include <stddef.h>

#include "k3/error.h"

struct sockaddr; /* the system's (util/os_net.h) */

typedef struct k3_client_key {
    unsigned char b[9]; /* b[0]: 4 or 6; then 4 (IPv4) or 8 (IPv6 /64) address bytes */
} k3_client_key;

/* The key of a peer address (any family other than IPv4 and IPv6, e.g. a
 * Unix socket, is one client, key b[0] = 0). */
void k3_client_key_of(const struct sockaddr *sa, k3_client_key *out);

/* "127.0.0.1" or "2001:db8:1:2::/64" into out[0..cap). */
void k3_client_key_format(const k3_client_key *k, char *out, size_t cap);

/* Whether a listening address is only reachable from this machine:
 * 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. 0.0.0.0 and :: are not. */
int k3_addr_is_loopback(const struct sockaddr *sa);

/* Open connections per client. Thread-safe. */
typedef struct k3_clients {
    pthread_mutex_t mu;
    struct k3_client_count *v; /* clients with at least one connection */
    size_t n, cap;
    int limit;                 /* connections one client may hold */
} k3_clients;

int k3_clients_init(k3_clients *c, int limit, k3_err *e);
void k3_clients_free(k3_clients *c);

/* Counts a new connection of k: 0, or -1 when k already holds limit
 * connections (or no memory is left to count it), which leaves the count
 * unchanged. Every 0 is paired with one k3_clients_leave. */
int k3_clients_enter(k3_clients *c, const k3_client_key *k);
void k3_clients_leave(k3_clients *c, const k3_client_key *k);

#endif
