#include "cli/args.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "cli/cli.h"

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
