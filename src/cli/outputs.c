/* outputs.c - see outputs.h. */
#include "cli/outputs.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "util/error.h"
#include "util/os.h"

static int begin(k3_atomic_file *a, const char *path, k3_err *e)
{
    return path ? k3_atomic_begin(a, path, e) : K3_OK;
}

/* DIR is created if missing (but not its parents). */
static int begin_trace(k3_outputs *out, const char *dir, k3_err *e)
{
    if (!dir)
        return K3_OK;
    if (k3_os_mkdir(dir) != 0 && errno != EEXIST)
        return k3_fail(e, K3_EINPUT, "--dump-cache-trace %s: cannot create: %s", dir,
                       strerror(errno));
    if ((size_t)snprintf(out->trace_path, sizeof out->trace_path, "%s/trace.txt", dir) >=
        sizeof out->trace_path)
        return k3_fail(e, K3_EINPUT, "--dump-cache-trace %s: path too long", dir);
    return k3_atomic_begin(&out->trace, out->trace_path, e);
}

int k3_outputs_open(k3_outputs *out, const k3_output_opts *o, const char *save_state,
                    const char *history, k3_err *e)
{
    memset(out, 0, sizeof *out);
    if (begin(&out->report, o->out_json, e) || begin(&out->logits, o->dump_logits, e) ||
        begin(&out->prompt_logits, o->dump_prompt_logits, e) ||
        begin_trace(out, o->cache_trace_dir, e) ||
        (save_state && k3_atomic_probe(save_state, e)) ||
        (history && k3_atomic_probe(history, e)))
        k3_outputs_abort(out);
    return e->code;
}

static int commit(k3_atomic_file *a, k3_err *e)
{
    return a->f ? k3_atomic_commit(a, e) : K3_OK;
}

int k3_outputs_commit(k3_outputs *out, k3_err *e)
{
    if (commit(&out->report, e) || commit(&out->logits, e) ||
        commit(&out->prompt_logits, e) || commit(&out->trace, e))
        k3_outputs_abort(out);
    return e->code;
}

void k3_outputs_abort(k3_outputs *out)
{
    k3_atomic_abort(&out->report);
    k3_atomic_abort(&out->logits);
    k3_atomic_abort(&out->prompt_logits);
    k3_atomic_abort(&out->trace);
}
