// ctron peak: measure this machine's fp32 GEMM peak and cache it for `ctron train` (util/peak.h).
#ifndef CTRON_PEAK_CMD_H
#define CTRON_PEAK_CMD_H
#include <stdio.h>

void cli_peak_usage(FILE *f);
// argv[0] is "peak". Returns the exit code: 0; 1 when --show finds no figure or the cache cannot be
// written; 2 on a usage error.
int cli_peak_main(int argc, char **argv);
#endif
