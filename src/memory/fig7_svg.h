// A Figure-7-style bar chart as hand-written SVG: per model, each technique's per-layer activation
// bytes as a percent of the tensor-parallel baseline.
#ifndef CTRON_FIG7_SVG_H
#define CTRON_FIG7_SVG_H
#include <stddef.h>
#include <stdio.h>
#include "memory/memory_config.h"

void fig7_svg_write(FILE *f, const MemoryConfig *cs, int n);
// Writes the chart to path; returns 0, or -1 with a message naming the file in err.
int fig7_svg_save(const char *path, const MemoryConfig *cs, int n, char *err, size_t errlen);
#endif
