#include "ops/gelu.h"
#include "ops/bf16.h"
#include <math.h>
#include "ops/fastmath.h"

#define GELU_K 0.7978845608028654f  // sqrt(2/pi)
#define GELU_C 0.044715f

float gelu_scalar(float x) {
    return 0.5f * x * (1.0f + ctron_tanhf(GELU_K * (x + GELU_C * x * x * x)));
}

void bias_gelu_forward(float *y, float *x, const float *bias, int n, int cols, int round_bf16) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        float *xr = x + (size_t)r * cols, *yr = y + (size_t)r * cols;
        if (round_bf16) {
#pragma omp simd
            for (int c = 0; c < cols; c++) {
                float v = bf16_to_f32(bf16_from_f32(xr[c] + bias[c]));
                xr[c] = v;
                yr[c] = bf16_to_f32(bf16_from_f32(gelu_scalar(v)));
            }
        } else {
#pragma omp simd
            for (int c = 0; c < cols; c++) {
                float v = xr[c] + bias[c];
                xr[c] = v;
                yr[c] = gelu_scalar(v);
            }
        }
    }
}

void gelu_backward(float *dx, const float *dy, const float *x, size_t count) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        float t = ctron_tanhf(GELU_K * (v + GELU_C * v * v * v));
        float dt = GELU_K * (1.0f + 3.0f * GELU_C * v * v) * (1.0f - t * t);
        dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * dt);
    }
}

// Tempo's in-place GeLU. GeLU falls on (−∞, x_min] and rises on [x_min, ∞), so the output and the
// side of x_min (one bit) determine the input.
#define GELU_XMIN (-0.75246141f)   // argmin of the tanh-form GeLU (f(x_min) = −0.170041)

static inline float gelu_slope(float v) {
    float t = ctron_tanhf(GELU_K * (v + GELU_C * v * v * v));
    float dt = GELU_K * (1.0f + 3.0f * GELU_C * v * v) * (1.0f - t * t);
    return 0.5f * (1.0f + t) + 0.5f * v * dt;
}

void gelu_branch_pack(uint8_t *bits, const float *x, size_t count) {
    size_t nbytes = (count + 7) / 8;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nbytes; i++) {
        uint8_t b = 0;
        for (size_t j = 0; j < 8 && 8 * i + j < count; j++) b |= (uint8_t)((x[8 * i + j] >= GELU_XMIN) << j);
        bits[i] = b;
    }
}

// The x on the given side of x_min with gelu(x) = y: Newton's method kept inside a bracket that
// holds the root (bisection when a step leaves it). On the falling side x below −12 gives gelu(x)
// = −0 in fp32, so that is where the bracket starts.
static float gelu_invert(float y, int right) {
    float lo, hi, x;
    if (right) {
        if (y <= -0.17004075f) return GELU_XMIN;
        lo = GELU_XMIN;
        hi = y > 0.0f ? y + 1.0f : 0.0f;
        x = y > 0.0f ? y : 0.5f * (lo + hi);
    } else {
        if (y >= 0.0f) return -12.0f;
        if (y <= -0.17004075f) return GELU_XMIN;
        lo = -12.0f;
        hi = GELU_XMIN;
        // the tail: gelu(x) ≈ −φ(x) (Mills' ratio), so x ≈ −√(−2 ln(−y·√(2π))); without this start
        // Newton's first steps leave the bracket and bisection takes ~25 halvings
        float t = -2.0f * logf(-y * 2.5066283f);
        x = t > 0.0f ? -sqrtf(t) : 0.5f * (lo + hi);
        if (!(x > lo && x < hi)) x = 0.5f * (lo + hi);
    }
    for (int it = 0; it < 24; it++) {
        // GeLU and its slope from one tanh
        float t = ctron_tanhf(GELU_K * (x + GELU_C * x * x * x));
        float g = 0.5f * x * (1.0f + t) - y;
        float d = 0.5f * (1.0f + t) + 0.5f * x * GELU_K * (1.0f + 3.0f * GELU_C * x * x) * (1.0f - t * t);
        if (g == 0.0f) return x;
        // on the rising side g < 0 means x is too small; on the falling side, too large
        if ((g < 0.0f) == (right != 0)) lo = x; else hi = x;
        float next = d != 0.0f ? x - g / d : 0.5f * (lo + hi);
        if (!(next >= lo && next <= hi)) next = 0.5f * (lo + hi);
        if (fabsf(next - x) <= 2e-7f * (1.0f + fabsf(x))) return next;   // ~2 ulp: fp32 goes no further
        x = next;
    }
    return x;
}

void gelu_backward_from_output(float *dx, const float *dy, const float *y, const uint8_t *bits, size_t count) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) {
        int right = (bits[i / 8] >> (i % 8)) & 1;
        dx[i] = dy[i] * gelu_slope(gelu_invert(y[i], right));
    }
}
