/* safetensors.h - one index over every tensor of a checkpoint's shards.
 *
 * A checkpoint directory holds model.safetensors.index.json (weight_map:
 * tensor name -> shard file) and the shards, or a single model.safetensors.
 * Opening validates every header the index names: sizes, dtypes, shapes,
 * offsets inside the file, no two tensors overlapping, and every tensor the
 * weight map promises present in its shard. Nothing is guessed: a lying or
 * truncated file is refused with K3_EINPUT naming the shard and tensor.
 *
 * Offsets are absolute file offsets (the data section starts after the
 * 8-byte length and the header); data is NOT assumed to be aligned. */
#ifndef K3_IO_SAFETENSORS_H
#define K3_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "k3/error.h"

typedef enum {
    K3_DT_BOOL, K3_DT_U8, K3_DT_I8, K3_DT_F8_E4M3, K3_DT_F8_E5M2,
    K3_DT_U16, K3_DT_I16, K3_DT_F16, K3_DT_BF16,
    K3_DT_U32, K3_DT_I32, K3_DT_F32,
    K3_DT_U64, K3_DT_I64, K3_DT_F64,
    K3_DT_COUNT
} k3_dtype;

#define K3_MAX_DIMS 8
/* Headers larger than this are refused: the release's are under 1 MB. */
#define K3_ST_MAX_HEADER (100u * 1000u * 1000u)

const char *k3_dtype_name(k3_dtype dt);
size_t k3_dtype_size(k3_dtype dt);

typedef struct k3_tensor_info {
    const char *name;
    uint32_t shard;          /* index into k3_st_index.shard_paths */
    k3_dtype dtype;
    uint32_t ndim;
    int64_t shape[K3_MAX_DIMS];
    uint64_t offset;         /* absolute offset of the data in the shard file */
    uint64_t nbytes;
} k3_tensor_info;

typedef struct k3_st_index k3_st_index;

int k3_st_open(k3_st_index **out, const char *dir, k3_err *e);
void k3_st_close(k3_st_index *ix);

size_t k3_st_count(const k3_st_index *ix);
const k3_tensor_info *k3_st_at(const k3_st_index *ix, size_t i);
const k3_tensor_info *k3_st_find(const k3_st_index *ix, const char *name);
const char *k3_st_shard_path(const k3_st_index *ix, uint32_t shard);
int k3_st_shard_fd(const k3_st_index *ix, uint32_t shard);

/* Reads bytes [off, off+n) of a tensor's data into dst. A failed or short
 * read is retried, then reported as K3_EINVALID ("run invalid"): a weight
 * that cannot be read must stop the run, never be replaced by anything. */
int k3_st_read(const k3_st_index *ix, const k3_tensor_info *t, uint64_t off, uint64_t n,
               void *dst, k3_err *e);

#endif
