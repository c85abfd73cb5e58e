// The names under which saved activations are counted (DESIGN.md §2).
#ifndef CTRON_ACT_NAMES_H
#define CTRON_ACT_NAMES_H

typedef enum {
    // per layer, the paper's table
    ACT_LN1_IN, ACT_QKV_IN, ACT_Q, ACT_K, ACT_ATTN_PROB, ACT_ATTN_MASK, ACT_ATTN_DROP, ACT_V, ACT_PROJ_IN,
    ACT_DROP1_MASK, ACT_LN2_IN, ACT_FC1_IN, ACT_GELU_IN, ACT_FC2_IN, ACT_DROP2_MASK,
    ACT_N_CORE,
    // per-layer extras: LayerNorm statistics; Tempo's GeLU branch bits (kept instead of gelu_in)
    // and Few-Bit's k-bit GeLU codes (kept instead of gelu_in)
    // and flash attention's log-sum-exp per query row (kept instead of the s×s tensors)
    // and the SwiGLU MLP's two inputs (llama: kept instead of gelu_in and fc2_in, whose place they take;
    // SwiGLU's backward recomputes its output, the down projection's input, from them)
    ACT_LN1_STATS = ACT_N_CORE, ACT_LN2_STATS, ACT_GELU_BRANCH, ACT_GELU_CODE, ACT_ATTN_LSE, ACT_GATE, ACT_UP,
    // the per-head q/k norms (Qwen3): q and k as their projections made them (the norms' inputs, [s·b, a·d/t] and
    // [s·b, kv·d/t]), kept in place of q and k, and 1/rms per row and head ([s·b, a/t], [s·b, kv/t]), which backward
    // makes again with q and k (QK_NORM_REBUILD, model/policy.h) as the norms' backward reads them
    ACT_Q_NORM_IN, ACT_K_NORM_IN, ACT_Q_NORM_STATS, ACT_K_NORM_STATS,
    // LoRA: x·Aᵀ·(α/r) of each adapted linear ([s·b, r], arch/lora.h's LoraSite order): B's gradient
    // reads it (so does A's through dY·B). Not offloadable (the offload mask has 32 bits).
    ACT_LORA_Q, ACT_LORA_K, ACT_LORA_V, ACT_LORA_O, ACT_LORA_GATE, ACT_LORA_UP, ACT_LORA_DOWN,
    ACT_LORA_QKV, ACT_LORA_PROJ, ACT_LORA_FC, ACT_LORA_FC2, ACT_LORA_GATE_UP,
    ACT_N_LAYER,
    // the model-level tensors
    // (with --mini-seq the output layer runs in chunks and keeps only dL/d lm_in: lm_grad)
    ACT_EMB_MASK = ACT_N_LAYER, ACT_LNF_IN, ACT_LNF_STATS, ACT_LM_IN, ACT_LOGITS, ACT_LM_GRAD,
    // with --offload: the two layer slots where offloaded tensors are written and fetched back
    ACT_OFFLOAD_STAGE,
    // reversible blocks: the two residual streams (fp32), the last block's outputs, inverted in place in backward
    ACT_REV_X1, ACT_REV_X2,
    // MEMO (--memo): the two layer slots where the swapped token slices are written and fetched back
    ACT_MEMO_STAGE,
    ACT_COUNT
} ActName;

const char *act_name_str(ActName n);
static inline int act_is_lora(ActName n) { return n >= ACT_LORA_Q && n <= ACT_LORA_GATE_UP; }
// Per-layer names the offload pool (a 32-bit mask) can take: all but the adapters' x·Aᵀ.
enum { ACT_N_OFFLOADABLE = ACT_LORA_Q };
static inline int act_is_core(ActName n) { return n < ACT_N_CORE; }
static inline int act_is_mask(ActName n) {
    return n == ACT_ATTN_MASK || n == ACT_DROP1_MASK || n == ACT_DROP2_MASK || n == ACT_EMB_MASK;
}
// What the q/k/v projections make (the fusion search's RECOMPUTE_QKV_OUT part makes them all again): q, k, v, and
// with per-head q/k norms their inputs and statistics.
static inline int act_is_qkv_out(ActName n) {
    return n == ACT_Q || n == ACT_K || n == ACT_V || (n >= ACT_Q_NORM_IN && n <= ACT_K_NORM_STATS);
}
// Kept as bits whatever the mask mode: Tempo's GeLU branch (1 per element), Few-Bit codes (k).
static inline int act_is_bits(ActName n) { return n == ACT_GELU_BRANCH || n == ACT_GELU_CODE; }
// Norm statistics (LayerNorm: mean and 1/std per row; RMSNorm: 1/rms) and logits are always fp32, whatever act_dtype is.
static inline int act_is_fp32_always(ActName n) {
    return n == ACT_LN1_STATS || n == ACT_LN2_STATS || n == ACT_LNF_STATS || n == ACT_Q_NORM_STATS ||
           n == ACT_K_NORM_STATS || n == ACT_LOGITS || n == ACT_LM_GRAD || n == ACT_ATTN_LSE || n == ACT_REV_X1 ||
           n == ACT_REV_X2;
}
#endif
