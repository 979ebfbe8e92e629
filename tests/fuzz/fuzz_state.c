/* fuzz_state.c - the saved-state loader (model/state_file.c,
 * k3_state_load) on arbitrary files, against the tiny-a model of
 * $K3_FUZZ_DATA/model (resident). Seeds are states of that model saved by
 * `k3 --save-state`.
 *
 * Input: byte 0 bit 0 set = replace the last 8 bytes by the XXH64 of the
 * bytes before them, so that mutations pass the checksum and reach the
 * checks behind it (a file can be crafted that way too: XXH64 finds
 * corruption, not tampering); bit 1 set = after a successful load, feed one
 * token from the loaded state. The rest is the state file.
 *
 * Promises checked (k3/k3.h): a refusal is a code with a message and leaves
 * the state reset (never half-loaded); an accepted state has a position
 * within the file's size, ids inside the vocabulary and logits when its
 * position is not 0, and the model can go on from it - or, when the loaded
 * floats are NaN or Inf, stops with RUN INVALID (exit 4), never a token. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "fuzz.h"
#include "k3/k3.h"
#include "util/xxh64.h"

static k3_model *model;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
#ifdef _OPENMP
    /* One core: OpenMP's default (every core, spinning between the small
     * matmuls of tiny-a) doubled the CPU a run took and halved its speed. */
    omp_set_num_threads(1);
#endif
    char dir[512];
    snprintf(dir, sizeof dir, "%s/model", fz_data_dir());
    k3_model_opts o;
    k3_model_opts_default(&o);
    o.no_mem_check = 1;
    k3_err e = { 0, "" };
    FZ_ASSERT(k3_model_open(&model, dir, &o, &e) == K3_OK, "%s: %s", dir, e.msg);
    return 0;
}

/* Loads one input into a fresh state (a state per input keeps every
 * input's allocations balanced, which libFuzzer's leak check relies on). */
static void load(k3_state *state, const uint8_t *data, size_t size)
{
    int fix = data[0] & 1, feed = data[0] & 2;
    size_t n = size - 1;
    uint8_t *file = malloc(n ? n : 1);
    FZ_ASSERT(file != NULL, "out of memory");
    memcpy(file, data + 1, n);
    if (fix && n >= 8) {
        uint64_t h = k3_xxh64(file, n - 8, 0);
        for (int i = 0; i < 8; i++)
            file[n - 8 + i] = (uint8_t)(h >> (8 * i));
    }
    const char *path = fz_write("state.k3", file, n);
    free(file);
    k3_err e = { 0, "" };
    int rc = k3_state_load(state, path, &e);
    if (rc != K3_OK) {
        fz_check_input_refusal(&e, rc);
        FZ_ASSERT(k3_state_pos(state) == 0, "a refused state is left at position %lld",
                  (long long)k3_state_pos(state));
        return;
    }
    int64_t pos = k3_state_pos(state);
    uint32_t V = k3_model_vocab(model);
    FZ_ASSERT(pos >= 0 && (uint64_t)pos * 4 <= n, "position %lld from a %zu-byte file",
              (long long)pos, n);
    const uint32_t *ids = k3_state_ids(state);
    for (int64_t i = 0; i < pos; i++)
        FZ_ASSERT(ids[i] < V, "id %u at %lld outside the vocabulary", ids[i], (long long)i);
    FZ_ASSERT((pos == 0) == (k3_state_logits(state) == NULL), "logits and position disagree");
    if (feed) {
        float *logits = malloc(V * sizeof *logits);
        uint32_t id = pos ? ids[pos - 1] : 1;
        FZ_ASSERT(logits != NULL, "out of memory");
        rc = k3_forward(model, state, &id, 1, logits, 0, &e);
        FZ_ASSERT(rc == K3_OK || rc == K3_ERUNTIME ||
                      (rc == K3_EINVALID && strstr(e.msg, "not finite")),
                  "feeding a loaded state: %s", e.msg);
        FZ_ASSERT(rc != K3_OK || k3_state_pos(state) == pos + 1, "position did not advance");
        free(logits);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    k3_state *state;
    k3_err e = { 0, "" };
    FZ_ASSERT(k3_state_new(&state, model, &e) == K3_OK, "%s", e.msg);
    load(state, data, size);
    k3_state_free(state);
    return 0;
}
