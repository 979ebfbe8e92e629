/* trunk_format.c - see trunk_format.h. */
#include "io/trunk_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"
#include "util/file.h"
#include "util/json.h"
#include "util/json_write.h"
#include "util/os.h"
#include "io/codec.h"
#include "util/xxh64.h"

/* trunk.json of the release is ~300 KB; anything near this is not ours. */
#define MAX_MANIFEST_BYTES (64u << 20)

void k3_trunk_hex(uint64_t v, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)v);
}

int k3_trunk_config_hash(const char *model_dir, uint64_t *hash, k3_err *e)
{
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    char *text = k3_read_small_file(e, path, 16u << 20, &len);
    if (!text)
        return e->code;
    *hash = k3_xxh64(text, len, 0);
    free(text);
    return K3_OK;
}

/* "64x64" into out. */
static void shape_text(const k3_trunk_tensor *t, char *out, size_t n)
{
    out[0] = 0;
    for (uint32_t d = 0; d < t->ndim; d++)
        snprintf(out + strlen(out), n - strlen(out), "%s%lld", d ? "x" : "",
                 (long long)t->shape[d]);
}

/* The canonical table text, hashed line by line (see trunk_format.h). */
static uint64_t table_hash(const k3_trunk_manifest *m)
{
    k3_xxh64_state s;
    k3_xxh64_init(&s, 0);
    char line[1024], shape[256];
    if (m->ranks > 0) {
        int n = snprintf(line, sizeof line, "rank_of %d %d\n", m->rank, m->ranks);
        k3_xxh64_update(&s, line, (size_t)n);
    }
    for (size_t r = 0; r < m->nruns; r++) {
        const k3_trunk_run *run = &m->runs[r];
        int n = snprintf(line, sizeof line, "run %s %llu\n", run->name,
                         (unsigned long long)run->length);
        k3_xxh64_update(&s, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        for (size_t i = 0; i < run->ntensors; i++) {
            const k3_trunk_tensor *t = &run->tensors[i];
            shape_text(t, shape, sizeof shape);
            /* Names longer than the line are hashed whole, in two updates. */
            k3_xxh64_update(&s, "tensor ", 7);
            k3_xxh64_update(&s, t->name, strlen(t->name));
            n = snprintf(line, sizeof line, " %s %s %llu", k3_dtype_name(t->dtype), shape,
                         (unsigned long long)t->offset);
            if (t->split)
                n += snprintf(line + n, sizeof line - (size_t)n, " rows %lld %lld",
                              (long long)t->row_lo, (long long)t->row_hi);
            n += snprintf(line + n, sizeof line - (size_t)n, "\n");
            k3_xxh64_update(&s, line, (size_t)n);
        }
    }
    return k3_xxh64_digest(&s);
}

/* Allocates runs and one block of ntensors tensors. */
static int alloc_manifest(k3_trunk_manifest *m, size_t nruns, size_t ntensors, k3_err *e)
{
    m->runs = k3_calloc(e, nruns ? nruns : 1, sizeof *m->runs, "trunk manifest");
    m->blocks = k3_calloc(e, ntensors ? ntensors : 1, sizeof(k3_trunk_tensor), "trunk manifest");
    m->nruns = nruns;
    return e->code;
}

static void set_tensor(k3_trunk_tensor *kt, const k3_tensor_info *t, uint64_t offset,
                       const char *path, int fd, uint64_t src_off)
{
    kt->name = t->name;
    kt->dtype = t->dtype;
    kt->ndim = t->ndim;
    memcpy(kt->shape, t->shape, sizeof kt->shape);
    kt->offset = offset;
    kt->nbytes = t->nbytes;
    kt->src_path = path;
    kt->src_fd = fd;
    kt->src_off = src_off;
}

/* A piece that holds rows of its tensor (a rank's share or a row block,
 * weights.c): kt
 * becomes a split tensor of those rows; 0, or 1 when the piece is no whole
 * rows of a 2-D tensor. */
static int set_rows(k3_trunk_tensor *kt, const k3_tensor_info *t, const k3_run_piece *p)
{
    if (t->ndim != 2 || t->shape[0] <= 0 || p->src_off < t->offset)
        return 1;
    uint64_t row = t->nbytes / (uint64_t)t->shape[0], at = p->src_off - t->offset;
    if (!row || at % row || p->len % row || at > t->nbytes || p->len > t->nbytes - at)
        return 1;
    kt->split = 1;
    kt->row_lo = (int64_t)(at / row);
    kt->row_hi = kt->row_lo + (int64_t)(p->len / row);
    kt->nbytes = p->len;
    return 0;
}

int k3_trunk_layout(k3_trunk_manifest *m, const k3_run *runs, size_t nruns,
                    const k3_st_index *ix, const k3_tensor_info *embed, int rank, int ranks,
                    k3_err *e)
{
    memset(m, 0, sizeof *m);
    m->version = K3_TRUNK_VERSION;
    m->rank = ranks > 1 ? rank : 0;
    m->ranks = ranks > 1 ? ranks : 0;
    size_t nt = 1;
    for (size_t r = 0; r < nruns; r++)
        nt += runs[r].npieces;
    if (alloc_manifest(m, nruns + 1, nt, e) != K3_OK)
        goto fail;
    k3_trunk_tensor *next = m->blocks;
    uint64_t off = 0;
    for (size_t r = 0; r <= nruns; r++) {
        k3_trunk_run *kr = &m->runs[r];
        kr->offset = off;
        kr->tensors = next;
        if (r == nruns) {
            kr->name = K3_TRUNK_EMBED_RUN;
            kr->length = embed->nbytes;
            kr->stored = embed->nbytes;
            kr->ntensors = 1;
            set_tensor(next++, embed, 0, k3_st_shard_path(ix, embed->shard),
                       k3_st_shard_fd(ix, embed->shard), embed->offset);
        } else {
            kr->name = runs[r].name;
            kr->length = runs[r].bytes;
            kr->stored = runs[r].bytes;
            kr->ntensors = runs[r].npieces;
            for (size_t i = 0; i < runs[r].npieces; i++) {
                const k3_run_piece *p = &runs[r].pieces[i];
                const k3_tensor_info *t = p->tensor ? k3_st_find(ix, p->tensor) : NULL;
                int whole = t && t->nbytes == p->len && p->src_off == t->offset;
                if (t)
                    set_tensor(next, t, p->dst_off, p->path, p->fd, p->src_off);
                if (!t || (!whole && set_rows(next, t, p)) ||
                    p->dst_off + p->len > runs[r].bytes ||
                    (i && p->dst_off < next[-1].offset + next[-1].nbytes)) {
                    k3_fail(e, K3_ERUNTIME, "internal: piece %zu of %s is not a tensor in order",
                            i, runs[r].name);
                    goto fail;
                }
                next++;
            }
        }
        off += k3_trunk_align_up(kr->length);
    }
    m->file_size = off;
    m->table_hash = table_hash(m);
    return K3_OK;
fail:
    k3_trunk_manifest_free(m);
    return e->code;
}

void k3_trunk_manifest_free(k3_trunk_manifest *m)
{
    k3_json_free(m->doc);
    free(m->blocks);
    free(m->runs);
    memset(m, 0, sizeof *m);
}

const k3_trunk_run *k3_trunk_find_run(const k3_trunk_manifest *m, const char *name)
{
    for (size_t r = 0; r < m->nruns; r++)
        if (!strcmp(m->runs[r].name, name))
            return &m->runs[r];
    return NULL;
}

static void describe(const k3_trunk_tensor *t, char *out, size_t n)
{
    char shape[256];
    shape_text(t, shape, sizeof shape);
    int k = snprintf(out, n, "%s [%s] at offset %llu", k3_dtype_name(t->dtype), shape,
                     (unsigned long long)t->offset);
    if (t->split && k > 0 && (size_t)k < n)
        snprintf(out + k, n - (size_t)k, " (rows %lld..%lld only)", (long long)t->row_lo,
                 (long long)t->row_hi);
}

int k3_trunk_run_differs(const k3_trunk_run *want, const k3_trunk_run *got, char *why,
                         size_t whylen)
{
    if (want->ntensors != got->ntensors) {
        snprintf(why, whylen, "run \"%s\" holds %zu tensors in trunk.json but %zu in the model",
                 want->name, got->ntensors, want->ntensors);
        return 1;
    }
    for (size_t i = 0; i < want->ntensors; i++) {
        const k3_trunk_tensor *a = &want->tensors[i], *b = &got->tensors[i];
        char da[300], db[300];
        if (strcmp(a->name, b->name)) {
            snprintf(why, whylen, "run \"%s\" holds %s in trunk.json where the model has %s",
                     want->name, b->name, a->name);
            return 1;
        }
        describe(a, da, sizeof da);
        describe(b, db, sizeof db);
        if (strcmp(da, db)) {
            snprintf(why, whylen, "tensor %s is %s in trunk.json but %s in the model", a->name,
                     db, da);
            return 1;
        }
    }
    if (want->length != got->length) {
        snprintf(why, whylen, "run \"%s\" is %llu bytes in trunk.json but %llu in the model",
                 want->name, (unsigned long long)got->length, (unsigned long long)want->length);
        return 1;
    }
    return 0;
}

/* ---- reading ---- */

typedef struct {
    const char *path;
    k3_err *e;
} reader;

static const k3_json *need(reader *rd, const k3_json *obj, const char *key, k3_json_type type,
                           const char *where)
{
    static const char *names[] = { "null", "boolean", "number", "string", "array", "object" };
    const k3_json *v = k3_json_get(obj, key);
    if (rd->e->code)
        return NULL;
    if (!v || v->type != type) {
        k3_fail(rd->e, K3_EINPUT, "%s: %s\"%s\" %s (expected a%s %s)", rd->path, where, key,
                v ? "has the wrong type" : "is missing",
                type == K3J_ARRAY || type == K3J_OBJECT ? "n" : "",
                names[type]);
        return NULL;
    }
    return v;
}

static int need_u64(reader *rd, const k3_json *obj, const char *key, const char *where,
                    uint64_t *out)
{
    const k3_json *v = need(rd, obj, key, K3J_NUMBER, where);
    if (v && (!v->is_int || v->integer < 0))
        k3_fail(rd->e, K3_EINPUT, "%s: %s\"%s\" must be a non-negative integer", rd->path, where,
                key);
    if (rd->e->code)
        return rd->e->code;
    *out = (uint64_t)v->integer;
    return K3_OK;
}

static int need_hex(reader *rd, const k3_json *obj, const char *key, const char *where,
                    uint64_t *out)
{
    const k3_json *v = need(rd, obj, key, K3J_STRING, where);
    if (!v)
        return rd->e->code;
    uint64_t x = 0;
    int ok = v->len == 16;
    for (size_t i = 0; ok && i < 16; i++) {
        char c = v->str[i];
        ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        x = x << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (!ok)
        return k3_fail(rd->e, K3_EINPUT, "%s: %s\"%s\" must be 16 lower-case hex digits",
                       rd->path, where, key);
    *out = x;
    return K3_OK;
}

static int need_str(reader *rd, const k3_json *obj, const char *key, const char *where,
                    const char *want, const char **out)
{
    const k3_json *v = need(rd, obj, key, K3J_STRING, where);
    if (!v)
        return rd->e->code;
    if (v->len == 0 || v->len != strlen(v->str))
        return k3_fail(rd->e, K3_EINPUT, "%s: %s\"%s\" is empty or holds NUL", rd->path, where,
                       key);
    if (want && strcmp(v->str, want))
        return k3_fail(rd->e, K3_EINPUT, "%s: %s\"%s\" is \"%s\", expected \"%s\"", rd->path,
                       where, key, v->str, want);
    if (out)
        *out = v->str;
    return K3_OK;
}

static int read_tensor(reader *rd, const k3_json *j, const k3_trunk_run *run, const char *where,
                       k3_trunk_tensor *t)
{
    const char *dtype;
    if (j->type != K3J_OBJECT)
        return k3_fail(rd->e, K3_EINPUT, "%s: %sa tensor entry is not an object", rd->path, where);
    need_str(rd, j, "name", where, NULL, &t->name);
    need_str(rd, j, "dtype", where, NULL, &dtype);
    const k3_json *shape = need(rd, j, "shape", K3J_ARRAY, where);
    need_u64(rd, j, "offset", where, &t->offset);
    if (rd->e->code)
        return rd->e->code;
    int d;
    for (d = 0; d < K3_DT_COUNT && strcmp(dtype, k3_dtype_name((k3_dtype)d)); d++)
        ;
    if (d == K3_DT_COUNT)
        return k3_fail(rd->e, K3_EINPUT, "%s: %stensor %s has unknown dtype \"%s\"", rd->path,
                       where, t->name, dtype);
    t->dtype = (k3_dtype)d;
    if (shape->count > K3_MAX_DIMS)
        return k3_fail(rd->e, K3_EINPUT, "%s: %stensor %s has over %d dims", rd->path, where,
                       t->name, K3_MAX_DIMS);
    t->ndim = (uint32_t)shape->count;
    uint64_t bytes = k3_dtype_size(t->dtype);
    for (size_t i = 0; i < shape->count; i++) {
        const k3_json *x = &shape->items[i];
        if (x->type != K3J_NUMBER || !x->is_int || x->integer < 0 ||
            (x->integer && bytes > UINT64_MAX / (uint64_t)x->integer))
            return k3_fail(rd->e, K3_EINPUT, "%s: %stensor %s: bad shape entry %zu", rd->path,
                           where, t->name, i);
        t->shape[i] = x->integer;
        bytes *= (uint64_t)x->integer;
    }
    t->nbytes = bytes;
    const k3_json *rows = k3_json_get(j, "rows");
    if (rows) {
        const k3_json *a = rows->type == K3J_ARRAY && rows->count == 2 ? &rows->items[0] : NULL;
        const k3_json *b = a ? &rows->items[1] : NULL;
        if (!a || t->ndim != 2 || a->type != K3J_NUMBER || !a->is_int ||
            b->type != K3J_NUMBER || !b->is_int || a->integer < 0 || b->integer < a->integer ||
            b->integer > t->shape[0])
            return k3_fail(rd->e, K3_EINPUT, "%s: %stensor %s: \"rows\" must be [LO, HI] "
                           "within its first dimension (a 2-D tensor)", rd->path, where,
                           t->name);
        t->split = 1;
        t->row_lo = a->integer;
        t->row_hi = b->integer;
        t->nbytes = t->shape[0] ? bytes / (uint64_t)t->shape[0] *
                                      (uint64_t)(t->row_hi - t->row_lo) : 0;
        bytes = t->nbytes;
    }
    if (t->offset > run->length || bytes > run->length - t->offset)
        return k3_fail(rd->e, K3_EINPUT, "%s: %stensor %s ends past the run's %llu bytes",
                       rd->path, where, t->name, (unsigned long long)run->length);
    return K3_OK;
}

/* Whether a compressed run's stored size can hold its blocks and table
 * (each block 1..K3_CODEC_MAX_STORED bytes; io/codec.h). */
static int stored_plausible(const k3_trunk_run *run)
{
    uint64_t nb = k3_codec_nblocks(run->length);
    if (nb > (UINT64_MAX - 1) / (4 + K3_CODEC_MAX_STORED))
        return 0;
    return run->stored >= 5 * nb && run->stored <= (4 + (uint64_t)K3_CODEC_MAX_STORED) * nb;
}

static int read_run(reader *rd, const k3_json *j, size_t r, uint64_t end_prev,
                    uint64_t file_size, int version, int codec, k3_trunk_tensor *tensors,
                    k3_trunk_run *run)
{
    char where[64];
    snprintf(where, sizeof where, "run %zu: ", r);
    if (j->type != K3J_OBJECT)
        return k3_fail(rd->e, K3_EINPUT, "%s: %snot an object", rd->path, where);
    need_str(rd, j, "name", where, NULL, &run->name);
    need_u64(rd, j, "offset", where, &run->offset);
    need_u64(rd, j, "length", where, &run->length);
    run->stored = run->length;
    if (version >= 3)
        need_u64(rd, j, "stored", where, &run->stored);
    need_hex(rd, j, "checksum", where, &run->checksum);
    need_hex(rd, j, "source", where, &run->source);
    const k3_json *ts = need(rd, j, "tensors", K3J_ARRAY, where);
    if (rd->e->code)
        return rd->e->code;
    if (codec == K3_RUN_PLAIN ? run->stored != run->length : !stored_plausible(run))
        return k3_fail(rd->e, K3_EINPUT, "%s: %s\"%s\" stores %llu bytes, which cannot hold "
                                         "its %llu-byte image%s",
                       rd->path, where, run->name, (unsigned long long)run->stored,
                       (unsigned long long)run->length,
                       codec == K3_RUN_PLAIN ? " uncompressed" : "'s blocks and block table");
    if (run->offset % K3_TRUNK_ALIGN || run->offset < end_prev ||
        run->offset > file_size || k3_trunk_align_up(run->stored) > file_size - run->offset)
        return k3_fail(rd->e, K3_EINPUT,
                       "%s: %s\"%s\" at %llu (+%llu bytes) is misaligned, overlaps the previous "
                       "run or ends past file_size %llu",
                       rd->path, where, run->name, (unsigned long long)run->offset,
                       (unsigned long long)run->stored, (unsigned long long)file_size);
    run->tensors = tensors;
    run->ntensors = ts->count;
    for (size_t i = 0; i < ts->count; i++) {
        if (read_tensor(rd, &ts->items[i], run, where, &tensors[i]) != K3_OK)
            return rd->e->code;
        if (i && tensors[i].offset < tensors[i - 1].offset + tensors[i - 1].nbytes)
            return k3_fail(rd->e, K3_EINPUT, "%s: %stensor %s overlaps the one before it",
                           rd->path, where, tensors[i].name);
    }
    return K3_OK;
}

int k3_trunk_manifest_read(k3_trunk_manifest *m, const char *dir, k3_err *e)
{
    memset(m, 0, sizeof *m);
    char path[4096], jerr[256];
    snprintf(path, sizeof path, "%s/%s", dir, K3_TRUNK_JSON);
    reader rd = { path, e };
    size_t len;
    char *text = k3_read_small_file(e, path, MAX_MANIFEST_BYTES, &len);
    if (!text)
        return e->code;
    m->doc = k3_json_parse(text, len, jerr, sizeof jerr);
    free(text);
    if (!m->doc)
        return k3_fail(e, K3_EINPUT, "%s: not valid JSON: %s", path, jerr);
    const k3_json *root = k3_json_root(m->doc);
    uint64_t version = 0, align = 0, recorded;
    if (root->type != K3J_OBJECT) {
        k3_fail(e, K3_EINPUT, "%s: not a JSON object", path);
        goto fail;
    }
    need_str(&rd, root, "format", "", "k3-trunk", NULL);
    if (need_u64(&rd, root, "version", "", &version) == K3_OK &&
        (version < 2 || version > K3_TRUNK_VERSION))
        k3_fail(e, K3_EINPUT, "%s: format version %llu, but this k3 reads versions 2 to %d: "
                              "repack it (k3 pack-trunk MODEL_DIR %s)",
                path, (unsigned long long)version, K3_TRUNK_VERSION, dir);
    need_str(&rd, root, "checksum", "", version >= 3 ? "xxh3-blocks" : "xxh64", NULL);
    const char *codec = "none";
    if (version >= 3 && need_str(&rd, root, "codec", "", NULL, &codec) == K3_OK &&
        strcmp(codec, "none") && strcmp(codec, K3_TRUNK_CODEC_NAME) &&
        strcmp(codec, K3_TRUNK_CODEC_NIBBLE_NAME))
        k3_fail(e, K3_EINPUT, "%s: \"codec\" is \"%s\", expected \"none\", \"%s\" or \"%s\"",
                path, codec, K3_TRUNK_CODEC_NAME, K3_TRUNK_CODEC_NIBBLE_NAME);
    need_str(&rd, root, "file", "", K3_TRUNK_BIN, NULL);
    if (need_u64(&rd, root, "align", "", &align) == K3_OK && align != K3_TRUNK_ALIGN)
        k3_fail(e, K3_EINPUT, "%s: \"align\" is %llu, expected %u", path,
                (unsigned long long)align, K3_TRUNK_ALIGN);
    need_hex(&rd, root, "config_hash", "", &m->config_hash);
    need_hex(&rd, root, "tensor_table_hash", "", &recorded);
    need_u64(&rd, root, "file_size", "", &m->file_size);
    const k3_json *runs = need(&rd, root, "runs", K3J_ARRAY, "");
    const k3_json *rk = k3_json_get(root, "rank_of");
    if (!e->code && rk) {
        const k3_json *r = rk->type == K3J_OBJECT ? k3_json_get(rk, "rank") : NULL;
        const k3_json *n = rk->type == K3J_OBJECT ? k3_json_get(rk, "ranks") : NULL;
        if (!r || !n || r->type != K3J_NUMBER || !r->is_int || n->type != K3J_NUMBER ||
            !n->is_int || n->integer < 2 || n->integer > 1 << 20 || r->integer < 0 ||
            r->integer >= n->integer)
            k3_fail(e, K3_EINPUT, "%s: \"rank_of\" must be {\"rank\": R, \"ranks\": N} "
                    "with 0 <= R < N and N >= 2", path);
        else
            m->rank = (int)r->integer, m->ranks = (int)n->integer;
    }
    if (e->code)
        goto fail;
    m->version = (int)version;
    m->codec = !strcmp(codec, K3_TRUNK_CODEC_NAME)          ? K3_RUN_BF16
               : !strcmp(codec, K3_TRUNK_CODEC_NIBBLE_NAME) ? K3_RUN_BF16_NIBBLE
                                                            : K3_RUN_PLAIN;
    size_t nt = 0;
    for (size_t r = 0; r < runs->count; r++) {
        const k3_json *ts = k3_json_get(&runs->items[r], "tensors");
        nt += ts && ts->type == K3J_ARRAY ? ts->count : 0;
    }
    if (alloc_manifest(m, runs->count, nt, e) != K3_OK)
        goto fail;
    k3_trunk_tensor *next = m->blocks;
    uint64_t end = 0;
    for (size_t r = 0; r < runs->count; r++) {
        if (read_run(&rd, &runs->items[r], r, end, m->file_size, m->version, m->codec, next,
                     &m->runs[r]) != K3_OK)
            goto fail;
        next += m->runs[r].ntensors;
        end = m->runs[r].offset + k3_trunk_align_up(m->runs[r].stored);
        if (k3_trunk_find_run(m, m->runs[r].name) != &m->runs[r]) {
            k3_fail(e, K3_EINPUT, "%s: two runs are called \"%s\"", path, m->runs[r].name);
            goto fail;
        }
    }
    m->table_hash = table_hash(m);
    if (m->table_hash != recorded) {
        char a[17], b[17];
        k3_trunk_hex(recorded, a);
        k3_trunk_hex(m->table_hash, b);
        k3_fail(e, K3_EINPUT, "%s: inconsistent: tensor_table_hash says %s but its runs hash to %s",
                path, a, b);
        goto fail;
    }
    return K3_OK;
fail:
    k3_trunk_manifest_free(m);
    return e->code;
}

/* ---- writing ---- */

static int put_str(k3_buf *b, const char *s, k3_err *e)
{
    k3_json v;
    memset(&v, 0, sizeof v);
    v.type = K3J_STRING;
    v.str = s;
    v.len = strlen(s);
    return k3_json_write(b, &v, 0, e);
}

static int put_fmt(k3_buf *b, k3_err *e, const char *fmt, ...) K3_PRINTF(3, 4);
static int put_fmt(k3_buf *b, k3_err *e, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return k3_buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1, e);
}

static int manifest_text(const k3_trunk_manifest *m, k3_buf *b, k3_err *e)
{
    char ch[17], th[17], rh[17], sh[17], shape[256];
    k3_trunk_hex(m->config_hash, ch);
    k3_trunk_hex(m->table_hash, th);
    put_fmt(b, e, "{\n  \"format\": \"k3-trunk\",\n  \"version\": %d,\n  \"checksum\": \"%s\",\n",
            m->version, m->version >= 3 ? "xxh3-blocks" : "xxh64");
    if (m->version >= 3)
        put_fmt(b, e, "  \"codec\": \"%s\",\n",
                m->codec == K3_RUN_BF16          ? K3_TRUNK_CODEC_NAME
                : m->codec == K3_RUN_BF16_NIBBLE ? K3_TRUNK_CODEC_NIBBLE_NAME
                                                 : "none");
    if (m->ranks > 0)
        put_fmt(b, e, "  \"rank_of\": {\"rank\": %d, \"ranks\": %d},\n", m->rank, m->ranks);
    put_fmt(b, e, "  \"config_hash\": \"%s\",\n  \"tensor_table_hash\": \"%s\",\n"
                  "  \"align\": %u,\n  \"file\": \"%s\",\n  \"file_size\": %llu,\n  \"runs\": [",
            ch, th, K3_TRUNK_ALIGN, K3_TRUNK_BIN, (unsigned long long)m->file_size);
    for (size_t r = 0; r < m->nruns && !e->code; r++) {
        const k3_trunk_run *run = &m->runs[r];
        k3_trunk_hex(run->checksum, rh);
        k3_trunk_hex(run->source, sh);
        put_fmt(b, e, "%s\n    {\"name\": ", r ? "," : "");
        put_str(b, run->name, e);
        put_fmt(b, e, ", \"offset\": %llu, \"length\": %llu, ", (unsigned long long)run->offset,
                (unsigned long long)run->length);
        if (m->version >= 3)
            put_fmt(b, e, "\"stored\": %llu, ", (unsigned long long)run->stored);
        put_fmt(b, e, "\"checksum\": \"%s\", \"source\": \"%s\",\n     \"tensors\": [", rh, sh);
        for (size_t i = 0; i < run->ntensors && !e->code; i++) {
            const k3_trunk_tensor *t = &run->tensors[i];
            put_fmt(b, e, "%s\n       {\"name\": ", i ? "," : "");
            put_str(b, t->name, e);
            shape_text(t, shape, sizeof shape);
            for (char *x = strchr(shape, 'x'); x; x = strchr(x, 'x'))
                *x = ',';
            put_fmt(b, e, ", \"dtype\": \"%s\", \"shape\": [%s], \"offset\": %llu",
                    k3_dtype_name(t->dtype), shape, (unsigned long long)t->offset);
            if (t->split)
                put_fmt(b, e, ", \"rows\": [%lld, %lld]", (long long)t->row_lo,
                        (long long)t->row_hi);
            put_fmt(b, e, "}");
        }
        put_fmt(b, e, "]}");
    }
    put_fmt(b, e, "\n  ]\n}\n");
    return e->code;
}

int k3_trunk_manifest_write(const k3_trunk_manifest *m, const char *path, k3_err *e)
{
    k3_buf b = { NULL, 0, 0 };
    if (manifest_text(m, &b, e) != K3_OK) {
        k3_buf_free(&b);
        return e->code;
    }
    int fd = k3_os_open_output(path, 0);
    if (fd < 0) {
        k3_buf_free(&b);
        return k3_fail(e, K3_ERUNTIME, "%s: cannot create: %s", path, strerror(errno));
    }
    size_t done = 0;
    while (done < b.len) {
        ssize_t n = write(fd, b.data + done, b.len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    if (done < b.len || k3_os_fsync(fd) != 0)
        k3_fail(e, K3_ERUNTIME, "%s: write failed: %s", path, strerror(errno));
    if (close(fd) != 0)
        k3_fail(e, K3_ERUNTIME, "%s: write failed: %s", path, strerror(errno));
    k3_buf_free(&b);
    return e->code;
}
