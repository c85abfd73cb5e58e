// GeLU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
#ifndef CTRON_GELU_H
#define CTRON_GELU_H
#include <stddef.h>
#include <stdint.h>

// x[n,cols] += bias[cols] in place (x becomes gelu_in), y[n,cols] = gelu(x): one sweep.
// round_bf16: x and y are rounded to bf16 before use, as when they are stored in bf16.
void bias_gelu_forward(float *y, float *x, const float *bias, int n, int cols, int round_bf16);
// dx[i] = dy[i] · gelu'(x[i]); dx may alias dy.
void gelu_backward(float *dx, const float *dy, const float *x, size_t count);
#pragma omp declare simd
float gelu_scalar(float x);
// Tempo's in-place GeLU: instead of x, keep y = gelu(x) (needed by FC2 anyway) and one bit per
// element, x ≥ x_min (the side of GeLU's minimum), packed 8 per byte, LSB first.
void gelu_branch_pack(uint8_t *bits, const float *x, size_t count);
// dx[i] = dy[i] · gelu'(x[i]) with x recovered from y[i] and its bit by a bracketed Newton
// inversion (relative error ~1e-7 in x; near x_min, where gelu' → 0, x is less certain but
// gelu'(x) is ~0 either way); dx may alias dy.
void gelu_backward_from_output(float *dx, const float *dy, const float *y, const uint8_t *bits, size_t count);
#endif
