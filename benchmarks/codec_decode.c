/* codec_decode.c - the block decoder's speed on a real compressed trunk:
 * decoded bytes per CPU-second of one core (thread CPU time, so other jobs
 * on the machine do not understate it).
 *
 *   codec_decode TRUNK_BIN RUNS_TXT [REPS]
 *
 * RUNS_TXT: one line per run, "OFFSET STORED LENGTH" (decimal, from
 * trunk.json; benchmarks/codec_bench.sh writes it). Each run's block table
 * (io/trunk_format.h) is read from its end; every block is decoded once to
 * check it (exit 1 if one is refused), then the whole trunk is decoded REPS
 * (5) times, each timed alone; prints every rate and the median. Not a
 * test: the reader's checks (table sums, hashes) are the engine's job. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/codec.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    const uint8_t *src; /* stored block */
    size_t len, n;      /* stored and image bytes */
} block;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: codec_decode TRUNK_BIN RUNS_TXT [REPS]\n");
        return 2;
    }
    int reps = argc == 4 ? atoi(argv[3]) : 5;
    if (reps < 1 || reps > 101) {
        fprintf(stderr, "codec_decode: REPS must be 1..101\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        fprintf(stderr, "codec_decode: cannot open %s\n", argv[1]);
        return 1;
    }
    long fsz = ftell(f);
    if (fsz <= 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "codec_decode: cannot size %s\n", argv[1]);
        return 1;
    }
    uint8_t *file = malloc((size_t)fsz);
    if (!file || fread(file, 1, (size_t)fsz, f) != (size_t)fsz) {
        fprintf(stderr, "codec_decode: cannot read %s\n", argv[1]);
        return 1;
    }
    fclose(f);
    FILE *rl = fopen(argv[2], "r");
    if (!rl) {
        fprintf(stderr, "codec_decode: cannot open %s\n", argv[2]);
        return 1;
    }
    size_t nb = 0, cap = 0;
    block *b = NULL;
    unsigned long long off, stored, length, image = 0;
    while (fscanf(rl, "%llu %llu %llu", &off, &stored, &length) == 3) {
        uint64_t k = k3_codec_nblocks(length);
        if (off > (uint64_t)fsz || stored > (uint64_t)fsz - off || k > stored / 4) {
            fprintf(stderr, "codec_decode: run at %llu does not fit the file\n", off);
            return 2;
        }
        const uint8_t *run = file + off, *tab = run + stored - 4 * k;
        uint64_t at = 0;
        for (uint64_t i = 0; i < k; i++) {
            uint64_t sl = (uint64_t)tab[4 * i] | (uint64_t)tab[4 * i + 1] << 8 |
                          (uint64_t)tab[4 * i + 2] << 16 | (uint64_t)tab[4 * i + 3] << 24;
            if (sl > stored - 4 * k - at) {
                fprintf(stderr, "codec_decode: block table of run at %llu lies\n", off);
                return 2;
            }
            if (nb == cap) {
                cap = cap ? 2 * cap : 256;
                b = realloc(b, cap * sizeof *b);
                if (!b)
                    return 1;
            }
            b[nb++] = (block){ run + at, (size_t)sl, k3_codec_block_len(length, i) };
            at += sl;
            image += k3_codec_block_len(length, i);
        }
    }
    fclose(rl);
    if (!nb) {
        fprintf(stderr, "codec_decode: no blocks\n");
        return 2;
    }
    static uint8_t out[K3_CODEC_BLOCK];
    const char *why = "";
    for (size_t i = 0; i < nb; i++)
        if (k3_codec_decode(b[i].src, b[i].len, out, b[i].n, &why) != 0) {
            fprintf(stderr, "codec_decode: block %zu refused: %s\n", i, why);
            return 1;
        }
    double rate[101];
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        for (size_t i = 0; i < nb; i++)
            k3_codec_decode(b[i].src, b[i].len, out, b[i].n, &why);
        rate[r] = (double)image / (cpu_now() - t0) / 1e9;
    }
    printf("codec_decode: %zu blocks, %llu image bytes; GB/s per CPU-second:", nb, image);
    for (int r = 0; r < reps; r++)
        printf(" %.2f", rate[r]);
    qsort(rate, (size_t)reps, sizeof *rate, cmp_double);
    printf("; median %.2f\n", rate[reps / 2]);
    free(b);
    free(file);
    return 0;
}
