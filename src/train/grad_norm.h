// Global gradient norm and clipping, summed in a fixed order (bitwise reproducible).
#ifndef CTRON_GRAD_NORM_H
#define CTRON_GRAD_NORM_H
#include <stddef.h>
#include "backend/backend.h"

double grad_global_norm(Backend *be, const float *g, size_t n);
// The clipping factor: max_norm / norm when norm > max_norm, else 1 (max_norm <= 0 disables).
// The optimizer applies it (adamw_step's grad_scale).
float grad_clip_scale(double norm, float max_norm);
#endif
