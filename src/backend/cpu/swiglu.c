#include "backend/cpu/swiglu.h"
#include <stddef.h>
#include "backend/cpu/bf16.h"

static inline float round_bf16_f(float x) { return bf16_to_f32(bf16_from_f32(x)); }

void swiglu_forward(float *y, float *gate, float *up, int ld, int n, int f, int round_bf16) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        float *g = gate + (size_t)r * ld, *u = up + (size_t)r * ld, *yr = y + (size_t)r * f;
        if (round_bf16) {
#pragma omp simd
            for (int c = 0; c < f; c++) {
                float gv = round_bf16_f(g[c]), uv = round_bf16_f(u[c]);
                g[c] = gv;
                u[c] = uv;
                yr[c] = round_bf16_f(swiglu_silu(gv) * uv);
            }
        } else {
#pragma omp simd
            for (int c = 0; c < f; c++) yr[c] = swiglu_silu(g[c]) * u[c];
        }
    }
}

// One row; y NULL skips the recomputed output. The branches on y and round_bf16 stay outside the
// loops (a masked store through NULL is what layernorm.c's xhat_row warns of).
static inline void backward_row(float *dg, float *du, float *y, const float *dy, const float *g, const float *u, int f,
                                int round_bf16) {
    if (!y) {
#pragma omp simd
        for (int c = 0; c < f; c++) {
            float a, b;
            swiglu_backward_elem(dy[c], g[c], u[c], &a, &b);
            dg[c] = a;
            du[c] = b;
        }
    } else if (!round_bf16) {
#pragma omp simd
        for (int c = 0; c < f; c++) {
            float a, b, uv = u[c], si = swiglu_backward_elem(dy[c], g[c], uv, &a, &b);
            y[c] = si * uv;
            dg[c] = a;
            du[c] = b;
        }
    } else {
#pragma omp simd
        for (int c = 0; c < f; c++) {
            float a, b, uv = u[c], si = swiglu_backward_elem(dy[c], g[c], uv, &a, &b);
            y[c] = round_bf16_f(si * uv);
            dg[c] = a;
            du[c] = b;
        }
    }
}

void swiglu_backward(float *dgate, float *dup, int ldd, float *y, const float *dy, const float *gate,
                     const float *up, int ld, int n, int f, int round_bf16) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++)
        backward_row(dgate + (size_t)r * ldd, dup + (size_t)r * ldd, y ? y + (size_t)r * f : NULL,
                     dy + (size_t)r * f, gate + (size_t)r * ld, up + (size_t)r * ld, f, round_bf16);
}
