#include "backend/cpu/layernorm.h"
#include "backend/cpu/bf16.h"
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include "util/common.h"

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

// x̂ of a row, into xhat: from the input (x − mean)·rstd, or, when beta is given, from the output
// y = x̂·w + b as (y − b)/w (Tempo). The branch stays outside the loops: GCC outlines the parallel
// regions once for both callers, and an if-converted loop would do a masked load through a NULL beta
// on every element — fault-suppressed, but a microcode assist each time (30x slower, measured).
static inline void xhat_row(float *restrict xhat, const float *restrict xr, float mean, float rstd,
                            const float *restrict w, const float *restrict beta, int h) {
    if (beta) {
#pragma omp simd
        for (int c = 0; c < h; c++) xhat[c] = (xr[c] - beta[c]) / w[c];
    } else {
#pragma omp simd
        for (int c = 0; c < h; c++) xhat[c] = (xr[c] - mean) * rstd;
    }
}

enum { LN_CHUNK = 64 };

// x16 (x NULL): the input's bf16 copy, each row widened exactly first: the same arithmetic on the same values.
static void backward_impl(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *x,
                          const uint16_t *x16, const float *stats, const float *w, const float *beta, int n, int h) {
    // dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ · x̂)), with dx̂ = dy · w; rows in parallel.
#pragma omp parallel
    {
        float *xhat = xmalloc((size_t)h * sizeof(float));   // one row's x̂ per thread, any hidden size
        float *wide = x16 ? xmalloc((size_t)h * sizeof(float)) : NULL;
#pragma omp for schedule(static)
        for (int r = 0; r < n; r++) {
            const float *dyr = dy + (size_t)r * h;
            float *dxr = dx + (size_t)r * h;
            float rstd = stats[2 * r + 1];
            const float *xr = x16 ? bf16_widen_row(wide, x16 + (size_t)r * h, h) : x + (size_t)r * h;
            xhat_row(xhat, xr, stats[2 * r], rstd, w, beta, h);
            float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
            for (int c = 0; c < h; c++) {
                float dxhat = dyr[c] * w[c];
                sum_dxhat += dxhat;
                sum_dxhat_xhat += dxhat * xhat[c];
            }
            float m1 = sum_dxhat / (float)h, m2 = sum_dxhat_xhat / (float)h;
            if (accumulate) {
#pragma omp simd
                for (int c = 0; c < h; c++) dxr[c] += rstd * (dyr[c] * w[c] - m1 - xhat[c] * m2);
            } else {
#pragma omp simd
                for (int c = 0; c < h; c++) dxr[c] = rstd * (dyr[c] * w[c] - m1 - xhat[c] * m2);
            }
        }
        free(xhat);
        free(wide);
    }
    if (!dw) return;   // a frozen norm (LoRA): no weight gradients
    // dw, db: column chunks in parallel, rows in order, so the sum order never depends on threads.
    int nchunks = (h + LN_CHUNK - 1) / LN_CHUNK;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nchunks; ch++) {
        int c0 = ch * LN_CHUNK, len = c0 + LN_CHUNK < h ? LN_CHUNK : h - c0;
        float aw[LN_CHUNK] = {0}, ab[LN_CHUNK] = {0}, xhat[LN_CHUNK], wide[LN_CHUNK];
        for (int r = 0; r < n; r++) {
            const float *dyr = dy + (size_t)r * h + c0;
            const float *xr = x16 ? bf16_widen_row(wide, x16 + (size_t)r * h + c0, len) : x + (size_t)r * h + c0;
            xhat_row(xhat, xr, stats[2 * r], stats[2 * r + 1], w + c0, beta ? beta + c0 : NULL, len);
#pragma omp simd
            for (int c = 0; c < len; c++) {
                aw[c] += dyr[c] * xhat[c];
                ab[c] += dyr[c];
            }
        }
        for (int c = 0; c < len; c++) { dw[c0 + c] += aw[c]; db[c0 + c] += ab[c]; }
    }
}

void layernorm_backward(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *x,
                        const float *stats, const float *w, int n, int h) {
    backward_impl(dx, accumulate, dw, db, dy, x, NULL, stats, w, NULL, n, h);
}

void layernorm_backward16(float *dx, int accumulate, float *dw, float *db, const float *dy, const uint16_t *x16,
                          const float *stats, const float *w, int n, int h) {
    backward_impl(dx, accumulate, dw, db, dy, NULL, x16, stats, w, NULL, n, h);
}

void layernorm_backward_from_output(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *y,
                                    const float *stats, const float *w, const float *b, int n, int h) {
    backward_impl(dx, accumulate, dw, db, dy, y, NULL, stats, w, b, n, h);
}
