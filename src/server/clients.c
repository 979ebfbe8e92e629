/* clients.c - see clients.h. */
#include "server/clients.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/os_net.h"

struct k3_client_count {
    k3_client_key key;
    int n;
};

static const unsigned char v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF };

void k3_client_key_of(const struct sockaddr *sa, k3_client_key *out)
{
    memset(out, 0, sizeof *out);
    if (sa->sa_family == AF_INET) {
        out->b[0] = 4;
        memcpy(out->b + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        if (!memcmp(a, v4_mapped, 12)) {
            out->b[0] = 4;
            memcpy(out->b + 1, a + 12, 4);
        } else {
            out->b[0] = 6;
            memcpy(out->b + 1, a, 8);
        }
    }
}

void k3_client_key_format(const k3_client_key *k, char *out, size_t cap)
{
    char t[INET6_ADDRSTRLEN];
    unsigned char a[16];
    memset(a, 0, sizeof a);
    if (k->b[0] == 4 && inet_ntop(AF_INET, k->b + 1, t, sizeof t)) {
        snprintf(out, cap, "%s", t);
        return;
    }
    memcpy(a, k->b + 1, 8);
    if (k->b[0] == 6 && inet_ntop(AF_INET6, a, t, sizeof t))
        snprintf(out, cap, "%s/64", t);
    else
        snprintf(out, cap, "(local)");
}

int k3_addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ((const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr)[0] == 127;
    if (sa->sa_family != AF_INET6)
        return 0;
    const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const unsigned char one[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };
    return !memcmp(a, one, 16) || (!memcmp(a, v4_mapped, 12) && a[12] == 127);
}

int k3_clients_init(k3_clients *c, int limit, k3_err *e)
{
    memset(c, 0, sizeof *c);
    c->limit = limit;
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        return k3_fail(e, K3_ERUNTIME, "cannot create a mutex");
    return K3_OK;
}

void k3_clients_free(k3_clients *c)
{
    pthread_mutex_destroy(&c->mu);
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* The index of k in c->v, or c->n. Lock held. */
static size_t find(const k3_clients *c, const k3_client_key *k)
{
    size_t i = 0;
    while (i < c->n && memcmp(c->v[i].key.b, k->b, sizeof k->b) != 0)
        i++;
    return i;
}

int k3_clients_enter(k3_clients *c, const k3_client_key *k)
{
    int rc = -1;
    pthread_mutex_lock(&c->mu);
    size_t i = find(c, k);
    if (i == c->n && c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        struct k3_client_count *v = realloc(c->v, cap * sizeof *v);
        if (v) {
            c->v = v;
            c->cap = cap;
        }
    }
    if (i < c->n && c->v[i].n < c->limit) {
        c->v[i].n++;
        rc = 0;
    } else if (i == c->n && c->n < c->cap && c->limit > 0) {
        c->v[c->n].key = *k;
        c->v[c->n++].n = 1;
        rc = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void k3_clients_leave(k3_clients *c, const k3_client_key *k)
{
    pthread_mutex_lock(&c->mu);
    size_t i = find(c, k);
    if (i < c->n && --c->v[i].n == 0)
        c->v[i] = c->v[--c->n]; /* order does not matter */
    pthread_mutex_unlock(&c->mu);
}
