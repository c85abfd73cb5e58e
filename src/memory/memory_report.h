// `ctron memory` output: a readable report (one model in full, or several side by side as in the
// paper's Figure 7) and the same numbers as JSON.
#ifndef CTRON_MEMORY_REPORT_H
#define CTRON_MEMORY_REPORT_H
#include <stdio.h>
#include <cjson/cJSON.h>
#include "memory/memory_config.h"

void memory_report_text(FILE *f, const MemoryConfig *c);
// Several models: the Figure 7 table and one line of first-stage totals and utilisation each.
void memory_report_compare(FILE *f, const MemoryConfig *cs, int n);
cJSON *memory_report_json(const MemoryConfig *c);
#endif
