/* main.c - the k3 command: parse options, open the model, dispatch. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/generate.h"
#include "cli/options.h"
#include "k3/k3.h"
#include "util/error.h"

#ifndef K3_VERSION
#define K3_VERSION "0.1.0"
#endif
#ifndef K3_GIT_COMMIT
#define K3_GIT_COMMIT "unknown"
#endif

static int fail(const k3_err *e)
{
    fprintf(stderr, "k3: error: %s\n", e->msg);
    return e->code;
}

int main(int argc, char **argv)
{
    k3_err e = { 0, "" };
    k3_options o;
    if (k3_options_parse(&o, argc, argv, &e) != K3_OK)
        return fail(&e);
    if (o.help) {
        k3_options_usage();
        return 0;
    }
    if (o.version) {
        printf("k3 %s (commit %s)\n", K3_VERSION, K3_GIT_COMMIT);
        return 0;
    }
    if (!o.model_dir) {
        fprintf(stderr, "k3: error: no MODEL_DIR given (see k3 --help)\n");
        return K3_EINPUT;
    }
    if (!o.ids_csv) {
        fprintf(stderr, "k3: error: no prompt: give --ids 1,2,3 (see k3 --help)\n");
        return K3_EINPUT;
    }
    if (o.threads)
        omp_set_num_threads(o.threads);
    uint32_t *ids = NULL;
    size_t n = 0;
    k3_model *m = NULL;
    if (k3_parse_ids(o.ids_csv, &ids, &n, &e) != K3_OK)
        return fail(&e);
    k3_model_opts mo = { o.layers };
    if (k3_model_open(&m, o.model_dir, &mo, &e) == K3_OK) {
        for (size_t i = 0; i < n && !e.code; i++)
            if (ids[i] >= k3_model_vocab(m))
                k3_fail(&e, K3_EINPUT, "--ids: token id %u is outside the vocabulary (%u ids)",
                        ids[i], k3_model_vocab(m));
        if (!e.code)
            k3_run_generate(m, &o, ids, n, &e);
    }
    k3_model_close(m);
    free(ids);
    return e.code ? fail(&e) : 0;
}
