#include "backend/cpu/optim.h"
#include <math.h>
#include "backend/cpu/bf16.h"

typedef struct { float lr, beta1, beta2, eps, wd, bc1, bc2, grad_scale; } AdamW;

// One element's update; returns the new weight (for the bf16 copy).
static inline float adamw_step(float *p, const float *g, float *m, float *v, const AdamW *a, long e) {
    float ge = g[e] * a->grad_scale;
    m[e] = a->beta1 * m[e] + (1.0f - a->beta1) * ge;
    v[e] = a->beta2 * v[e] + (1.0f - a->beta2) * ge * ge;
    float mhat = m[e] / a->bc1, vhat = v[e] / a->bc2;
    p[e] -= a->lr * (mhat / (sqrtf(vhat) + a->eps) + a->wd * p[e]);
    return p[e];
}

void cpu_adamw_update(float *p, uint16_t *w16, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float wd, float bc1, float bc2, float grad_scale) {
    long count = (long)n;
    const AdamW a = {lr, beta1, beta2, eps, wd, bc1, bc2, grad_scale};
    if (!w16) {
#pragma omp parallel for simd schedule(static)
        for (long e = 0; e < count; e++) adamw_step(p, g, m, v, &a, e);
        return;
    }
    // Mixed precision: the bf16 weight copy is refreshed in the same sweep, by the branch-free form
    // of bf16.h's rounding rule (the same bits), so the weights are read once.
#pragma omp parallel for simd schedule(static)
    for (long e = 0; e < count; e++) {
        union { float f; uint32_t u; } x = {adamw_step(p, g, m, v, &a, e)};
        uint32_t nan = (x.u & 0x7FFFFFFFu) > 0x7F800000u;
        uint32_t rounded = (x.u + 0x7FFFu + ((x.u >> 16) & 1u)) >> 16;
        w16[e] = (uint16_t)(nan ? (x.u >> 16) | 0x40u : rounded);
    }
}

double cpu_sum_squares(const float *x, size_t n) {
    enum { CHUNKS = 256 };
    double partial[CHUNKS];
    size_t per = (n + CHUNKS - 1) / CHUNKS;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < CHUNKS; ch++) {
        size_t lo = (size_t)ch * per, hi = lo + per < n ? lo + per : n;
        double acc = 0.0;   // in SIMD lanes: a serial double sum is latency-bound (4 cycles an element)
#pragma omp simd reduction(+ : acc)
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
