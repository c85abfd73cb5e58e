#include "train/grad_norm.h"
#include <math.h>

double grad_global_norm(Backend *be, const float *g, size_t n) { return sqrt(be->sum_squares(be, g, n)); }

float grad_clip_scale(double norm, float max_norm) {
    if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
    return (float)(max_norm / (norm + 1e-6));
}
