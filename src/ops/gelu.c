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
