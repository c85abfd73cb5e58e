// Shared helpers: checked allocation and fatal errors for internal invariants.
#ifndef CTRON_COMMON_H
#define CTRON_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CTRON_ALIGN 64

// Allocation failure or a broken internal invariant: print and exit(1).
// (User errors are reported by the CLI with exit code 2 before we get here.)
_Noreturn void ctron_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void *xmalloc(size_t bytes);            // 64-byte aligned, exits on failure
void *xcalloc(size_t bytes);            // aligned and zeroed
// A growing array: a new xmalloc block of `bytes` holding p's first `used` bytes, p freed (realloc would not
// keep the 64-byte alignment).
void *xgrow(void *p, size_t used, size_t bytes);
static inline size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

double now_seconds(void);               // monotonic clock
// The shortest decimal whose (float) is f, bit for bit (0.1f as "0.1", not 0.10000000149011612), into buf
// (32 bytes are enough); returns buf. float_shortest: the same as the double a JSON writer prints.
const char *float_shortest_text(float f, char *buf, size_t len);
double float_shortest(float f);
#endif
