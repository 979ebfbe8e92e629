/* prefix_hook.c - see prefix_hook.h. */
#include "server/prefix_hook.h"

#include <stdlib.h>

#include "util/error.h"
#include "util/xxh64.h"

/* Changes when the chat renderer's output for the same request changes
 * (chat/render.c): snapshots of the older format are then foreign. */
#define CHAT_FORMAT "k3-xtml-1"

int k3_prefix_points(const uint32_t *ids, size_t n, int64_t eom, size_t **pts, size_t *npts,
                     k3_err *e)
{
    size_t last = 0, k = 0, cap = 8;
    *npts = 0;
    *pts = k3_malloc(e, cap * sizeof **pts, "snapshot points");
    if (!*pts)
        return e->code;
    for (size_t i = 0; eom >= 0 && i < n; i++)
        if (ids[i] == (uint32_t)eom)
            last = i + 1;
    for (size_t i = 0; i <= n; i++) {
        int at = i == n || (i == last && i > 0) ||
                 (i > 0 && ids[i - 1] == (uint32_t)eom && eom >= 0 &&
                  i - (k ? (*pts)[k - 1] : 0) >= K3_PREFIX_GAP);
        if (!at || (k && (*pts)[k - 1] == i))
            continue;
        if (k == cap) {
            size_t *g = realloc(*pts, 2 * cap * sizeof *g);
            if (!g) {
                free(*pts);
                *pts = NULL;
                return k3_fail(e, K3_ERUNTIME, "out of memory for snapshot points");
            }
            *pts = g;
            cap *= 2;
        }
        (*pts)[k++] = i;
    }
    *npts = k;
    return K3_OK;
}

uint64_t k3_prefix_namespace(const k3_tokenizer *tok)
{
    k3_xxh64_state h;
    uint32_t V = k3_tok_vocab_size(tok);
    k3_xxh64_init(&h, 0);
    k3_xxh64_update(&h, CHAT_FORMAT, sizeof CHAT_FORMAT);
    k3_xxh64_update(&h, &V, sizeof V);
    for (uint32_t id = 0; id < V; id++) {
        const unsigned char *b;
        size_t len;
        k3_err e = { 0, "" };
        if (k3_tok_piece(tok, id, &b, &len, &e) == K3_OK) {
            k3_xxh64_update(&h, &id, sizeof id);
            k3_xxh64_update(&h, b, len);
        }
    }
    return k3_xxh64_digest(&h);
}
