/* trunk_source.c - see trunk_source.h. */
#include "io/trunk_source.h"

#include <stdio.h>
#include <string.h>

#include "io/pread_all.h"
#include "util/error.h"
#include "util/xxh64.h"

/* Hashes the tensor's bytes [off, off + n) (n <= K3_TRUNK_SAMPLE). */
static int hash_sample(k3_xxh64_state *h, const k3_trunk_tensor *t, uint64_t off, size_t n,
                       k3_err *e)
{
    unsigned char buf[K3_TRUNK_SAMPLE];
    char why[96];
    if (k3_pread_weight(t->src_fd, buf, n, (off_t)(t->src_off + off), why, sizeof why) != 0)
        return k3_fail(e, K3_EINVALID, "RUN INVALID: reading tensor %s from %s (the trunk's "
                                       "source fingerprint) failed after %d attempts (%s)",
                       t->name, t->src_path, K3_READ_ATTEMPTS, why);
    k3_xxh64_update(h, buf, n);
    return K3_OK;
}

/* The header text of t (see trunk_source.h). */
static void hash_header(k3_xxh64_state *h, const k3_trunk_tensor *t)
{
    char line[512];
    const char *base = strrchr(t->src_path, '/');
    base = base ? base + 1 : t->src_path;
    k3_xxh64_update(h, "source ", 7);
    k3_xxh64_update(h, t->name, strlen(t->name));
    int n = snprintf(line, sizeof line, " %s ", k3_dtype_name(t->dtype));
    for (uint32_t d = 0; d < t->ndim; d++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s%lld", d ? "x" : "",
                      (long long)t->shape[d]);
    k3_xxh64_update(h, line, (size_t)n);
    k3_xxh64_update(h, " ", 1);
    k3_xxh64_update(h, base, strlen(base));
    n = snprintf(line, sizeof line, " %llu %llu\n", (unsigned long long)t->src_off,
                 (unsigned long long)t->nbytes);
    k3_xxh64_update(h, line, (size_t)n);
}

int k3_trunk_source_fingerprint(k3_trunk_manifest *m, k3_err *e)
{
    for (size_t r = 0; r < m->nruns; r++) {
        k3_trunk_run *run = &m->runs[r];
        k3_xxh64_state h;
        k3_xxh64_init(&h, 0);
        for (size_t i = 0; i < run->ntensors; i++) {
            const k3_trunk_tensor *t = &run->tensors[i];
            size_t head = t->nbytes < K3_TRUNK_SAMPLE ? (size_t)t->nbytes : K3_TRUNK_SAMPLE;
            hash_header(&h, t);
            if (head && hash_sample(&h, t, 0, head, e) != K3_OK)
                return e->code;
            if (i + 1 == run->ntensors && t->nbytes > K3_TRUNK_SAMPLE &&
                hash_sample(&h, t, t->nbytes - K3_TRUNK_SAMPLE, K3_TRUNK_SAMPLE, e) != K3_OK)
                return e->code;
        }
        run->source = k3_xxh64_digest(&h);
    }
    return K3_OK;
}
