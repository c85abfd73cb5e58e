#include "cli/args.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "cli/cli.h"
#include "memory/planner.h"

int args_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ctron %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see ctron %s --help)\n", cmd);
    va_end(ap);
    return CTRON_EXIT_USAGE;
}

int args_int(const char *cmd, const char *flag, const char *text, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0') return args_error(cmd, "%s: expected an integer, got '%s'", flag, text);
    if (v < lo || v > hi) return args_error(cmd, "%s: %ld is out of range, expected %ld..%ld", flag, v, lo, hi);
    *out = (int)v;
    return 0;
}

int args_double(const char *cmd, const char *flag, const char *text, double lo, double hi, int hi_open, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !isfinite(v))
        return args_error(cmd, "%s: expected a number, got '%s'", flag, text);
    if (v < lo || v > hi || (hi_open && v >= hi))
        return args_error(cmd, "%s: %g is out of range, expected %g <= value %s %g", flag, v, lo, hi_open ? "<" : "<=", hi);
    *out = v;
    return 0;
}

// "1 B", "1 GiB", "1 EiB": a range's ends, exact.
static const char *size_text(double v, char *buf, size_t len) {
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (u < 6 && v >= 1024.0) { v /= 1024.0; u++; }
    snprintf(buf, len, "%g %s", v, unit[u]);
    return buf;
}

int args_bytes(const char *cmd, const char *flag, const char *text, double lo, double hi, double *out) {
    char a[32], b[32], *end;
    size_text(lo, a, sizeof a);
    size_text(hi, b, sizeof b);
    double v;
    if (parse_bytes(text, &v) == 0 && v >= lo && v <= hi) { *out = v; return 0; }
    strtod(text, &end);   // a number with a known unit, only too small or too large (0, 1e30)?
    char unit[40];
    double one;
    int sized = end != text && snprintf(unit, sizeof unit, "1%s", end) < (int)sizeof unit && parse_bytes(unit, &one) == 0;
    return args_error(cmd, "%s: '%s' is %s: expected a size from %s to %s (e.g. 6GiB, 512MiB, 2e9)", flag, text,
                      sized ? "out of range" : "not a size", a, b);
}
