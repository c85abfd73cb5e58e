// Global gradient norm and clipping, summed in a fixed order (bitwise reproducible).
#ifndef CTRON_GRAD_NORM_H
#define CTRON_GRAD_NORM_H
#include <stddef.h>

double grad_global_norm(const float *g, size_t n);
// Scales g by max_norm / norm when norm > max_norm (max_norm <= 0 disables); returns the scale applied.
float grad_clip(float *g, size_t n, double norm, float max_norm);
#endif
