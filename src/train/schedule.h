// Learning rate: linear warmup to lr, then cosine decay to min_lr at the last step.
#ifndef CTRON_SCHEDULE_H
#define CTRON_SCHEDULE_H

typedef struct { float lr, min_lr; int warmup, steps; } LRSchedule;
// step counts from 1
float lr_at(const LRSchedule *sc, int step);
#endif
