// `ctron plan --pp`: the per-stage budget plan (memory/stage_planner.h) printed stage by stage, with the
// ctron train flags that reproduce it.
#ifndef CTRON_PLAN_PIPE_H
#define CTRON_PLAN_PIPE_H
#include <stdio.h>
#include "train/pipe_schedule.h"
#include "train/trainer.h"

// Returns 0 when every stage fits the budget; -1 (the least-memory plan printed, and why) otherwise.
int plan_print_stages(FILE *f, const TrainOptions *o, const PipeSpec *spec, double budget);
#endif
