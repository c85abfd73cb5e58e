// MEMO's token-wise swapping and recomputation (Zhao et al. 2024; model/memo.h) in the analytic model: a
// memo layer keeps its input (ln1_in) on the device; of every other tensor a none-policy layer keeps
// (the s×s attention tensors excepted: a memo layer recomputes its attention core in backward, from
// q, k, v, or with flash from them and the log-sum-exp), the slice of the first r positions goes to
// the host pool and the remaining positions are recomputed in backward over their range only. Dropout
// masks are never swapped: they are drawn again from their Philox key for every position.
#ifndef CTRON_MEMO_MODEL_H
#define CTRON_MEMO_MODEL_H
#include <stddef.h>
#include "memory/memory_model.h"

// Token ranges are whole flash tiles, so the recomputed range's attention runs the very tiles of a
// whole-sequence call.
#define MEMO_TILE 64

// Positions of s whose tensors a memo layer swaps: α·s rounded down to a multiple of MEMO_TILE (all s
// when α = 1).
long memo_swap_positions(long s, double alpha);
// Positions layer l swaps: memo_swap_positions of its α (0 unless l is a memo layer).
long memo_layer_positions(const ActShape *sh, const MemoryPolicy *p, int l);
// Does a memo layer swap (first positions) and recompute (the rest) `name`?
int memo_swaps(const ActShape *sh, unsigned tempo, ActName name);
// Bytes of layer l's swapped slice of `name` (0 unless l is a memo layer and memo_swaps(name)); all of
// them; the slice region (each 64-byte aligned: the layout of a stage slot and of the pool).
size_t act_memo_swap_name_bytes(const ActShape *sh, const MemoryPolicy *p, int l, ActName name);
size_t act_memo_swap_bytes(const ActShape *sh, const MemoryPolicy *p, int l);
size_t act_memo_span(const ActShape *sh, const MemoryPolicy *p, int l);
// memo_stage: two slots, each of the largest span among its layers (the swapping layers alternate between
// them: one slot when a single layer swaps), an arena entry at the bottom.
size_t act_memo_stage_bytes(const ActShape *sh, const MemoryPolicy *p);
// The host pool: every memo layer's swapped slices.
size_t act_memo_pool_bytes(const ActShape *sh, const MemoryPolicy *p);
// What a memo layer's backward holds on top of its kept input: each swapped/recomputed tensor whole
// (every position) and the dropout masks the mask mode keeps (0 for other layers).
size_t act_memo_working_bytes(const ActShape *sh, const MemoryPolicy *p, int l);
int policy_has_memo(const MemoryPolicy *p);

// The step-time model of a memo layer (per micro-batch, per layer, per TP rank): the base's forward takes
// fwd_s, of which attn_s is the causal attention core and down_s the down projection (FC2); its backward
// 2·fwd_s (dX and dW of every linear, attention's backward twice its forward), less frozen_s under LoRA,
// whose frozen base runs no weight-gradient GEMM (frozen_s = fwd_s − attn_s: its backward is the dX GEMMs
// and attention's, fwd_s + attn_s). The adapters add their own GEMMs: lora_fwd_s to the forward (x·Aᵀ, v·Bᵀ),
// lora_bwd_s to the backward (dB, dv = dy·B, dx += du·A; dA but under LoRA-FA). The host link moves link_bps
// bytes/s each way, overlapped with compute.
// Recomputing positions [r, s) costs (1 − r/s) of the layer's linear work but the down projection
// (backward never reads the block's output) and (1 − (r/s)²) of its causal attention (query i reads i
// keys), plus (1 − r/s) of lora_s, the adapters' v·Bᵀ the recompute adds again (memo_recompute_lora_flops),
// and under TP (1 − r/s) of the repeated collectives' tp_bytes at tp_link_bps (tp_s; none without a rate).
// A swap that takes longer than the compute it hides under (the next layer's forward; the previous
// layer's backward, recompute and repeated collectives) stalls the step. At α = 0 this is full
// recompute's layer. Without LoRA the three adapter terms are 0 and every time is bit for bit the
// 3·fwd_s model's.
typedef struct {
    double fwd_s, attn_s, down_s;   // seconds: the base's forward of one layer, its attention core, its down projection
    double swap_bytes;      // the layer's swappable bytes at α = 1 (all positions)
    double link_bps;        // host-link bytes per second (one direction)
    double lora_s;          // seconds: the adapters' GEMMs a recompute of every position repeats (0: no LoRA)
    double tp_bytes;        // one rank's ring bytes of the collectives a recompute of every position repeats (0: t = 1)
    double tp_link_bps;     // the TP link's bytes per second (0: not given; the collectives are then not priced)
    double lora_fwd_s;      // seconds: the adapters' forward GEMMs, x·Aᵀ and v·Bᵀ (0: no LoRA)
    double lora_bwd_s;      // seconds: the adapters' backward GEMMs, dB, dv, dx and (LoRA) dA (0: no LoRA)
    double frozen_s;        // seconds: the weight-gradient GEMMs the frozen base skips in backward (0: no LoRA)
} MemoLayerCost;
typedef struct {
    double forward_s;       // per layer: the forward, the adapters' included (fwd_s + lora_fwd_s)
    double backward_s;      // per layer: the backward (2·fwd_s − frozen_s + lora_bwd_s)
    double recompute_s;     // per layer: the recomputed range's forward (its adapters' GEMMs included)
    double tp_s;            // per layer: the collectives the recomputed range repeats, on the TP link
    double transfer_s;      // per layer: the swapped slice, one way
    double stall_s;         // per layer: the transfer not hidden under compute (forward + backward)
    double layer_s;         // per layer: forward + backward + recompute + tp + stall
} MemoTime;
MemoTime memo_layer_time(const MemoLayerCost *c, double frac_swapped);
// A layer's cost on a machine of gemm_flops FLOP/s (every op at that rate: GEMMs, the adapters' (memory/flops.h's
// flops_lora_layer) and the causal attention core at half the 4·s²·h of Eq. 7), link_bps and, under TP,
// tp_link_bps, for the memo layers of policy p.
MemoLayerCost memo_layer_cost(const ActShape *sh, const MemoryPolicy *p, double gemm_flops, double link_bps,
                              double tp_link_bps);
// What the recompute of `positions` positions of a memo layer repeats on one rank (model/memo.c's
// recompute_rows: layer_rows over [r, s) without the block's output and with the kept v of each adapter):
// the TP bytes (comm.h's ring count) of the attention projection's all-reduce over those rows ([rows, h]
// fp32; the down projection and its all-reduce, and a row-parallel adapter's x·Aᵀ all-reduce, are not redone;
// 0 at t = 1), and the FLOPs of the adapters' v·Bᵀ, 2·rows·r·out per adapted site but the down
// projection's (out: the rank's rows of B; x·Aᵀ is not redone: v is kept whole).
double memo_recompute_tp_bytes(const ActShape *sh, long positions);
double memo_recompute_lora_flops(const ActShape *sh, long positions);
#endif
