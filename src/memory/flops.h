// Work accounting (the paper's Appendix A, DESIGN.md §5).
#ifndef CTRON_FLOPS_H
#define CTRON_FLOPS_H
#include "arch/lora.h"
#include "memory/memory_model.h"
#include "model/policy.h"

// Model FLOPs of one step, Eq. 7: 72·B·L·s·h²·(1 + s/(6h) + v/(12hL)), B = sequences per step.
double flops_model(double B, double L, double s, double h, double v);
// Hardware FLOPs: what the policy recomputes on top. A selective layer counts Eq. 8 as printed,
// 72·B·s·h²·(1 + s/(3h)); a full-recompute layer one more forward, its Eq. 7 part × 4/3; the output
// layer is never recomputed. policy NULL: no recomputation (= model FLOPs). ctron_full: count what
// ctron's full recompute runs — the last layer of each recomputed group skips its FC2 (8·B·s·h²),
// whose output backward never reads — instead of the paper's whole extra forward.
double flops_hardware(double B, double s, double h, double v, const MemoryPolicy *policy, int layers, int ctron_full);
// What one layer recomputes, per B sequences: selective, the attention core (Eq. 8 − Eq. 7:
// 12·B·s²·h); full, one more forward of the layer (24·B·s·h²·(1 + s/(6h))), less its FC2
// (8·B·s·h²) when it is the last layer of its group and ctron_full.
double flops_recompute_selective(double B, double s, double h);
double flops_recompute_full(double B, double s, double h, int skip_fc2);

// Any family's block (DESIGN.md §10): kv_width = kv·d (h for MHA), ffn the MLP's width, mlp_mats its
// input matrices (GeLU 1, SwiGLU's gate and up 2). Per sequence, one layer's forward is
// 2sh(h + 2·kv_width) (q, k, v) + 2sh² (o) + 4s²h (the core) + 2sh·ffn·(mlp_mats + 1); training is 3×
// and the output layer adds 6shv. For GPT-2's shape (kv_width = h, ffn = 4h, 1 matrix) these are the
// paper's closed forms above, which they return exactly. A sliding window W < s counts the core over the
// W keys of each query, 4sWh, as the paper counts it over all s (dense, not causal, in both).
typedef struct {
    double kv_width, ffn;
    int mlp_mats;
    double q_width;   // a·d, the width of q and of the attention's output (0: h)
    double window;    // keys per query under a sliding window (0: all s)
} FlopBlock;
double flops_model_block(double B, double L, double s, double h, double v, const FlopBlock *blk);
double flops_hardware_block(double B, double s, double h, double v, const MemoryPolicy *policy, int layers,
                            int ctron_full, const FlopBlock *blk);
// One layer's forward, per sequence (the sum above).
double flops_layer_forward_block(double s, double h, const FlopBlock *blk);
// What a memo layer recomputes (model/memo.h), per B sequences: positions [r, s) of its forward but the
// down projection, r = frac·s: (1 − frac) of the linear work and (1 − frac²) of the causal core.
double flops_recompute_memo_block(double B, double s, double h, double frac, const FlopBlock *blk);
// The block of an analytic-model shape (kv·d, its FFN width, SwiGLU's two input matrices).
FlopBlock flops_block_of(const ActShape *sh);
// A selective layer's attention core again, per B sequences: Eq. 8 − Eq. 7 at the block's q width, over
// each query's keys (W of a sliding window, else s). flops_recompute_selective for GPT-2's shape.
double flops_recompute_selective_block(double B, double s, double h, const FlopBlock *blk);
// One layer's full recompute, per B sequences: one more forward, less the down projection (FC2) when
// skip_down (the last layer of a group: backward never reads its output). flops_recompute_full for
// GPT-2's shape.
double flops_recompute_full_block(double B, double s, double h, int skip_down, const FlopBlock *blk);
// LoRA's change to a step's model FLOPs (B sequences, the shape's s, h, L, v and lora_*; widths of the
// whole model, t ignored): the frozen base runs no weight-gradient GEMM (its linears' and the output
// layer's, 2·B·s per weight), and each adapted site adds its forward (2·B·s·r·(in + out)) and backward
// (dv, dB, dx: 2·B·s·r·(2·out + in); dA without LoRA-FA: 2·B·s·r·in). Layer 0 computes no dL/dx through
// its q, k and v GEMMs nor their adapters (the frozen embedding reads none). 0 without LoRA.
double flops_lora_delta(const ActShape *sh, double B);
// A LoRA site's width w (arch/lora.h) on a tensor-parallel rank of t (1: the whole model's): h is never split
// (a column-parallel site reads all of x, a row-parallel one's B holds all h rows); the query, k/v and FFN
// widths are the rank's 1/t, as model/adapters.c holds A and B.
long flops_lora_width(const ActShape *sh, LoraWidth w, long t);
// One layer's adapters on one TP rank (the shape's t), per B sequences (rows = B·s), in and out each site's
// widths on the rank: the forward's x·Aᵀ and v·Bᵀ, 2·rows·r·(in + out); the backward's dB, dv = dy·B and
// dx += du·A, 2·rows·r·(2·out + in), and A's gradient duᵀ·x, 2·rows·r·in, but under LoRA-FA. {0, 0} without
// LoRA.
typedef struct { double fwd, bwd; } FlopPair;
FlopPair flops_lora_layer(const ActShape *sh, double B);
#endif
