#include "util/common.h"
#include <stdarg.h>
#include <string.h>
#include <time.h>

void ctron_fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("ctron: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

void *xmalloc(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = CTRON_ALIGN;
    if (posix_memalign(&p, CTRON_ALIGN, align_up(bytes, CTRON_ALIGN)) != 0 || !p)
        ctron_fatal("out of memory allocating %zu bytes", bytes);
    return p;
}

void *xcalloc(size_t bytes) {
    void *p = xmalloc(bytes);
    memset(p, 0, bytes);
    return p;
}

void *xgrow(void *p, size_t used, size_t bytes) {
    void *q = xmalloc(bytes);
    if (used) memcpy(q, p, used);
    free(p);
    return q;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *float_shortest_text(float f, char *buf, size_t len) {
    for (int p = 1; p <= 9; p++) {   // %.9g always reads back
        snprintf(buf, len, "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f) break;
    }
    return buf;
}

double float_shortest(float f) {
    char buf[32];
    return strtod(float_shortest_text(f, buf, sizeof buf), NULL);
}
