#include "backend/cpu/swiglu.h"
#include <stddef.h>
#include <stdlib.h>
#include "backend/cpu/bf16.h"
#include "util/common.h"

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

// ---- from and into bf16 copies: each row widened exactly first, so the arithmetic is the fp32 ops' on the same values

void swiglu_forward16(uint16_t *y16, const uint16_t *gate16, const uint16_t *up16, int ld, int n, int f) {
#pragma omp parallel
    {
        float *g = xmalloc(2 * (size_t)f * sizeof(float)), *u = g + f;
#pragma omp for schedule(static)
        for (int r = 0; r < n; r++) {
            bf16_widen_row(g, gate16 + (size_t)r * ld, f);
            bf16_widen_row(u, up16 + (size_t)r * ld, f);
            uint16_t *yr = y16 + (size_t)r * f;
#pragma omp simd
            for (int c = 0; c < f; c++) yr[c] = bf16_from_f32(swiglu_silu(g[c]) * u[c]);
        }
        free(g);
    }
}

void swiglu_forward_pack16(uint16_t *y16, uint16_t *gate16, uint16_t *up16, const float *gate, const float *up, int ld,
                           int n, int f) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        const float *g = gate + (size_t)r * ld, *u = up + (size_t)r * ld;
        uint16_t *gr = gate16 + (size_t)r * f, *ur = up16 + (size_t)r * f, *yr = y16 + (size_t)r * f;
#pragma omp simd
        for (int c = 0; c < f; c++) {
            uint16_t gb = bf16_from_f32(g[c]), ub = bf16_from_f32(u[c]);
            gr[c] = gb;
            ur[c] = ub;
            yr[c] = bf16_from_f32(swiglu_silu(bf16_to_f32(gb)) * bf16_to_f32(ub));
        }
    }
}

void swiglu_backward16(void *dgate, void *dup, int ldd, int grad16, const float *dy, const uint16_t *gate16,
                       const uint16_t *up16, int ld, int n, int f) {
#pragma omp parallel
    {
        float *g = xmalloc(4 * (size_t)f * sizeof(float)), *u = g + f, *dg = u + f, *du = dg + f;
#pragma omp for schedule(static)
        for (int r = 0; r < n; r++) {
            bf16_widen_row(g, gate16 + (size_t)r * ld, f);
            bf16_widen_row(u, up16 + (size_t)r * ld, f);
            size_t o = (size_t)r * ldd;
            if (!grad16) {
                backward_row((float *)dgate + o, (float *)dup + o, NULL, dy + (size_t)r * f, g, u, f, 0);
                continue;
            }
            backward_row(dg, du, NULL, dy + (size_t)r * f, g, u, f, 0);
            uint16_t *dgr = (uint16_t *)dgate + o, *dur = (uint16_t *)dup + o;
#pragma omp simd
            for (int c = 0; c < f; c++) {
                dgr[c] = bf16_from_f32(dg[c]);
                dur[c] = bf16_from_f32(du[c]);
            }
        }
        free(g);
    }
}
