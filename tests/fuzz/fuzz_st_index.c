/* fuzz_st_index.c - the shard index reader (k3_st_open with
 * model.safetensors.index.json): weight_map parsing, shard file names,
 * and the agreement of the map with the shards' headers.
 *
 * The input, up to its first NUL byte, is written as the index; the
 * directory holds three small valid shards (SHARDS below). If the input
 * has a NUL, the bytes after it replace the first shard for this run, so
 * an index and a header can be mutated together.
 *
 * Promises checked on an accepted index: every weight_map entry is found,
 * in the shard file the map names, and every tensor lies inside its shard. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "io/safetensors.h"
#include "util/json.h"

/* Three shards: header JSON and data-section size. Offsets are relative
 * to the data section, as in the format. */
static const struct { const char *file, *header; size_t data; } SHARDS[] = {
    { "model-00001-of-000003.safetensors",
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"language_model.model.embed_tokens.weight\":"
      "{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
      "\"language_model.model.norm.weight\":"
      "{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[8,20]}}",
      20 },
    { "model-00002-of-000003.safetensors",
      "{\"language_model.model.layers.0.block_sparse_moe.experts.0.w1.weight_packed\":"
      "{\"dtype\":\"U8\",\"shape\":[2,3],\"data_offsets\":[0,6]},"
      "\"language_model.model.layers.0.block_sparse_moe.experts.0.w1.weight_scale\":"
      "{\"dtype\":\"U8\",\"shape\":[2,1],\"data_offsets\":[6,8]}}",
      8 },
    { "model-00003-of-000003.safetensors",
      "{\"language_model.lm_head.weight\":"
      "{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[0,4]},"
      "\"vision_tower.x\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[4,6]}}",
      6 },
};
#define NSHARDS (sizeof SHARDS / sizeof *SHARDS)

/* Writes shard k as a valid file. */
static void write_shard(size_t k)
{
    size_t hl = strlen(SHARDS[k].header), n = 8 + hl + SHARDS[k].data;
    unsigned char buf[1024];
    FZ_ASSERT(n <= sizeof buf, "shard table too large");
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, SHARDS[k].header, hl);
    for (size_t i = 0; i < SHARDS[k].data; i++)
        buf[8 + hl + i] = (unsigned char)(i * 37 + k);
    fz_write(SHARDS[k].file, buf, n);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (size_t k = 0; k < NSHARDS; k++)
        write_shard(k);
    return 0;
}

static void check_index(const k3_st_index *ix, const char *text, size_t len)
{
    char err[256];
    k3_json_doc *doc = k3_json_parse(text, len, err, sizeof err);
    FZ_ASSERT(doc != NULL, "accepted an index that is not JSON: %s", err);
    const k3_json *wm = k3_json_get(k3_json_root(doc), "weight_map");
    FZ_ASSERT(wm && wm->type == K3J_OBJECT, "accepted an index without a weight_map");
    for (size_t i = 0; i < wm->count; i++) {
        const k3_tensor_info *t = k3_st_find(ix, wm->keys[i]);
        FZ_ASSERT(t != NULL, "weight_map entry %s not found", wm->keys[i]);
        const char *path = k3_st_shard_path(ix, t->shard), *slash = strrchr(path, '/');
        FZ_ASSERT(wm->items[i].type == K3J_STRING && slash && !strcmp(slash + 1, wm->items[i].str),
                  "%s is in %s, not in %s", wm->keys[i], path, wm->items[i].str);
    }
    for (size_t i = 0; i < k3_st_count(ix); i++) {
        const k3_tensor_info *t = k3_st_at(ix, i);
        struct stat st;
        FZ_ASSERT(stat(k3_st_shard_path(ix, t->shard), &st) == 0 &&
                      t->offset + t->nbytes <= (uint64_t)st.st_size,
                  "%s lies outside its shard", t->name);
    }
    k3_json_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int shard0_replaced;
    const uint8_t *nul = memchr(data, 0, size);
    size_t ilen = nul ? (size_t)(nul - data) : size;
    if (nul) {
        fz_write(SHARDS[0].file, nul + 1, size - ilen - 1);
        shard0_replaced = 1;
    } else if (shard0_replaced) {
        write_shard(0);
        shard0_replaced = 0;
    }
    fz_write("model.safetensors.index.json", data, ilen);
    k3_st_index *ix = NULL;
    k3_err e = { 0, "" };
    int rc = k3_st_open(&ix, fz_tmpdir(), &e);
    if (rc != K3_OK) {
        fz_check_input_refusal(&e, rc);
        return 0;
    }
    check_index(ix, (const char *)data, ilen);
    k3_st_close(ix);
    return 0;
}
