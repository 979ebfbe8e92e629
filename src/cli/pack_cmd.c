/* pack_cmd.c - see pack_cmd.h. Opens the model with the library's
 * plan-only open, which binds it exactly as a run does (config, shard index,
 * weights.c's runs) and loads nothing, so the packed runs are the engine's
 * runs byte for byte; then hands their layout to the packer. */
#include "cli/pack_cmd.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/opt_table.h"
#include "core/kernels.h"
#include "core/row_split.h"
#include "model/model.h"
#include "pack/draft_pack.h"
#include "pack/trunk_pack.h"
#include "util/error.h"
#include "util/os.h"

typedef struct {
    const char *model_dir, *trunk_dir, *rank_of, *draft;
    int layers, force, verify, compress, compress_fast, quiet, help, list_options;
} pack_args;

#define P pack_args

static const k3_opt pack_table[] = {
    K3_OPT_TEXT_("usage: k3 pack-trunk MODEL_DIR TRUNK_DIR [--layers N] [--rank-of R/N]"
                 " [--force]\n"
                 "                     [--verify] [--compress | --compress-fast] [--draft q8|q4]"
                 " [--quiet]\n"
                 "\n"
                 "Copies the dense trunk (every layer's matrices, lm_head, the embedding) into\n"
                 "TRUNK_DIR/trunk.bin, one 4096-aligned run per layer, and describes it in\n"
                 "TRUNK_DIR/trunk.json; then run k3 with --trunk TRUNK_DIR. A trunk that is up\n"
                 "to date (same config.json, same tensor table, the same weights by sampled\n"
                 "fingerprints of every run's tensors, trunk.bin of the recorded size) is left\n"
                 "alone; any other trunk in TRUNK_DIR (another model's, other weights, an older\n"
                 "format) is repacked, and stays usable until the new one is complete. A failed\n"
                 "pack leaves no partial file behind.\n"
                 "\n"),
    K3_OPT_INT_("--layers", "N", P, layers, 1, 100000,
                "pack only the first N layers (with lm_head and the embedding)"),
    K3_OPT_STR_("--rank-of", "R/N", P, rank_of,
                "pack only the rows rank R of N binds under k3-mpi\n"
                "(each rank streams its share from its own trunk)"),
    K3_OPT_FLAG_("--force", P, force, "repack even when up to date"),
    K3_OPT_FLAG_("--verify", P, verify,
                 "when up to date, compare every byte of trunk.bin with the model"),
    K3_OPT_FLAG_("--compress", P, compress,
                 "store the runs losslessly compressed (BF16 exponents\n"
                 "Huffman-coded: ~67% of the bytes, decoded ~2 GB/s a core)"),
    K3_OPT_FLAG_("--compress-fast", P, compress_fast,
                 "the same with 4-bit exponent codes (~75% of the bytes,\n"
                 "decoded ~3x faster: for disks faster than the cores decode)"),
    K3_OPT_STR_("--draft", "KIND", P, draft,
                "instead of the exact trunk, write TRUNK_DIR/draft.bin: a\n"
                "quantized copy (q8: int8 per weight, q4: 4 bits, a scale\n"
                "per 32) for k3 --draft self --draft-trunk TRUNK_DIR"),
    K3_OPT_FLAG_AS("--quiet", "-q", P, quiet, "no progress or summary lines"),
    K3_OPT_FLAG_AS("--help", "-h", P, help, NULL),
    K3_OPT_FLAG_("--list-options", P, list_options, NULL),
    { .kind = K3_OPT_END },
};

static const k3_opt_cmd pack_cmd = {
    .opts = pack_table,
    .col = 15,
    .prefix = "pack-trunk: ",
    .command = "k3 pack-trunk",
    .extra = "",
    .pos = { offsetof(P, model_dir), offsetof(P, trunk_dir) },
    .npos = 2,
};

#undef P

/* --rank-of R/N: the row split of rank R of N (core/row_split.h), with
 * k3-mpi's threshold (K3_MPI_SPLIT_MIN, as src/mpi/part.c reads it), so the
 * weights bind exactly the rows that rank binds in a k3-mpi run; nothing is
 * computed (a plan-only open), so the partition has no begin/end. */
typedef struct {
    int rank, ranks;
    int64_t split_min;
} rank_split;

static int split_share(void *ctx, int64_t rows, int64_t cols, int64_t *lo, int64_t *hi)
{
    const rank_split *r = ctx;
    return k3_row_split(rows, cols, r->rank, r->ranks, r->split_min, lo, hi);
}

static int parse_rank_of(const char *text, rank_split *r, k3_err *e)
{
    char *end;
    long rank = strtol(text, &end, 10), n = -1;
    if (end != text && *end == '/' && end[1] >= '0' && end[1] <= '9')
        n = strtol(end + 1, &end, 10);
    if (*end || n < 2 || n > 1 << 20 || rank < 0 || rank >= n)
        return k3_fail(e, K3_EINPUT, "pack-trunk: --rank-of %s: expected R/N with 0 <= R < N "
                       "and N >= 2 (rank R of N ranks)", text);
    r->rank = (int)rank;
    r->ranks = (int)n;
    r->split_min = K3_ROW_SPLIT_MIN;
    const char *sm = getenv("K3_MPI_SPLIT_MIN");
    if (sm && *sm) {
        long long v = strtoll(sm, &end, 10);
        if (*end || v < 0 || v > INT64_MAX / 2)
            return k3_fail(e, K3_EINPUT, "pack-trunk: K3_MPI_SPLIT_MIN=%s is not an integer "
                           ">= 0", sm);
        r->split_min = v;
    }
    return K3_OK;
}

/* --draft q8: the draft trunk (pack/draft_pack.h) of the model's runs. */
static int pack_draft(const pack_args *a, const k3_model *model, k3_err *e)
{
    uint64_t fp = 0;
    k3_draft_pack_result r;
    uint32_t kind = strcmp(a->draft, "q4") ? K3_DRAFT_KIND_Q8 : K3_DRAFT_KIND_Q4;
    if (k3_draft_fingerprint(a->model_dir, &model->w, model->ix, &fp, e) != K3_OK ||
        k3_draft_pack(&model->w, kind, fp, a->trunk_dir, a->quiet ? NULL : stderr, &r, e))
        return e->code;
    if (!a->quiet)
        fprintf(stderr, "pack-trunk: wrote %s/%s: %zu matrices as %s, %.1f MB (their BF16 "
                        "%.1f MB) in %.2f s\n", a->trunk_dir, K3_DRAFT_FILE, r.matrices, a->draft,
                r.bytes / 1e6, r.bf16_bytes / 1e6, r.seconds);
    return K3_OK;
}

static int pack(const pack_args *a, k3_err *e)
{
    k3_model *model = NULL;
    k3_trunk_manifest m;
    uint64_t config_hash = 0;
    /* Zeroed, it is safe to free whether or not it was filled. */
    memset(&m, 0, sizeof m);
    /* Plan only: nothing is loaded, and the plan is not checked against the
     * machine (packing needs its copy windows, not the plan's memory). The
     * layout's names and source descriptors point into the model's index
     * and runs, so the model is closed last. */
    k3_model_opts mo;
    k3_model_opts_default(&mo);
    mo.n_layers = a->layers;
    mo.plan_only = 1;
    mo.no_mem_check = 1;
    rank_split rs = { 0, 0, 0 };
    k3_mm_part part;
    memset(&part, 0, sizeof part);
    if (a->rank_of) {
        if (parse_rank_of(a->rank_of, &rs, e) != K3_OK)
            goto done;
        part.share = split_share;
        part.keep_shares = 1;
        part.rank = rs.rank;
        part.size = rs.ranks;
        part.ctx = &rs;
        k3_mm_set_part(&part); /* only while binding: cleared below */
    }
    int opened = k3_model_open(&model, a->model_dir, &mo, e);
    k3_mm_set_part(NULL);
    if (opened != K3_OK)
        goto done;
    const k3_weights *w = &model->w;
    if (a->draft) {
        if (k3_os_mkdir(a->trunk_dir) != 0 && errno != EEXIST)
            k3_fail(e, K3_EINPUT, "%s: cannot create: %s", a->trunk_dir, strerror(errno));
        else
            pack_draft(a, model, e);
        goto done;
    }
    if (k3_trunk_config_hash(a->model_dir, &config_hash, e) != K3_OK ||
        k3_trunk_layout(&m, w->runs, w->nruns, model->ix, w->embed_info, rs.rank, rs.ranks,
                        e) != K3_OK)
        goto done;
    m.config_hash = config_hash;
    /* Runs bound whole (K3_SUBRUNS=0, a rank's rows) are a format 3 trunk:
     * version 4 says the runs are cut as model/weights.h cuts them. */
    if (!w->subruns)
        m.version = 3;
    if (k3_os_mkdir(a->trunk_dir) != 0 && errno != EEXIST) {
        k3_fail(e, K3_EINPUT, "%s: cannot create: %s", a->trunk_dir, strerror(errno));
        goto done;
    }
    k3_pack_opts o = { a->force, a->verify, a->compress_fast ? 2 : a->compress,
                       a->quiet ? NULL : stderr };
    k3_pack_result r;
    if (k3_trunk_pack(&m, a->trunk_dir, &o, &r, e) == K3_OK && !r.up_to_date && !a->quiet)
        fprintf(stderr, "pack-trunk: packed %zu runs (%d layers, lm_head, embedding%s%s), "
                        "%.3f GB, into %s/trunk.bin in %.2f s: copy %.2f GB/s, verify %.2f "
                        "GB/s\n",
                m.nruns, w->n_layers, a->rank_of ? "; the rows of rank " : "",
                a->rank_of ? a->rank_of : "", r.bytes / 1e9, a->trunk_dir, r.total_seconds,
                r.copy_seconds > 0 ? r.bytes / r.copy_seconds / 1e9 : 0.0,
                r.verify_seconds > 0 ? r.bytes / r.verify_seconds / 1e9 : 0.0);
    if (!e->code && !r.up_to_date && !a->quiet && (a->compress || a->compress_fast))
        fprintf(stderr, "pack-trunk: compressed: %.3f GB stored for %.3f GB of runs (%.1f%%, "
                        "%.1f%% fewer bytes to read)\n",
                r.stored / 1e9, r.bytes / 1e9, r.bytes ? 100.0 * r.stored / r.bytes : 0.0,
                r.bytes ? 100.0 - 100.0 * r.stored / r.bytes : 0.0);
done:
    k3_trunk_manifest_free(&m);
    k3_model_close(model);
    return e->code;
}

int k3_cmd_pack_trunk(int argc, char **argv)
{
    k3_err e = { 0, "" };
#ifdef SIGXFSZ
    /* Past a file size limit, a write must fail (EFBIG) and the pack clean
     * up, not the process die with its temporary file left behind. */
    signal(SIGXFSZ, SIG_IGN);
#endif
    pack_args a;
    memset(&a, 0, sizeof a);
    if (k3_opt_parse(&pack_cmd, &a, argc, argv, &e) != K3_OK)
        ; /* reported below */
    else if (a.help)
        k3_opt_help(&pack_cmd, stdout);
    else if (a.list_options)
        k3_opt_list(&pack_cmd, stdout);
    else if (!a.trunk_dir)
        k3_fail(&e, K3_EINPUT,
                "pack-trunk: expected MODEL_DIR TRUNK_DIR (see k3 pack-trunk --help)");
    else if (a.draft && strcmp(a.draft, "q8") != 0 && strcmp(a.draft, "q4") != 0)
        k3_fail(&e, K3_EINPUT, "pack-trunk: --draft %s: the draft trunk kinds are q8 and q4",
                a.draft);
    else if (a.compress && a.compress_fast)
        k3_fail(&e, K3_EINPUT, "pack-trunk: --compress and --compress-fast are two codecs: "
                               "give one");
    else if (a.draft && (a.rank_of || a.compress || a.compress_fast || a.verify || a.force))
        k3_fail(&e, K3_EINPUT, "pack-trunk: --draft writes draft.bin only (always anew): not "
                               "with --rank-of, --compress, --verify or --force");
    else
        pack(&a, &e);
    if (e.code)
        fprintf(stderr, "k3: error: %s\n", e.msg);
    return e.code;
}
