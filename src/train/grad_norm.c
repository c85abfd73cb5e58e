#include "train/grad_norm.h"
#include <math.h>

double grad_global_norm(Backend *be, const float *g, size_t n) { return sqrt(be->sum_squares(be, g, n)); }

float grad_clip_scale(double norm, float max_norm) { return backend_clip_scale(norm, max_norm); }
