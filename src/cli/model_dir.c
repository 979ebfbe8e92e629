/* model_dir.c - see model_dir.h. */
#include "cli/model_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/suggest.h"
#include "util/error.h"

/* The entry of dir's parent closest to its last component, as a path in
 * out ("" when none is close). */
static void sibling(const char *dir, char *out, size_t cap)
{
    char parent[4096];
    const char *slash = strrchr(dir, '/'), *base = slash ? slash + 1 : dir;
    size_t plen = slash ? (size_t)(slash - dir) : 0;
    out[0] = '\0';
    if (plen >= sizeof parent || !*base)
        return;
    memcpy(parent, dir, plen);
    parent[plen] = '\0';
    DIR *d = opendir(slash ? (plen ? parent : "/") : ".");
    if (!d)
        return;
    const char *best = NULL;
    size_t dist = 0;
    char name[256] = "";
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        k3_suggest_fold(base, de->d_name, &best, &dist);
        if (best == de->d_name) { /* readdir may reuse de: keep a copy */
            snprintf(name, sizeof name, "%s", de->d_name);
            best = name;
        }
    }
    closedir(d);
    if (best)
        snprintf(out, cap, "%.*s%s%s", (int)plen, dir, slash ? "/" : "", best);
}

int k3_cli_check_dir(const char *dir, const char *what, k3_err *e)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT)
            return K3_OK; /* let the reader say what is wrong */
        char near[4400];
        sibling(dir, near, sizeof near);
        return k3_fail(e, K3_EINPUT, "%s %s does not exist%s%s%s", what, dir,
                       near[0] ? " (did you mean " : "", near, near[0] ? "?)" : "");
    }
    if (S_ISDIR(st.st_mode))
        return K3_OK;
    char magic[4] = { 0 };
    FILE *f = fopen(dir, "rb");
    size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f)
        fclose(f);
    size_t len = strlen(dir);
    if ((got == 4 && !memcmp(magic, "GGUF", 4)) || (len > 5 && !strcmp(dir + len - 5, ".gguf")))
        return k3_fail(e, K3_EINPUT,
                       "%s: GGUF is not supported: k3 reads the release's safetensors "
                       "checkpoint (a directory with config.json, tiktoken.model and "
                       "model-*.safetensors; see README.md, \"The real model\")",
                       dir);
    return k3_fail(e, K3_EINPUT,
                   "%s %s is a file, not a model directory (a directory with config.json, "
                   "tiktoken.model and model-*.safetensors)",
                   what, dir);
}
