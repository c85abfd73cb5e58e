// The CUDA backend's kernels: one entry per kernel of struct Backend (backend.h documents each, and
// the CPU header named there gives its shapes). Each group is implemented in the .cu file its
// heading names. All run on the backend's stream, take device pointers, and are deterministic: no
// float atomics, fixed reduction orders, so a step repeated or recomputed is bitwise identical.
#ifndef CTRON_CUDA_KERNELS_H
#define CTRON_CUDA_KERNELS_H
#include "backend/cuda/cuda_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- gemm.cu (cuBLASLt)
void cuda_linear_forward(Backend *be, float *y, int ldy, const float *x, const uint16_t *x16, int ldx,
                         const float *w, const uint16_t *w16, const float *bias, int n, int in, int out);
void cuda_linear_forward_acc(Backend *be, float *y, int ldy, const float *x, const uint16_t *x16, int ldx,
                             const float *w, const uint16_t *w16, int n, int in, int out);
void cuda_linear_backward(Backend *be, float *dx, int ldx_out, int accumulate, float *dw, float *db,
                          const float *dy, int lddy, const float *x, const uint16_t *x16, int ldx, const float *w,
                          const uint16_t *w16, int n, int in, int out);
void cuda_linear_backward16(Backend *be, float *dx, int ldx_out, int accumulate, float *dw, const uint16_t *dy16,
                            int lddy16, const float *x, const uint16_t *x16, int ldx, const uint16_t *w16, int n,
                            int in, int out);
void cuda_bias_backward(Backend *be, float *db, const float *dy, int lddy, int n, int cols);
void cuda_linear_forward_rows(Backend *be, float *y, int ldy, const float *x, int ldx, const float *w,
                              const uint16_t *w16, const float *bias, int n, int in, int out);

// ---- attention.cu (standard attention, masks, KV-cache attention)
void cuda_attention_forward(Backend *be, float *ctx, float *prob, uint8_t *keep, float *drop, const float *q,
                            const float *k, const float *v, int s, int b, int a, int kv, int h, int window, int head0,
                            DropoutSite site, uint32_t sample0, int round_bf16);
void cuda_attention_backward(Backend *be, float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                             const uint8_t *keep, const float *drop, const float *q, const float *k,
                             const float *v, float *scratch, int s, int b, int a, int kv, int h, float p, int round_bf16);
void cuda_attention_backward_recompute(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                       const float *q, const float *k, const float *v, float *scratch, int s,
                                       int b, int a, int kv, int h, int window, int head0, DropoutSite site,
                                       uint32_t sample0, int round_bf16);
void cuda_attention_mask(Backend *be, uint8_t *keep, int s, int b, int a, int head0, DropoutSite site,
                         uint32_t sample0);
size_t cuda_attention_scratch_floats(Backend *be, AttnScratchKind kind, int s, int b, int a, int kv, int h);
void cuda_kv_attention_forward(Backend *be, float *ctx, const float *q, int ldq, const float *kc, const float *vc,
                               float *scores, int seq, int p0, int n, int a, int kv, int h, int window);

// ---- flash_attention.cu (its scratch size feeds cuda_attention_scratch_floats)
size_t cuda_flash_scratch_floats(int s, int b, int a, int h);
void cuda_flash_attention_forward(Backend *be, float *ctx, float *lse, const float *q, const float *k,
                                  const float *v, float *scratch, int s, int b, int a, int kv, int h, int window,
                                  int head0, DropoutSite site, uint32_t sample0);
// Query positions [q0, q0+nq) only (backend.h's flash_attention_forward_rows).
void cuda_flash_attention_forward_rows(Backend *be, float *ctx, float *lse, const float *q, const float *k,
                                       const float *v, float *scratch, int s, int q0, int nq, int b, int a, int kv,
                                       int h, int window, int head0, DropoutSite site, uint32_t sample0);
void cuda_flash_attention_backward(Backend *be, float *dq, float *dk, float *dv, const float *dctx, const float *q,
                                   const float *k, const float *v, const float *ctx, const float *lse,
                                   float *scratch, int s, int b, int a, int kv, int h, int window, int head0,
                                   DropoutSite site, uint32_t sample0);
// The bf16 path on kept copies (backend.h's flash_attention_forward16 / _backward16; at bf16 only).
void cuda_flash_attention_forward16(Backend *be, float *ctx, float *lse, const FlashIn16 *in, const float *q,
                                    const float *k, const float *v, float *scratch, int s, int q0, int nq, int b, int a,
                                    int kv, int h, int window, int head0, DropoutSite site, uint32_t sample0);
void cuda_flash_attention_backward16(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                     const FlashIn16 *in, const float *q, const float *k, const float *v,
                                     const float *ctx, const float *lse, float *scratch, int s, int b, int a, int kv,
                                     int h, int window, int head0, DropoutSite site, uint32_t sample0);

// ---- layernorm.cu
void cuda_layernorm_forward(Backend *be, float *y, float *stats, const float *x, const float *w, const float *b,
                            int n, int h);
void cuda_layernorm_backward(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy,
                             const float *x, const float *stats, const float *w, int n, int h);
void cuda_layernorm_backward16(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy,
                               const uint16_t *x, const float *stats, const float *w, int n, int h);
void cuda_layernorm_backward_from_output(Backend *be, float *dx, int accumulate, float *dw, float *db,
                                         const float *dy, const float *y, const float *stats, const float *w,
                                         const float *b, int n, int h);

// ---- rmsnorm.cu, rope.cu, swiglu.cu (the Llama block's ops, docs/LLAMA-OPS.md)
void cuda_rmsnorm_forward(Backend *be, float *y, float *rstd, const float *x, const float *w, float eps, int n, int h,
                          int round_bf16);
void cuda_rmsnorm_backward(Backend *be, float *dx, int accumulate, float *dw, const float *dy, const float *x,
                           const float *rstd, const float *w, int n, int h);
void cuda_rmsnorm_backward16(Backend *be, float *dx, int accumulate, float *dw, const float *dy, const uint16_t *x,
                             const float *rstd, const float *w, int n, int h);
void cuda_rmsnorm_backward_from_output(Backend *be, float *dx, int accumulate, float *dw, const float *dy,
                                       const float *y, const float *rstd, const float *w, int n, int h);
void cuda_rope_forward(Backend *be, float *y, const float *x, int ld, const float *cs, int positions, int rows, int b,
                       int heads, int d, int rot, int pos0, int round_bf16);
void cuda_rope_backward(Backend *be, float *dx, const float *dy, int ld, const float *cs, int positions, int rows,
                        int b, int heads, int d, int rot, int pos0);
void cuda_swiglu_forward(Backend *be, float *y, float *gate, float *up, int ld, int n, int f, int round_bf16);
void cuda_swiglu_backward(Backend *be, float *dgate, float *dup, int ldd, float *y, const float *dy,
                          const float *gate, const float *up, int ld, int n, int f, int round_bf16);
void cuda_swiglu_forward16(Backend *be, uint16_t *y16, const uint16_t *gate, const uint16_t *up, int ld, int n, int f);
void cuda_swiglu_forward_pack16(Backend *be, uint16_t *y16, uint16_t *gate16, uint16_t *up16, const float *gate,
                                const float *up, int ld, int n, int f);
void cuda_swiglu_backward16(Backend *be, void *dgate, void *dup, int ldd, int grad16, const float *dy,
                            const uint16_t *gate, const uint16_t *up, int ld, int n, int f);

// ---- gelu.cu (GeLU, its bit and Few-Bit forms)
void cuda_bias_gelu_forward(Backend *be, float *y, float *x, const float *bias, int n, int cols, int round_bf16);
void cuda_gelu_backward(Backend *be, float *dx, const float *dy, const float *x, size_t count);
void cuda_gelu_backward16(Backend *be, float *dx, const float *dy, const uint16_t *x, size_t count);
void cuda_bias_gelu_forward16(Backend *be, uint16_t *y16, uint16_t *x16, const float *x, const float *bias, int n,
                              int cols);
void cuda_gelu_branch_pack(Backend *be, uint8_t *bits, const float *x, size_t count);
void cuda_gelu_backward_from_output(Backend *be, float *dx, const float *dy, const float *y, const uint8_t *bits,
                                    size_t count);
void cuda_fewbit_gelu_encode(Backend *be, uint8_t *codes, const float *x, size_t count, const FewBitGelu *t);
void cuda_fewbit_gelu_backward(Backend *be, float *dx, const float *dy, const uint8_t *codes, size_t count,
                               const FewBitGelu *t);
void cuda_gelu_forward(Backend *be, float *y, const float *x, size_t count);

// ---- dropout.cu (Philox masks, dropout, bf16 and mask storage formats)
void cuda_dropout_mask_sbw(Backend *be, uint8_t *keep, DropoutSite site, int s0, int s, int b, int w,
                           uint32_t sample0);
void cuda_dropout_mask_cols(Backend *be, uint8_t *keep, DropoutSite site, int r0, int rows, int b, int w, int W,
                            int c0, uint32_t sample0);
void cuda_dropout_residual_forward(Backend *be, float *out, const float *res, const float *y, const float *bias,
                                   const uint8_t *keep, float p, int n, int w);
void cuda_dropout_residual_inverse(Backend *be, float *out, const float *res, const float *y, const float *bias,
                                   const uint8_t *keep, float p, int n, int w);
void cuda_dropout_apply(Backend *be, float *x, const uint8_t *keep, float p, size_t count);
void cuda_axpby(Backend *be, float *y, float alpha, const float *x, float beta, size_t count);
void cuda_dropout_backward(Backend *be, float *dy, const float *dout, const uint8_t *keep, float p, size_t count);
void cuda_bf16_round(Backend *be, float *x, size_t n);
void cuda_bf16_pack(Backend *be, uint16_t *dst, const float *src, size_t n);
void cuda_bf16_unpack(Backend *be, float *dst, const uint16_t *src, size_t n);
void cuda_bf16_pack_round(Backend *be, uint16_t *dst, float *x, size_t n);
void cuda_mask_pack_bits(Backend *be, uint8_t *bits, const uint8_t *keep, size_t n);
void cuda_mask_unpack_bits(Backend *be, uint8_t *keep, const uint8_t *bits, size_t n);

// ---- embedding.cu
void cuda_embedding_forward(Backend *be, float *x, const int32_t *tokens, const float *wte, const float *wpe,
                            int s, int b, int h);
void cuda_embedding_backward(Backend *be, float *dwte, float *dwpe, const float *dx, const int32_t *tokens, int s,
                             int b, int h);
void cuda_embedding_vocab_forward(Backend *be, float *x, const int32_t *tokens, const float *wte, int v0, int vl,
                                  int n, int h);
void cuda_embedding_vocab_forward16(Backend *be, float *x, const int32_t *tokens, const uint16_t *wte16, int v0, int vl,
                                    int n, int h);
void cuda_embedding_add_positions(Backend *be, float *x, const float *wpe, int s0, int s, int b, int h);
void cuda_embedding_vocab_backward(Backend *be, float *dwte, const float *dx, const int32_t *tokens, int v0,
                                   int vl, int n, int h);
void cuda_embedding_positions_backward(Backend *be, float *dwpe, const float *dx, int s0, int s, int b, int h);

// ---- crossentropy.cu
double cuda_crossentropy_forward_backward(Backend *be, float *logits, const int32_t *targets, float *row_loss,
                                          int n, int v, float grad_scale);
double cuda_crossentropy_loss(Backend *be, const float *logits, const int32_t *targets, float *row_loss, int n,
                              int v);
void cuda_crossentropy_vocab_partial(Backend *be, float *part, const float *logits, const int32_t *targets, int n,
                                     int vl, int v0, int n_valid);
double cuda_crossentropy_vocab_combine(Backend *be, float *lse, float *row_loss, const float *parts, int t, int n);
void cuda_crossentropy_vocab_backward(Backend *be, float *logits, const float *lse, const int32_t *targets, int n,
                                      int vl, int v0, int n_valid, float grad_scale);
void cuda_crossentropy_deferred(Backend *be, float *logits, const int32_t *targets, float *row_loss, int n, int v,
                                float grad_scale, int train);
void cuda_crossentropy_deferred16(Backend *be, float *logits, const int32_t *targets, float *row_loss, int n, int v,
                                  float grad_scale);
void cuda_loss_end_microbatch(Backend *be);
double cuda_loss_take(Backend *be);

// ---- optim.cu (AdamW, sum of squares, non-finite count)
void cuda_adamw_update(Backend *be, float *p, uint16_t *w16, const float *g, float *m, float *v, size_t n,
                       float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                       float grad_scale);
double cuda_sum_squares(Backend *be, const float *x, size_t n);
size_t cuda_count_nonfinite(Backend *be, const float *x, size_t n);
void cuda_adamw_update_multi(Backend *be, const AdamWSlice *slices, int count, float lr, float beta1, float beta2,
                             float eps, float bc1, float bc2, float grad_scale);
void cuda_tensor_stats_multi(Backend *be, const float *const *x, const size_t *n, int count, double *sumsq,
                             size_t *nonfinite);
void cuda_step_guard(Backend *be, const float *g, size_t n, float max_norm);
void cuda_adamw_update_guarded(Backend *be, const AdamWSlice *slices, int count, float lr, float beta1, float beta2,
                               float eps, float bc1, float bc2);
void cuda_step_take(Backend *be, double *loss_sum, double *sumsq);

// ---- cuda_backend.c (the device's datasheet peak, backend/gpu_peaks.h)
double cuda_peak_flops(const Backend *be, Precision precision, char *source, size_t sourcelen);

#ifdef __cplusplus
}
#endif
#endif
