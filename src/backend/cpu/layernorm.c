#include "backend/cpu/layernorm.h"
#include <math.h>
#include <stddef.h>

void layernorm_forward(float *y, float *stats, const float *x, const float *w, const float *b, int n, int h) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * h;
        float *yr = y + (size_t)r * h;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int c = 0; c < h; c++) sum += xr[c];
        float mean = sum / (float)h;
        float var = 0.0f;
#pragma omp simd reduction(+ : var)
        for (int c = 0; c < h; c++) { float d = xr[c] - mean; var += d * d; }
        float rstd = 1.0f / sqrtf(var / (float)h + LN_EPS);
#pragma omp simd
        for (int c = 0; c < h; c++) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
        stats[2 * r] = mean;
        stats[2 * r + 1] = rstd;
    }
}

// x̂ of row element c: from the input (x − mean)·rstd, or, when beta is given, from the output
// y = x̂·w + b as (y − b)/w (Tempo). Inlined into both wrappers, so each gets its own loops.
static inline __attribute__((always_inline)) float xhat_of(const float *xr, int c, float mean, float rstd,
                                                           const float *w, const float *beta) {
    return beta ? (xr[c] - beta[c]) / w[c] : (xr[c] - mean) * rstd;
}

static inline __attribute__((always_inline)) void backward_impl(float *dx, int accumulate, float *dw, float *db,
                                                                const float *dy, const float *x, const float *stats,
                                                                const float *w, const float *beta, int n, int h) {
    // dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ · x̂)), with dx̂ = dy · w; rows in parallel.
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * h, *dyr = dy + (size_t)r * h;
        float *dxr = dx + (size_t)r * h;
        float mean = stats[2 * r], rstd = stats[2 * r + 1];
        float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
        for (int c = 0; c < h; c++) {
            float xhat = xhat_of(xr, c, mean, rstd, w, beta), dxhat = dyr[c] * w[c];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * xhat;
        }
        float m1 = sum_dxhat / (float)h, m2 = sum_dxhat_xhat / (float)h;
#pragma omp simd
        for (int c = 0; c < h; c++) {
            float xhat = xhat_of(xr, c, mean, rstd, w, beta);
            float g = rstd * (dyr[c] * w[c] - m1 - xhat * m2);
            dxr[c] = accumulate ? dxr[c] + g : g;
        }
    }
    // dw, db: column chunks in parallel, rows in order, so the sum order never depends on threads.
    enum { CHUNK = 64 };
    int nchunks = (h + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nchunks; ch++) {
        int c0 = ch * CHUNK, c1 = c0 + CHUNK < h ? c0 + CHUNK : h;
        float aw[CHUNK] = {0}, ab[CHUNK] = {0};
        for (int r = 0; r < n; r++) {
            const float *xr = x + (size_t)r * h, *dyr = dy + (size_t)r * h;
            float mean = stats[2 * r], rstd = stats[2 * r + 1];
            for (int c = c0; c < c1; c++) {
                aw[c - c0] += dyr[c] * xhat_of(xr, c, mean, rstd, w, beta);
                ab[c - c0] += dyr[c];
            }
        }
        for (int c = c0; c < c1; c++) { dw[c] += aw[c - c0]; db[c] += ab[c - c0]; }
    }
}

void layernorm_backward(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *x,
                        const float *stats, const float *w, int n, int h) {
    backward_impl(dx, accumulate, dw, db, dy, x, stats, w, NULL, n, h);
}

void layernorm_backward_from_output(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *y,
                                    const float *stats, const float *w, const float *b, int n, int h) {
    backward_impl(dx, accumulate, dw, db, dy, y, stats, w, b, n, h);
}
