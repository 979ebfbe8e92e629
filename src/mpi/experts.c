/* experts.c - the routed experts split by expert over the ranks
 * (model/moe_part.h): the gather of their outputs, one token's k or a
 * multi-token call's T x k. Each rank packs the outputs of the
 * chosen experts it owns (ascending position), one MPI_Allgatherv brings
 * every rank's block, and each block is unpacked to the positions of its
 * owner's experts: rank r's block holds, in order, the outputs of the
 * positions q with k3_moe_owner(ids[q]) == r. Copies only: no arithmetic
 * on the outputs, so they keep the bits their owner computed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k3/error.h"
#include "mpi/part.h"

static void gather(void *ctx, const int32_t *ids, size_t n, float *o, size_t Z)
{
    k3_mpi_part *p = ctx;
    size_t need = 2 * n * Z; /* [n][Z] own block (packed), [n][Z] all blocks */
    if (need > p->ebuf_floats) {
        float *nb = realloc(p->ebuf, need * sizeof *nb);
        if (!nb) {
            fprintf(stderr, "k3-mpi: rank %d: error: out of memory for the experts' gather\n",
                    p->rank);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, K3_ERUNTIME);
        }
        p->ebuf = nb;
        p->ebuf_floats = need;
    }
    float *mine = p->ebuf, *all = p->ebuf + n * Z;
    size_t nmine = 0, off = 0;
    for (int r = 0; r < p->size; r++) {
        size_t cnt = 0;
        for (size_t q = 0; q < n; q++)
            if (k3_moe_owner(ids[q], p->size) == r)
                cnt++;
        p->counts[r] = (int)(cnt * Z); /* n Z <= INT_MAX (model/moe.c split_of) */
        p->displs[r] = (int)off;
        off += cnt * Z;
    }
    for (size_t q = 0; q < n; q++)
        if (k3_moe_owner(ids[q], p->size) == p->rank)
            memcpy(mine + nmine++ * Z, o + q * Z, Z * sizeof *o);
    MPI_Request rq;
    double t0 = MPI_Wtime();
    MPI_Iallgatherv(mine, (int)(nmine * Z), MPI_FLOAT, all, p->counts, p->displs, MPI_FLOAT,
                    p->comm, &rq);
    k3_mpi_wait(p, &rq, "the routed experts' gather");
    p->st.wait_s += MPI_Wtime() - t0;
    p->st.expert_gathers++;
    p->st.expert_rows += n;
    p->st.experts_here += nmine;
    p->st.expert_floats_in += (n - nmine) * Z;
    for (int r = 0; r < p->size; r++) {
        if (r == p->rank)
            continue;
        const float *src = all + p->displs[r];
        for (size_t q = 0; q < n; q++)
            if (k3_moe_owner(ids[q], p->size) == r) {
                memcpy(o + q * Z, src, Z * sizeof *o);
                src += Z;
            }
    }
}

void k3_mpi_experts_init(k3_mpi_part *p)
{
    p->moe_hook.rank = p->rank;
    p->moe_hook.size = p->size;
    p->moe_hook.gather = gather;
    p->moe_hook.ctx = p;
}
