/* fuzz_trunk_json.c - the packed-trunk manifest reader (io/trunk_format.c,
 * k3_trunk_manifest_read) on arbitrary trunk.json files. Seeds are the
 * trunk.json of `k3 pack-trunk` over tiny-a; mutations that keep the
 * tensor table (run offsets, file_size, checksums, sources, config_hash)
 * still pass the table hash and reach every later check. Manifests of
 * another version or without a run's "source" (regressions/trunk_json/)
 * must be refused.
 *
 * Promises checked on an accepted manifest: runs are aligned, in order,
 * disjoint and inside file_size; every tensor lies inside its run, in
 * order, with the byte count of its shape (of its rows, for a row block);
 * run names are unique; the version is one this k3 reads (2 to 4); and
 * writing the manifest and reading it back gives the same runs, checksums
 * and source fingerprints. */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "io/trunk_format.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_tmpdir();
    return 0;
}

static void check_manifest(const k3_trunk_manifest *m)
{
    FZ_ASSERT(m->version >= 2 && m->version <= K3_TRUNK_VERSION, "version %d accepted",
              m->version);
    uint64_t end = 0;
    for (size_t r = 0; r < m->nruns; r++) {
        const k3_trunk_run *run = &m->runs[r];
        FZ_ASSERT(run->offset % K3_TRUNK_ALIGN == 0 && run->offset >= end &&
                      run->offset <= m->file_size &&
                      k3_trunk_align_up(run->length) <= m->file_size - run->offset,
                  "run %zu misplaced", r);
        end = run->offset + k3_trunk_align_up(run->length);
        FZ_ASSERT(k3_trunk_find_run(m, run->name) == run, "run name %s repeated", run->name);
        uint64_t tend = 0;
        for (size_t i = 0; i < run->ntensors; i++) {
            const k3_trunk_tensor *t = &run->tensors[i];
            uint64_t bytes = k3_dtype_size(t->dtype);
            for (uint32_t d = 0; d < t->ndim; d++)
                bytes *= (uint64_t)t->shape[d];
            if (t->split) { /* rows [row_lo, row_hi) of a 2-D tensor only */
                FZ_ASSERT(t->ndim == 2 && t->row_lo >= 0 && t->row_lo <= t->row_hi &&
                              t->row_hi <= t->shape[0],
                          "%s: rows %lld..%lld", t->name, (long long)t->row_lo,
                          (long long)t->row_hi);
                bytes = t->shape[0] > 0 ? bytes / (uint64_t)t->shape[0] *
                                              (uint64_t)(t->row_hi - t->row_lo)
                                        : 0;
            }
            FZ_ASSERT(t->ndim <= K3_MAX_DIMS && bytes == t->nbytes, "%s: size", t->name);
            FZ_ASSERT(t->offset >= tend && t->offset <= run->length &&
                          t->nbytes <= run->length - t->offset,
                      "%s outside its run or out of order", t->name);
            tend = t->offset + t->nbytes;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_write(K3_TRUNK_JSON, data, size);
    k3_trunk_manifest m;
    k3_err e = { 0, "" };
    int rc = k3_trunk_manifest_read(&m, fz_tmpdir(), &e);
    if (rc != K3_OK) {
        fz_check_input_refusal(&e, rc);
        FZ_ASSERT(m.runs == NULL && m.doc == NULL, "refused manifest keeps memory");
        return 0;
    }
    check_manifest(&m);
    /* Written and read back: the same runs. */
    const char *path = fz_write(K3_TRUNK_JSON, "", 0);
    FZ_ASSERT(k3_trunk_manifest_write(&m, path, &e) == K3_OK, "write: %s", e.msg);
    k3_trunk_manifest back;
    rc = k3_trunk_manifest_read(&back, fz_tmpdir(), &e);
    FZ_ASSERT(rc == K3_OK, "the written manifest does not read back: %s", e.msg);
    FZ_ASSERT(back.nruns == m.nruns && back.table_hash == m.table_hash &&
                  back.config_hash == m.config_hash && back.file_size == m.file_size,
              "manifest changed in the round trip");
    char why[512];
    for (size_t r = 0; r < m.nruns; r++)
        FZ_ASSERT(!k3_trunk_run_differs(&m.runs[r], &back.runs[r], why, sizeof why) &&
                      m.runs[r].offset == back.runs[r].offset &&
                      m.runs[r].checksum == back.runs[r].checksum &&
                      m.runs[r].source == back.runs[r].source,
                  "run %zu changed in the round trip: %s", r, why);
    k3_trunk_manifest_free(&back);
    k3_trunk_manifest_free(&m);
    return 0;
}
