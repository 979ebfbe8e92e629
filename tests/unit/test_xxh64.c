/* test_xxh64.c - util/xxh64 against the reference XXH64 (values from
 * libxxhash 0.8.1), one-shot and streamed in every split; prints the
 * single-core speed (the checksum cost of a packed trunk). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "util/xxh64.h"

static const struct { size_t n; uint64_t seed0, seed1; } VEC[] = {
    { 0, 0xef46db3751d8e999ull, 0xac75fda2929b17efull },
    { 1, 0x1f25c8d0bc1f4bb6ull, 0x79cf94f5ace37fe1ull },
    { 3, 0x31d2363f52e564c9ull, 0x96d2a5e583ddd738ull },
    { 4, 0x9bb64b7d66ee9fdaull, 0x4a862fbb4b73776eull },
    { 7, 0x9a7b149959ce60d8ull, 0xddc5cf71d37a6368ull },
    { 8, 0xdab99d95c6f90092ull, 0xc6e75e2cbd8e07eeull },
    { 31, 0xa2aa5f33cc4a6119ull, 0x381822f33376d6b6ull },
    { 32, 0x23c3c17ef790fd97ull, 0x9abd315470ac276aull },
    { 33, 0x50a7cfc7ba588784ull, 0x72cdd3262f467933ull },
    { 63, 0x5e3e54b431c7493cull, 0x634da7d265979e61ull },
    { 64, 0x0eb64b3ef6eeb01full, 0xbcb3847d70525180ull },
    { 100, 0xa61f8d4c170fe531ull, 0x86f549ede5ac87e2ull },
    { 1000, 0x5f235fa033f1a3fbull, 0x83080310ee83cc20ull },
};
#define SEED1 0x9E3779B1u

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
    unsigned char data[1000];
    for (int i = 0; i < 1000; i++)
        data[i] = (unsigned char)((i * 7 + 3) & 255);
    CHECK(k3_xxh64("abc", 3, 0) == 0x44bc2cf5ad770999ull, "abc");
    for (size_t v = 0; v < sizeof VEC / sizeof *VEC; v++) {
        size_t n = VEC[v].n;
        CHECK(k3_xxh64(data, n, 0) == VEC[v].seed0, "n=%zu seed 0", n);
        CHECK(k3_xxh64(data, n, SEED1) == VEC[v].seed1, "n=%zu seed 1", n);
        /* Streamed in two and in three pieces at every cut. */
        for (size_t a = 0; a <= n; a++) {
            k3_xxh64_state s;
            k3_xxh64_init(&s, 0);
            k3_xxh64_update(&s, data, a);
            size_t b = a + (n - a) / 2;
            k3_xxh64_update(&s, data + a, b - a);
            k3_xxh64_update(&s, data + b, n - b);
            CHECK(k3_xxh64_digest(&s) == VEC[v].seed0, "n=%zu streamed, cut at %zu", n, a);
        }
    }
    /* Speed over 256 MiB (not a check: reported for the trunk's checksum cost). */
    size_t big = (size_t)256 << 20;
    unsigned char *buf = malloc(big);
    CHECK(buf != NULL, "alloc");
    if (buf) {
        for (size_t i = 0; i < big; i++)
            buf[i] = (unsigned char)(i * 131);
        double t0 = now();
        uint64_t h = k3_xxh64(buf, big, 0);
        double dt = now() - t0;
        printf("xxh64: %.2f GB/s on one core (%016llx)\n", big / dt / 1e9, (unsigned long long)h);
        free(buf);
    }
    return check_report("test_xxh64");
}
