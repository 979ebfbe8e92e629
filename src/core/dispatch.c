/* dispatch.c - the one place that chooses the ISA table (kernels_isa.h).
 *
 * The choice is made once, at the first kernel call of the process: env
 * K3_KERNELS names a table (scalar, avx2, avx512, neon), else the best one
 * this CPU runs is taken (avx512 > avx2 > scalar on x86-64, neon on
 * aarch64). Naming a table the build or the CPU cannot run is a usage
 * error (exit 2), never a silent fallback: a benchmark or gate that asks
 * for a path must measure that path. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernels.h"
#include "core/kernels_isa.h"

const char *const k3_isa_names[] = { "scalar", "avx2", "avx512", "neon", NULL };

/* Best first. */
static const k3_isa *const tables[] = {
#if defined(K3_HAVE_X86_TABLES)
    &k3_isa_avx512, &k3_isa_avx2,
#endif
#if defined(K3_HAVE_NEON_TABLE)
    &k3_isa_neon,
#endif
    &k3_isa_scalar,
};

static int cpu_runs(const k3_isa *t)
{
#if defined(K3_HAVE_X86_TABLES)
    __builtin_cpu_init();
    if (t == &k3_isa_avx512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
    if (t == &k3_isa_avx2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    (void)t;
    return 1; /* scalar everywhere; NEON is part of the aarch64 baseline */
}

const k3_isa *k3_isa_find(const char *name)
{
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (!strcmp(tables[i]->name, name))
            return cpu_runs(tables[i]) ? tables[i] : NULL;
    return NULL;
}

static const k3_isa *active;
static pthread_once_t chosen = PTHREAD_ONCE_INIT;

static void choose(void)
{
    const char *want = getenv("K3_KERNELS");
    if (want && *want) {
        active = k3_isa_find(want);
        if (active)
            return;
        int known = 0;
        for (size_t i = 0; k3_isa_names[i]; i++)
            known |= !strcmp(k3_isa_names[i], want);
        fprintf(stderr, "k3: error: K3_KERNELS=%s: %s\n", want,
                known ? "this build or CPU cannot run these kernels"
                      : "unknown kernels (choose scalar, avx2, avx512 or neon)");
        exit(2);
    }
    for (size_t i = 0; !active; i++)
        if (cpu_runs(tables[i]))
            active = tables[i];
}

const k3_isa *k3_isa_active(void)
{
    pthread_once(&chosen, choose);
    return active;
}

int k3_isa_select(const char *name)
{
    pthread_once(&chosen, choose);
    const k3_isa *t = k3_isa_find(name);
    if (!t)
        return -1;
    active = t;
    return 0;
}

const char *k3_kernels_name(void) { return k3_isa_active()->name; }
