#include "train/grad_norm.h"
#include <math.h>

double grad_global_norm(const float *g, size_t n) {
    enum { CHUNKS = 256 };
    double partial[CHUNKS];
    size_t per = (n + CHUNKS - 1) / CHUNKS;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < CHUNKS; ch++) {
        size_t lo = (size_t)ch * per, hi = lo + per < n ? lo + per : n;
        double acc = 0.0;
        for (size_t i = lo; i < hi; i++) acc += (double)g[i] * (double)g[i];
        partial[ch] = acc;
    }
    double total = 0.0;
    for (int ch = 0; ch < CHUNKS; ch++) total += partial[ch];
    return sqrt(total);
}

float grad_clip_scale(double norm, float max_norm) {
    if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
    return (float)(max_norm / (norm + 1e-6));
}
