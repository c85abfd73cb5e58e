// `ctron memory --pp`: every pipeline stage's activation bytes from the schedule (pipe_stages.h), beside
// the paper's Eq. 5 for the first stage, as text and as the JSON "stages" array.
#ifndef CTRON_PIPE_REPORT_H
#define CTRON_PIPE_REPORT_H
#include <stdio.h>
#include <cjson/cJSON.h>
#include "memory/memory_config.h"
#include "train/pipe_schedule.h"

typedef struct {
    PipeSpec spec;
    int keep_all;        // --recompute-microbatches N
    char m_from[64];     // where the micro-batch count came from, for the header ("--grad-accum", …)
} PipeReport;

void pipe_report_text(FILE *f, const MemoryConfig *c, const PipeReport *pr);
// {"schedule", "p", "virtual_stages", "micro_batches", "recompute_microbatches", "largest_stage",
//  "first_stage_eq5": {...}} and "stages": [...] added to the model's object o.
void pipe_report_json(cJSON *o, const MemoryConfig *c, const PipeReport *pr);
#endif
