#include "backend/cpu/optim.h"
#include <math.h>
#include "backend/cpu/bf16.h"

void cpu_adamw_update(float *p, uint16_t *w16, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float wd, float bc1, float bc2, float grad_scale) {
    long count = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long e = 0; e < count; e++) {
        float ge = g[e] * grad_scale;
        m[e] = beta1 * m[e] + (1.0f - beta1) * ge;
        v[e] = beta2 * v[e] + (1.0f - beta2) * ge * ge;
        float mhat = m[e] / bc1, vhat = v[e] / bc2;
        p[e] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[e]);
    }
    if (w16) bf16_pack(w16, p, n);
}

double cpu_sum_squares(const float *x, size_t n) {
    enum { CHUNKS = 256 };
    double partial[CHUNKS];
    size_t per = (n + CHUNKS - 1) / CHUNKS;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < CHUNKS; ch++) {
        size_t lo = (size_t)ch * per, hi = lo + per < n ? lo + per : n;
        double acc = 0.0;
        for (size_t i = lo; i < hi; i++) acc += (double)x[i] * (double)x[i];
        partial[ch] = acc;
    }
    double total = 0.0;
    for (int ch = 0; ch < CHUNKS; ch++) total += partial[ch];
    return total;
}

size_t cpu_count_nonfinite(const float *x, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += !isfinite(x[i]);
    return bad;
}
