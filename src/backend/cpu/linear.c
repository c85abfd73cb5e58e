#include "backend/cpu/linear.h"
#include <cblas.h>
#include "backend/cpu/gemm_bf16.h"

void bias_add(float *y, int ldy, const float *bias, int n, int cols) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        float *row = y + (size_t)r * ldy;
        for (int c = 0; c < cols; c++) row[c] += bias[c];
    }
}

void linear_forward(float *y, int ldy, const float *x, int ldx, const float *w, const float *bias,
                    int n, int in, int out) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, ldx, w, in, 0.0f, y, ldy);
    if (bias) bias_add(y, ldy, bias, n, out);
}

void linear_forward_acc(float *y, int ldy, const float *x, int ldx, const float *w, int n, int in, int out) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, ldx, w, in, 1.0f, y, ldy);
}

void bias_backward(float *db, const float *dy, int lddy, int n, int cols) {
    enum { CHUNK = 64 };
    int nchunks = (cols + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nchunks; ch++) {
        int c0 = ch * CHUNK, c1 = c0 + CHUNK < cols ? c0 + CHUNK : cols;
        float acc[CHUNK] = {0};
        for (int r = 0; r < n; r++) {
            const float *row = dy + (size_t)r * lddy;
#pragma omp simd
            for (int c = c0; c < c1; c++) acc[c - c0] += row[c];
        }
        for (int c = c0; c < c1; c++) db[c] += acc[c - c0];
    }
}

void linear_backward(float *dx, int ldx_out, int accumulate, float *dw, float *db, const float *dy, int lddy,
                     const float *x, int ldx, const float *w, int n, int in, int out) {
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, lddy, w, in,
                    accumulate ? 1.0f : 0.0f, dx, ldx_out);
    if (dw) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, lddy, x, ldx, 1.0f, dw, in);
    if (db) bias_backward(db, dy, lddy, n, out);
}

void linear_forward_bf16(float *y, int ldy, const uint16_t *x16, const uint16_t *w16, const float *bias, int n,
                         int in, int out) {
    gemm_bf16(0, 1, n, out, in, x16, in, w16, in, 0.0f, y, ldy);
    if (bias) bias_add(y, ldy, bias, n, out);
}

void linear_forward_acc_bf16(float *y, int ldy, const uint16_t *x16, const uint16_t *w16, int n, int in, int out) {
    gemm_bf16(0, 1, n, out, in, x16, in, w16, in, 1.0f, y, ldy);
}

void linear_backward_bf16(float *dx, int ldx_out, int accumulate, float *dw, const uint16_t *dy16, int lddy16,
                          const uint16_t *x16, const uint16_t *w16, int n, int in, int out) {
    if (dx) gemm_bf16(0, 0, n, in, out, dy16, lddy16, w16, in, accumulate ? 1.0f : 0.0f, dx, ldx_out);
    if (dw) gemm_bf16(1, 0, out, in, n, dy16, lddy16, x16, in, 1.0f, dw, in);   // fp32 weight gradients accumulate
}
