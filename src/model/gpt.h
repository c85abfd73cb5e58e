// The GPT-2 model of DESIGN.md §1: parameters, the saved activations of a step, forward and backward.
#ifndef CTRON_GPT_H
#define CTRON_GPT_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "arch/arch.h"
#include "arch/lora.h"
#include "arch/rope_scaling.h"
#include "backend/backend.h"
#include "memory/arena.h"
#include "memory/ledger.h"
#include "memory/memory_model.h"
#include "memory/offload_pool.h"
#include "memory/step_mem.h"
#include "model/policy.h"
#include "parallel/comm.h"
#include "util/philox.h"

// The ids a Hugging Face model gives its beginning- and end-of-sequence tokens (config.json,
// generation_config.json's bos_token_id / eos_token_id, which may list several ends: Llama 3.1 Instruct's
// 128001, 128008, 128009). Not the architecture: they travel with it (checkpoints, --init-from, export)
// so that generation stops where transformers' does. Zeroed: none known.
enum { MAX_EOS_IDS = 8 };
typedef struct {
    int has_bos, bos;
    int n_eos;
    int32_t eos[MAX_EOS_IDS];
} SpecialTokens;

typedef struct {
    int layers, hidden, heads, seq, batch, vocab;
    float dropout;
    // The family (arch/arch.h) and its knobs. 0 means the family's default: a config written as
    // {layers, hidden, heads, seq, batch, vocab, dropout} is GPT-2 as before. gpt_config_resolve fills them.
    int arch;                     // ArchKind
    int kv_heads;                 // k and v heads (grouped-query attention; 0: = heads)
    int head_dim;                 // each head's width d (0: hidden / heads; Mistral Nemo's 128 with hidden
                                  // 5120 and 32 heads): q and the attention output are heads·d wide
    int ffn;                      // the MLP's inner width (0: arch_default_ffn)
    float rope_theta;             // RoPE base (0: 10000)
    RopeScaling rope_scaling;     // RoPE frequency scaling (arch/rope_scaling.h; zero: none), e.g. Llama 3.1's
    float norm_eps;               // RMSNorm/LayerNorm epsilon (0: the family's)
    int tie_embeddings;           // 1: the output layer is the token embedding; -1: its own; 0: the family's
    int qkv_bias;                 // llama: q, k and v have biases (Qwen2)
    int qk_norm;                  // llama: q and k RMS-normalised per head before RoPE, one weight [d] each (Qwen3)
    int fused_proj;               // llama: q|k|v are one tensor qkv_proj and gate|up one gate_up_proj (Phi-3's
                                  // names), and LoRA adapts them as such (one A over q, k and v; one over gate, up)
    int rotary_dim;               // llama: RoPE rotates the first rotary_dim dims of each head (pairs j, j + rotary_dim/2)
                                  // and passes the rest through (transformers' partial_rotary_factor = rotary_dim / d:
                                  // Phi-4-mini's 0.75); 0: all d (gpt_rotary_dim)
    int sliding_window;           // llama: each query attends to its last W positions only, key j seen by query i
                                  // iff i − j < W (transformers' sliding_window: Mistral, Phi-3); 0: the whole
                                  // causal prefix. Every layer (gpt_layer_window)
    // LoRA (arch/lora.h, docs/LORA.md): rank 0 is none. A rank freezes the base and adapts the sites of
    // lora_targets (LoraSite bits; 0: the family's all) with y = W x + (α/r)·B(A x); LoRA-FA freezes A too.
    int lora_rank;
    float lora_alpha;             // α (0: peft's default, 8)
    unsigned lora_targets;
    int lora_fa;
    int lora_rslora;              // --lora-rslora: peft's use_rslora, the adapters scaled by α/√r instead of α/r
    float lora_dropout;           // --lora-dropout p: peft's lora_dropout on the adapters' input (training only)
    int base_bf16;                // --base-dtype bf16 (LoRA only): the frozen base stored only in bf16 (docs/LORA.md)
    int reversible;               // two residual streams, y1 = x1 + Attn(x2), y2 = x2 + MLP(y1) (model/reversible.h)
    SpecialTokens tokens;         // the vocabulary's BOS and EOS ids, as a Hugging Face model names them (none: zero)
    int max_positions;            // a rotary model's context length as the Hugging Face config it came from
                                  // declares it (max_position_embeddings), carried like tokens so that an
                                  // export of a run at a shorter --seq keeps it; 0: none known
} GPTConfig;

// Fills the 0 (default) knobs of c from its family's row; idempotent.
void gpt_config_resolve(GPTConfig *c);
// The bits the configuration sets on MemoryPolicy.tempo (policy.h): LoRA's (LORA_*) and Qwen3's QK_NORM_REBUILD;
// 0 for a plain model.
unsigned gpt_keep_bits(const GPTConfig *c);
// The family's part of the analytic model's shape (kv heads, FFN width, norm statistics, SwiGLU).
void gpt_shape_family(const GPTConfig *c, ActShape *sh);
// After gpt_config_resolve: the head dimension, the q width (heads·d: the attention's output too), the
// k/v width (kv·d) and whether the output layer is tied.
static inline int gpt_head_dim(const GPTConfig *c) { return c->head_dim > 0 ? c->head_dim : c->hidden / c->heads; }
static inline int gpt_q_width(const GPTConfig *c) { return c->heads * gpt_head_dim(c); }
static inline int gpt_kv_width(const GPTConfig *c) { return c->kv_heads * gpt_head_dim(c); }
// ActShape.head_dim's value: the head width when it is not hidden / heads, else 0.
static inline long gpt_shape_head_dim(const GPTConfig *c) {
    return gpt_q_width(c) != c->hidden ? gpt_head_dim(c) : 0;
}
static inline int gpt_tied(const GPTConfig *c) { return c->tie_embeddings > 0; }
// The dims of each head RoPE rotates: rotary_dim, or the whole head.
static inline int gpt_rotary_dim(const GPTConfig *c) { return c->rotary_dim > 0 ? c->rotary_dim : gpt_head_dim(c); }
// The attention window of layer l (0: the whole causal prefix): every layer has the model's.
static inline int gpt_layer_window(const GPTConfig *c, int l) {
    (void)l;
    return c->sliding_window;
}
// Which linears LoRA adapts and what peft calls them (arch/lora.h).
static inline LoraFamily gpt_lora_family(const GPTConfig *c) { return lora_family(c->arch, c->fused_proj); }
// The adapters' scale: peft's lora_alpha / r, or lora_alpha / sqrt(r) under use_rslora (a Python double,
// rounded once when it multiplies a float32 tensor).
static inline float gpt_lora_scale(const GPTConfig *c) {
    return c->lora_rslora ? (float)((double)c->lora_alpha / sqrt((double)c->lora_rank)) : c->lora_alpha / (float)c->lora_rank;
}

// Views into one flat buffer (parameters or their gradients): this rank's shards (the whole model
// when t = 1; ql = a·d/t, which is h/t unless head_dim says otherwise, kvl = kv·d/t, fl = ffn/t,
// vl = ⌈v/t⌉). Per-layer tensors are stacked [L, ...]; weight matrices are [out, in] (nn.Linear
// orientation); qkv rows are [q | k | v]: ql, kvl and kvl rows.
typedef struct {
    float *wte, *wpe;             // [vl,h], [s,h]
    float *ln1_w, *ln1_b;         // [L,h]
    float *qkv_w, *qkv_b;         // [L,ql+2kvl,h], [L,ql+2kvl]
    float *proj_w, *proj_b;       // [L,h,ql], [L,h]
    float *ln2_w, *ln2_b;         // [L,h]
    float *fc1_w, *fc1_b;         // [L,fl,h], [L,fl]
    float *fc2_w, *fc2_b;         // [L,h,fl], [L,h]
    float *qk_norm_w;             // [L,2d] the per-head q norm's weight, then k's (Qwen3; every rank all of it)
    float *lnf_w, *lnf_b;         // [h]
    float *lm_head;               // [vl,h] an untied output layer (NULL when tied to wte)
} GPTTensors;

// The adapters of the targeted sites (NULL elsewhere), stacked over the stage's layers: A [L, r, in],
// B [L, out, r] (peft's lora_A / lora_B orientation), this rank's shards.
typedef struct { float *a[LORA_SITES], *b[LORA_SITES]; } LoraTensors;

// How a tensor is split over the TP ranks (Megatron): column-parallel weights and biases and the
// vocabulary-parallel embedding hold a slice of the rows (c_attn splits q, k and v separately: 3
// row blocks), row-parallel weights a slice of the columns; the rest is replicated.
typedef enum { TP_REPLICATED, TP_ROWS, TP_COLS } TPSplit;

// One named parameter tensor (GPT-2 state-dict names, e.g. "h.0.attn.c_attn.weight"). shape is
// this rank's shard; full_shape the model's tensor.
typedef struct {
    char name[80];                // HF llama names reach 48 characters, peft's 64 (layer 100 and above)
    size_t offset, numel;
    int ndim, shape[2], full_shape[2];
    int decay;                    // AdamW weight decay applies (weight matrices and wte)
    TPSplit split;
    int row_blocks;               // TP_ROWS: row blocks split separately (q|k|v: 3; gate|up: 2)
    int block_rows[3];            // row_blocks > 1: each block's rows in the whole model (q, kv, kv; f, f)
    int sp_partial;               // each TP rank computes part of this gradient (under SP, or LoRA's A of a
                                  // column-parallel base): all-reduced over TP
    int full_index;               // its index in the whole model's list (initialisation, checkpoints)
    int pp_mirror;                // the last pipeline stage's copy of the tied wte: the first stage's counts
    int init;                     // how gpt_init_weights draws it (params.c's table)
} ParamInfo;

// What the TP group's bytes were moved for (comm.h's convention): the conjugate operators inside
// the blocks (f/f̄ all-reduces, or SP's g/ḡ all-gathers and reduce-scatters), SP's re-gathering in
// backward of the column-parallel inputs it kept as shards, and the vocabulary-parallel embedding,
// output layer and cross-entropy.
typedef enum { TPC_BLOCK, TPC_REGATHER, TPC_VOCAB, TPC_PURPOSES } TPCommPurpose;

// The rank's place in tensor (and sequence) parallelism. t = 1: the whole model on this process.
typedef struct {
    int t, rank, sp;
    CommGroup *group;             // the TP group (NULL or a group of one when t = 1)
} TPLayout;

// What one block (or, for layer -1, the model around the blocks) holds for backward: the arena
// copy of each named tensor (fp32, bf16 or mask storage); NULL when the policy does not keep it.
typedef struct {
    void *saved[ACT_COUNT];
    int mark;                     // arena entry where this block's tensors begin
} BlockActs;

// Where the random numbers of a micro-batch come from (DESIGN.md §3).
typedef struct {
    uint64_t seed;
    uint32_t step;
    uint32_t sample0;             // global index of the micro-batch's first sequence in the step
    int train;                    // dropout on, activations kept for backward
} StepCtx;

// One micro-batch's activations between its forward and its backward (DESIGN.md §9): its own arena
// (a stack, counted in its own ledger slot), the tensors of each block and of the model around the
// blocks, and the micro-batch's random-number key. A pipeline stage keeps several in flight and frees
// them in the order its schedule says; the one-process trainer uses one.
typedef struct {
    Arena arena;
    BlockActs *blocks;            // [layers] (a stage fills only its own)
    BlockActs model_acts;         // emb_mask, lnf_in, lnf_stats, lm_in, logits
    int mark_head;                // arena entry of lnf_in
    float *logits;                // dL/dlogits after a training forward of the last chunk
    StepCtx ctx;
    int keep_all;                 // --recompute-microbatches: this context keeps every activation
    int32_t *tokens, *targets;    // [s·b] on the device: the micro-batch's inputs (the embedding's
                                  // backward reads the tokens again)
} ActContext;

// The rank's place in the pipeline (p = 1: every layer here). Stage r holds V model chunks of n =
// L/(pV) layers: chunk v is global chunk g = v·p + r, layers [g·n, (g+1)·n) (1F1B and GPipe: V = 1;
// layered: n = 1, layer l on stage l mod p). The embedding lives on the first stage; the final LN,
// output layer and loss on the last, which keeps its own copy of the tied token embedding.
typedef struct {
    int p, rank, V, n;
    int contexts;                 // activation contexts: the most micro-batch chunks in flight at once
    int keep_all;                 // contexts 0..keep_all−1 keep every activation (--recompute-microbatches)
    CommGroup *group;             // the pipeline group (NULL when p = 1)
} PPLayout;

// Activation offload (policy.offload; model/offload_sched.h): the forward writes a layer's offloaded
// tensors into a stage slot and queues them to the pool; the backward fetches them back into a slot,
// the next layer's while the current one computes. Slots alternate between the layers that offload.
typedef struct {
    OffloadPool *pool;            // NULL without --offload
    Ledger ledger;                // bytes in the pool, per layer and name
    uint8_t *stage;               // the arena entry offload_stage: slots of `span` bytes
    size_t span;                  // a slot: the largest layer's region
    size_t *pool_at;              // [layers] where each layer's region starts in the pool
    int *order;                   // layers that offload, last first (the backward's order)
    int *slot;                    // [layers] the layer's slot (-1: it offloads nothing)
    int n_order, cursor;          // cursor: the next of `order` the backward fetches
    int owner[2];                 // the layer whose tensors a slot holds (-1: none)
    uint64_t ticket[2];           // the last pool operation on a slot
} OffloadState;

typedef enum {
    W_OUT, W_GATHER, W_GATHER2, W_D_RES, W_D_TMP, W_D_Q, W_D_K, W_D_V, W_D_4H, W_ATTN_SCRATCH,
    W_MINI_A, W_MINI_B, W_MINI_C, W_MINI_LOGITS, W_FFN, W_D_UP, W_MINI_D, W_D_RES2, W_LORA, W_LORA_R, W_LORA_MASK, W_X16, W_COUNT
} WorkName;

typedef struct {
    GPTConfig cfg;
    MemoryPolicy policy;          // recompute plan, mask storage, stored precision
    TPLayout tp;
    PPLayout pp;
    MemoryPolicy policy_all;      // the plan with nothing recomputed: the keep_all contexts' policy
    // This rank's widths: hidden columns of q/k/v/context (h/t), heads (a/t), MLP columns (4h/t),
    // vocabulary rows (⌈v/t⌉: the vocabulary is padded to a multiple of t), first head, first
    // vocabulary row, and its sequence rows: s_rank positions from s0 (all of them without SP).
    // kvl, kvh: the k/v width (kv·d/t) and kv heads (kv/t) on this rank.
    int al, fl, vl, head0, v0, kvl, kvh;
    int ql;                       // this rank's q width al·d (h/t unless head_dim is not hidden / heads)
    size_t n_params;              // this rank's parameters (its shards and the replicated tensors)
    uint64_t comm_bytes[TPC_PURPOSES];  // TP bytes moved since the caller last zeroed them
    Backend *be;                  // where tensors live and kernels run (the CPU backend; --precision)
    float *params, *grads;        // fp32 master weights and gradients: what the optimizer trains
    uint16_t *params16;           // mixed precision: bf16 copy of params for the GEMMs (NULL under fp32)
    // LoRA: the frozen tensors (the base, and A under LoRA-FA) live here, with no gradient and no optimizer
    // state, and params/grads/info hold only the adapters the optimizer trains. NULL/0 without LoRA.
    // --base-dtype bf16: frozen is an address range with nothing behind it (PROT_NONE, no memory): the
    // views m->w into it only name the base's tensors; frozen16 holds the base's only copy (and, under
    // mixed precision with LoRA-FA, A's bf16 copy after it), frozen_a LoRA-FA's fp32 A, and base_stage the
    // one-dimensional tensors (norms, biases) and learned positions a pass reads, widened per use.
    float *frozen;
    uint16_t *frozen16;           // mixed precision: its bf16 copy; --base-dtype bf16: the base itself
    size_t n_frozen;
    size_t n_base;                // the base's elements (the first n_base of frozen; LoRA-FA's A follows)
    float *frozen_a;              // --base-dtype bf16 with LoRA-FA: A's fp32 storage (frozen's last n_frozen − n_base)
    float *base_stage;            // --base-dtype bf16: widened vectors for the pass running now (workspace)
    size_t base_stage_floats;
    int base16;                   // the above is in force (a training model of gpt_init_pp; host models keep fp32)
    ParamInfo *frozen_info;       // offsets into frozen
    int n_frozen_info;
    LoraTensors lw, lg;           // the adapters and their gradients (lg.a NULL under LoRA-FA)
    float lora_scale;             // α/r
    int params16_stale;           // params changed since the copy was made: refreshed before the next forward
    GPTTensors w, g;
    ParamInfo *info;
    int n_info;

    ActShape shape;               // the saved-activation shape of a training micro-batch
    Ledger ledger;                // one slot per activation context
    ActContext *acts;             // [pp.contexts]
    ActContext *act;              // the context the next forward or backward uses (gpt_use_context)
    OffloadState off;
    float *logits;                // [s,b,v] of the last forward (arena or workspace); gradient after training
    float *chunk_out;             // a chunk's forward writes its last block's output here (the send buffer)
    int s_cur, b_cur;
    int s0, s_rank;               // the sequence rows this rank holds (SP: s/t of them from s0)

    // Workspace: temporaries of one op or one pass, never held across layers (not activations),
    // reached through ws() (gpt.c): the buffer of its own, or with --static-plan the place the plan
    // gives it in the running scope.
    //   W_OUT      [s,b,h] projection / FC2 output (partial sums under TP)
    //   W_GATHER   [s,b,h] a gathered (SP) or reduced input/gradient
    //   W_GATHER2  [s,b,h] mini-seq: SP's kept fc1_in shard gathered while W_GATHER holds the FC2 gradient
    //   W_D_RES    [s,b,h] the backward's running gradient of the residual stream (the whole backward)
    //   W_D_TMP, W_D_Q, W_D_K, W_D_V  [s,b,h], [s,b,h/t] ×3 gradients
    //   W_D_4H     [s,b,4h/t] the MLP's gradient (mini-seq: [s,b,h/t], the attention context's)
    //   W_ATTN_SCRATCH [threads, s, s] attention backward (flash: tiles)
    //   W_MINI_A, W_MINI_B, W_MINI_C [⌈s·b/M⌉, f/t], W_MINI_LOGITS [⌈s·b/M⌉, ⌈v/t⌉]: one mini-seq chunk
    //              (GeLU: its input, output, gradient; SwiGLU: gate, up — then their gradients — and
    //              its output), W_MINI_D [⌈s·b/M⌉, f/t]: SwiGLU's output gradient (SwiGLU only)
    //   W_D_RES2   [s,b,h] reversible blocks: the second stream's running gradient (W_D_RES the first's)
    //   W_FFN      [s,b,f/t] SwiGLU's output, the down projection's input (forward; again in backward,
    //              where it then takes dL/dgate), W_D_UP [s,b,f/t] dL/dup (SwiGLU without mini-seq only)
    //   W_LORA     --lora-dropout only: a site's dropped input, then (du·A) before its mask joins dL/dx
    //              (without dropout v·Bᵀ adds into the base's output in its GEMM: no buffer); the largest
    //              [rows, in] of the targeted sites: [s,b,h] (a column site), [s,b,h/t] (o, proj), [s,b,f/t]
    //              (down, fc2; with mini-seq [⌈s·b/M⌉,f/t]: they read one chunk's rows);
    //              W_LORA_R [s,b,r] dL/d(x·Aᵀ) (LoRA only)
    //   W_LORA_MASK bytes, as many as W_LORA's floats: --lora-dropout's mask of one site's rows, drawn where
    //              they are read
    //   W_X16      bf16 GEMMs only: [s,b,max(h, a·d/t)] bf16, a GEMM input that the arena keeps no copy of (the
    //              norms' outputs, the attention output) rounded once for all the GEMMs that read it; in backward
    //              an adapted site's dy so, for the base's GEMM and the adapter's (q, k and v's at once: with
    //              an adapter on one of them and linear_backward16, [s,b,(a + 2·kv)·d/t] when wider)
    float *ws[W_COUNT];
    size_t ws_bytes[W_COUNT];
    float *ws_memo[W_COUNT];      // --static-plan: this scope's place of each
    int scope;                    // --static-plan: the scope running now (a layer, or SCOPE_*)
    StepMem mem;
    float *rope_cs;               // RoPE: rope_table [seq, d] on the device (NULL for learned positions)
    float *ce_part;               // [t, s·b, 3] vocabulary-parallel cross-entropy partials
    float *ce_lse;                // [s·b] log-sum-exp per row
    float *row_loss;              // [s,b]
    size_t io_bytes;              // every context's tokens and targets on the device (the cross-entropy
                                  // rows count in workspace_bytes)
    void *work[ACT_COUNT + 1];    // fp32 working copy per name (+1: second ln1_in), allocated on first use
    size_t workspace_bytes;
    int defer_loss;               // gpt_forward leaves its loss for gpt_loss_take (set by the caller)
    int inputs_held;              // the caller's tokens and targets are host_alloc memory it keeps unchanged
                                  // until its next wait for the device: they go up without a wait (set by
                                  // the caller, as defer_loss)
    double loss_pending;          // under TP, the deferred sum of the micro-batches' losses
    struct MemoState *memo;       // --memo's swap pool and stage (model/memo.h); NULL without memo layers
    struct RevProbe *rev_probe;   // reversible blocks, measurements only (model/reversible.h); NULL in training
    unsigned remat_made;          // model/remat.c: bit (1 << name) of each tensor of the layer in backward made
                                  // again so far; 0 between layers
    void *remat_at[ACT_COUNT];    // model/remat.c: where each made tensor is (its workspace slot: under
                                  // --static-plan every work_slot call is a temporary of its own)
} GPT;

// Validates nothing (the CLI does); allocates parameters, gradients, arena and workspace.
// policy NULL: no recompute, fp32 activations, byte masks. The policy is copied.
void gpt_init(GPT *m, const GPTConfig *cfg, const MemoryPolicy *policy);
// The same for one rank of a TP group (tp NULL: t = 1). heads, 4·hidden and, with SP, seq must be
// divisible by t (the CLI checks). Every TP rank of a group calls gpt_forward/backward together.
void gpt_init_tp(GPT *m, const GPTConfig *cfg, const MemoryPolicy *policy, const TPLayout *tp);
// The same for one stage of a pipeline (pp NULL: p = 1). The CLI checked that p·V divides L.
void gpt_init_pp(GPT *m, const GPTConfig *cfg, const MemoryPolicy *policy, const TPLayout *tp, const PPLayout *pp);
// Parameters (and their names) only, the whole model: what checkpoints and generation use.
void gpt_init_params(GPT *m, const GPTConfig *cfg);
void gpt_free(GPT *m);
// Parameters drawn from Philox keyed by seed: each element is a function of its tensor and its index
// in the unsharded tensor, so every TP layout starts from the same model.
void gpt_init_weights(GPT *m, uint64_t seed);
// Between the whole model's flat layout (gpt_init_params) and this rank's shards: a copy of this
// rank's slices out of full (padded vocabulary rows become 0), or the gathering of every rank's
// slices into full (collective over the TP group; every rank receives the whole model). src/dst
// are laid out as m->params (e.g. gradients or optimizer moments).
void gpt_shard_from_full(const GPT *m, const GPT *full, const float *full_buf, float *dst);
void gpt_gather_to_full(const GPT *m, const GPT *full, const float *src, float *full_buf);
// LoRA (--init-from): the frozen base from base, the whole model of m's configuration without adapters (host
// parameters, gpt_init_params): this rank's shards of its tensors into m->frozen; the adapters stay.
void gpt_set_frozen_base(GPT *m, const GPT *base);
// The same with this rank's side in host memory (ZeRO's unsharded moments).
void gpt_shard_from_full_host(const GPT *m, const GPT *full, const float *full_buf, float *host);
void gpt_gather_to_full_host(const GPT *m, const GPT *full, const float *host, float *full_buf);
// tokens, targets [s,b]. Training: returns Σ loss over the s·b rows and leaves grad_scale·dloss/dlogits
// in place of the logits, ready for gpt_backward. Evaluation (train = 0): returns Σ loss (targets may be
// NULL; then returns 0) and leaves the logits readable via m->logits; nothing goes to the arena.
double gpt_forward(GPT *m, const int32_t *tokens, const int32_t *targets, int s, int b, StepCtx ctx,
                   float grad_scale);
// The deferred loss (the trainer's micro-batches: one read-back per step on a GPU, not one per
// cross-entropy): while m->defer_loss is set, gpt_forward and gpt_forward_chunk return 0 and add their
// Σ loss to the step's sum; gpt_loss_take returns that sum (the bits of adding the returns, from 0)
// and starts the next. With defer_loss clear nothing may be pending.
double gpt_loss_take(GPT *m);
// Accumulates parameter gradients into m->grads and releases every saved activation.
void gpt_backward(GPT *m, const int32_t *tokens, StepCtx ctx);
// Pipelines (DESIGN.md §9). The context the next forward/backward uses (0 ≤ k < pp.contexts).
void gpt_use_context(GPT *m, int k);
// The forward of layers [l0, l1) of this stage into the current context. l0 = 0 starts from tokens (the
// embedding); otherwise input is the previous chunk's output [s_rank·b, h]. l1 = L ends in the loss
// (returned, as gpt_forward); otherwise the last block's output goes to output [s_rank·b, h].
double gpt_forward_chunk(GPT *m, int l0, int l1, const int32_t *tokens, const int32_t *targets, const float *input,
                         float *output, int s, int b, StepCtx ctx, float grad_scale);
// Its backward: d_output is dL/d(output) from the next chunk (ignored when l1 = L: the loss's gradient is
// in the context); dL/d(input) goes to d_input (l0 > 0) or into the embedding's gradient (l0 = 0).
// Releases the context.
void gpt_backward_chunk(GPT *m, int l0, int l1, const int32_t *tokens, const float *d_output, float *d_input);
// Does this stage hold layer l, and where is it in the stage's stacked tensors?
static inline int gpt_owns_layer(const GPT *m, int l) { return (l / m->pp.n) % m->pp.p == m->pp.rank; }
static inline int gpt_local_layer(const GPT *m, int l) { return (l / m->pp.n) / m->pp.p * m->pp.n + l % m->pp.n; }
static inline int gpt_first_stage(const GPT *m) { return m->pp.rank == 0; }
static inline int gpt_last_stage(const GPT *m) { return m->pp.rank == m->pp.p - 1; }
// Releases whatever a forward left in the arena (a training forward that is not followed by backward).
void gpt_release(GPT *m);
void gpt_zero_grad(GPT *m);
// Something other than the optimizer's fused update wrote m->params (initialisation, a checkpoint,
// ZeRO's gather): the bf16 copy is made again before the next forward.
void gpt_params_changed(GPT *m);
size_t gpt_num_params(const GPTConfig *cfg);
// LoRA on: the base is frozen (m->frozen), params are the adapters.
static inline int gpt_lora(const GPT *m) { return m->cfg.lora_rank > 0; }
// --base-dtype bf16: the frozen base has no fp32 storage (gpt.h's frozen); w names one of its tensors.
static inline int gpt_base16(const GPT *m) { return m->base16; }
static inline int gpt_base_key(const GPT *m, const float *w) {
    return gpt_base16(m) && w >= m->frozen && w < m->frozen + m->n_base;
}
// Device bytes of the weights: the trainable tensors (fp32) and the frozen ones (fp32, or the base in bf16
// under --base-dtype bf16), what the analytic model's weights term counts (memory_weight_bytes); and the
// bf16 copies mixed precision keeps beside them.
size_t gpt_weight_bytes(const GPT *m);
size_t gpt_weight_copy_bytes(const GPT *m);
// The frozen tensors between host fp32 laid out as frozen_info's offsets (n_frozen floats) and the device:
// under --base-dtype bf16 the base is rounded to bf16 (to nearest even) on the way in and widened exactly on
// the way out.
void gpt_frozen_to_device(GPT *m, const float *host);
void gpt_frozen_to_host(const GPT *m, float *host);
// One frozen tensor (this rank's shard, host fp32 in its layout) into the device storage, the same way.
void gpt_frozen_put(GPT *m, const ParamInfo *pi, const float *host);
// The tensor of the whole model's list with this full_index, in m's trainable or frozen list (NULL: none).
const ParamInfo *gpt_info_by_full_index(const GPT *m, int full_index);
const ParamInfo *gpt_find_param(const GPT *m, const char *name);
// The name of the whole model's tensor number full_index (ParamInfo.full_index), on any stage.
void gpt_param_full_name(const GPTConfig *c, int full_index, char *buf, size_t len);
#endif
