/* state_sync.c - k3_state_sync: prompt reuse (see k3/k3.h).
 *
 * The KDA recurrent state cannot be rolled back, so the only ways back to
 * an earlier position are a mark taken there or a reset; the MLA cache
 * could be truncated, but it is useless without the matching KDA state. */
#include "model/model.h"
#include "util/error.h"

int k3_state_sync(k3_model *m, k3_state *s, k3_state_mark *mark, const uint32_t *ids, size_t n,
                  size_t *reused, k3_err *e)
{
    size_t have = (size_t)s->pos, common = 0;
    *reused = 0;
    while (common < have && common < n && s->ids[common] == ids[common])
        common++;
    if (common < have) {
        k3_err stale = { 0, "" };
        if (!mark || k3_state_mark_pos(mark) > (int64_t)common ||
            k3_state_rewind(s, mark, &stale) != K3_OK)
            k3_state_reset(s);
    }
    size_t at = (size_t)s->pos;
    *reused = at;
    if (at == n)
        return K3_OK;
    /* No logits buffer: the state keeps the last row (k3_state_logits). */
    while (at < n && !e->code) {
        size_t T = n - at < K3_PREFILL_CHUNK ? n - at : K3_PREFILL_CHUNK;
        if (k3_forward(m, s, ids + at, T, NULL, 0, e) == K3_OK)
            at += T;
    }
    return e->code;
}
