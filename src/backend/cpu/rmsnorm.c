#include "backend/cpu/rmsnorm.h"
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include "backend/cpu/bf16.h"
#include "util/common.h"

void rmsnorm_forward(float *y, float *rstd, const float *x, const float *w, float eps, int n, int h, int round_bf16) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * h;
        float *yr = y + (size_t)r * h;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < h; c++) ss += xr[c] * xr[c];
        float rs = 1.0f / sqrtf(ss / (float)h + eps);
        // HF's order: x̂ = x·rstd first, then w·x̂
        if (round_bf16) {
#pragma omp simd
            for (int c = 0; c < h; c++) yr[c] = bf16_to_f32(bf16_from_f32(w[c] * (xr[c] * rs)));
        } else {
#pragma omp simd
            for (int c = 0; c < h; c++) yr[c] = w[c] * (xr[c] * rs);
        }
        rstd[r] = rs;
    }
}

// x̂ of a row into xhat: from the input x·rstd, or (from_output) from the output as y / w. The branch
// stays outside the loops (see layernorm.c's xhat_row).
static inline void xhat_row(float *restrict xhat, const float *restrict src, float rs, const float *restrict w,
                            int from_output, int h) {
    if (from_output) {
#pragma omp simd
        for (int c = 0; c < h; c++) xhat[c] = src[c] / w[c];
    } else {
#pragma omp simd
        for (int c = 0; c < h; c++) xhat[c] = src[c] * rs;
    }
}

enum { RMS_CHUNK = 64 };

// src16 (src NULL): the input's bf16 copy, each row widened exactly first: the same arithmetic on the same values.
static void backward_impl(float *dx, int accumulate, float *dw, const float *dy, const float *src,
                          const uint16_t *src16, const float *rstd, const float *w, int from_output, int n, int h) {
#pragma omp parallel
    {
        float *xhat = xmalloc((size_t)h * sizeof(float));   // one row's x̂ per thread, any width
        float *wide = src16 ? xmalloc((size_t)h * sizeof(float)) : NULL;
#pragma omp for schedule(static)
        for (int r = 0; r < n; r++) {
            const float *dyr = dy + (size_t)r * h;
            float *dxr = dx + (size_t)r * h;
            float rs = rstd[r];
            const float *sr = src16 ? bf16_widen_row(wide, src16 + (size_t)r * h, h) : src + (size_t)r * h;
            xhat_row(xhat, sr, rs, w, from_output, h);
            // Σ dx̂ ⊙ x̂; from the output it is Σ dy ⊙ y (w ⊙ x̂ = y): no division, so a zero w[c]
            // spoils only column c
            float dot = 0.0f;
            if (from_output) {
#pragma omp simd reduction(+ : dot)
                for (int c = 0; c < h; c++) dot += dyr[c] * sr[c];
            } else {
#pragma omp simd reduction(+ : dot)
                for (int c = 0; c < h; c++) dot += dyr[c] * w[c] * xhat[c];
            }
            float m = dot / (float)h;
            if (accumulate) {
#pragma omp simd
                for (int c = 0; c < h; c++) dxr[c] += rs * (dyr[c] * w[c] - xhat[c] * m);
            } else {
#pragma omp simd
                for (int c = 0; c < h; c++) dxr[c] = rs * (dyr[c] * w[c] - xhat[c] * m);
            }
        }
        free(xhat);
        free(wide);
    }
    if (!dw) return;   // a frozen norm (LoRA): no weight gradient
    // dw: column chunks in parallel, rows in order, so the sum order never depends on threads.
    int nchunks = (h + RMS_CHUNK - 1) / RMS_CHUNK;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nchunks; ch++) {
        int c0 = ch * RMS_CHUNK, len = c0 + RMS_CHUNK < h ? RMS_CHUNK : h - c0;
        float aw[RMS_CHUNK] = {0}, xhat[RMS_CHUNK], wide[RMS_CHUNK];
        for (int r = 0; r < n; r++) {
            const float *dyr = dy + (size_t)r * h + c0;
            const float *sr = src16 ? bf16_widen_row(wide, src16 + (size_t)r * h + c0, len) : src + (size_t)r * h + c0;
            xhat_row(xhat, sr, rstd[r], w + c0, from_output, len);
#pragma omp simd
            for (int c = 0; c < len; c++) aw[c] += dyr[c] * xhat[c];
        }
        for (int c = 0; c < len; c++) dw[c0 + c] += aw[c];
    }
}

void rmsnorm_backward(float *dx, int accumulate, float *dw, const float *dy, const float *x, const float *rstd,
                      const float *w, int n, int h) {
    backward_impl(dx, accumulate, dw, dy, x, NULL, rstd, w, 0, n, h);
}

void rmsnorm_backward16(float *dx, int accumulate, float *dw, const float *dy, const uint16_t *x16, const float *rstd,
                        const float *w, int n, int h) {
    backward_impl(dx, accumulate, dw, dy, NULL, x16, rstd, w, 0, n, h);
}

void rmsnorm_backward_from_output(float *dx, int accumulate, float *dw, const float *dy, const float *y,
                                  const float *rstd, const float *w, int n, int h) {
    backward_impl(dx, accumulate, dw, dy, y, NULL, rstd, w, 1, n, h);
}
