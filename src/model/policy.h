// What a run keeps for backward: recompute policy per layer, dropout-mask storage, stored precision.
#ifndef CTRON_POLICY_H
#define CTRON_POLICY_H
#include <stddef.h>

// RECOMPUTE_MEMO (MEMO, model/memo.h): the layer keeps its input; of the rest, the first α of the tokens
// (policy_memo_alpha: the layer's own, or memo_alpha) go to host memory and come back, the other tokens
// are recomputed over their range only.
typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_SELECTIVE = 1, RECOMPUTE_FULL = 2, RECOMPUTE_MEMO = 3 } LayerRecompute;
typedef enum { MASKS_BYTES = 0, MASKS_BITS = 1, MASKS_REGEN = 2 } MaskMode;
typedef enum { ACT_FP32 = 0, ACT_BF16 = 1 } ActDtype;
// Tempo (Andoorveedu et al., NeurIPS 2022), each part a bit of MemoryPolicy.tempo:
//   gelu      keep the GeLU output (fc2_in, kept anyway) and one branch bit, not gelu_in; backward
//             inverts GeLU on its branch to get the derivative
//   layernorm keep the LN output (qkv_in / fc1_in, kept anyway), not ln1_in / ln2_in; backward
//             recovers x̂ = (y − β)/γ
//   softmax   keep the softmax output and the dropout mask, not attn_drop; backward re-forms the
//             dropped probabilities from them, per head, with the forward's arithmetic (exact)
enum { TEMPO_GELU = 1, TEMPO_LAYERNORM = 2, TEMPO_SOFTMAX = 4 };
// Few-Bit Backward (Novikov et al.): keep a k-bit code of the GeLU input instead of gelu_in, and
// use the optimal piecewise-constant GeLU′ of its 2^k levels in backward (backend/cpu/gelu_fewbit.h).
// A bit of MemoryPolicy.tempo too (the options that change what a layer keeps); k is gelu_bits.
enum { GELU_FEWBIT = 8 };
// Mini-Sequence Transformer (Luo et al.): the MLP and the output layer + cross-entropy run in
// MemoryPolicy.mini_seq chunks of the sequence. The MLP keeps neither gelu_in nor fc2_in (backward
// recomputes FC1 and GeLU chunk by chunk); the output layer finishes its backward inside the
// forward, chunk by chunk, and keeps only dL/d lm_in (lm_grad): the logits are never whole.
enum { MINI_SEQ = 16 };
// Flash-style attention (backend/cpu/flash_attention.h): keeps q, k, v, the output and attn_lse (one float
// per query row and head) instead of attn_prob, attn_mask and attn_drop; backward recomputes the
// probabilities tile by tile.
enum { ATTN_FLASH = 32 };
// LoRA (arch/lora.h, docs/LORA.md), bits of MemoryPolicy.tempo too: LORA_FROZEN (any --lora-rank) freezes
// the base, so no linear keeps its input for a weight gradient any more; the bit of each adapted site
// (1 << (LORA_TARGET_SHIFT + LoraSite)) keeps that site's x·Aᵀ and, without LORA_FA, its input for A's
// gradient. LORA_FA (LoRA-FA): A is frozen too, only x·Aᵀ is kept.
enum { LORA_FROZEN = 64, LORA_FA = 128, LORA_TARGET_SHIFT = 8 };
// Fusion-aware recompute search (memory/fusion_search.h, `--recompute search`), bits of MemoryPolicy.tempo
// too, all exact (the forward's kernels on the kept inputs, rounded as storage rounds):
//   NORM_OUT  keep the norms' inputs and statistics (ln1_in, ln2_in), not their outputs (qkv_in, fc1_in);
//             a weight gradient that reads one makes it again from the input (model/remat.c)
//   ACT_OUT   GPT-2: keep GeLU's input (gelu_in), not its output (fc2_in); FC2's weight gradient makes it
//             again (llama's SwiGLU output is never kept: its backward always makes it again)
//   ATTN_OUT  selective layers only: keep q, k, v, not the attention's output (proj_in); backward runs the
//             attention forward again from them and reads its probabilities with the standard backward
//   QKV_OUT   keep qkv_in (or, with NORM_OUT, ln1_in), not q, k, v; backward runs the q, k and v GEMMs (and
//             RoPE) again from it, once per layer, before anything reads them
//   FC1_OUT   keep fc1_in (or ln2_in), not the MLP's inner tensors: GPT-2's gelu_in and fc2_in, llama's gate
//             and up; backward runs FC1 (+ bias and GeLU; the gate and up GEMMs) again, once per layer
//   PROJ_OUT  keep proj_in (or what makes it), ln1_in and the mask, not the attention half's output (ln2_in);
//             backward runs the projection and the residual again, once per layer, before the MLP's backward
//   ATTN_MASK, DROP1_MASK, DROP2_MASK  keep not that one dropout mask (attn_mask, drop1_mask, drop2_mask):
//             backward draws it again from its Philox key, site, step and positions (what --dropout-masks regen
//             does for every mask), once per layer, at its first read (model/remat.c)
// Qwen3's per-head q/k norms (GPTConfig.qk_norm), a bit the model sets, as LoRA's: a layer keeps the norms'
// inputs (q_norm_in, k_norm_in), not their normalised, rotated outputs q and k nor their 1/rms; backward makes
// those again from the inputs (the norms and RoPE: pointwise, the forward's kernels on the stored values)
// where attention's backward first reads them (model/remat.c). So a Qwen3 layer keeps a Llama layer's bytes.
enum { QK_NORM_REBUILD = 1u << 30 };
enum { RECOMPUTE_ATTN_MASK = 1u << 21, RECOMPUTE_DROP1_MASK = 1u << 22, RECOMPUTE_DROP2_MASK = 1u << 23,
       RECOMPUTE_NORM_OUT = 1u << 24, RECOMPUTE_ACT_OUT = 1u << 25, RECOMPUTE_ATTN_OUT = 1u << 26,
       RECOMPUTE_QKV_OUT = 1u << 27, RECOMPUTE_FC1_OUT = 1u << 28, RECOMPUTE_PROJ_OUT = 1u << 29 };

// The per-layer plan. Full-recompute layers form groups: the first layer of a group stores its
// input (the checkpoint); the whole group is run forward again in backward.
typedef struct {
    int layers;
    LayerRecompute *kind;     // [layers]
    int *group_start;         // [layers] first layer of this layer's full-recompute group (= l otherwise)
    float *alpha;             // [layers] a memo layer's own α ("FIRST-LAST:memo@ALPHA"); < 0 (or NULL): memo_alpha
    ActDtype act_dtype;
    int precision;            // Precision (backend/backend.h): bf16 = mixed precision (act_dtype is then bf16)
    const char *device;       // the backend the model runs on: cpu, cpu-guarded, cuda[:N] (NULL: cpu); not owned
    MaskMode masks;
    unsigned tempo;           // what changes what a layer keeps: TEMPO_*, GELU_FEWBIT, MINI_SEQ, ATTN_FLASH, LORA_*,
                              // RECOMPUTE_NORM_OUT, RECOMPUTE_ACT_OUT, RECOMPUTE_ATTN_OUT, RECOMPUTE_QKV_OUT,
                              // RECOMPUTE_FC1_OUT, RECOMPUTE_PROJ_OUT, RECOMPUTE_*_MASK
    int gelu_bits;            // k of GELU_FEWBIT (1..4), 0 otherwise
    int mini_seq;             // chunks of MINI_SEQ (>= 2), 0 otherwise
    size_t arena_budget;      // --mem-budget: the arena's hard limit in bytes (0: exactly the prediction)
    unsigned offload;         // --offload: bit (1 << name) for each per-layer tensor kept in the offload pool
    const char *offload_dir;  // --offload-dir: the pool is a file there (NULL: host memory); not owned
    float memo_alpha;         // --memo: the fraction of a memo layer's tokens swapped, not recomputed (0..1),
                              // for every memo layer without its own alpha[l]
    int rev_store;            // reversible blocks: keep each layer's activations instead of inverting (the reference)
} MemoryPolicy;

// Megatron's options: --recompute none|selective|full, --recompute-method uniform|block,
// --recompute-num-layers N, or an explicit list "0-3:full,4-11:selective" (each full layer of a
// list is its own group; "0-3:memo@0.25" gives memo layers their own α in [0, 1]). Returns 0, or -1 with
// a message naming the bad value in err.
int policy_build(MemoryPolicy *p, int layers, const char *recompute, const char *method, int num_layers,
                 const char *layer_list, char *err, size_t errlen);
int policy_parse_masks(const char *text, MaskMode *out);
int policy_parse_dtype(const char *text, ActDtype *out);
// "gelu,layernorm,softmax" (any subset, comma-separated; "none" or "" for no bit, "all" for all).
// Returns 0, or -1 naming the unknown word in err.
int policy_parse_tempo(const char *text, unsigned *out, char *err, size_t errlen);
// Activation offload: "fc1_in,gelu_in" — per-layer tensor names (the ledger's), "all" for every
// per-layer tensor, "none" or "" for none. Returns 0, or -1 naming the unknown word in err.
int policy_parse_offload(const char *text, unsigned *out, char *err, size_t errlen);
const char *offload_describe(unsigned offload, char *buf, size_t len);
// "gelu,softmax" / "none"
const char *tempo_describe(unsigned tempo, char *buf, size_t len);
void policy_default(MemoryPolicy *p, int layers);   // none, fp32, byte masks
// Layer l's α: its own (alpha[l] >= 0), else memo_alpha. Meaningful for memo layers.
static inline double policy_memo_alpha(const MemoryPolicy *p, int l) {
    return p->alpha && p->alpha[l] >= 0.0f ? (double)p->alpha[l] : (double)p->memo_alpha;
}
// Does any memo layer carry its own α (a per-layer mix, "0-3:memo@0.25,...")?
int policy_memo_mixed(const MemoryPolicy *p);
// Is there a memo layer without its own α (one that needs --memo ALPHA)?
int policy_memo_needs_alpha(const MemoryPolicy *p);
// An α as the shortest decimal that reads back as the same float ("0.25", "0.333333343").
const char *policy_alpha_text(float a, char *buf, size_t len);
// Does a --recompute-layers list name memo layers (before it is parsed: the CLI's refusals)?
int policy_list_has_memo(const char *list);
void policy_free(MemoryPolicy *p);
// A deep copy (its own per-layer arrays; offload_dir stays borrowed). policy_free it.
void policy_copy(MemoryPolicy *dst, const MemoryPolicy *src);
// The plan with nothing recomputed (same dtype, masks, Tempo): what --recompute-microbatches' keep-all
// micro-batches follow. Allocates; policy_free it.
void policy_keep_everything(MemoryPolicy *all, const MemoryPolicy *plan);
// Pipelines: a full-recompute group never straddles two model chunks of chunk_layers layers (each chunk
// runs its backward on its own): groups are cut at chunk starts.
void policy_cut_groups(MemoryPolicy *p, int chunk_layers);
const char *recompute_name(LayerRecompute k);
const char *mask_mode_name(MaskMode m);
const char *act_dtype_name(ActDtype d);
// e.g. "none" / "full(uniform, 2)" / "0-3:full,4-11:selective" — for headers and reports.
void policy_describe(const MemoryPolicy *p, char *buf, size_t len);
#endif
