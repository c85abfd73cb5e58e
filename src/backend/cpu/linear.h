// Linear layers y = x Wᵀ (+ b), W in nn.Linear orientation [out, in]. All GEMMs are cblas_sgemm.
#ifndef CTRON_LINEAR_H
#define CTRON_LINEAR_H
#include <stddef.h>
#include <stdint.h>

// y[n,out] = x[n,in] · W[out,in]ᵀ  (+ bias[out] when bias != NULL); ldx/ldy are row strides.
void linear_forward(float *y, int ldy, const float *x, int ldx, const float *w, const float *bias,
                    int n, int in, int out);
// y[n,out] += x[n,in] · W[out,in]ᵀ (beta 1: OpenBLAS adds the product to y in its kernel, no zeroing pass).
void linear_forward_acc(float *y, int ldy, const float *x, int ldx, const float *w, int n, int in, int out);
// dx[n,in] (= or += when accumulate) dy[n,out] · W;  dW[out,in] += dyᵀ · x;  db[out] += Σ_rows dy.
// dx may be NULL (input needs no gradient), db may be NULL (no bias).
void linear_backward(float *dx, int ldx_out, int accumulate, float *dw, float *db, const float *dy, int lddy,
                     const float *x, int ldx, const float *w, int n, int in, int out);

// db[c] += Σ_r dy[r, c]: columns split over threads so the sum order is fixed.
void bias_backward(float *db, const float *dy, int lddy, int n, int cols);
// y[r, c] += bias[c]
void bias_add(float *y, int ldy, const float *bias, int n, int cols);

// Mixed precision (bf16 inputs, fp32 accumulation and outputs): the same maps with x16/dy16/w16 the
// bf16 copies of x, dy and W (contiguous rows: ld = in or out; dy16's row stride lddy16); the bias sum
// (bias_backward, on the fp32 dy) is the caller's.
void linear_forward_bf16(float *y, int ldy, const uint16_t *x16, const uint16_t *w16, const float *bias, int n,
                         int in, int out);
void linear_forward_acc_bf16(float *y, int ldy, const uint16_t *x16, const uint16_t *w16, int n, int in, int out);
void linear_backward_bf16(float *dx, int ldx_out, int accumulate, float *dw, const uint16_t *dy16, int lddy16,
                          const uint16_t *x16, const uint16_t *w16, int n, int in, int out);
#endif
