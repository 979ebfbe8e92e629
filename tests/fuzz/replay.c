/* replay.c - a plain main for a fuzz target (see fuzz.h): feeds every file
 * named on the command line, and every file inside every directory named,
 * to LLVMFuzzerTestOneInput once, in name order. Exit 0 when all returned
 * (a finding aborts the process, so it fails the caller).
 *
 *   replay_NAME FILE|DIR...
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fprintf(stderr, "replay: out of memory reading %s\n", path);
            fclose(f);
            return -1;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *grown = realloc(buf, cap *= 2);
        if (!grown)
            free(buf);
        buf = grown;
    }
    fclose(f);
    /* An exact-size copy, so ASan sees reads past the input's end. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays the regular files of dir in name order; returns how many, or -1. */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open directory %s\n", dir);
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown)
                break;
            names = grown;
        }
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        if (!(names[n] = malloc(len)))
            break;
        snprintf(names[n++], len, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, by_name);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (count >= 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            count = replay_file(names[i]) == 0 ? count + 1 : -1;
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int got = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? replay_dir(argv[i])
                  : replay_file(argv[i]) == 0                       ? 1
                                                                    : -1;
        if (got < 0)
            return 1;
        total += got;
    }
    printf("%s: %d inputs replayed, no finding\n", argv[0], total);
    return 0;
}
