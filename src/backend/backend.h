// The backend layer (DESIGN.md §8): the model says *what* is computed, a backend says *where and
// how*. One table of function pointers carries the device (allocation, copies, memset, events) and
// the kernels (every forward/backward pair of backend/cpu/*.h, the optimizer update, sums of squares,
// the non-finite check, bf16 and mask packing). Model, memory and train code reach tensors only
// through it; the CPU backend (backend/cpu/) is the only code that calls cblas, oneDNN or OpenMP.
// A kernel's shapes are documented once, in the CPU header that implements it.
#ifndef CTRON_BACKEND_H
#define CTRON_BACKEND_H
#include <stddef.h>
#include <stdint.h>
#include "backend/cpu/dropout.h"
#include "backend/cpu/gelu_fewbit.h"

// fp32: compute and store in fp32. bf16: mixed precision as Megatron does it — fp32 master weights,
// optimizer state and weight gradients; bf16 weight copies and inputs for the GEMMs (fp32
// accumulation); fp32 LN/softmax/GeLU/loss arithmetic; saved activations in bf16.
typedef enum { PRECISION_FP32 = 0, PRECISION_BF16 = 1 } Precision;
const char *precision_name(Precision p);
int precision_parse(const char *text, Precision *out);   // "fp32" | "bf16" → 0, else -1

typedef enum { COPY_H2D, COPY_D2H, COPY_D2D } CopyDir;

// An asynchronous copy's completion (a CUDA event on a GPU; done at once on the CPU).
typedef struct { void *handle; int done; } BackendEvent;

// Which attention kernel a scratch size is for (attention_scratch_floats).
typedef enum {
    ATTN_SCRATCH_BACKWARD,            // attention_backward from the stored probabilities
    ATTN_SCRATCH_BACKWARD_TEMPO,      // the same, with Tempo's in-place softmax (P from the output)
    ATTN_SCRATCH_RECOMPUTE,           // attention_backward_recompute (selective recompute)
    ATTN_SCRATCH_FLASH                // flash_attention_forward / _backward
} AttnScratchKind;

// One tensor (or piece of one) of a multi-tensor AdamW update: the arguments of adamw_update that
// differ between tensors (w16 may be NULL; wd 0 for the tensors that are not decayed).
typedef struct {
    float *p;
    uint16_t *w16;
    const float *g;
    float *m, *v;
    size_t n;
    float wd;
} AdamWSlice;

// Flash attention's operands as kept bf16 copies (flash_attention_forward16 / _backward16): each the bf16
// rounding of the fp32 tensor it stands for, with that tensor's layout; NULL: read the fp32 tensor instead.
typedef struct { const uint16_t *q, *k, *v, *ctx; } FlashIn16;

typedef struct Backend Backend;
struct Backend {
    const char *name;             // "cpu"
    Precision precision;
    void *impl;                   // the backend's own state (scratch, streams, library handles)

    // ---- the device: allocations are opaque outside the backend
    void *(*alloc)(Backend *be, size_t bytes);     // zero-filled; aborts with the size when it cannot
    void (*free)(Backend *be, void *p);
    void (*copy)(Backend *be, void *dst, const void *src, size_t bytes, CopyDir dir);
    void (*copy_async)(Backend *be, void *dst, const void *src, size_t bytes, CopyDir dir, BackendEvent *done);
    void (*event_wait)(Backend *be, BackendEvent *ev);
    void (*memset)(Backend *be, void *p, int byte, size_t bytes);
    void (*synchronize)(Backend *be);
    size_t (*scratch_bytes)(const Backend *be);   // what the backend holds for its own temporaries

    // ---- GEMMs. w16: the bf16 copy of w under mixed precision (NULL: fp32 GEMM). x16: x already in
    // bf16, [n, in] contiguous (a tensor the arena keeps in bf16), or NULL: the backend rounds x itself,
    // to the same bits. With w16 and x16 given, x may be NULL: it is not read.
    void (*linear_forward)(Backend *be, float *y, int ldy, const float *x, const uint16_t *x16, int ldx,
                           const float *w, const uint16_t *w16, const float *bias, int n, int in, int out);
    // y[n,out] += x[n,in]·Wᵀ: linear_forward with the GEMM's beta 1 and no bias, so that a sum of products
    // needs no zeroed temporary and no extra pass (a LoRA adapter's v·Bᵀ onto its base linear's output).
    void (*linear_forward_acc)(Backend *be, float *y, int ldy, const float *x, const uint16_t *x16, int ldx,
                               const float *w, const uint16_t *w16, int n, int in, int out);
    void (*linear_backward)(Backend *be, float *dx, int ldx_out, int accumulate, float *dw, float *db,
                            const float *dy, int lddy, const float *x, const uint16_t *x16, int ldx,
                            const float *w, const uint16_t *w16, int n, int in, int out);
    void (*bias_backward)(Backend *be, float *db, const float *dy, int lddy, int n, int cols);

    // ---- attention (bf16: round stored P/D to bf16, and under mixed precision bf16 GEMMs per head)
    // Grouped-query attention: a local query heads, kv local key/value heads (kv divides a; kv = a is
    // multi-head attention). q, ctx, dq, dctx are [s, b, a·d]; k, v, dk, dv [s, b, kv·d] (h = a·d is the
    // query width). Local query head j reads kv head j / (a/kv) (HF's repeat_kv). prob, keep, drop and lse
    // stay per query head; dk, dv of a kv head sum its query heads' contributions.
    void (*attention_forward)(Backend *be, float *ctx, float *prob, uint8_t *keep, float *drop, const float *q,
                              const float *k, const float *v, int s, int b, int a, int kv, int h, int window, int head0,
                              DropoutSite site, uint32_t sample0, int round_bf16);
    void (*attention_backward)(Backend *be, float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                               const uint8_t *keep, const float *drop, const float *q, const float *k,
                               const float *v, float *scratch, int s, int b, int a, int kv, int h, float p, int round_bf16);
    void (*attention_backward_recompute)(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                         const float *q, const float *k, const float *v, float *scratch, int s,
                                         int b, int a, int kv, int h, int window, int head0, DropoutSite site,
                                         uint32_t sample0, int round_bf16);
    void (*flash_attention_forward)(Backend *be, float *ctx, float *lse, const float *q, const float *k, const float *v,
                                    float *scratch, int s, int b, int a, int kv, int h, int window, int head0,
                                    DropoutSite site, uint32_t sample0);
    void (*flash_attention_backward)(Backend *be, float *dq, float *dk, float *dv, const float *dctx, const float *q,
                                     const float *k, const float *v, const float *ctx, const float *lse,
                                     float *scratch, int s, int b, int a, int kv, int h, int window, int head0,
                                     DropoutSite site, uint32_t sample0);

    // ---- elementwise and normalisation
    void (*layernorm_forward)(Backend *be, float *y, float *stats, const float *x, const float *w, const float *b, int n, int h);
    void (*layernorm_backward)(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy, const float *x,
                               const float *stats, const float *w, int n, int h);
    void (*layernorm_backward_from_output)(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy,
                                           const float *y, const float *stats, const float *w, const float *b,
                                           int n, int h);
    void (*bias_gelu_forward)(Backend *be, float *y, float *x, const float *bias, int n, int cols, int round_bf16);
    void (*gelu_backward)(Backend *be, float *dx, const float *dy, const float *x, size_t count);
    void (*gelu_branch_pack)(Backend *be, uint8_t *bits, const float *x, size_t count);
    void (*gelu_backward_from_output)(Backend *be, float *dx, const float *dy, const float *y, const uint8_t *bits, size_t count);
    void (*fewbit_gelu_encode)(Backend *be, uint8_t *codes, const float *x, size_t count, const FewBitGelu *t);
    void (*fewbit_gelu_backward)(Backend *be, float *dx, const float *dy, const uint8_t *codes, size_t count, const FewBitGelu *t);
    void (*attention_mask)(Backend *be, uint8_t *keep, int s, int b, int a, int head0, DropoutSite site, uint32_t sample0);
    void (*dropout_mask_sbw)(Backend *be, uint8_t *keep, DropoutSite site, int s0, int s, int b, int w, uint32_t sample0);
    void (*dropout_residual_forward)(Backend *be, float *out, const float *res, const float *y, const float *bias,
                                     const uint8_t *keep, float p, int n, int w);
    void (*dropout_apply)(Backend *be, float *x, const uint8_t *keep, float p, size_t count);
    // dropout_residual_forward undone: out = res − keep·(y + bias)/(1−p) (reversible blocks; NULL where a
    // backend has none: it cannot run them)
    void (*dropout_residual_inverse)(Backend *be, float *out, const float *res, const float *y, const float *bias,
                                     const uint8_t *keep, float p, int n, int w);
    void (*dropout_backward)(Backend *be, float *dy, const float *dout, const uint8_t *keep, float p, size_t count);
    // y[i] = alpha·x[i] + beta·y[i] (x NULL: y = beta·y). LoRA's scaling α/r and its adapter's sum.
    void (*axpby)(Backend *be, float *y, float alpha, const float *x, float beta, size_t count);

    // ---- embedding and loss (vocabulary-parallel forms under TP)
    void (*embedding_forward)(Backend *be, float *x, const int32_t *tokens, const float *wte, const float *wpe, int s, int b, int h);
    void (*embedding_backward)(Backend *be, float *dwte, float *dwpe, const float *dx, const int32_t *tokens, int s, int b, int h);
    void (*embedding_vocab_forward)(Backend *be, float *x, const int32_t *tokens, const float *wte, int v0, int vl, int n, int h);
    void (*embedding_add_positions)(Backend *be, float *x, const float *wpe, int s0, int s, int b, int h);
    void (*embedding_vocab_backward)(Backend *be, float *dwte, const float *dx, const int32_t *tokens, int v0, int vl, int n, int h);
    void (*embedding_positions_backward)(Backend *be, float *dwpe, const float *dx, int s0, int s, int b, int h);
    double (*crossentropy_forward_backward)(Backend *be, float *logits, const int32_t *targets, float *row_loss, int n, int v,
                                            float grad_scale);
    double (*crossentropy_loss)(Backend *be, const float *logits, const int32_t *targets, float *row_loss, int n, int v);
    void (*crossentropy_vocab_partial)(Backend *be, float *part, const float *logits, const int32_t *targets, int n, int vl,
                                       int v0, int n_valid);
    double (*crossentropy_vocab_combine)(Backend *be, float *lse, float *row_loss, const float *parts, int t, int n);
    void (*crossentropy_vocab_backward)(Backend *be, float *logits, const float *lse, const int32_t *targets, int n, int vl,
                                        int v0, int n_valid, float grad_scale);

    // ---- storage formats
    void (*bf16_round)(Backend *be, float *x, size_t n);
    void (*bf16_pack)(Backend *be, uint16_t *dst, const float *src, size_t n);
    // bf16_pack, then x = the packed values (bf16_unpack) in one pass; optional (NULL: the two ops)
    void (*bf16_pack_round)(Backend *be, uint16_t *dst, float *x, size_t n);
    void (*bf16_unpack)(Backend *be, float *dst, const uint16_t *src, size_t n);
    void (*mask_pack_bits)(Backend *be, uint8_t *bits, const uint8_t *keep, size_t n);
    void (*mask_unpack_bits)(Backend *be, uint8_t *keep, const uint8_t *bits, size_t n);

    // ---- the optimizer and the guards
    // AdamW on [lo, hi) of p/g with moments m/v (indices relative to lo); decay_mask NULL: decay all.
    // w16 (may be NULL): the bf16 copy of p, refreshed in the same sweep.
    void (*adamw_update)(Backend *be, float *p, uint16_t *w16, const float *g, float *m, float *v, size_t n, float lr,
                         float beta1, float beta2, float eps, float wd, float bc1, float bc2, float grad_scale);
    double (*sum_squares)(Backend *be, const float *x, size_t n);           // fixed summation order
    size_t (*count_nonfinite)(Backend *be, const float *x, size_t n);

    // ---- host memory the device copies to and from (appended: entries above keep their places)
    // Zero-filled host memory for copy/copy_async with COPY_H2D / COPY_D2H at full speed: pinned
    // (page-locked) on a GPU, where a copy from pageable memory is staged and never asynchronous;
    // aligned heap memory on the CPU. The offload pool lives here. Aborts with the size when it cannot.
    void *(*host_alloc)(Backend *be, size_t bytes);
    void (*host_free)(Backend *be, void *p);
    // 1 when the host may read and write device allocations in place (the CPU backend: host memory is
    // the device). Only I/O that must run on the host (the offload pool's file) looks at it: without
    // it, bytes go through a host_alloc bounce buffer with a copy first.
    int host_addressable;

    // ---- inference with a KV cache (model/infer.c): one sequence, dropout off
    // y[n,out] = x[n,in] · Wᵀ (+ bias): linear_forward, except that one row (decoding) is a
    // matrix-vector product that reads W once. w16 as in linear_forward.
    void (*linear_forward_rows)(Backend *be, float *y, int ldy, const float *x, int ldx, const float *w,
                                const uint16_t *w16, const float *bias, int n, int in, int out);
    // ctx[i] = softmax(q_i · K[0..p0+i]ᵀ / √d) · V[0..p0+i] for the n new tokens i and every head:
    // q rows of stride ldq (head j at column j·d), K/V the cache [positions, kv·d] (query head j reads
    // kv head j / (a/kv)), ctx [n, h] (h = a·d).
    // scores: threads · seq floats of scratch (seq: the cache's capacity). fp32 at every precision.
    void (*kv_attention_forward)(Backend *be, float *ctx, const float *q, int ldq, const float *kc, const float *vc,
                                 float *scores, int seq, int p0, int n, int a, int kv, int h, int window);
    // y = gelu(x), elementwise (the tanh form of bias_gelu_forward, without the bias).
    void (*gelu_forward)(Backend *be, float *y, const float *x, size_t count);
    // Floats of the scratch argument the attention kernel of this kind needs for s, b, a (local
    // heads), kv (local kv heads), h (local query width): the model allocates it once, in its workspace. On the CPU it is per
    // OpenMP thread; a GPU backend sizes it for its own launch.
    size_t (*attention_scratch_floats)(Backend *be, AttnScratchKind kind, int s, int b, int a, int kv, int h);

    // ---- what the device says of itself (the run header)
    // One line: the device, its driver and runtime; returns snprintf's count.
    int (*describe)(const Backend *be, char *out, size_t outlen);
    // Bytes in use on the device as its driver counts them, beyond what was in use when the backend
    // opened (the CUDA context, cuBLASLt's handle, other processes): every later allocation of the
    // process, the libraries' too (NCCL, lazily loaded kernels); and its capacity. 0 and 0 on the CPU.
    void (*device_memory)(const Backend *be, size_t *in_use, size_t *total);

    // ---- the Llama block's ops (backend/cpu/rmsnorm.h, rope.h, swiglu.h; docs/LLAMA-OPS.md). rstd: one
    // fp32 per row. cs: a rope_table copied to the device. round_bf16 as in bias_gelu_forward.
    void (*rmsnorm_forward)(Backend *be, float *y, float *rstd, const float *x, const float *w, float eps, int n, int h,
                            int round_bf16);
    void (*rmsnorm_backward)(Backend *be, float *dx, int accumulate, float *dw, const float *dy, const float *x,
                             const float *rstd, const float *w, int n, int h);
    void (*rmsnorm_backward_from_output)(Backend *be, float *dx, int accumulate, float *dw, const float *dy,
                                         const float *y, const float *rstd, const float *w, int n, int h);
    void (*rope_forward)(Backend *be, float *y, const float *x, int ld, const float *cs, int positions, int rows, int b,
                         int heads, int d, int rot, int pos0, int round_bf16);
    void (*rope_backward)(Backend *be, float *dx, const float *dy, int ld, const float *cs, int positions, int rows,
                          int b, int heads, int d, int rot, int pos0);
    void (*swiglu_forward)(Backend *be, float *y, float *gate, float *up, int ld, int n, int f, int round_bf16);
    void (*swiglu_backward)(Backend *be, float *dgate, float *dup, int ldd, float *y, const float *dy, const float *gate,
                            const float *up, int ld, int n, int f, int round_bf16);
    // ---- collectives between ranks on this device's memory (NCCL on CUDA), used by
    // parallel/comm_device.c; NULL where the build has none: ranks then stage through host memory.
    const struct BackendCollectives *collectives;
    // ---- many tensors at once (the optimizer step, the gradient norm and guards): a GPU runs each in
    // a few launches over a device-side table of chunks, not a launch per tensor, and reads its
    // results back once. The CPU loops over its single-tensor kernels.
    // adamw_update on each of count slices with the shared hyper-parameters: the same bits as one
    // adamw_update per slice.
    void (*adamw_update_multi)(Backend *be, const AdamWSlice *slices, int count, float lr, float beta1, float beta2,
                               float eps, float bc1, float bc2, float grad_scale);
    // For each of count ranges x[i][0, n[i]): sumsq[i] = Σ x² in double and nonfinite[i] = how many
    // are ±inf or NaN (either output may be NULL). On the CPU sumsq[i] is sum_squares(x[i], n[i]) to
    // the bit; on a GPU its fixed summation order differs (a relative 1e-12 at most).
    void (*tensor_stats_multi)(Backend *be, const float *const *x, const size_t *n, int count, double *sumsq,
                               size_t *nonfinite);

    // ---- the device's dense peak for MFU/HFU (the run header)
    // FLOP/s of dense GEMMs at this precision (fp32 runs: fp32, or tf32 where the backend's fp32
    // GEMMs use tensor cores; bf16: bf16 with fp32 accumulation) and in `source` what the figure is
    // ("NVIDIA H100 SXM5 datasheet", "unknown device ..."); 0 when the backend does not know it
    // (the CPU: the caller measures its sgemm, util/peak.h).
    double (*peak_flops)(const Backend *be, Precision precision, char *source, size_t sourcelen);

    // ---- the loss read back once per step, not once per cross-entropy (a GPU keeps the sums on the
    // device; model/gpt.h's deferred loss)
    // crossentropy_forward_backward (train 1) or crossentropy_loss (train 0), with the sum of row_loss
    // added to the backend's micro-batch sum instead of returned: the same rows, and the same sum.
    void (*crossentropy_deferred)(Backend *be, float *logits, const int32_t *targets, float *row_loss, int n, int v,
                                  float grad_scale, int train);
    // The step's sum += the micro-batch's (the sum, from 0, of its crossentropy_deferred calls: what a
    // caller adding their returned sums would have); the micro-batch's sum = 0.
    void (*loss_end_microbatch)(Backend *be);
    // The step's sum (the one read-back, which waits for the work before it), and 0 from then on.
    double (*loss_take)(Backend *be);

    // ---- a token embedding stored in bf16 (--base-dtype bf16: the frozen base has no fp32 copy):
    // embedding_vocab_forward with each row of wte16 widened exactly to fp32.
    void (*embedding_vocab_forward16)(Backend *be, float *x, const int32_t *tokens, const uint16_t *wte16, int v0,
                                      int vl, int n, int h);
    // ---- --lora-dropout: backend/cpu/dropout.h's dropout_mask_cols (a column slice of rows [r0, r0+rows) of an
    // [s, b, W] mask)
    void (*dropout_mask_cols)(Backend *be, uint8_t *keep, DropoutSite site, int r0, int rows, int b, int w, int W,
                              int c0, uint32_t sample0);
    // ---- MEMO's token ranges (model/memo.h): flash_attention_forward for query positions [q0, q0+nq)
    // only (keys 0 .. q0+nq−1 read from k, v; ctx rows and lse entries of those positions written). With
    // q0 a multiple of the tile the rows are bitwise the whole call's. NULL where a backend has none.
    void (*flash_attention_forward_rows)(Backend *be, float *ctx, float *lse, const float *q, const float *k,
                                         const float *v, float *scratch, int s, int q0, int nq, int b, int a, int kv,
                                         int h, int window, int head0, DropoutSite site, uint32_t sample0);

    // ---- ops on the arena's bf16 copies (docs/BACKENDS.md, "Ops on the kept bf16 copies"). Where a backend's
    // kernels can read bf16 (the CUDA backend at bf16), the model hands them the arena's bf16 copies of what
    // they read instead of fp32 tensors unpacked from those copies (and, for a GEMM or flash, rounded to the
    // same bits again). Results: bitwise those of the fp32 op on the unpacked values. NULL where a backend has
    // none (at fp32; the CPU backend has those of the llama block, the norms and linear_backward16 at bf16).
    // Flash: q, k, v (and the backward's ctx) in `in`; a member of `in` that is NULL is read from its fp32
    // argument, as flash_attention_forward_rows / flash_attention_backward read it.
    void (*flash_attention_forward16)(Backend *be, float *ctx, float *lse, const FlashIn16 *in, const float *q,
                                      const float *k, const float *v, float *scratch, int s, int q0, int nq, int b,
                                      int a, int kv, int h, int window, int head0, DropoutSite site, uint32_t sample0);
    void (*flash_attention_backward16)(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                       const FlashIn16 *in, const float *q, const float *k, const float *v,
                                       const float *ctx, const float *lse, float *scratch, int s, int b, int a, int kv,
                                       int h, int window, int head0, DropoutSite site, uint32_t sample0);
    // SwiGLU from the copies of gate and up (row stride ld): y16 [n, f] is swiglu_forward's fp32 y (round_bf16
    // 0) rounded to bf16 as a GEMM's packing rounds its input; the backward is swiglu_backward's with y NULL,
    // dgate and dup fp32 (float *), or with grad16 rounded so into bf16 (uint16_t *, row stride ldd elements)
    // for the gate and up GEMMs (linear_backward16).
    void (*swiglu_forward16)(Backend *be, uint16_t *y16, const uint16_t *gate, const uint16_t *up, int ld, int n, int f);
    // The same from fp32 gate and up (row stride ld), writing their bf16 copies gate16, up16 ([n, f]: bf16_pack's
    // bits) as it goes: the kept copies and SwiGLU's output in one pass.
    void (*swiglu_forward_pack16)(Backend *be, uint16_t *y16, uint16_t *gate16, uint16_t *up16, const float *gate,
                                  const float *up, int ld, int n, int f);
    void (*swiglu_backward16)(Backend *be, void *dgate, void *dup, int ldd, int grad16, const float *dy,
                              const uint16_t *gate, const uint16_t *up, int ld, int n, int f);
    // gelu_backward with x the copy of GeLU's input; bias_gelu_forward (round_bf16 1) writing its two outputs
    // only as bf16 copies (x16 = x + bias, y16 = GeLU of it: the bits bf16_pack gives of its fp32 outputs), x
    // left as it was.
    void (*gelu_backward16)(Backend *be, float *dx, const float *dy, const uint16_t *x, size_t count);
    // layernorm_backward and rmsnorm_backward with x the copy of the norm's input.
    void (*layernorm_backward16)(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy,
                                 const uint16_t *x, const float *stats, const float *w, int n, int h);
    void (*rmsnorm_backward16)(Backend *be, float *dx, int accumulate, float *dw, const float *dy, const uint16_t *x,
                               const float *rstd, const float *w, int n, int h);
    void (*bias_gelu_forward16)(Backend *be, uint16_t *y16, uint16_t *x16, const float *x, const float *bias, int n,
                                int cols);
    // The output layer's gradient in bf16: crossentropy_deferred (train) leaving row r's gradient, rounded as a
    // GEMM's packing rounds it, in the first half of the row's own storage (((uint16_t *)logits)[2·v·r + c]),
    // and linear_backward reading dy as such a copy (dy16 [n, out], row stride lddy16; no bias gradient).
    void (*crossentropy_deferred16)(Backend *be, float *logits, const int32_t *targets, float *row_loss, int n, int v,
                                    float grad_scale);
    void (*linear_backward16)(Backend *be, float *dx, int ldx_out, int accumulate, float *dw, const uint16_t *dy16,
                              int lddy16, const float *x, const uint16_t *x16, int ldx, const uint16_t *w16, int n,
                              int in, int out);

    // ---- a training step without host waits (train/run_step.c; docs/PERFORMANCE.md, "Host waits")
    // The device's clock: mark records the device's time when it gets there in stream order (a CUDA event;
    // the CPU: the monotonic clock at the call) and returns its index, 0, 1, ... since marks_reset;
    // mark_seconds is the seconds from mark `from` to mark `to`, read after a wait for the device that
    // followed both (a GPU waits for `to` first where the caller read too early).
    int (*mark)(Backend *be);
    double (*mark_seconds)(Backend *be, int from, int to);
    void (*marks_reset)(Backend *be);
    // copy COPY_H2D in stream order without a wait: src is host_alloc memory that the caller leaves
    // unchanged until its next wait for the device (a read-back). The CPU: copy.
    void (*copy_enqueue)(Backend *be, void *dst, const void *src, size_t bytes);
    // The step's guard and clipping, kept on the device: Σ g² over g[0, n) (sum_squares' bits), and from
    // it and the step's loss sum (loss_take's), the clipping factor backend_clip_scale(√Σ, max_norm) and
    // whether the step is skipped (the loss sum or √Σ not finite).
    void (*step_guard)(Backend *be, const float *g, size_t n, float max_norm);
    // adamw_update_multi with grad_scale the last step_guard's factor; nothing at all when it skips.
    void (*adamw_update_guarded)(Backend *be, const AdamWSlice *slices, int count, float lr, float beta1, float beta2,
                                 float eps, float bc1, float bc2);
    // The step's one read-back (it waits for all work before it): the step's loss sum (then 0, as
    // loss_take does) and the last step_guard's Σ g².
    void (*step_take)(Backend *be, double *loss_sum, double *sumsq);
};

// A device's own collective library. Each call returns 0 or a code that error_string names; sizes
// in floats; a communicator spans the `size` ranks that share one id (rank 0 draws it, the others
// receive its id_bytes over MPI). Collectives are enqueued on the backend's compute stream, so they
// are ordered with its kernels and copies; in place as comm.h's contracts say.
typedef struct BackendCollectives {
    const char *name;     // "nccl"
    size_t id_bytes;
    int (*new_id)(void *id);
    int (*comm_open)(Backend *be, void **comm, int size, int rank, const void *id);
    int (*comm_close)(void *comm);
    int (*allreduce_sum)(Backend *be, void *comm, const float *send, float *recv, size_t n);
    int (*allgather)(Backend *be, void *comm, const float *send, float *recv, size_t chunk);
    int (*reduce_scatter_sum)(Backend *be, void *comm, const float *send, float *recv, size_t chunk);
    int (*broadcast)(Backend *be, void *comm, float *buf, size_t n, int root);
    const char *(*error_string)(int code);
} BackendCollectives;

// "cpu" (any precision); "cuda" / "cuda:N" where the CUDA backend is built and a GPU is visible. NULL
// with err when the name is unknown, no such device is there, or the precision cannot run on it.
Backend *backend_open(const char *name, Precision precision, char *err, size_t errlen);
void backend_close(Backend *be);
// The gradient clipping factor: max_norm / (norm + 1e-6) when norm > max_norm, else 1 (max_norm <= 0:
// off; a NaN norm: 1). A GPU's step_guard computes the same expression on the device.
float backend_clip_scale(double norm, float max_norm);
// CTRON_BF16_COPIES: 1 (or unset) when a backend's kernels at bf16 read and write the arena's bf16 copies as they are
// (the ops above on the copies), 0 when they get the fp32 values unpacked from them (the same bits, for comparison);
// -1 with err naming the value for anything else.
int backend_bf16_copies(char *err, size_t errlen);
// 1 when this build has the CUDA backend.
int backend_has_cuda(void);
// The CPU backend's attention_scratch_floats for a run of `threads` OpenMP threads (its op gives this
// for omp_get_max_threads()): what the planner asks when no device is open yet.
size_t backend_cpu_attention_scratch_floats(AttnScratchKind kind, int s, int b, int a, int kv, int h, int threads);
#endif
