/* check.h - the smallest test harness that does the job: CHECK records a
 * failure with its line and keeps going; main returns check_report(). */
#ifndef K3_TESTS_CHECK_H
#define K3_TESTS_CHECK_H

#include <stdio.h>

static int check_failures, check_count;

#define CHECK(cond, ...)                                                                \
    do {                                                                                \
        check_count++;                                                                  \
        if (!(cond)) {                                                                  \
            check_failures++;                                                           \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
        }                                                                               \
    } while (0)

static int check_report(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures ? 1 : 0;
}

#endif
