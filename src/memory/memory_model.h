// The analytic activation model (the paper's §4, generalised; DESIGN.md §2): the bytes each saved
// tensor takes, which tensors each recompute policy keeps, the bill per layer, and the peak of a
// training step including what backward recomputes. The ledger must measure exactly this.
#ifndef CTRON_MEMORY_MODEL_H
#define CTRON_MEMORY_MODEL_H
#include <stddef.h>
#include "arch/arch.h"
#include "memory/act_names.h"
#include "model/policy.h"

typedef struct {
    long s, b, h, a, L, v;
    int elem_bytes;    // e: bytes per stored activation element (4 fp32, 2 bf16)
    MaskMode masks;    // bytes: 1 byte per element; bits: 1 bit (⌈n/8⌉ bytes per tensor); regen: none
    int dropout;       // 0 when p = 0: no masks and no dropped copy are kept
    int t;             // tensor-parallel size (1: none); per-rank shards follow DESIGN.md §2
    int sp;            // sequence parallelism on
    int gelu_bits;     // k of Few-Bit GeLU codes (0: none kept)
    int mini_seq;      // chunks of the Mini-Sequence MLP and output layer (0: off)
    // The family's block (arch/arch.h); 0 for each is GPT-2's.
    long kv;           // k and v heads (grouped-query attention; 0: a)
    long head_dim;     // each head's width d (0: h/a); q and the attention output are a·d wide
    long ffn;          // the MLP's inner width (0: 4h)
    int rms_norm;      // RMSNorm: one statistic per row (1/rms) instead of LayerNorm's two
    int swiglu;        // the MLP keeps gate and up (no gelu_in, no fc2_in: SwiGLU's backward recomputes it)
    // The parameter side (memory/param_count.h); 0 for each is GPT-2's.
    int arch;          // ArchKind: the family's row says which linears and norms have biases, which positions
    int untied;        // the output layer is a matrix of its own (lm_head), not the token embedding
    int qkv_bias;      // q, k and v have biases where the family's linears have none (Qwen2)
    int qk_norm;       // q and k RMS-normalised per head before RoPE (Qwen3): their inputs and 1/rms kept too
    int fused_proj;    // q|k|v one qkv_proj, gate|up one gate_up_proj (Phi-3): LoRA adapts them so (set after
                       // act_shape_set_family, which leaves it as it was)
    // LoRA (arch/lora.h): rank r > 0 freezes the base; each site of lora_sites keeps x·Aᵀ [s·b, r] (not
    // divided by t: every TP rank holds all rows). The frozen embedding and output layer need neither
    // the embedding's dropout mask nor the output layer's input in backward.
    int lora_rank;
    unsigned lora_sites;
    int base_bf16;     // LoRA with --base-dtype bf16: the frozen base's weights are 2 B per element (no activation term)
    int lora_fa;       // LoRA-FA: A frozen too; a site keeps x·Aᵀ only (not its input for A's gradient)
    int reversible;    // two residual streams (model/reversible.h): rev_x1, rev_x2 kept; layers inverted in backward
    long window;       // sliding window W (llama): each query's core runs over W keys, not s (FLOPs and flash's
                       // time only: no saved tensor changes; 0: the whole causal prefix)
    long first_layer;  // the model's index of this shape's layer 0: > 0 for a later pipeline stage planned alone
                       // (the cluster planner), whose first layer has an input gradient under LoRA
} ActShape;

// A head's width d (h/a unless head_dim says otherwise), the q width a·d and the k/v width kv·d.
static inline long act_head_dim(const ActShape *sh) { return sh->head_dim > 0 ? sh->head_dim : sh->h / sh->a; }
static inline long act_q_width(const ActShape *sh) { return sh->a * act_head_dim(sh); }
static inline long act_kv_width(const ActShape *sh) { return (sh->kv > 0 ? sh->kv : sh->a) * act_head_dim(sh); }

// Fills the family's part of a shape from its row of arch/arch.h and the knobs: kv heads (0: a), the
// FFN width (0: the family's default), tie (1: tied, -1: untied, 0: the family's default) and the
// qkv bias and the per-head q/k norm. The one place a memory-side shape learns its family (gpt_shape_family is model/'s).
void act_shape_set_family(ActShape *sh, ArchKind arch, long kv, long ffn, int tie, int qkv_bias, int qk_norm);
// Does the block have what a Tempo/Few-Bit option replaces? Tempo's GeLU and Few-Bit's codes are the
// GeLU MLP's (SwiGLU has neither: ctron train refuses them for llama). Mini-seq chunks either MLP.
int act_tempo_applies(const ActShape *sh, unsigned tempo);

// The policy bits the model sets on a layer's kept tensors: LoRA's (LORA_FROZEN, LORA_FA, the sites <<
// LORA_TARGET_SHIFT; model/policy.h) from the shape's lora_rank, lora_sites and lora_fa, and QK_NORM_REBUILD
// with per-head q/k norms; 0 for neither. The planners add them to every tempo they try: what the family and
// the adapters keep is the run's, not a choice.
unsigned act_keep_bits(const ActShape *sh);

// Does the family's block have `name` at all (GPT-2 never keeps gate/up, llama never gelu_in/fc2_in
// or GeLU bits)? Reports list only these.
int act_in_block(const ActShape *sh, ActName name);
// Elements of one tensor on one rank (0 when the configuration never has it).
size_t act_elements(const ActShape *sh, ActName name);
// Bytes one tensor takes when it is kept.
size_t act_tensor_bytes(const ActShape *sh, ActName name);
// Does a layer under this policy keep `name` through the forward? (group_start: the layer's input
// is a full-recompute checkpoint; tempo: the TEMPO_* bits of the policy)
int act_kept(LayerRecompute kind, int group_start, unsigned tempo, ActName name);
// The model's layer 0 under a frozen embedding (LoRA; not reversible blocks): nothing reads dL/d(its input), so its
// backward skips its first norm's backward and the q, k and v GEMMs' dL/dx (the adapters' too).
int act_input_grad_dead(const ActShape *sh, int l);
// Does layer l keep `name` through the forward? act_kept for its kind, except that a layer whose input
// gradient is dead keeps no first-norm input and statistics where only that norm's backward would read
// them: a none or selective layer without the fusion search's NORM_OUT (qkv_in made again from them; QKV_OUT
// too where qkv_in is not kept) or PROJ_OUT (ln2_in made again from ln1_in) parts. A full group's checkpoint
// and a MEMO layer's input stay.
int act_kept_layer(const ActShape *sh, const MemoryPolicy *p, int l, ActName name);
// What a full group's recompute pass keeps of layer l for its backward: a none layer's tensors, less the
// same dead first-norm tensors (and Tempo's norm's qkv_in, where no adapter reads it).
int act_kept_rebuilt(const ActShape *sh, unsigned tempo, int l, ActName name);
// The fusion search's part that regenerates the dropout mask `name` alone (RECOMPUTE_ATTN_MASK,
// RECOMPUTE_DROP1_MASK, RECOMPUTE_DROP2_MASK; model/policy.h); 0 for any other name.
unsigned act_mask_part(ActName name);

// Is `name` one of the per-layer tensors the policy sends to the offload pool (--offload)?
static inline int act_offloaded(const MemoryPolicy *p, ActName name) {
    return p && (int)name < (int)ACT_N_OFFLOADABLE && (p->offload >> name & 1u);
}

// Bytes layer l keeps in the arena from its forward to its backward: one name, the paper's names
// (core), or everything including LN statistics. Offloaded tensors are not in the arena.
size_t act_layer_name_bytes(const ActShape *sh, const MemoryPolicy *p, int l, ActName name);
size_t act_layer_core_bytes(const ActShape *sh, const MemoryPolicy *p, int l);
size_t act_layer_bytes(const ActShape *sh, const MemoryPolicy *p, int l);
// What one layer of a kind keeps (LN statistics and Tempo's bits included), and what a full-
// recompute group of n layers from layer g0 holds again during its backward on top of its checkpoint:
// the planner's closed forms (equal to the sums above for its plans).
size_t act_layer_kind_bytes(const ActShape *sh, LayerRecompute kind, int group_start, unsigned tempo);
size_t act_group_working_bytes(const ActShape *sh, unsigned tempo, int g0, int n);
// Model-level extras: embedding mask, final LN input and statistics, output-layer input, logits.
size_t act_model_extra_bytes(const ActShape *sh);
// Held at the end of a training forward.
size_t act_forward_end_bytes(const ActShape *sh, const MemoryPolicy *p);
// What layer l's backward holds on top of the stored layers: a full-recompute group rebuilt at its
// last layer (0 for other layers and policies).
size_t act_recompute_working_bytes(const ActShape *sh, const MemoryPolicy *p, int l);
// The step's peak: the forward's end or a backward point holding recomputed tensors.
size_t act_peak_bytes(const ActShape *sh, const MemoryPolicy *p);
// A pipeline chunk of layers [l0, l1) for one micro-batch (DESIGN.md §9): what its context holds from
// the end of its forward to its backward (the first chunk adds the embedding mask; the one ending at L
// the final LN input and statistics, the output-layer input and the logits), and the most it holds
// during its backward (the head goes first; a full-recompute group is rebuilt at its last layer).
// For [0, L) without offload these are act_forward_end_bytes and act_peak_bytes.
void act_chunk_bytes(const ActShape *sh, const MemoryPolicy *p, int l0, int l1, size_t *stored, size_t *backward_peak);
// Activation offload. What layer l keeps in the offload pool (one name, or all of them); its region
// (each tensor 64-byte aligned: the layout of a stage slot and of the pool); the stage, an arena
// entry of two slots of the largest region (one when a single layer offloads) where the forward
// writes a layer's offloaded tensors and the backward fetches them back; the pool's bytes.
size_t act_layer_offload_name_bytes(const ActShape *sh, const MemoryPolicy *p, int l, ActName name);
// The sum over layer l's names of fn's bytes, each rounded up to a multiple of align (1: exact; 64: the
// host pool's regions, as offload and memo lay them out).
typedef size_t (*ActNameBytesFn)(const ActShape *sh, const MemoryPolicy *p, int l, ActName name);
size_t act_layer_names_sum(const ActShape *sh, const MemoryPolicy *p, int l, ActNameBytesFn fn, size_t align);
size_t act_layer_offload_bytes(const ActShape *sh, const MemoryPolicy *p, int l);
size_t act_layer_offload_span(const ActShape *sh, const MemoryPolicy *p, int l);
size_t act_offload_stage_bytes(const ActShape *sh, const MemoryPolicy *p);
size_t act_offload_pool_bytes(const ActShape *sh, const MemoryPolicy *p);
// Largest number of arena entries alive at once (sizes the arena's bookkeeping).
int act_max_entries(const MemoryPolicy *p);
#endif
