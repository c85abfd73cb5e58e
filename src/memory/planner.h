// The memory-budget planner (`ctron plan`, `ctron train --mem-budget`): among the recompute
// policies per layer (Megatron's none / selective / full), the dropout-mask storage and Tempo's
// parts, the combination with the fewest recompute FLOPs that keeps the step's activation peak
// (the arena, as the analytic model predicts it, entry alignment included) within a budget; ties
// go to the plan with the fewest extra element-wise passes. Mini-seq (PLAN_MINI_SEQ chunks) is one
// more option: it recomputes FC1 in backward (8·B·s·h² per layer) and keeps no MLP intermediates
// and no logits. Flash attention is another: it recomputes the attention scores in backward (counted
// as selective's) and keeps a log-sum-exp; its gain is the attention scratch, which the budget
// counts with the activations (at long sequences selective's 3s² floats per thread do not fit). Few-Bit GeLU changes the gradient and
// is never chosen. Offload (given a pool budget) keeps the named tensors of every layer off the
// device but for two stage slots; it costs traffic, not FLOPs. Layers are alike, so a plan is: layers 0..F−1 full (each its own group; they
// are recomputed last, when the fewest layers are held), the next S selective, the rest none.
#ifndef CTRON_PLANNER_H
#define CTRON_PLANNER_H
#include <stddef.h>
#include "backend/backend.h"
#include "memory/memory_model.h"
#include "model/policy.h"

#define PLAN_MINI_SEQ 4

typedef struct MemPlan {
    int n_full, n_sel;
    MaskMode masks;
    unsigned tempo;         // TEMPO_* parts, and MINI_SEQ when the MLP and output layer run in chunks
    size_t act_peak;        // predicted bytes at the step's peak (the ledger's figure)
    size_t arena_bytes;     // what the arena needs for it: the peak plus each entry's alignment
    size_t scratch_bytes;   // the attention backward's per-thread scratch, all threads (s² floats per
                            // thread for the standard kernel, ~3s² with selective recompute, O(tile²)
                            // with flash attention): outside the arena, inside the budget
    double extra_flops;     // recompute FLOPs per micro-batch per rank, on top of the model's
    double model_flops;     // the model's FLOPs per micro-batch per rank (Eq. 7 / t)
    int passes;             // element-wise extras: mask bits 1, regenerated masks 2, Tempo parts 1 + gelu 2
    unsigned offload;       // per-layer tensors kept in the offload pool (--offload), 0: none
    size_t pool_bytes;      // the offload pool's bytes (moved out, and mostly back, each micro-batch)
    // Mixed precision's bytes outside the ledger (0 under fp32):
    size_t gemm_scratch_bytes;  // the backend's bf16 operand scratch (plan_gemm_scratch_bytes): a temporary
                                // whose size the plan sets (mini-seq, flash), inside the budget
    size_t weight_copy_bytes;   // the bf16 weight copy, 2 bytes per parameter of the rank: the same for
                                // every plan, so outside the budget (beside the fp32 weights), printed
} MemPlan;

// sh: the shape and layout (s, b, h, a, L, v, e, dropout, t, sp; masks are chosen here); threads:
// the OpenMP threads the run uses; offload_budget: bytes the offload pool may take (0: no offload;
// offload moves no FLOPs, so within it the planner prefers it to recompute and, among offload sets,
// the least traffic: the largest tensors first). Returns 0 with the best plan whose arena_bytes +
// scratch_bytes <= budget, or -1 with *out the plan of least memory.
int plan_memory(const ActShape *sh, int threads, double budget, double offload_budget, MemPlan *out);
// The same at a compute precision: under bf16 the budget also holds gemm_scratch_bytes (arena_bytes +
// scratch_bytes + gemm_scratch_bytes <= budget) and weight_copy_bytes is filled in. be: the backend
// the run will use, which sizes the attention scratch (plan_attention_scratch_bytes); NULL: the CPU
// backend with `threads` threads. plan_memory is fp32 on the CPU backend.
int plan_memory_precision(const ActShape *sh, Precision precision, Backend *be, int threads, double budget,
                          double offload_budget, MemPlan *out);
// What the CPU backend's bf16 operand scratch holds after one training step (forward, backward,
// evaluation forward) of this shape under mixed precision (activations kept in bf16, as the CLI
// demands): Backend.scratch_bytes. Two slots that grow to the largest request. Slot 0: a GEMM input
// the arena holds no bf16 copy of, converted (the evaluation forward's x [n, in]; SwiGLU's output,
// the down projection's input) and every backward's dy [n, out] (q, k and v one at a time): n = s·b
// rows, or ⌈s·b/M⌉ for mini-seq's chunked MLP and output layer. Slot 1: a backward's x that is not
// the kept bf16 copy (SP's gathered inputs, mini-seq's chunks, SwiGLU's output made again for the
// down projection: n·f/t) and, unless flash, attention's per-thread bf16 operands,
// threads·(s·max(s, d) + s·d).
// tempo: the plan's (ATTN_FLASH counts); sh->mini_seq > 1: chunks. 0 under fp32 (no conversion).
size_t plan_gemm_scratch_bytes(const ActShape *sh, Precision precision, unsigned tempo, int threads);
// The attention scratch in bytes, as gpt_init allocates it, sized by the backend's own
// attention_scratch_floats for the rank's heads (a/t) and width (h/t): flash's tiles (tempo's
// ATTN_FLASH bit), else the stored-probability backward's (Tempo's softmax form with TEMPO_SOFTMAX),
// or once any layer is selective the larger of it and the selective recompute's. be NULL: the CPU
// backend's sizes for `threads` OpenMP threads (planning with no device open: ctron plan, the tests).
size_t plan_attention_scratch_bytes(Backend *be, const ActShape *sh, int threads, unsigned tempo, int any_selective);
// Parameters on one rank (its shards and the replicated tensors), as gpt_init_tp lays them out.
size_t plan_rank_params(const ActShape *sh);
// The plan as a MemoryPolicy (act_dtype from e; free with policy_free) and as ctron train flags.
void plan_policy(const MemPlan *p, const ActShape *sh, MemoryPolicy *pol);
void plan_flags(const MemPlan *p, int layers, char *buf, size_t len);
// "6GiB", "512MiB", "1.5G", "2e9" (bytes): returns 0, or -1 when it is not a positive size up to 2^60.
int parse_bytes(const char *text, double *out);
// The largest size parse_bytes accepts: 2^60 bytes (1 EiB); above it a size means nothing here.
#define PARSE_BYTES_MAX 1152921504606846976.0
#endif
