#include "backend/cpu/crossentropy.h"
#include <math.h>
#include "backend/cpu/fastmath.h"
#include <stddef.h>

static inline float row_logsumexp(const float *z, int v, float *max_out) {
    float m = z[0];
#pragma omp simd reduction(max : m)
    for (int c = 1; c < v; c++) m = z[c] > m ? z[c] : m;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < v; c++) sum += ctron_expf(z[c] - m);
    *max_out = m;
    return m + logf(sum);
}

double crossentropy_forward_backward(float *logits, const int32_t *targets, float *row_loss, int n, int v,
                                     float grad_scale) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        float *z = logits + (size_t)r * v;
        float m, lse = row_logsumexp(z, v, &m);
        row_loss[r] = lse - z[targets[r]];
#pragma omp simd
        for (int c = 0; c < v; c++) z[c] = ctron_expf(z[c] - lse) * grad_scale;
        z[targets[r]] -= grad_scale;
    }
    double total = 0.0;
    for (int r = 0; r < n; r++) total += row_loss[r];
    return total;
}

double crossentropy_loss(const float *logits, const int32_t *targets, float *row_loss, int n, int v) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        const float *z = logits + (size_t)r * v;
        float m, lse = row_logsumexp(z, v, &m);
        row_loss[r] = lse - z[targets[r]];
    }
    double total = 0.0;
    for (int r = 0; r < n; r++) total += row_loss[r];
    return total;
}
