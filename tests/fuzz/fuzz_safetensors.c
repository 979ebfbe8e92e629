/* fuzz_safetensors.c - the safetensors header parser (io/safetensors.c,
 * load_shard) on arbitrary shard files: the input is written as the
 * model.safetensors of a directory without an index and opened with
 * k3_st_open.
 *
 * Promises checked on an accepted file: every tensor lies inside the data
 * section of the file, its byte count is its shape times its dtype size,
 * no two tensors overlap, k3_st_find finds each by name, and k3_st_read
 * returns exactly the file's bytes at the tensor's offset. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "io/safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_tmpdir();
    return 0;
}

typedef struct { uint64_t begin, end; } span;

static int by_begin(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

static void check_index(const k3_st_index *ix, const uint8_t *data, size_t size)
{
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | data[i];
    size_t n = k3_st_count(ix);
    span *spans = malloc((n ? n : 1) * sizeof *spans);
    FZ_ASSERT(spans != NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const k3_tensor_info *t = k3_st_at(ix, i);
        uint64_t elems = 1;
        for (uint32_t d = 0; d < t->ndim; d++)
            elems *= (uint64_t)t->shape[d];
        FZ_ASSERT(t->name[0] && k3_st_find(ix, t->name) == t, "tensor %zu not findable", i);
        FZ_ASSERT(t->ndim <= K3_MAX_DIMS && elems * k3_dtype_size(t->dtype) == t->nbytes,
                  "%s: %llu bytes do not match its shape", t->name,
                  (unsigned long long)t->nbytes);
        FZ_ASSERT(t->offset >= 8 + hlen && t->offset <= size && t->nbytes <= size - t->offset,
                  "%s: [%llu, +%llu) outside the data section of a %zu-byte file", t->name,
                  (unsigned long long)t->offset, (unsigned long long)t->nbytes, size);
        spans[i] = (span){ t->offset, t->offset + t->nbytes };
        k3_err e = { 0, "" };
        uint8_t *buf = malloc(t->nbytes ? (size_t)t->nbytes : 1);
        FZ_ASSERT(buf != NULL, "out of memory");
        int rc = k3_st_read(ix, t, 0, t->nbytes, buf, &e);
        FZ_ASSERT(rc == K3_OK && !memcmp(buf, data + t->offset, (size_t)t->nbytes),
                  "%s: k3_st_read returned other bytes (%s)", t->name, e.msg);
        free(buf);
    }
    qsort(spans, n, sizeof *spans, by_begin);
    for (size_t i = 1; i < n; i++)
        FZ_ASSERT(spans[i].begin >= spans[i - 1].end, "two tensors overlap");
    free(spans);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_write("model.safetensors", data, size);
    k3_st_index *ix = NULL;
    k3_err e = { 0, "" };
    int rc = k3_st_open(&ix, fz_tmpdir(), &e);
    if (rc != K3_OK) {
        fz_check_input_refusal(&e, rc);
        FZ_ASSERT(ix == NULL, "refused but returned an index");
        return 0;
    }
    check_index(ix, data, size);
    k3_st_close(ix);
    return 0;
}
