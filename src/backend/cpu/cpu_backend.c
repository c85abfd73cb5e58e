// The CPU backend: host memory is the device, the kernels are backend/cpu/*.c (OpenBLAS, oneDNN,
// OpenMP). Under mixed precision the GEMM inputs are converted to bf16 in the backend's scratch
// (two growable buffers: a GEMM reads at most two converted operands) and the weights come as
// their bf16 copies.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/bf16.h"
#include "backend/cpu/crossentropy.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/flash_attention.h"
#include "backend/cpu/gelu.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/infer_kernels.h"
#include "backend/cpu/layernorm.h"
#include "backend/cpu/linear.h"
#include "backend/cpu/optim.h"
#include "backend/cpu/rmsnorm.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/swiglu.h"
#include "backend/cpu/vocab_parallel.h"
#include "util/common.h"

typedef struct {
    uint16_t *scratch[2];
    size_t cap[2];   // elements
    double loss_microbatch, loss_step;   // the deferred loss (crossentropy_deferred)
    double *marks;                       // mark's times (the monotonic clock), n_marks of cap_marks
    int n_marks, cap_marks;
    double guard_sumsq;                  // the last step_guard: Σ g², its clipping factor and verdict
    float guard_scale;
    int guard_skip;
} CpuImpl;

static uint16_t *scratch(Backend *be, int slot, size_t elems) {
    CpuImpl *c = be->impl;
    if (elems > c->cap[slot]) {
        free(c->scratch[slot]);
        c->scratch[slot] = xmalloc(elems * sizeof(uint16_t));
        c->cap[slot] = elems;
    }
    return c->scratch[slot];
}

static size_t cpu_scratch_bytes(const Backend *be) {
    const CpuImpl *c = be->impl;
    return (c->cap[0] + c->cap[1]) * sizeof(uint16_t);
}

// ---- the device
static void *cpu_alloc(Backend *be, size_t bytes) { (void)be; return xcalloc(bytes ? bytes : 1); }
static void cpu_free(Backend *be, void *p) { (void)be; free(p); }
static void cpu_copy(Backend *be, void *dst, const void *src, size_t bytes, CopyDir dir) {
    (void)be; (void)dir;
    if (bytes) memmove(dst, src, bytes);
}
// Host to host: the copy is complete when the call returns.
static void cpu_copy_async(Backend *be, void *dst, const void *src, size_t bytes, CopyDir dir, BackendEvent *done) {
    cpu_copy(be, dst, src, bytes, dir);
    if (done) done->done = 1;
}
static void cpu_event_wait(Backend *be, BackendEvent *ev) { (void)be; (void)ev; }
static void cpu_memset(Backend *be, void *p, int byte, size_t bytes) { (void)be; if (bytes) memset(p, byte, bytes); }
static void cpu_synchronize(Backend *be) { (void)be; }
// Host memory is the device: the pool's memory is ordinary aligned heap memory, touched (zeroed) now
// so that it is there before training and not faulted in mid-step.
static void *cpu_host_alloc(Backend *be, size_t bytes) { (void)be; return xcalloc(bytes ? bytes : 1); }
static void cpu_host_free(Backend *be, void *p) { (void)be; free(p); }

// ---- GEMMs
static void cpu_linear_forward(Backend *be, float *y, int ldy, const float *x, const uint16_t *x16, int ldx,
                               const float *w, const uint16_t *w16, const float *bias, int n, int in, int out) {
    if (!w16) { linear_forward(y, ldy, x, ldx, w, bias, n, in, out); return; }
    if (!x16) {
        uint16_t *packed = scratch(be, 0, (size_t)n * in);
        bf16_pack_rows(packed, in, x, ldx, n, in);
        x16 = packed;
    }
    linear_forward_bf16(y, ldy, x16, w16, bias, n, in, out);
}

static void cpu_linear_forward_acc(Backend *be, float *y, int ldy, const float *x, const uint16_t *x16, int ldx,
                                   const float *w, const uint16_t *w16, int n, int in, int out) {
    if (!w16) { linear_forward_acc(y, ldy, x, ldx, w, n, in, out); return; }
    if (!x16) {
        uint16_t *packed = scratch(be, 0, (size_t)n * in);
        bf16_pack_rows(packed, in, x, ldx, n, in);
        x16 = packed;
    }
    linear_forward_acc_bf16(y, ldy, x16, w16, n, in, out);
}

// linear_backward with dy given as a bf16 copy a kernel wrote (row stride lddy16; x16, given or x packed here, at
// row stride in, as the CUDA backend reads it); no bias gradient.
static void cpu_linear_backward16(Backend *be, float *dx, int ldx_out, int accumulate, float *dw, const uint16_t *dy16,
                                  int lddy16, const float *x, const uint16_t *x16, int ldx, const uint16_t *w16, int n,
                                  int in, int out) {
    if (!w16) ctron_fatal("linear_backward16: no bf16 weight (the op runs only under mixed precision)");
    if (!x16 && dw) {   // x is read only for the weight gradient (none for a frozen weight)
        uint16_t *packed = scratch(be, 1, (size_t)n * in);
        bf16_pack_rows(packed, in, x, ldx, n, in);
        x16 = packed;
    }
    linear_backward_bf16(dx, ldx_out, accumulate, dw, dy16, lddy16, x16, w16, n, in, out);
}

static void cpu_linear_backward(Backend *be, float *dx, int ldx_out, int accumulate, float *dw, float *db,
                                const float *dy, int lddy, const float *x, const uint16_t *x16, int ldx,
                                const float *w, const uint16_t *w16, int n, int in, int out) {
    if (!w16) { linear_backward(dx, ldx_out, accumulate, dw, db, dy, lddy, x, ldx, w, n, in, out); return; }
    uint16_t *dy16 = scratch(be, 0, (size_t)n * out);
    bf16_pack_rows(dy16, out, dy, lddy, n, out);
    cpu_linear_backward16(be, dx, ldx_out, accumulate, dw, dy16, out, x, x16, ldx, w16, n, in, out);
    if (db) bias_backward(db, dy, lddy, n, out);
}

// Inference: one row is sgemv in fp32 (infer_kernels.h); under mixed precision the bf16 GEMM, whose
// oneDNN matmul takes one row as it takes many.
static void cpu_linear_forward_rows(Backend *be, float *y, int ldy, const float *x, int ldx, const float *w,
                                    const uint16_t *w16, const float *bias, int n, int in, int out) {
    if (n == 1 && !w16) { linear_forward_row(y, x, w, bias, in, out); return; }
    cpu_linear_forward(be, y, ldy, x, NULL, ldx, w, w16, bias, n, in, out);
}
static void cpu_kv_attention_forward(Backend *be, float *ctx, const float *q, int ldq, const float *kc,
                                     const float *vc, float *scores, int seq, int p0, int n, int a, int kv, int h,
                                     int window) {
    (void)be;
    kv_attention_forward(ctx, q, ldq, kc, vc, scores, seq, p0, n, a, kv, h, window);
}

// ---- attention: under mixed precision the per-head GEMMs run in bf16 in per-thread scratch (slot 1)
static uint16_t *attention_s16(Backend *be, int s, int a, int h) {
    if (be->precision != PRECISION_BF16) return NULL;
    return scratch(be, 1, (size_t)omp_get_max_threads() * ATTENTION_BF16_SCRATCH(s, h / a));
}

static void cpu_attention_forward(Backend *be, float *ctx, float *prob, uint8_t *keep, float *drop, const float *q,
                                  const float *k, const float *v, int s, int b, int a, int kv, int h, int window,
                                  int head0, DropoutSite site, uint32_t sample0, int round_bf16) {
    attention_forward_bf16(ctx, prob, keep, drop, q, k, v, s, b, a, kv, h, window, head0, site, sample0, round_bf16,
                           attention_s16(be, s, a, h));
}
static void cpu_attention_backward(Backend *be, float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                                   const uint8_t *keep, const float *drop, const float *q, const float *k,
                                   const float *v, float *scratch_f, int s, int b, int a, int kv, int h, float p,
                                   int round_bf16) {
    attention_backward_bf16(dq, dk, dv, dctx, prob, keep, drop, q, k, v, scratch_f, s, b, a, kv, h, p, round_bf16,
                            attention_s16(be, s, a, h));
}
static void cpu_attention_backward_recompute(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                             const float *q, const float *k, const float *v, float *scratch_f,
                                             int s, int b, int a, int kv, int h, int window, int head0,
                                             DropoutSite site, uint32_t sample0, int round_bf16) {
    attention_backward_recompute_bf16(dq, dk, dv, dctx, q, k, v, scratch_f, s, b, a, kv, h, window, head0, site,
                                      sample0, round_bf16, attention_s16(be, s, a, h));
}

// ---- the stateless kernels: the CPU functions take no backend
static void be_bias_backward(Backend *be, float *db, const float *dy, int lddy, int n, int cols) {
    (void)be;
    bias_backward(db, dy, lddy, n, cols);
}
static void be_flash_attention_forward(Backend *be, float *ctx, float *lse, const float *q, const float *k,
                                       const float *v, float *scratch, int s, int b, int a, int kv, int h, int window,
                                       int head0, DropoutSite site, uint32_t sample0) {
    (void)be;
    flash_attention_forward(ctx, lse, q, k, v, scratch, s, b, a, kv, h, window, head0, site, sample0);
}
static void be_flash_attention_forward_rows(Backend *be, float *ctx, float *lse, const float *q, const float *k,
                                            const float *v, float *scratch, int s, int q0, int nq, int b, int a,
                                            int kv, int h, int window, int head0, DropoutSite site, uint32_t sample0) {
    (void)be;
    flash_attention_forward_rows(ctx, lse, q, k, v, scratch, s, q0, nq, b, a, kv, h, window, head0, site, sample0);
}
static void be_flash_attention_backward(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                        const float *q, const float *k, const float *v, const float *ctx,
                                        const float *lse, float *scratch, int s, int b, int a, int kv, int h,
                                        int window, int head0, DropoutSite site, uint32_t sample0) {
    (void)be;
    flash_attention_backward(dq, dk, dv, dctx, q, k, v, ctx, lse, scratch, s, b, a, kv, h, window, head0, site,
                             sample0);
}
static void be_layernorm_forward(Backend *be, float *y, float *stats, const float *x, const float *w,
                                 const float *b, int n, int h) {
    (void)be;
    layernorm_forward(y, stats, x, w, b, n, h);
}
static void be_layernorm_backward(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy,
                                  const float *x, const float *stats, const float *w, int n, int h) {
    (void)be;
    layernorm_backward(dx, accumulate, dw, db, dy, x, stats, w, n, h);
}
static void be_layernorm_backward_from_output(Backend *be, float *dx, int accumulate, float *dw, float *db,
                                              const float *dy, const float *y, const float *stats, const float *w,
                                              const float *b, int n, int h) {
    (void)be;
    layernorm_backward_from_output(dx, accumulate, dw, db, dy, y, stats, w, b, n, h);
}
static void be_bias_gelu_forward(Backend *be, float *y, float *x, const float *bias, int n, int cols,
                                 int round_bf16) {
    (void)be;
    bias_gelu_forward(y, x, bias, n, cols, round_bf16);
}
static void be_gelu_backward(Backend *be, float *dx, const float *dy, const float *x, size_t count) {
    (void)be;
    gelu_backward(dx, dy, x, count);
}
static void be_gelu_branch_pack(Backend *be, uint8_t *bits, const float *x, size_t count) {
    (void)be;
    gelu_branch_pack(bits, x, count);
}
static void be_gelu_backward_from_output(Backend *be, float *dx, const float *dy, const float *y,
                                         const uint8_t *bits, size_t count) {
    (void)be;
    gelu_backward_from_output(dx, dy, y, bits, count);
}
static void be_fewbit_gelu_encode(Backend *be, uint8_t *codes, const float *x, size_t count, const FewBitGelu *t) {
    (void)be;
    fewbit_gelu_encode(codes, x, count, t);
}
static void be_fewbit_gelu_backward(Backend *be, float *dx, const float *dy, const uint8_t *codes, size_t count,
                                    const FewBitGelu *t) {
    (void)be;
    fewbit_gelu_backward(dx, dy, codes, count, t);
}
static void be_attention_mask(Backend *be, uint8_t *keep, int s, int b, int a, int head0, DropoutSite site,
                              uint32_t sample0) {
    (void)be;
    attention_mask(keep, s, b, a, head0, site, sample0);
}
static void be_dropout_mask_sbw(Backend *be, uint8_t *keep, DropoutSite site, int s0, int s, int b, int w,
                                uint32_t sample0) {
    (void)be;
    dropout_mask_sbw(keep, site, s0, s, b, w, sample0);
}
static void be_dropout_residual_forward(Backend *be, float *out, const float *res, const float *y,
                                        const float *bias, const uint8_t *keep, float p, int n, int w) {
    (void)be;
    dropout_residual_forward(out, res, y, bias, keep, p, n, w);
}
static void be_dropout_residual_inverse(Backend *be, float *out, const float *res, const float *y,
                                        const float *bias, const uint8_t *keep, float p, int n, int w) {
    (void)be;
    dropout_residual_inverse(out, res, y, bias, keep, p, n, w);
}
static void be_dropout_apply(Backend *be, float *x, const uint8_t *keep, float p, size_t count) {
    (void)be;
    dropout_apply(x, keep, p, count);
}
static void be_dropout_backward(Backend *be, float *dy, const float *dout, const uint8_t *keep, float p,
                                size_t count) {
    (void)be;
    dropout_backward(dy, dout, keep, p, count);
}
static void be_axpby(Backend *be, float *y, float alpha, const float *x, float beta, size_t count) {
    (void)be;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) y[i] = x ? alpha * x[i] + beta * y[i] : beta * y[i];
}
static void be_embedding_forward(Backend *be, float *x, const int32_t *tokens, const float *wte, const float *wpe,
                                 int s, int b, int h) {
    (void)be;
    embedding_forward(x, tokens, wte, wpe, s, b, h);
}
static void be_embedding_backward(Backend *be, float *dwte, float *dwpe, const float *dx, const int32_t *tokens,
                                  int s, int b, int h) {
    (void)be;
    embedding_backward(dwte, dwpe, dx, tokens, s, b, h);
}
static void be_dropout_mask_cols(Backend *be, uint8_t *keep, DropoutSite site, int r0, int rows, int b, int w, int W,
                                 int c0, uint32_t sample0) {
    (void)be;
    dropout_mask_cols(keep, site, r0, rows, b, w, W, c0, sample0);
}
static void be_embedding_vocab_forward16(Backend *be, float *x, const int32_t *tokens, const uint16_t *wte16,
                                         int v0, int vl, int n, int h) {
    (void)be;
    embedding_vocab_forward16(x, tokens, wte16, v0, vl, n, h);
}
static void be_embedding_vocab_forward(Backend *be, float *x, const int32_t *tokens, const float *wte, int v0,
                                       int vl, int n, int h) {
    (void)be;
    embedding_vocab_forward(x, tokens, wte, v0, vl, n, h);
}
static void be_embedding_add_positions(Backend *be, float *x, const float *wpe, int s0, int s, int b, int h) {
    (void)be;
    embedding_add_positions(x, wpe, s0, s, b, h);
}
static void be_embedding_vocab_backward(Backend *be, float *dwte, const float *dx, const int32_t *tokens, int v0,
                                        int vl, int n, int h) {
    (void)be;
    embedding_vocab_backward(dwte, dx, tokens, v0, vl, n, h);
}
static void be_embedding_positions_backward(Backend *be, float *dwpe, const float *dx, int s0, int s, int b,
                                            int h) {
    (void)be;
    embedding_positions_backward(dwpe, dx, s0, s, b, h);
}
static double be_crossentropy_forward_backward(Backend *be, float *logits, const int32_t *targets, float *row_loss,
                                               int n, int v, float grad_scale) {
    (void)be;
    return crossentropy_forward_backward(logits, targets, row_loss, n, v, grad_scale);
}
static double be_crossentropy_loss(Backend *be, const float *logits, const int32_t *targets, float *row_loss, int n,
                                   int v) {
    (void)be;
    return crossentropy_loss(logits, targets, row_loss, n, v);
}
// The returned sum, kept: the same bits a caller adding the returns gets.
static void be_crossentropy_deferred(Backend *be, float *logits, const int32_t *targets, float *row_loss, int n,
                                     int v, float grad_scale, int train) {
    CpuImpl *c = be->impl;
    c->loss_microbatch += train ? crossentropy_forward_backward(logits, targets, row_loss, n, v, grad_scale)
                                : crossentropy_loss(logits, targets, row_loss, n, v);
}
static void be_loss_end_microbatch(Backend *be) {
    CpuImpl *c = be->impl;
    c->loss_step += c->loss_microbatch;
    c->loss_microbatch = 0.0;
}
static double be_loss_take(Backend *be) {
    CpuImpl *c = be->impl;
    double r = c->loss_step;
    c->loss_step = 0.0;
    return r;
}
static void be_crossentropy_vocab_partial(Backend *be, float *part, const float *logits, const int32_t *targets,
                                          int n, int vl, int v0, int n_valid) {
    (void)be;
    crossentropy_vocab_partial(part, logits, targets, n, vl, v0, n_valid);
}
static double be_crossentropy_vocab_combine(Backend *be, float *lse, float *row_loss, const float *parts, int t,
                                            int n) {
    (void)be;
    return crossentropy_vocab_combine(lse, row_loss, parts, t, n);
}
static void be_crossentropy_vocab_backward(Backend *be, float *logits, const float *lse, const int32_t *targets,
                                           int n, int vl, int v0, int n_valid, float grad_scale) {
    (void)be;
    crossentropy_vocab_backward(logits, lse, targets, n, vl, v0, n_valid, grad_scale);
}
static void be_bf16_round(Backend *be, float *x, size_t n) {
    (void)be;
    bf16_round(x, n);
}
static void be_bf16_pack(Backend *be, uint16_t *dst, const float *src, size_t n) {
    (void)be;
    bf16_pack(dst, src, n);
}
static void be_bf16_pack_round(Backend *be, uint16_t *dst, float *x, size_t n) {
    (void)be;
    bf16_pack_round(dst, x, n);
}
static void be_bf16_unpack(Backend *be, float *dst, const uint16_t *src, size_t n) {
    (void)be;
    bf16_unpack(dst, src, n);
}
static void be_mask_pack_bits(Backend *be, uint8_t *bits, const uint8_t *keep, size_t n) {
    (void)be;
    mask_pack_bits(bits, keep, n);
}
static void be_mask_unpack_bits(Backend *be, uint8_t *keep, const uint8_t *bits, size_t n) {
    (void)be;
    mask_unpack_bits(keep, bits, n);
}
static void be_adamw_update(Backend *be, float *p, uint16_t *w16, const float *g, float *m, float *v, size_t n,
                            float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                            float grad_scale) {
    (void)be;
    cpu_adamw_update(p, w16, g, m, v, n, lr, beta1, beta2, eps, wd, bc1, bc2, grad_scale);
}
static double be_sum_squares(Backend *be, const float *x, size_t n) {
    (void)be;
    return cpu_sum_squares(x, n);
}
static size_t be_count_nonfinite(Backend *be, const float *x, size_t n) {
    (void)be;
    return cpu_count_nonfinite(x, n);
}
// Many tensors: the single-tensor kernels in turn (each already uses every thread).
static void be_adamw_update_multi(Backend *be, const AdamWSlice *t, int count, float lr, float beta1, float beta2,
                                  float eps, float bc1, float bc2, float grad_scale) {
    (void)be;
    for (int i = 0; i < count; i++)
        cpu_adamw_update(t[i].p, t[i].w16, t[i].g, t[i].m, t[i].v, t[i].n, lr, beta1, beta2, eps, t[i].wd, bc1, bc2,
                         grad_scale);
}
static void be_tensor_stats_multi(Backend *be, const float *const *x, const size_t *n, int count, double *sumsq,
                                  size_t *nonfinite) {
    (void)be;
    for (int i = 0; i < count; i++) {
        if (sumsq) sumsq[i] = cpu_sum_squares(x[i], n[i]);
        if (nonfinite) nonfinite[i] = cpu_count_nonfinite(x[i], n[i]);
    }
}
// ---- a step without host waits: on the CPU nothing is queued, so each is done at the call
static int cpu_mark(Backend *be) {
    CpuImpl *c = be->impl;
    if (c->n_marks == c->cap_marks) {
        int cap = c->cap_marks ? 2 * c->cap_marks : 64;
        c->marks = xgrow(c->marks, (size_t)c->n_marks * sizeof *c->marks, (size_t)cap * sizeof *c->marks);
        c->cap_marks = cap;
    }
    c->marks[c->n_marks] = now_seconds();
    return c->n_marks++;
}
static double cpu_mark_seconds(Backend *be, int from, int to) {
    const CpuImpl *c = be->impl;
    if (from < 0 || to < 0 || from >= c->n_marks || to >= c->n_marks)
        ctron_fatal("mark_seconds(%d, %d): %d marks since marks_reset", from, to, c->n_marks);
    return c->marks[to] - c->marks[from];
}
static void cpu_marks_reset(Backend *be) { ((CpuImpl *)be->impl)->n_marks = 0; }
static void cpu_copy_enqueue(Backend *be, void *dst, const void *src, size_t bytes) {
    cpu_copy(be, dst, src, bytes, COPY_H2D);
}
static void cpu_step_guard(Backend *be, const float *g, size_t n, float max_norm) {
    CpuImpl *c = be->impl;
    c->guard_sumsq = cpu_sum_squares(g, n);
    double norm = sqrt(c->guard_sumsq);
    c->guard_scale = backend_clip_scale(norm, max_norm);
    c->guard_skip = !isfinite(c->loss_step) || !isfinite(norm);
}
static void cpu_adamw_update_guarded(Backend *be, const AdamWSlice *t, int count, float lr, float beta1, float beta2,
                                     float eps, float bc1, float bc2) {
    const CpuImpl *c = be->impl;
    if (!c->guard_skip) be_adamw_update_multi(be, t, count, lr, beta1, beta2, eps, bc1, bc2, c->guard_scale);
}
static void cpu_step_take(Backend *be, double *loss_sum, double *sumsq) {
    *loss_sum = be_loss_take(be);
    *sumsq = ((const CpuImpl *)be->impl)->guard_sumsq;
}

// The CPU's peak is measured (util/peak.h), not known: 0.
static double cpu_peak_flops(const Backend *be, Precision precision, char *source, size_t sourcelen) {
    (void)be; (void)precision;
    if (sourcelen) snprintf(source, sourcelen, "measured (the CPU's sgemm)");
    return 0.0;
}
static void be_gelu_forward(Backend *be, float *y, const float *x, size_t count) {
    (void)be;
    gelu_forward(y, x, count);
}
static void be_rmsnorm_forward(Backend *be, float *y, float *rstd, const float *x, const float *w, float eps, int n,
                               int h, int round_bf16) {
    (void)be;
    rmsnorm_forward(y, rstd, x, w, eps, n, h, round_bf16);
}
static void be_rmsnorm_backward(Backend *be, float *dx, int accumulate, float *dw, const float *dy, const float *x,
                                const float *rstd, const float *w, int n, int h) {
    (void)be;
    rmsnorm_backward(dx, accumulate, dw, dy, x, rstd, w, n, h);
}
static void be_rmsnorm_backward_from_output(Backend *be, float *dx, int accumulate, float *dw, const float *dy,
                                            const float *y, const float *rstd, const float *w, int n, int h) {
    (void)be;
    rmsnorm_backward_from_output(dx, accumulate, dw, dy, y, rstd, w, n, h);
}
static void be_rope_forward(Backend *be, float *y, const float *x, int ld, const float *cs, int positions, int rows,
                            int b, int heads, int d, int rot, int pos0, int round_bf16) {
    (void)be;
    rope_forward(y, x, ld, cs, positions, rows, b, heads, d, rot, pos0, round_bf16);
}
static void be_rope_backward(Backend *be, float *dx, const float *dy, int ld, const float *cs, int positions, int rows,
                             int b, int heads, int d, int rot, int pos0) {
    (void)be;
    rope_backward(dx, dy, ld, cs, positions, rows, b, heads, d, rot, pos0);
}
static void be_swiglu_forward(Backend *be, float *y, float *gate, float *up, int ld, int n, int f, int round_bf16) {
    (void)be;
    swiglu_forward(y, gate, up, ld, n, f, round_bf16);
}
static void be_swiglu_forward16(Backend *be, uint16_t *y16, const uint16_t *gate, const uint16_t *up, int ld, int n,
                                int f) {
    (void)be;
    swiglu_forward16(y16, gate, up, ld, n, f);
}
static void be_swiglu_forward_pack16(Backend *be, uint16_t *y16, uint16_t *gate16, uint16_t *up16, const float *gate,
                                     const float *up, int ld, int n, int f) {
    (void)be;
    swiglu_forward_pack16(y16, gate16, up16, gate, up, ld, n, f);
}
static void be_swiglu_backward16(Backend *be, void *dgate, void *dup, int ldd, int grad16, const float *dy,
                                 const uint16_t *gate, const uint16_t *up, int ld, int n, int f) {
    (void)be;
    swiglu_backward16(dgate, dup, ldd, grad16, dy, gate, up, ld, n, f);
}
static void be_rmsnorm_backward16(Backend *be, float *dx, int accumulate, float *dw, const float *dy, const uint16_t *x,
                                  const float *rstd, const float *w, int n, int h) {
    (void)be;
    rmsnorm_backward16(dx, accumulate, dw, dy, x, rstd, w, n, h);
}
static void be_layernorm_backward16(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy,
                                    const uint16_t *x, const float *stats, const float *w, int n, int h) {
    (void)be;
    layernorm_backward16(dx, accumulate, dw, db, dy, x, stats, w, n, h);
}
static void be_swiglu_backward(Backend *be, float *dgate, float *dup, int ldd, float *y, const float *dy,
                               const float *gate, const float *up, int ld, int n, int f, int round_bf16) {
    (void)be;
    swiglu_backward(dgate, dup, ldd, y, dy, gate, up, ld, n, f, round_bf16);
}

// Per OpenMP thread: dP; with Tempo's softmax P and dP; recompute P, D, dP and the mask; flash tiles.
// Grouped-query attention (kv < a) adds a block of one query head's dK, dV (ATTENTION_GQA_SCRATCH;
// flash: flash_scratch_floats).
size_t backend_cpu_attention_scratch_floats(AttnScratchKind kind, int s, int b, int a, int kv, int h, int threads) {
    (void)b;
    size_t ss = (size_t)s * (size_t)s, per_thread = ss;
    if (kind == ATTN_SCRATCH_BACKWARD_TEMPO) per_thread = 2 * ss;
    if (kind == ATTN_SCRATCH_RECOMPUTE) per_thread = ATTENTION_RECOMPUTE_SCRATCH(s);
    if (kv < a) per_thread += ATTENTION_GQA_SCRATCH(s, h / a);
    if (kind == ATTN_SCRATCH_FLASH) per_thread = flash_scratch_floats(s, h / a, a, kv);
    return (size_t)threads * per_thread;
}
static size_t cpu_attention_scratch_floats(Backend *be, AttnScratchKind kind, int s, int b, int a, int kv, int h) {
    (void)be;
    return backend_cpu_attention_scratch_floats(kind, s, b, a, kv, h, omp_get_max_threads());
}

static int cpu_describe(const Backend *be, char *out, size_t outlen) {
    (void)be;
    return snprintf(out, outlen, "cpu (%d OpenMP threads)", omp_get_max_threads());
}
static void cpu_device_memory(const Backend *be, size_t *in_use, size_t *total) {
    (void)be;
    *in_use = 0;
    *total = 0;
}

static const Backend cpu_table = {
    .name = "cpu",
    .alloc = cpu_alloc, .free = cpu_free, .copy = cpu_copy, .copy_async = cpu_copy_async,
    .event_wait = cpu_event_wait, .memset = cpu_memset, .synchronize = cpu_synchronize,
    .scratch_bytes = cpu_scratch_bytes,
    .linear_forward = cpu_linear_forward, .linear_forward_acc = cpu_linear_forward_acc,
    .linear_backward = cpu_linear_backward, .bias_backward = be_bias_backward,
    .attention_forward = cpu_attention_forward, .attention_backward = cpu_attention_backward,
    .attention_backward_recompute = cpu_attention_backward_recompute,
    .flash_attention_forward = be_flash_attention_forward, .flash_attention_backward = be_flash_attention_backward,
    .layernorm_forward = be_layernorm_forward, .layernorm_backward = be_layernorm_backward,
    .layernorm_backward_from_output = be_layernorm_backward_from_output,
    .bias_gelu_forward = be_bias_gelu_forward, .gelu_backward = be_gelu_backward, .gelu_branch_pack = be_gelu_branch_pack,
    .gelu_backward_from_output = be_gelu_backward_from_output,
    .fewbit_gelu_encode = be_fewbit_gelu_encode, .fewbit_gelu_backward = be_fewbit_gelu_backward,
    .attention_mask = be_attention_mask, .dropout_mask_sbw = be_dropout_mask_sbw, .dropout_residual_forward = be_dropout_residual_forward,
    .dropout_residual_inverse = be_dropout_residual_inverse,
    .dropout_apply = be_dropout_apply, .dropout_backward = be_dropout_backward, .axpby = be_axpby,
    .embedding_forward = be_embedding_forward, .embedding_backward = be_embedding_backward,
    .embedding_vocab_forward = be_embedding_vocab_forward, .embedding_add_positions = be_embedding_add_positions,
    .embedding_vocab_backward = be_embedding_vocab_backward, .embedding_positions_backward = be_embedding_positions_backward,
    .crossentropy_forward_backward = be_crossentropy_forward_backward, .crossentropy_loss = be_crossentropy_loss,
    .crossentropy_vocab_partial = be_crossentropy_vocab_partial, .crossentropy_vocab_combine = be_crossentropy_vocab_combine,
    .crossentropy_vocab_backward = be_crossentropy_vocab_backward,
    .bf16_round = be_bf16_round, .bf16_pack = be_bf16_pack, .bf16_pack_round = be_bf16_pack_round, .bf16_unpack = be_bf16_unpack,
    .mask_pack_bits = be_mask_pack_bits, .mask_unpack_bits = be_mask_unpack_bits,
    .adamw_update = be_adamw_update, .sum_squares = be_sum_squares, .count_nonfinite = be_count_nonfinite,
    .host_alloc = cpu_host_alloc, .host_free = cpu_host_free, .host_addressable = 1,
    .linear_forward_rows = cpu_linear_forward_rows, .kv_attention_forward = cpu_kv_attention_forward,
    .gelu_forward = be_gelu_forward, .attention_scratch_floats = cpu_attention_scratch_floats,
    .describe = cpu_describe, .device_memory = cpu_device_memory,
    .rmsnorm_forward = be_rmsnorm_forward, .rmsnorm_backward = be_rmsnorm_backward,
    .rmsnorm_backward_from_output = be_rmsnorm_backward_from_output,
    .rope_forward = be_rope_forward, .rope_backward = be_rope_backward,
    .swiglu_forward = be_swiglu_forward, .swiglu_backward = be_swiglu_backward,
    .adamw_update_multi = be_adamw_update_multi, .tensor_stats_multi = be_tensor_stats_multi,
    .peak_flops = cpu_peak_flops,
    .crossentropy_deferred = be_crossentropy_deferred, .loss_end_microbatch = be_loss_end_microbatch,
    .loss_take = be_loss_take, .embedding_vocab_forward16 = be_embedding_vocab_forward16,
    .dropout_mask_cols = be_dropout_mask_cols,
    .flash_attention_forward_rows = be_flash_attention_forward_rows,
    .mark = cpu_mark, .mark_seconds = cpu_mark_seconds, .marks_reset = cpu_marks_reset,
    .copy_enqueue = cpu_copy_enqueue, .step_guard = cpu_step_guard, .adamw_update_guarded = cpu_adamw_update_guarded,
    .step_take = cpu_step_take,
};

Backend *backend_cpu_open(Precision precision, char *err, size_t errlen) {
    int copies = backend_bf16_copies(err, errlen);
    if (copies < 0) return NULL;
    Backend *be = xmalloc(sizeof *be);
    *be = cpu_table;
    be->precision = precision;
    // At bf16 the kernels read the arena's bf16 copies as they are, as the CUDA backend's do (CTRON_BF16_COPIES=0:
    // the fp32 values unpacked from them, the same bits, for comparison)
    if (precision == PRECISION_BF16 && copies) {
        be->swiglu_forward16 = be_swiglu_forward16;
        be->swiglu_forward_pack16 = be_swiglu_forward_pack16;
        be->swiglu_backward16 = be_swiglu_backward16;
        be->rmsnorm_backward16 = be_rmsnorm_backward16;
        be->layernorm_backward16 = be_layernorm_backward16;
        be->linear_backward16 = cpu_linear_backward16;
    }
    be->impl = xcalloc(sizeof(CpuImpl));
    return be;
}

void backend_cpu_close(Backend *be) {
    CpuImpl *c = be->impl;
    free(c->scratch[0]);
    free(c->scratch[1]);
    free(c->marks);
    free(c);
}
