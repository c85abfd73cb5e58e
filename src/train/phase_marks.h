// A step's phases (forward, backward, the optimizer) timed on the device without waiting for it: each phase is a pair
// of the backend's marks (backend.h: CUDA events on a GPU, the monotonic clock on the CPU), summed once
// the step's one wait has come (train/run_step.c; docs/PERFORMANCE.md, "Host waits").
#ifndef CTRON_PHASE_MARKS_H
#define CTRON_PHASE_MARKS_H
#include "backend/backend.h"

typedef enum { PHASE_FORWARD, PHASE_BACKWARD, PHASE_OPTIMIZER, PHASES } Phase;

typedef struct {
    Backend *be;
    int (*pair)[2];            // the marks that begin and end each timed phase, n of cap
    unsigned char *phase;
    int n, cap;
} PhaseMarks;

// A new step: no pairs, and the backend's marks restart (the last step's were read).
void phase_marks_start(PhaseMarks *p, Backend *be);
// A mark now, in the device's order: the start of a phase (and the end of the one before).
int phase_mark(PhaseMarks *p);
// Phase `phase` ran from mark `begin` to a mark made now; returns that mark.
int phase_end(PhaseMarks *p, Phase phase, int begin);
// After a wait that followed the last mark: seconds[k] = Σ over phase k's pairs.
void phase_marks_seconds(const PhaseMarks *p, double seconds[PHASES]);
void phase_marks_free(PhaseMarks *p);
#endif
