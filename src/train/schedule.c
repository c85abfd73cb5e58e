#include "train/schedule.h"
#include <math.h>

float lr_at(const LRSchedule *sc, int step) {
    if (sc->warmup > 0 && step <= sc->warmup) return sc->lr * (float)step / (float)sc->warmup;
    int span = sc->steps - sc->warmup;
    if (span <= 0) return sc->lr;
    double progress = (double)(step - sc->warmup) / (double)span;
    if (progress > 1.0) progress = 1.0;
    return sc->min_lr + (sc->lr - sc->min_lr) * (float)(0.5 * (1.0 + cos(3.141592653589793 * progress)));
}
