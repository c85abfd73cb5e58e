// Minimal test harness: CHECK records a failure and goes on; check_summary prints
// "N passed, N failed" and gives the exit code.
#ifndef CTRON_TEST_CHECK_H
#define CTRON_TEST_CHECK_H
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (cond) { check_passed++; }                                        \
        else {                                                               \
            check_failed++;                                                  \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);             \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

static inline int check_summary(void) {
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}
#endif
