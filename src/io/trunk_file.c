/* trunk_file.c - see trunk_file.h. */
#include "io/trunk_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/direct.h"
#include "io/trunk_format.h"
#include "io/trunk_source.h"
#include "util/error.h"

struct k3_trunk_file {
    k3_trunk_manifest packed;
    k3_file file;
};

/* Appends "; " and a difference to the list in msg. */
static void add_diff(char *msg, size_t n, const char *what)
{
    size_t len = strlen(msg);
    snprintf(msg + len, n - len, "%s%s", len ? "; " : "", what);
}

/* Every difference between the model's layout and the packed manifest
 * (empty when none), written to msg. */
static void differences(const k3_trunk_manifest *want, const k3_trunk_manifest *have,
                        const char *bin, char *msg, size_t n)
{
    char a[17], b[17], why[768];
    msg[0] = 0;
    if (want->config_hash != have->config_hash) {
        k3_trunk_hex(have->config_hash, a);
        k3_trunk_hex(want->config_hash, b);
        snprintf(why, sizeof why, "config.json differs (xxh64 %s when packed, %s now)", a, b);
        add_diff(msg, n, why);
    }
    for (size_t r = 0; r < want->nruns; r++) {
        const k3_trunk_run *got = k3_trunk_find_run(have, want->runs[r].name);
        if (!got)
            snprintf(why, sizeof why, "trunk.json has no run \"%s\" (packed with fewer layers?)",
                     want->runs[r].name);
        if (!got || k3_trunk_run_differs(&want->runs[r], got, why, sizeof why)) {
            add_diff(msg, n, why);
            break; /* one run tells the story; the rest usually differ alike */
        }
    }
    struct stat st;
    if (stat(bin, &st) != 0) {
        snprintf(why, sizeof why, "%s is missing", K3_TRUNK_BIN);
        add_diff(msg, n, why);
    } else if ((uint64_t)st.st_size != have->file_size) {
        snprintf(why, sizeof why, "%s is %llu bytes but trunk.json says %llu (incomplete or "
                                  "replaced)", K3_TRUNK_BIN, (unsigned long long)st.st_size,
                 (unsigned long long)have->file_size);
        add_diff(msg, n, why);
    }
}

/* Compares the source fingerprints of the runs the model uses with the
 * packed ones: 0 when all equal, else 1 with the first differing run and
 * the count written to msg (a plain difference: the caller refuses). */
static int other_weights(const k3_trunk_manifest *want, const k3_trunk_manifest *have,
                         const char *model_dir, char *msg, size_t n)
{
    size_t bad = 0;
    const k3_trunk_run *first = NULL, *first_have = NULL;
    for (size_t r = 0; r < want->nruns; r++) {
        const k3_trunk_run *got = k3_trunk_find_run(have, want->runs[r].name);
        if (got->source != want->runs[r].source && !bad++) {
            first = &want->runs[r];
            first_have = got;
        }
    }
    if (!bad)
        return 0;
    char a[17], b[17];
    k3_trunk_hex(first_have->source, a);
    k3_trunk_hex(first->source, b);
    snprintf(msg, n, "it was packed from other weights than %s's: %zu of %zu runs differ, the "
                     "first \"%s\" (source fingerprint %s in %s, %s from %s's shards: another "
                     "checkpoint of this config, or its shards replaced since)",
             model_dir, bad, want->nruns, first->name, a, K3_TRUNK_JSON, b, model_dir);
    return 1;
}

int k3_trunk_file_open(k3_trunk_file **out, const char *trunk_dir, const char *model_dir,
                       k3_run *runs, size_t nruns, const k3_st_index *ix,
                       const k3_tensor_info *embed, int rank, int ranks, k3_err *e)
{
    *out = NULL;
    char json[4096], bin[4096], diff[2048];
    snprintf(json, sizeof json, "%s/%s", trunk_dir, K3_TRUNK_JSON);
    snprintf(bin, sizeof bin, "%s/%s", trunk_dir, K3_TRUNK_BIN);
    struct stat st;
    if (stat(json, &st) != 0)
        return k3_fail(e, K3_EINPUT, "--trunk %s: no %s there (make one with: k3 pack-trunk %s %s)",
                       trunk_dir, K3_TRUNK_JSON, model_dir, trunk_dir);
    k3_trunk_file *tf = k3_calloc(e, 1, sizeof *tf, "trunk file");
    if (!tf)
        return e->code;
    k3_trunk_manifest want;
    memset(&want, 0, sizeof want);
    if (k3_trunk_manifest_read(&tf->packed, trunk_dir, e) != K3_OK ||
        k3_trunk_config_hash(model_dir, &want.config_hash, e) != K3_OK)
        goto fail;
    uint64_t config_hash = want.config_hash;
    const k3_trunk_manifest *pk = &tf->packed;
    if (pk->ranks != ranks || pk->rank != rank) {
        if (!ranks)
            k3_fail(e, K3_EINPUT, "--trunk %s was packed for rank %d of %d (k3 pack-trunk "
                    "--rank-of): it holds that rank's rows only; run it as that rank of "
                    "k3-mpi over %d ranks, or pack a whole trunk (without --rank-of)",
                    trunk_dir, pk->rank, pk->ranks, pk->ranks);
        else if (!pk->ranks)
            k3_fail(e, K3_EINPUT, "--trunk %s is a whole trunk but this process holds the "
                    "rows of rank %d of %d", trunk_dir, rank, ranks);
        else
            k3_fail(e, K3_EINPUT, "--trunk %s was packed for rank %d of %d, but this is rank "
                    "%d of %d: give each rank its own trunk (k3 pack-trunk --rank-of %d/%d)",
                    trunk_dir, pk->rank, pk->ranks, rank, ranks, rank, ranks);
        goto fail;
    }
    if (k3_trunk_layout(&want, runs, nruns, ix, embed, rank, ranks, e) != K3_OK)
        goto fail;
    want.config_hash = config_hash;
    differences(&want, &tf->packed, bin, diff, sizeof diff);
    /* Same shape: the same weights? (A sample that cannot be read: exit 4.) */
    if (!diff[0] && k3_trunk_source_fingerprint(&want, e) != K3_OK) {
        k3_trunk_manifest_free(&want);
        goto fail;
    }
    if (!diff[0])
        other_weights(&want, &tf->packed, model_dir, diff, sizeof diff);
    k3_trunk_manifest_free(&want);
    if (diff[0]) {
        char how[64] = "";
        if (ranks)
            snprintf(how, sizeof how, " --rank-of %d/%d (the same K3_MPI_SPLIT_MIN)", rank,
                     ranks);
        k3_fail(e, K3_EINPUT, "--trunk %s is stale or another model's: %s. Repack it: k3 "
                              "pack-trunk %s %s%s", trunk_dir, diff, model_dir, trunk_dir, how);
        goto fail;
    }
    if (k3_file_open(&tf->file, bin, 1, e) != K3_OK)
        goto fail;
    for (size_t r = 0; r < nruns; r++) {
        const k3_trunk_run *p = k3_trunk_find_run(&tf->packed, runs[r].name);
        if (!runs[r].npieces)
            continue; /* nothing to read */
        k3_run_piece *one = &runs[r].pieces[0]; /* p exists: differences() found no gap */
        memset(one, 0, sizeof *one);
        one->fd = -1;
        one->file = &tf->file;
        one->path = tf->file.path;
        one->src_off = p->offset;
        one->len = p->stored;
        runs[r].npieces = 1;
        runs[r].verify = 1;
        runs[r].checksum = p->checksum;
        runs[r].hash = tf->packed.version >= 3 ? K3_RUN_XXH3_BLOCKS : K3_RUN_XXH64;
        runs[r].codec = tf->packed.codec;
        runs[r].stored = p->stored;
    }
    *out = tf;
    return K3_OK;
fail:
    k3_trunk_file_close(tf);
    return e->code;
}

void k3_trunk_file_close(k3_trunk_file *tf)
{
    if (!tf)
        return;
    if (tf->file.path)
        k3_file_close(&tf->file);
    k3_trunk_manifest_free(&tf->packed);
    free(tf);
}

int k3_trunk_file_version(const char *trunk_dir)
{
    k3_trunk_manifest m;
    k3_err e = { 0, "" };
    if (k3_trunk_manifest_read(&m, trunk_dir, &e) != K3_OK)
        return 0;
    int version = m.version;
    k3_trunk_manifest_free(&m);
    return version;
}
