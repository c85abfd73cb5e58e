// The fusion-aware recompute search's parts (model/policy.h RECOMPUTE_NORM_OUT, _ACT_OUT, _ATTN_OUT, _QKV_OUT,
// _FC1_OUT, _PROJ_OUT, and the masks' _ATTN_MASK, _DROP1_MASK, _DROP2_MASK): a tensor the policy does not keep, made again in backward by the forward's own
// kernels (the same GEMM calls, the same shapes) from its kept inputs, rounded as storage would have
// rounded it, so whatever reads it is bitwise the kept run's. Recomputed into the tensor's workspace slot
// (where the forward wrote it when not kept), at most once per layer, and read back from there until the
// layer's backward ends: no activation memory, nothing for the ledger.
#ifndef CTRON_REMAT_H
#define CTRON_REMAT_H
#include "model/gpt.h"

// Does the policy make `name` again in backward instead of keeping it (qkv_in and fc1_in under
// NORM_OUT, fc2_in under ACT_OUT, proj_in under ATTN_OUT, q, k, v under QKV_OUT, gelu_in, fc2_in, gate
// and up under FC1_OUT, ln2_in under PROJ_OUT, a dropout mask under its own part)?
int remat_makes(const GPT *m, ActName name);
// Layer l's `name` again, fp32 on the rank's rows ([s_rank·b, h] for the norms' outputs, [s·b, f/t]
// for GeLU's output, [s·b, h/t] for the attention's): Norm(ln_in) with the layer's weights, GeLU(gelu_in),
// or the attention of the kept q, k, v; q, k, v from qkv_in; the MLP's inner tensors from fc1_in; ln2_in
// from proj_in, ln1_in and the mask. A GEMM part runs once per layer (all its outputs at once), when
// remat_half asks.
const float *remat_tensor(GPT *m, int l, ActName name);
// Layer l's `name` for its backward: made again (remat_tensor) or the kept one (saved_in, n elements).
const float *remat_in(GPT *m, int l, ActName name, size_t n);
// The bf16 copy of layer l's `name` for a backward kernel that reads copies (backend.h's *16 ops): the kept
// one when it is stored in bf16, not made again; else NULL (read remat_in's fp32).
const uint16_t *remat_copy16(GPT *m, int l, ActName name);
// Flash's operands on a backend whose flash multiplies bf16 (backend.h's flash_attention_*16): remat_copy16's.
const uint16_t *remat_flash16(GPT *m, int l, ActName name);
// Layer l's dropout mask `name` (n elements) for its backward: drawn again under its mask part
// (RECOMPUTE_ATTN_MASK, _DROP1_MASK, _DROP2_MASK: once per layer, into its workspace slot, read back from there
// until the layer's backward ends), else mask_in's (kept, or regenerated under --dropout-masks regen).
const uint8_t *remat_mask_in(GPT *m, int l, ActName name, size_t n);
// At the start of a half's backward (mlp: the MLP's, else the attention's): the GEMM part's tensors of that
// half made again (PROJ_OUT: ln2_in, then FC1_OUT: FC1 and GeLU, or gate and up; QKV_OUT: q, k, v), while
// W_OUT and SP's gather buffer are free.
void remat_half(GPT *m, int l, int mlp);
// RECOMPUTE_ATTN_OUT: layer l's attention forward made again (once per backward of the layer: proj_in
// for Proj's weight gradient, the probabilities for the standard attention backward; under flash O and
// the log-sum-exp, which remat_tensor returns, for flash's backward); returns the
// workspace copy of name: ACT_ATTN_PROB, ACT_ATTN_MASK (uint8_t) or ACT_ATTN_DROP.
void *remat_probs(GPT *m, int l, ActName name);
// gpt_init's check: the parts refuse what reads their tensors outside a weight gradient (Tempo's
// norm-from-output and GeLU inversion, mini-seq's chunked MLP) and what drops their inputs (Few-Bit).
void remat_check(const MemoryPolicy *p);
#endif
