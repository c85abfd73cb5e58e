// The block's GEMMs on the backend, with the frozen base's and the bf16 mirror's operands chosen per
// weight (gpt.c's layers and the mini-seq MLP, mini_mlp.c).
#ifndef CTRON_LINEAR_H
#define CTRON_LINEAR_H
#include "model/gpt.h"
#include "model/params.h"

// y[n,out] = x[n,in] · Wᵀ (+ bias) on the backend. x16: x's bf16 copy when the arena keeps one
// (the GEMM reads it as it is), else NULL (the backend rounds x to the same bits).
static inline void linear_fwd16(GPT *m, float *y, int ldy, const float *x, const uint16_t *x16, int ldx, const float *w,
                                const float *bias, int n, int in, int out) {
    m->be->linear_forward(m->be, y, ldy, x, x16, ldx, gpt_base_key(m, w) ? NULL : w, gpt_w16(m, w), bias, n, in, out);
}
static inline void linear_fwd(GPT *m, float *y, int ldy, const float *x, int ldx, const float *w, const float *bias,
                              int n, int in, int out) {
    linear_fwd16(m, y, ldy, x, NULL, ldx, w, bias, n, in, out);
}

// A GEMM input read back for the backward: the kept bf16 copy as it is when the GEMM runs in bf16
// (nothing unpacked to fp32 and rounded again), else the fp32 values.
typedef struct { const float *f32; const uint16_t *bf16; } GemmIn;

// dx (= or +=) dy · W;  dW += dyᵀ · x;  db += Σ dy.
static inline void linear_bwd16(GPT *m, float *dx, int ldx_out, int accumulate, float *dw, float *db, const float *dy,
                                int lddy, GemmIn x, int ldx, const float *w, int n, int in, int out) {
    m->be->linear_backward(m->be, dx, ldx_out, accumulate, dw, db, dy, lddy, x.f32, x.bf16, ldx,
                           gpt_base_key(m, w) ? NULL : w, gpt_w16(m, w), n, in, out);
}
// linear_bwd16 with dy given as a bf16 copy dy16 (row stride lddy16) that a kernel wrote for the GEMMs
// (backend.h's linear_backward16: the CUDA backend at bf16); no bias gradient.
static inline void linear_bwd_dy16(GPT *m, float *dx, int ldx_out, int accumulate, float *dw, const uint16_t *dy16,
                                   int lddy16, GemmIn x, int ldx, const float *w, int n, int in, int out) {
    m->be->linear_backward16(m->be, dx, ldx_out, accumulate, dw, dy16, lddy16, x.f32, x.bf16, ldx, gpt_w16(m, w), n, in,
                             out);
}
static inline void linear_bwd(GPT *m, float *dx, int ldx_out, int accumulate, float *dw, float *db, const float *dy,
                              int lddy, const float *x, int ldx, const float *w, int n, int in, int out) {
    linear_bwd16(m, dx, ldx_out, accumulate, dw, db, dy, lddy, (GemmIn){x, NULL}, ldx, w, n, in, out);
}
#endif
