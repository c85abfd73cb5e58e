// GeLU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
#ifndef CTRON_GELU_H
#define CTRON_GELU_H
#include <stddef.h>

// x[n,cols] += bias[cols] in place (x becomes gelu_in), y[n,cols] = gelu(x): one sweep.
// round_bf16: x and y are rounded to bf16 before use, as when they are stored in bf16.
void bias_gelu_forward(float *y, float *x, const float *bias, int n, int cols, int round_bf16);
// dx[i] = dy[i] · gelu'(x[i]); dx may alias dy.
void gelu_backward(float *dx, const float *dy, const float *x, size_t count);
#pragma omp declare simd
float gelu_scalar(float x);
#endif
