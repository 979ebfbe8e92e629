/* safetensors.c - see safetensors.h. */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/pread_all.h"
#include "util/error.h"
#include "util/file.h"
#include "util/json.h"
#include "util/xxh64.h"

static const struct { const char *name; size_t size; } DTYPES[K3_DT_COUNT] = {
    [K3_DT_BOOL] = { "BOOL", 1 },   [K3_DT_U8] = { "U8", 1 },
    [K3_DT_I8] = { "I8", 1 },       [K3_DT_F8_E4M3] = { "F8_E4M3", 1 },
    [K3_DT_F8_E5M2] = { "F8_E5M2", 1 },
    [K3_DT_U16] = { "U16", 2 },     [K3_DT_I16] = { "I16", 2 },
    [K3_DT_F16] = { "F16", 2 },     [K3_DT_BF16] = { "BF16", 2 },
    [K3_DT_U32] = { "U32", 4 },     [K3_DT_I32] = { "I32", 4 },
    [K3_DT_F32] = { "F32", 4 },     [K3_DT_U64] = { "U64", 8 },
    [K3_DT_I64] = { "I64", 8 },     [K3_DT_F64] = { "F64", 8 },
};

const char *k3_dtype_name(k3_dtype dt) { return dt < K3_DT_COUNT ? DTYPES[dt].name : "?"; }
size_t k3_dtype_size(k3_dtype dt) { return dt < K3_DT_COUNT ? DTYPES[dt].size : 0; }

struct k3_st_index {
    char **shard_paths;
    char **shard_files;  /* the plain file names, as the index gives them */
    uint32_t *shard_slots; /* open-addressing hash of shard_files: index + 1 */
    size_t nshard_slots;
    int *fds;
    uint64_t *shard_sizes;
    size_t nshards;
    k3_tensor_info *t;
    size_t n, cap;
    /* Open-addressing hash of tensor names: a slot is the name's hash's
     * high 32 bits (compared before the name, so a probe touches one
     * 8-byte slot until the likely match) over tensor index + 1; 0 = empty. */
    uint64_t *slots;
    size_t nslots;
    char **names;        /* owned name strings, one block per shard */
    size_t nnames;
};

static uint64_t hash_name(const char *s) { return k3_xxh64(s, strlen(s), 0); }

#define SLOT(h, k) ((h) >> 32 << 32 | (uint64_t)((k) + 1))
#define SLOT_INDEX(s) ((uint32_t)(s) - 1)

const k3_tensor_info *k3_st_find(const k3_st_index *ix, const char *name)
{
    if (!ix->nslots)
        return NULL;
    size_t m = ix->nslots - 1;
    uint64_t h = hash_name(name), tag = h >> 32;
    for (size_t i = h & m;; i = (i + 1) & m) {
        uint64_t s = ix->slots[i];
        if (!s)
            return NULL;
        if (s >> 32 == tag && !strcmp(ix->t[SLOT_INDEX(s)].name, name))
            return &ix->t[SLOT_INDEX(s)];
    }
}

static int build_hash(k3_st_index *ix, k3_err *e)
{
    size_t n = 16;
    while (n < ix->n * 2)
        n *= 2;
    ix->slots = k3_calloc(e, n, sizeof *ix->slots, "tensor hash");
    if (!ix->slots)
        return e->code;
    ix->nslots = n;
    for (size_t k = 0; k < ix->n; k++) {
        uint64_t h = hash_name(ix->t[k].name);
        size_t i = h & (n - 1);
        for (; ix->slots[i]; i = (i + 1) & (n - 1)) {
            uint32_t o = SLOT_INDEX(ix->slots[i]);
            if (ix->slots[i] >> 32 == h >> 32 && !strcmp(ix->t[o].name, ix->t[k].name))
                return k3_fail(e, K3_EINPUT, "tensor %s appears in two shards (%s and %s)",
                               ix->t[k].name, ix->shard_paths[ix->t[o].shard],
                               ix->shard_paths[ix->t[k].shard]);
        }
        ix->slots[i] = SLOT(h, k);
    }
    return K3_OK;
}

static int parse_dtype(const k3_json *v, k3_dtype *out)
{
    if (!v || v->type != K3J_STRING)
        return 0;
    for (int d = 0; d < K3_DT_COUNT; d++)
        if (!strcmp(v->str, DTYPES[d].name)) {
            *out = (k3_dtype)d;
            return 1;
        }
    return 0;
}

typedef struct { uint64_t begin, end; size_t t; } span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* Parses one shard's header and appends its tensors. */
static int load_shard(k3_st_index *ix, uint32_t shard, k3_err *e)
{
    const char *path = ix->shard_paths[shard];
    int fd = k3_open_input(path, e);
    if (fd < 0)
        return e->code;
    ix->fds[shard] = fd;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return k3_fail(e, K3_ERUNTIME, "%s: stat failed: %s", path, strerror(errno));
    uint64_t fsize = (uint64_t)st.st_size;
    ix->shard_sizes[shard] = fsize;
    unsigned char lenbuf[8];
    if (fsize < 8)
        return k3_fail(e, K3_EINPUT, "%s: truncated: %llu bytes, no safetensors header",
                       path, (unsigned long long)fsize);
    if (k3_pread_all(fd, lenbuf, 8, 0) != 8)
        return k3_fail(e, K3_ERUNTIME, "%s: cannot read header length", path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | lenbuf[i];
    if (hlen > K3_ST_MAX_HEADER)
        return k3_fail(e, K3_EINPUT, "%s: header length %llu exceeds the %u-byte limit", path,
                       (unsigned long long)hlen, K3_ST_MAX_HEADER);
    if (8 + hlen > fsize)
        return k3_fail(e, K3_EINPUT, "%s: truncated: header of %llu bytes but file is %llu bytes",
                       path, (unsigned long long)hlen, (unsigned long long)fsize);
    char *hdr = k3_malloc(e, (size_t)hlen + 1, "safetensors header");
    if (!hdr)
        return e->code;
    if (k3_pread_all(fd, hdr, (size_t)hlen, 8) != (ssize_t)hlen) {
        free(hdr);
        return k3_fail(e, K3_ERUNTIME, "%s: cannot read header", path);
    }
    char jerr[256];
    k3_json_doc *doc = k3_json_parse(hdr, (size_t)hlen, jerr, sizeof jerr);
    free(hdr);
    if (!doc)
        return k3_fail(e, K3_EINPUT, "%s: header is not valid JSON: %s", path, jerr);
    const k3_json *root = k3_json_root(doc);
    uint64_t data_start = 8 + hlen, data_size = fsize - data_start;
    int rc = K3_OK;
    size_t first = ix->n;
    span *spans = NULL;
    if (root->type != K3J_OBJECT) {
        rc = k3_fail(e, K3_EINPUT, "%s: header is not a JSON object", path);
        goto out;
    }
    /* Names live in one block per shard so the JSON document can be freed. */
    size_t namebytes = 0;
    for (size_t i = 0; i < root->count; i++)
        namebytes += root->key_lens[i] + 1;
    char *names = k3_malloc(e, namebytes, "tensor names");
    if (!names) {
        rc = e->code;
        goto out;
    }
    ix->names[ix->nnames++] = names;
    if (ix->n + root->count > ix->cap) {
        size_t ncap = ix->cap ? ix->cap : 1024;
        while (ncap < ix->n + root->count)
            ncap *= 2;
        k3_tensor_info *nt = realloc(ix->t, ncap * sizeof *nt);
        if (!nt) {
            rc = k3_fail(e, K3_ERUNTIME, "out of memory indexing %s", path);
            goto out;
        }
        ix->t = nt;
        ix->cap = ncap;
    }
    for (size_t i = 0; i < root->count; i++) {
        const char *key = root->keys[i];
        const k3_json *v = &root->items[i];
        if (!strcmp(key, "__metadata__"))
            continue;
        if (root->key_lens[i] != strlen(key) || root->key_lens[i] == 0) {
            rc = k3_fail(e, K3_EINPUT, "%s: a tensor name is empty or contains NUL", path);
            goto out;
        }
        k3_tensor_info *t = &ix->t[ix->n];
        memset(t, 0, sizeof *t);
        memcpy(names, key, root->key_lens[i] + 1);
        t->name = names;
        names += root->key_lens[i] + 1;
        t->shard = shard;
        const k3_json *sh = k3_json_get(v, "shape"), *off = k3_json_get(v, "data_offsets");
        if (v->type != K3J_OBJECT || !parse_dtype(k3_json_get(v, "dtype"), &t->dtype)) {
            rc = k3_fail(e, K3_EINPUT, "%s: tensor %s: missing or unknown dtype", path, key);
            goto out;
        }
        if (!sh || sh->type != K3J_ARRAY || sh->count > K3_MAX_DIMS) {
            rc = k3_fail(e, K3_EINPUT, "%s: tensor %s: shape missing or over %d dims", path, key,
                         K3_MAX_DIMS);
            goto out;
        }
        /* Element count with overflow checks: a lying shape must not wrap. */
        uint64_t elems = 1;
        t->ndim = (uint32_t)sh->count;
        for (size_t d = 0; d < sh->count; d++) {
            const k3_json *x = &sh->items[d];
            if (x->type != K3J_NUMBER || !x->is_int || x->integer < 0) {
                rc = k3_fail(e, K3_EINPUT,
                             "%s: tensor %s: shape entry %zu is not a non-negative integer", path,
                             key, d);
                goto out;
            }
            t->shape[d] = x->integer;
            if (x->integer && elems > UINT64_MAX / (uint64_t)x->integer) {
                rc = k3_fail(e, K3_EINPUT, "%s: tensor %s: shape overflows", path, key);
                goto out;
            }
            elems *= (uint64_t)x->integer;
        }
        if (!off || off->type != K3J_ARRAY || off->count != 2 ||
            off->items[0].type != K3J_NUMBER || !off->items[0].is_int ||
            off->items[1].type != K3J_NUMBER || !off->items[1].is_int ||
            off->items[0].integer < 0 || off->items[1].integer < off->items[0].integer) {
            rc = k3_fail(e, K3_EINPUT,
                         "%s: tensor %s: data_offsets must be [begin, end] with 0 <= begin <= end",
                         path, key);
            goto out;
        }
        uint64_t b = (uint64_t)off->items[0].integer, en = (uint64_t)off->items[1].integer;
        size_t es = k3_dtype_size(t->dtype);
        if (elems > UINT64_MAX / es || elems * es != en - b) {
            rc = k3_fail(e, K3_EINPUT,
                         "%s: tensor %s: data_offsets span %llu bytes but %s shape needs %llu",
                         path, key, (unsigned long long)(en - b), k3_dtype_name(t->dtype),
                         (unsigned long long)(elems > UINT64_MAX / es ? UINT64_MAX : elems * es));
            goto out;
        }
        if (en > data_size) {
            rc = k3_fail(e, K3_EINPUT,
                         "%s: truncated or lying header: tensor %s ends at data byte %llu but the "
                         "data section has %llu bytes",
                         path, key, (unsigned long long)en, (unsigned long long)data_size);
            goto out;
        }
        t->offset = data_start + b;
        t->nbytes = en - b;
        ix->n++;
    }
    /* Overlap check: sort this shard's spans by start. */
    size_t cnt = ix->n - first;
    spans = k3_malloc(e, cnt * sizeof *spans + 1, "span list");
    if (!spans) {
        rc = e->code;
        goto out;
    }
    for (size_t i = 0; i < cnt; i++) {
        spans[i].begin = ix->t[first + i].offset;
        spans[i].end = ix->t[first + i].offset + ix->t[first + i].nbytes;
        spans[i].t = first + i;
    }
    qsort(spans, cnt, sizeof *spans, span_cmp);
    for (size_t i = 1; i < cnt; i++)
        if (spans[i].begin < spans[i - 1].end) {
            rc = k3_fail(e, K3_EINPUT, "%s: tensors %s and %s overlap in the data section", path,
                         ix->t[spans[i - 1].t].name, ix->t[spans[i].t].name);
            goto out;
        }
out:
    free(spans);
    k3_json_free(doc);
    return rc;
}

static char *join_path(k3_err *e, const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = k3_malloc(e, n, "path");
    if (p)
        snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* A shard name from the index must be a plain file name in the model
 * directory: no separators, no "..". */
static int plain_file_name(const char *s)
{
    return *s && !strchr(s, '/') && !strchr(s, '\\') && strcmp(s, ".") && strcmp(s, "..");
}

/* The index of shard `file` (a plain name), added if new. Shards are found
 * through a small hash table: the release's index names one of 96 shards
 * for each of its 497,220 tensors. */
static int add_shard(k3_st_index *ix, const char *dir, const char *file, k3_err *e)
{
    if (ix->nshards * 2 >= ix->nshard_slots) { /* grow and rehash */
        size_t n = ix->nshard_slots ? ix->nshard_slots * 2 : 256;
        uint32_t *t = k3_calloc(e, n, sizeof *t, "shard table");
        if (!t)
            return -e->code;
        for (size_t i = 0; i < ix->nshards; i++) {
            size_t j = hash_name(ix->shard_files[i]) & (n - 1);
            while (t[j])
                j = (j + 1) & (n - 1);
            t[j] = (uint32_t)(i + 1);
        }
        free(ix->shard_slots);
        ix->shard_slots = t;
        ix->nshard_slots = n;
    }
    size_t j = hash_name(file) & (ix->nshard_slots - 1);
    for (; ix->shard_slots[j]; j = (j + 1) & (ix->nshard_slots - 1))
        if (!strcmp(ix->shard_files[ix->shard_slots[j] - 1], file))
            return (int)(ix->shard_slots[j] - 1);
    char **np = realloc(ix->shard_paths, (ix->nshards + 1) * sizeof *np);
    if (np)
        ix->shard_paths = np;
    char **nf = np ? realloc(ix->shard_files, (ix->nshards + 1) * sizeof *nf) : NULL;
    if (!np || !nf)
        return -k3_fail(e, K3_ERUNTIME, "out of memory");
    ix->shard_files = nf;
    ix->shard_paths[ix->nshards] = join_path(e, dir, file);
    ix->shard_files[ix->nshards] = ix->shard_paths[ix->nshards]
                                       ? ix->shard_paths[ix->nshards] + strlen(dir) + 1
                                       : NULL;
    if (!ix->shard_paths[ix->nshards])
        return -e->code;
    ix->shard_slots[j] = (uint32_t)(ix->nshards + 1);
    return (int)ix->nshards++;
}

int k3_st_open(k3_st_index **out, const char *dir, k3_err *e)
{
    *out = NULL;
    k3_st_index *ix = k3_calloc(e, 1, sizeof *ix, "index");
    if (!ix)
        return e->code;
    char *ipath = join_path(e, dir, "model.safetensors.index.json");
    k3_json_doc *doc = NULL;
    uint32_t *map_shard = NULL;
    const k3_json *wm = NULL;
    if (!ipath)
        goto fail;
    struct stat st;
    if (stat(ipath, &st) == 0) {
        size_t len;
        char *text = k3_read_small_file(e, ipath, 256u << 20, &len);
        if (!text)
            goto fail;
        char jerr[256];
        doc = k3_json_parse(text, len, jerr, sizeof jerr);
        free(text);
        if (!doc) {
            k3_fail(e, K3_EINPUT, "%s: not valid JSON: %s", ipath, jerr);
            goto fail;
        }
        wm = k3_json_get(k3_json_root(doc), "weight_map");
        if (!wm || wm->type != K3J_OBJECT || wm->count == 0) {
            k3_fail(e, K3_EINPUT, "%s: missing or empty \"weight_map\" object", ipath);
            goto fail;
        }
        map_shard = k3_malloc(e, wm->count * sizeof *map_shard, "weight map");
        if (!map_shard)
            goto fail;
        for (size_t i = 0; i < wm->count; i++) {
            const k3_json *f = &wm->items[i];
            if (f->type != K3J_STRING || !plain_file_name(f->str)) {
                k3_fail(e, K3_EINPUT,
                        "%s: weight_map entry %s must name a shard file in the model directory",
                        ipath, wm->keys[i]);
                goto fail;
            }
            int s = add_shard(ix, dir, f->str, e);
            if (s < 0)
                goto fail;
            map_shard[i] = (uint32_t)s;
        }
    } else {
        int s = add_shard(ix, dir, "model.safetensors", e);
        if (s < 0)
            goto fail;
        if (stat(ix->shard_paths[0], &st) != 0) {
            k3_fail(e, K3_EINPUT, "%s: no model.safetensors.index.json and no model.safetensors",
                    dir);
            goto fail;
        }
    }
    ix->fds = k3_malloc(e, ix->nshards * sizeof *ix->fds, "shard fds");
    ix->shard_sizes = k3_calloc(e, ix->nshards, sizeof *ix->shard_sizes, "shard sizes");
    ix->names = k3_calloc(e, ix->nshards, sizeof *ix->names, "name blocks");
    if (!ix->fds || !ix->shard_sizes || !ix->names)
        goto fail;
    for (size_t i = 0; i < ix->nshards; i++)
        ix->fds[i] = -1;
    for (uint32_t s = 0; s < ix->nshards; s++)
        if (load_shard(ix, s, e) != K3_OK)
            goto fail;
    if (build_hash(ix, e) != K3_OK)
        goto fail;
    /* The weight map must agree with the headers, tensor for tensor. */
    if (wm)
        for (size_t i = 0; i < wm->count; i++) {
            const k3_tensor_info *t = k3_st_find(ix, wm->keys[i]);
            if (!t) {
                k3_fail(e, K3_EINPUT,
                        "index names tensor %s in %s but that shard's header lacks it", wm->keys[i],
                        ix->shard_paths[map_shard[i]]);
                goto fail;
            }
            if (t->shard != map_shard[i]) {
                k3_fail(e, K3_EINPUT, "index puts tensor %s in %s but it is in %s", wm->keys[i],
                        ix->shard_paths[map_shard[i]], ix->shard_paths[t->shard]);
                goto fail;
            }
        }
    free(map_shard);
    k3_json_free(doc);
    free(ipath);
    *out = ix;
    return K3_OK;
fail:
    free(map_shard);
    k3_json_free(doc);
    free(ipath);
    k3_st_close(ix);
    return e->code ? e->code : K3_ERUNTIME;
}

void k3_st_close(k3_st_index *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i < ix->nshards; i++) {
        if (ix->fds && ix->fds[i] >= 0)
            close(ix->fds[i]);
        free(ix->shard_paths[i]);
    }
    for (size_t i = 0; i < ix->nnames; i++)
        free(ix->names[i]);
    free(ix->names);
    free(ix->shard_paths);
    free(ix->shard_files);
    free(ix->shard_slots);
    free(ix->fds);
    free(ix->shard_sizes);
    free(ix->t);
    free(ix->slots);
    free(ix);
}

size_t k3_st_count(const k3_st_index *ix) { return ix->n; }
const k3_tensor_info *k3_st_at(const k3_st_index *ix, size_t i) { return &ix->t[i]; }
const char *k3_st_shard_path(const k3_st_index *ix, uint32_t s) { return ix->shard_paths[s]; }
int k3_st_shard_fd(const k3_st_index *ix, uint32_t s) { return ix->fds[s]; }

int k3_st_read(const k3_st_index *ix, const k3_tensor_info *t, uint64_t off, uint64_t n,
               void *dst, k3_err *e)
{
    if (off > t->nbytes || n > t->nbytes - off)
        return k3_fail(e, K3_ERUNTIME, "internal: read of %s beyond its data", t->name);
    char why[96];
    if (k3_pread_weight(ix->fds[t->shard], dst, (size_t)n, (off_t)(t->offset + off), why,
                        sizeof why) == 0)
        return K3_OK;
    return k3_fail(e, K3_EINVALID,
                   "RUN INVALID: reading tensor %s from %s failed after %d attempts (%s)",
                   t->name, ix->shard_paths[t->shard], K3_READ_ATTEMPTS, why);
}
