// The cluster planner's model of one layout on a GPU cluster: the job, the layout, and what the
// planner predicts for it — per-GPU memory of every pipeline stage (exact, from the analytic
// activation model) and the step time from a physical model (cluster_time.c). docs/PLANNER.md.
#ifndef CTRON_CLUSTER_MODEL_H
#define CTRON_CLUSTER_MODEL_H
#include "memory/cluster_gpu.h"
#include "memory/planner.h"
#include "memory/stage_model.h"

typedef struct {
    long s, h, a, L, v;     // model shape (v as allocated)
    long B;                 // global batch, sequences per step
    int gpus_per_node, nodes;
    int e;                  // bytes per stored activation element and GEMM operand: 2 (bf16 mixed precision) or 4 (fp32)
    int dp_overlap;         // the DP gradient reduction overlaps the last micro-batch's backward, bucket by
                            // bucket (and ZeRO-1's weight all-gather the next step's first forward)
    int grad_bytes;         // bytes per gradient element, in the gradient buffer and the DP reduction: 4 (fp32,
                            // also when 0) or 2 (bf16: Megatron's --grad-reduce-in-bf16)
    int tp_overlap;         // TpOverlap (0: Megatron's backward overlap)
    double dp_bucket;       // parameters per DP bucket (0: Megatron's default, max(40M, 1M·d))
    int flash;              // flash attention in every layer (Transformer Engine's fused attention; 0: the
                            // paper's attention, the s×s scores stored; recompute=plan may still choose it)
    int fp8;                // the linears' GEMMs in FP8 (Transformer Engine): the GPU's FP8 peak, FP8 operands,
                            // the casts, FP8 copies of the weights, the linears' saved inputs in FP8
    double reserve_bytes;   // per GPU, for the framework (CUDA context, allocator fragmentation)
    // The family (arch/arch.h); 0 for each is GPT-2's block (MHA, an FFN of 4h, tied output layer).
    int arch;               // ArchKind
    long kv, ffn;           // key/value heads (0: a) and the FFN width (0: the family's default)
    int tie;                // 1 tied, -1 untied, 0 the family's default
    int qkv_bias;
    int qk_norm;            // q and k RMS-normalised per head (Qwen3)
    int fused_proj;         // q|k|v one qkv_proj, gate|up one gate_up_proj (Phi-3): LoRA adapts them so
    long head_dim;          // each head's width (0: h/a; Qwen3's 128, Mistral Nemo's): q is a·head_dim wide
    long window;            // sliding window W (0: none): flash attention's tiles and the model FLOPs cover W
                            // keys a query, not s (the paper's attention computes and stores all s×s scores)
    // LoRA (docs/LORA.md): rank > 0 freezes the base (e bytes per parameter, the GEMMs' copy; no gradient,
    // no optimizer state, no weight-gradient GEMMs, no embedding backward or sync); the adapters of
    // lora_sites (0: the family's all) train: weights, gradients and Adam, the DP reduction and the
    // optimizer step cover only them. lora_fa: A frozen too (only B trains; A's input not kept).
    int lora_rank;
    unsigned lora_sites;
    int lora_fa;
} ClusterJob;

// The analytic model's shape of one micro-batch of mb sequences on one rank under t (and SP): the
// job's shape and family (act_shape_set_family), bf16 or fp32 activations, byte masks, the family's
// dropout (Megatron's GPT 0.1, llama none).
void cluster_job_shape(const ClusterJob *job, int mb, int t, int sp, ActShape *sh);

// Which TP/SP collectives hide under a GEMM: backward (Megatron's default: the input-gradient all-reduce
// or reduce-scatter under the weight-gradient GEMM, SP's re-gather under the input-gradient GEMM), none
// (every collective exposed), full (also the forward's, as Transformer Engine's userbuffers overlap).
typedef enum { TP_OVERLAP_BACKWARD = 0, TP_OVERLAP_NONE, TP_OVERLAP_FULL, TP_OVERLAP_COUNT } TpOverlap;
const char *cluster_tp_overlap_name(TpOverlap o);
int cluster_tp_overlap_parse(const char *text, TpOverlap *out);   // 0 or -1

typedef enum { CR_NONE = 0, CR_SELECTIVE, CR_FULL, CR_PLAN, CR_COUNT } ClusterRecompute;
const char *cluster_recompute_name(ClusterRecompute r);
int cluster_recompute_parse(const char *text, ClusterRecompute *out);   // 0 or -1

typedef struct {
    int t, p, v, d, mb, sp, zero;   // v: interleaved model chunks per stage (the paper's m)
    ClusterRecompute rc;
    // Uneven stages (Megatron's --decoder-first/last-pipeline-num-layers): layers of the first and of
    // the last stage; 0 for either: an even share of what the stated ones leave; STAGE_NO_LAYERS: the
    // embedding (first) or the head (last) as a stage of its own.
    int first, last;
} ClusterLayout;

// Step-time parts, seconds; they sum to step_s. Compute parts are the slowest stage's, over its
// micro-batches; the bubble is the fill and drain of the schedule.
typedef enum {
    PART_GEMM, PART_ATTN, PART_ELEM, PART_HEAD, PART_RECOMPUTE, PART_TP_COMM, PART_PP_COMM, PART_DP_COMM,
    PART_BUBBLE, PART_OPTIMIZER, PART_OVERHEAD, PART_COUNT
} TimePart;
const char *cluster_part_name(TimePart p);     // "gemm", "attention", … (the JSON keys)
const char *cluster_part_label(TimePart p);    // one line for --explain

// Per-GPU memory of one stage, bytes.
typedef struct {
    double weights;       // parameters as the GEMMs read them (bf16 copy; fp32 when e = 4)
    double grads;         // gradients (fp32, or bf16 with ClusterJob.grad_bytes = 2)
    double optimizer;     // Adam m, v (and the fp32 master weights under mixed precision), /d with ZeRO-1
    double activations;   // the stage's in-flight micro-batches (stage_activations_at: held + the recompute transient)
    double workspace;     // one layer's activation gradients in backward (at most a none layer's bill)
    double reserve;       // ClusterJob.reserve_bytes
    double total;
    int n_full, n_sel;    // the stage's recompute (per stage for CR_PLAN)
    int layers;           // the stage's layers
    double in_flight;     // micro-batches' worth of its layers' activations held at once (the schedule's)
} StageMemory;

#define CLUSTER_MAX_STAGES 1024

typedef struct {
    ClusterLayout lay;
    int fits;
    char reason[160];          // why it does not fit (or is not valid), empty otherwise
    double step_s, mfu, hfu;
    double part[PART_COUNT];
    double mem_max;            // the worst stage's total
    int worst_stage, slowest_stage;
    long microbatches;         // per pipeline per step: B / (d · mb)
    MemPlan plan0;             // CR_PLAN: stage 0's plan
    int n_stages;              // memory of every stage: in mem[] up to CLUSTER_MAX_STAGES
    StageMemory *mem;          // NULL unless asked for (cluster_predict's keep_stages)
} ClusterPrediction;

// Is the layout possible at all (divisibility: t of the heads, hidden, vocabulary, key/value heads and
// FFN width; t within a node, …)? 0, or -1 with why in err.
int cluster_layout_check(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, char *err, size_t errlen);
// Predicts memory and time. keep_stages: fill out->mem (malloc'd, free with cluster_prediction_free).
void cluster_predict(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, int keep_stages,
                     ClusterPrediction *out);
void cluster_prediction_free(ClusterPrediction *p);
// Layers of stage r (uneven first/last stages, or L/p), and the first of them (v = 1).
int cluster_stage_layers(const ClusterJob *job, const ClusterLayout *lay, int r);
// Weights, gradients and optimizer state of the whole model, bytes per parameter without ZeRO:
// the floor under any layout (2 + 4 + 12 = 18 with mixed precision, 16 with bf16 gradients; 4 + 4 + 8 =
// 16 in fp32; under LoRA e, the frozen base's weights, the adapters left aside).
double cluster_state_bytes_per_param(const ClusterJob *job);
double cluster_param_count(const ClusterJob *job);
// LoRA: the adapter parameters of stage r's layers on one rank (TP split as model/adapters.c lays them
// out), and of them the trainable ones (B only under LoRA-FA); 0 without LoRA.
double cluster_stage_adapters(const ClusterJob *job, const ClusterLayout *lay, int r, int trainable_only);
#endif
