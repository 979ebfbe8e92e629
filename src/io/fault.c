/* fault.c - see fault.h. */
#include "io/fault.h"

#include <stdint.h>

void k3_fault_invert(void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)p)[i] ^= 0xFF;
}

#ifdef K3_FAULT_INJECTION
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int parsed;
    uint64_t reads, allocs;          /* attempts and allocations so far */
    uint64_t read_first, read_count; /* faulty attempt numbers [first, first + count) */
    int read_mode;
    uint64_t alloc_n;                /* failing allocation number, 0 = none */
} fault;

static void fault_bad(const char *spec)
{
    fprintf(stderr, "K3_FAULT=%s: expected read:N:fail|short|corrupt|einval[:COUNT] or alloc:N\n",
            spec);
    abort();
}

static uint64_t fault_number(const char *s, char **end, const char *spec)
{
    if (*s < '0' || *s > '9')
        fault_bad(spec);
    unsigned long long v = strtoull(s, end, 10);
    if (v == 0)
        fault_bad(spec);
    return (uint64_t)v;
}

/* Called with the lock held. */
static void fault_parse(void)
{
    static const char *modes[] = { "fail", "short", "corrupt", "einval" };
    static const int mode_of[] = { K3_FAULT_FAIL, K3_FAULT_SHORT, K3_FAULT_CORRUPT,
                                   K3_FAULT_EINVAL };
    const char *spec = getenv("K3_FAULT");
    char *end;
    fault.parsed = 1;
    if (!spec || !*spec)
        return;
    if (!strncmp(spec, "alloc:", 6)) {
        fault.alloc_n = fault_number(spec + 6, &end, spec);
        if (*end)
            fault_bad(spec);
        return;
    }
    if (strncmp(spec, "read:", 5))
        fault_bad(spec);
    fault.read_first = fault_number(spec + 5, &end, spec);
    if (*end++ != ':')
        fault_bad(spec);
    for (int m = 0; m < 4; m++) {
        size_t n = strlen(modes[m]);
        if (!strncmp(end, modes[m], n) && (end[n] == '\0' || end[n] == ':')) {
            fault.read_mode = mode_of[m];
            end += n;
            break;
        }
    }
    if (!fault.read_mode)
        fault_bad(spec);
    fault.read_count = 1;
    if (*end == ':')
        fault.read_count = fault_number(end + 1, &end, spec);
    if (*end)
        fault_bad(spec);
}

int k3_fault_read(void)
{
    pthread_mutex_lock(&lock);
    if (!fault.parsed)
        fault_parse();
    uint64_t n = ++fault.reads;
    int mode = n >= fault.read_first && n - fault.read_first < fault.read_count ? fault.read_mode
                                                                               : K3_FAULT_NONE;
    pthread_mutex_unlock(&lock);
    return mode;
}

int k3_fault_alloc(void)
{
    pthread_mutex_lock(&lock);
    if (!fault.parsed)
        fault_parse();
    int fail = fault.alloc_n != 0 && ++fault.allocs == fault.alloc_n;
    pthread_mutex_unlock(&lock);
    return fail;
}
#else
int k3_fault_read(void)
{
    return K3_FAULT_NONE;
}

int k3_fault_alloc(void)
{
    return 0;
}
#endif
