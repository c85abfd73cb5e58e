#include "train/phase_marks.h"
#include <stdlib.h>
#include "util/common.h"

void phase_marks_start(PhaseMarks *p, Backend *be) {
    p->be = be;
    p->n = 0;
    be->marks_reset(be);
}

int phase_mark(PhaseMarks *p) { return p->be->mark(p->be); }

int phase_end(PhaseMarks *p, Phase phase, int begin) {
    int end = p->be->mark(p->be);
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 32;
        p->pair = xgrow(p->pair, (size_t)p->n * sizeof *p->pair, (size_t)cap * sizeof *p->pair);
        p->phase = xgrow(p->phase, (size_t)p->n, (size_t)cap);
        p->cap = cap;
    }
    p->pair[p->n][0] = begin;
    p->pair[p->n][1] = end;
    p->phase[p->n++] = (unsigned char)phase;
    return end;
}

void phase_marks_seconds(const PhaseMarks *p, double seconds[PHASES]) {
    for (int k = 0; k < PHASES; k++) seconds[k] = 0.0;
    for (int i = 0; i < p->n; i++) seconds[p->phase[i]] += p->be->mark_seconds(p->be, p->pair[i][0], p->pair[i][1]);
}

void phase_marks_free(PhaseMarks *p) {
    free(p->pair);
    free(p->phase);
    p->pair = NULL;
    p->phase = NULL;
    p->n = p->cap = 0;
}
