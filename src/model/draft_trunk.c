/* draft_trunk.c - see draft_trunk.h. */
#include "model/draft_trunk.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/direct.h"
#include "io/pread_all.h"
#include "io/trunk_format.h"
#include "io/trunk_source.h"
#include "util/error.h"
#include "util/os.h"
#include "util/xxh64.h"

static const char magic[8] = { 'K', '3', 'D', 'R', 'A', 'F', 'T', 0 };

/* Bytes of the header the header hash covers: magic, four u32, three u64. */
#define HASHED 48u

struct k3_draft_trunk {
    uint8_t *data;           /* the whole file, 64-byte aligned */
    uint64_t bytes;
    k3_mat *mats;            /* [n] the matrices, in file order */
    k3_draft_entry *ent;     /* [n] what each is (layer, field) */
    size_t n;
    size_t *first;           /* [n_layers + 2]: layer i's entries are
                              * [first[i], first[i + 1]); lm_head's the last */
};

static uint64_t align64(uint64_t x) { return (x + 63) / 64 * 64; }

/* The MoE router stays BF16: its top-k is a discrete choice, and a small
 * error near a tie picks other experts, which changes the layer's output
 * far more than any rounding (as llama.cpp keeps ffn_gate_inp unquantized).
 * It is small: experts x hidden per MoE layer (0.5 GB of the release's). */
static int stays_bf16(size_t field) { return field == offsetof(k3_layer_weights, moe.router); }

/* lm_head's whole tensor as one piece: its runs' pieces (one, or a row
 * block each) are consecutive rows of one tensor. */
static int head_piece(const k3_weights *w, k3_run_piece *out, k3_err *e)
{
    size_t first = w->layer_run[w->n_layers];
    *out = w->runs[first].pieces[0];
    for (size_t r = first + 1; r < w->nruns; r++) {
        const k3_run_piece *p = &w->runs[r].pieces[0];
        if (p->fd != out->fd || p->src_off != out->src_off + out->len)
            return k3_fail(e, K3_ERUNTIME, "internal: lm_head's row blocks are not one tensor");
        out->len += p->len;
    }
    out->dst_off = 0;
    return K3_OK;
}

const char *k3_draft_kind_name(uint32_t kind)
{
    return kind == K3_DRAFT_KIND_Q8 ? "q8" : kind == K3_DRAFT_KIND_Q4 ? "q4" : NULL;
}

int k3_draft_layout(const k3_weights *w, uint32_t kind, k3_draft_entry **entries, size_t *n,
                    uint64_t *size, k3_err *e)
{
    size_t L = (size_t)w->n_layers, count = 1, k = 0;
    for (size_t r = 0; r < w->layer_run[L]; r++)
        count += w->nslots[r];
    k3_draft_entry *d = k3_calloc(e, count, sizeof *d, "draft trunk layout");
    if (!d)
        return e->code;
    uint64_t off = K3_DRAFT_HEADER;
    for (size_t i = 0; i <= L; i++) {
        size_t r0 = i < L ? w->layer_run[i] : 0, r1 = i < L ? w->layer_run[i + 1] : 1;
        for (size_t r = r0; r < r1; r++)
            for (size_t s = 0; s < (i < L ? w->nslots[r] : 1); s++, k++) {
                size_t field = i < L ? w->slots[r][s].field : 0;
                const k3_mat *m = i < L ? (const k3_mat *)(const void *)((const char *)
                                              &w->layers[i] + field)
                                        : &w->lm_head;
                if (m->share) {
                    free(d);
                    return k3_fail(e, K3_EINPUT, "a draft trunk holds whole matrices: not "
                                                 "under a k3-mpi row split");
                }
                d[k] = (k3_draft_entry){ (int)i, field, m->rows, m->cols,
                                         i < L && stays_bf16(field), { 0 }, 0, 0 };
                if (i < L) {
                    d[k].src = w->runs[r].pieces[s];
                    d[k].src.dst_off = 0;
                } else if (head_piece(w, &d[k].src, e) != K3_OK) {
                    free(d);
                    return e->code;
                }
                /* Shapes come from the config, whose sizes fit int64 with
                 * room (model/config.h), so these sums do not overflow. */
                uint64_t cells = (uint64_t)m->rows * (uint64_t)m->cols;
                d[k].q_off = align64(off);
                if (d[k].bf16) { /* no scales: they would start where the values end */
                    d[k].s_off = off = d[k].q_off + cells * 2;
                    continue;
                }
                if (kind == K3_DRAFT_KIND_Q4 && m->cols % 32) {
                    free(d);
                    return k3_fail(e, K3_EINPUT, "a q4 draft trunk needs every matrix's columns "
                                   "a multiple of 32; this model has %lld: use q8",
                                   (long long)m->cols);
                }
                d[k].s_off =
                    align64(d[k].q_off + (kind == K3_DRAFT_KIND_Q4 ? cells / 2 : cells));
                off = d[k].s_off + (uint64_t)m->rows * (uint64_t)k3_q8_blocks(m->cols) * 2;
            }
    }
    *entries = d;
    *n = count;
    *size = off;
    return K3_OK;
}

/* The kind in the header of path, or q8 when it cannot be read. */
static uint32_t file_kind(const char *path)
{
    uint8_t head[16];
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f)
        fclose(f);
    return got == sizeof head && !memcmp(head, magic, sizeof magic) &&
                   k3_draft_kind_name(head[12] | (uint32_t)head[13] << 8)
               ? head[12] | (uint32_t)head[13] << 8
               : K3_DRAFT_KIND_Q8;
}

uint64_t k3_draft_trunk_bytes(const char *dir, const k3_weights *w)
{
    k3_err e = { 0, "" };
    k3_draft_entry *d = NULL;
    size_t n;
    uint64_t size = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, K3_DRAFT_FILE);
    if (k3_draft_layout(w, file_kind(path), &d, &n, &size, &e) != K3_OK)
        return 0;
    free(d);
    return size;
}

int k3_draft_fingerprint(const char *model_dir, const k3_weights *w, const k3_st_index *ix,
                         uint64_t *fp, k3_err *e)
{
    k3_trunk_manifest m;
    memset(&m, 0, sizeof m);
    uint64_t config_hash = 0, size = 0;
    k3_draft_entry *ent = NULL;
    k3_run *runs = NULL;
    size_t n = 0;
    /* Each matrix a run of its own (draft_trunk.h). */
    if (k3_draft_layout(w, K3_DRAFT_KIND_Q8, &ent, &n, &size, e) == K3_OK &&
        (runs = k3_calloc(e, n, sizeof *runs, "draft trunk fingerprint")))
        for (size_t k = 0; k < n; k++)
            runs[k] = (k3_run){ .pieces = &ent[k].src, .npieces = 1, .bytes = ent[k].src.len,
                                .name = ent[k].src.tensor, .stored = ent[k].src.len };
    if (!e->code && k3_trunk_config_hash(model_dir, &config_hash, e) == K3_OK &&
        k3_trunk_layout(&m, runs, n, ix, w->embed_info, 0, 0, e) == K3_OK &&
        k3_trunk_source_fingerprint(&m, e) == K3_OK) {
        k3_xxh64_state h;
        k3_xxh64_init(&h, 0);
        k3_xxh64_update(&h, &config_hash, sizeof config_hash);
        k3_xxh64_update(&h, &m.table_hash, sizeof m.table_hash);
        for (size_t r = 0; r < m.nruns; r++)
            k3_xxh64_update(&h, &m.runs[r].source, sizeof m.runs[r].source);
        *fp = k3_xxh64_digest(&h);
    }
    k3_trunk_manifest_free(&m);
    free(runs);
    free(ent);
    return e->code;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void k3_draft_header_encode(uint8_t out[K3_DRAFT_HEADER], uint32_t kind, uint32_t nmats,
                            uint64_t fingerprint, uint64_t size, uint64_t payload_hash)
{
    memset(out, 0, K3_DRAFT_HEADER);
    memcpy(out, magic, sizeof magic);
    put32(out + 8, K3_DRAFT_VERSION);
    put32(out + 12, kind);
    put32(out + 16, K3_Q8_BLOCK);
    put32(out + 20, nmats);
    put64(out + 24, fingerprint);
    put64(out + 32, size);
    put64(out + 40, payload_hash);
    put64(out + HASHED, k3_xxh64(out, HASHED, 0));
}

/* Checks the header h of path against what w and fp want. */
static int check_header(const uint8_t *h, const char *path, uint32_t nmats, uint64_t size,
                        uint64_t have_size, uint64_t fp, k3_err *e)
{
    if (have_size < K3_DRAFT_HEADER || memcmp(h, magic, sizeof magic))
        return k3_fail(e, K3_EINPUT, "%s: not a draft trunk (make one with k3 pack-trunk MODEL "
                       "DIR --draft q8)", path);
    if (get32(h + 8) != K3_DRAFT_VERSION)
        return k3_fail(e, K3_EINPUT, "%s: draft trunk version %u; this k3 reads version %u: "
                       "repack it", path, get32(h + 8), K3_DRAFT_VERSION);
    if (!k3_draft_kind_name(get32(h + 12)) || get32(h + 16) != K3_Q8_BLOCK)
        return k3_fail(e, K3_EINPUT, "%s: a draft trunk of kind %u (block %u); this k3 runs "
                       "kinds 1 (q8) and 2 (q4), block %u", path, get32(h + 12), get32(h + 16),
                       K3_Q8_BLOCK);
    if (get32(h + 20) != nmats || get64(h + 32) != size)
        return k3_fail(e, K3_EINPUT, "%s: the draft trunk holds %u matrices in %llu bytes; this "
                       "model (as bound: --layers) needs %u in %llu", path, get32(h + 20),
                       (unsigned long long)get64(h + 32), nmats, (unsigned long long)size);
    if (get64(h + HASHED) != k3_xxh64(h, HASHED, 0))
        return k3_fail(e, K3_EINPUT, "%s: the draft trunk's header is damaged: repack it", path);
    if (get64(h + 24) != fp)
        return k3_fail(e, K3_EINPUT, "%s: the draft trunk was packed from another checkpoint "
                       "(fingerprint differs): repack it from this model", path);
    if (have_size != size)
        return k3_fail(e, K3_EINPUT, "%s: the draft trunk is %llu bytes, its header says %llu "
                       "(truncated or extended)", path, (unsigned long long)have_size,
                       (unsigned long long)size);
    return K3_OK;
}

/* Reads the whole file (size bytes) into d->data. */
static int read_all(int fd, const char *path, k3_draft_trunk *d, uint64_t size, k3_err *e)
{
    if (size > SIZE_MAX || !(d->data = k3_os_aligned_alloc(64, (size_t)size)))
        return k3_fail(e, K3_ERUNTIME, "%s: out of memory for the draft trunk (%.3f GB)", path,
                       (double)size / (1 << 30));
    d->bytes = size;
    const uint64_t chunk = 1u << 26;
    for (uint64_t off = 0; off < size; off += chunk) {
        size_t len = (size_t)(size - off < chunk ? size - off : chunk);
        if (k3_pread_all(fd, d->data + off, len, (off_t)off) != (ssize_t)len)
            return k3_fail(e, K3_EINPUT, "%s: cannot read %zu bytes at %llu (truncated?)", path,
                           len, (unsigned long long)off);
    }
    return K3_OK;
}

int k3_draft_trunk_open(k3_draft_trunk **out, const char *dir, const k3_weights *w, uint64_t fp,
                        k3_err *e)
{
    *out = NULL;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, K3_DRAFT_FILE) >= sizeof path)
        return k3_fail(e, K3_EINPUT, "--draft-trunk %s: path too long", dir);
    k3_draft_entry *ent = NULL;
    size_t n = 0;
    uint64_t size = 0;
    k3_draft_trunk *d = k3_calloc(e, 1, sizeof *d, "draft trunk");
    k3_file f = { NULL, -1, 0, 0 };
    struct stat st;
    uint8_t head[K3_DRAFT_HEADER];
    memset(head, 0, sizeof head);
    if (d && k3_file_open(&f, path, 0, e) == K3_OK && stat(path, &st) != 0)
        k3_fail(e, K3_EINPUT, "%s: cannot stat", path);
    uint64_t have = e->code ? 0 : (uint64_t)st.st_size;
    if (!e->code && have >= K3_DRAFT_HEADER &&
        k3_pread_all(f.fd, head, sizeof head, 0) != (ssize_t)sizeof head)
        k3_fail(e, K3_EINPUT, "%s: cannot read its header", path);
    /* The layout of the kind the header names (check_header refuses
     * another kind; q8's layout stands in until then). */
    uint32_t kind = k3_draft_kind_name(get32(head + 12)) ? get32(head + 12) : K3_DRAFT_KIND_Q8;
    if (!e->code)
        k3_draft_layout(w, kind, &ent, &n, &size, e);
    if (!e->code)
        check_header(head, path, (uint32_t)n, size, have, fp, e);
    if (!e->code)
        read_all(f.fd, path, d, size, e);
    if (f.path)
        k3_file_close(&f);
    if (!e->code && k3_xxh64(d->data + K3_DRAFT_HEADER, (size_t)(size - K3_DRAFT_HEADER), 0) !=
                        get64(d->data + 40))
        k3_fail(e, K3_EINPUT, "%s: the draft trunk's bytes do not match its hash (damaged): "
                "repack it", path);
    if (!e->code) {
        d->n = n;
        d->ent = ent;
        ent = NULL;
        d->mats = k3_calloc(e, n, sizeof *d->mats, "draft trunk");
        d->first = k3_calloc(e, (size_t)w->n_layers + 2, sizeof *d->first, "draft trunk");
    }
    for (size_t k = 0; !e->code && k < n; k++) {
        const k3_draft_entry *x = &d->ent[k];
        d->first[x->layer + 1] = k + 1;
        k3_mat *mt = &d->mats[k];
        k3_mat_kind mk = x->bf16 ? K3_MAT_BF16 : kind == K3_DRAFT_KIND_Q4 ? K3_MAT_Q4 : K3_MAT_Q8;
        *mt = (k3_mat){ mk, x->rows, x->cols, d->data + x->q_off,
                        x->bf16 ? NULL : d->data + x->s_off, 0, 0, 0 };
    }
    free(ent);
    if (e->code) {
        k3_draft_trunk_close(d);
        return e->code;
    }
    *out = d;
    return K3_OK;
}

void k3_draft_trunk_close(k3_draft_trunk *d)
{
    if (!d)
        return;
    free(d->mats);
    free(d->ent);
    free(d->first);
    k3_os_aligned_free(d->data);
    free(d);
}

uint64_t k3_draft_trunk_size(const k3_draft_trunk *d) { return d ? d->bytes : 0; }

void k3_draft_layer_view(const k3_draft_trunk *d, const k3_weights *w, int i,
                         k3_layer_weights *view)
{
    *view = w->layers[i];
    for (size_t k = d->first[i]; k < d->first[i + 1]; k++)
        *(k3_mat *)(void *)((char *)view + d->ent[k].field) = d->mats[k];
}

k3_mat k3_draft_lm_head(const k3_draft_trunk *d) { return d->mats[d->n - 1]; }
