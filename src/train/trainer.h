// The training run: data, model, optimizer, schedule, evaluation, progress and the JSON log.
#ifndef CTRON_TRAINER_H
#define CTRON_TRAINER_H
#include <stdint.h>
#include <stdio.h>
#include "data/dataset.h"
#include "memory/planner.h"
#include "memory/flops.h"
#include "memory/fusion_search.h"
#include "model/gpt.h"
#include "model/policy.h"
#include "parallel/comm.h"
#include "train/pipe_schedule.h"

typedef struct {
    GPTConfig model;
    int steps, grad_accum, warmup, eval_every, eval_batches, print_every, threads, sample_tokens;
    float lr, min_lr, weight_decay, beta1, beta2, clip;
    double val_frac;
    uint64_t seed;
    const char *data_path, *log_path, *sample_prompt;
    const char *tokenizer_path;  // BPE vocabulary for text data (NULL: byte-level); saved with checkpoints
    const char *val_path;        // explicit validation file (NULL: the last val_frac of data_path)
    DataOrder data_order;        // random windows (default) or sequential
    int show_ledger;     // print measured vs predicted ledger after the first step
    // What is kept for backward (see model/policy.h): Megatron's recompute options, mask storage,
    // stored precision.
    const char *recompute, *recompute_method, *recompute_layers;
    int recompute_num_layers;
    MaskMode masks;
    ActDtype act_dtype;
    int precision;       // Precision (backend/backend.h): --precision fp32|bf16
    const char *device;  // --device cpu|cuda[:N]|cpu-guarded (NULL: cpu)
    unsigned tempo;      // TEMPO_* bits (model/policy.h): --tempo gelu,layernorm,softmax
    int gelu_bits;       // --gelu-bits K: Few-Bit GeLU codes of K bits (0: exact GeLU′)
    int flash;           // --attention flash: tiled attention keeping only the log-sum-exp
    int mini_seq;        // --mini-seq M: MLP and output layer in M chunks of the sequence (0/1: off)
    unsigned offload;    // --offload LIST: bits (1 << name) of per-layer tensors kept in the offload pool
    const char *offload_dir;  // --offload-dir: the pool is a file there (NULL: host memory)
    int static_plan;     // --static-plan: one recorded step's lifetimes place every step's buffers in one block
    double memo_alpha;   // --memo ALPHA: MEMO's swapped fraction of each memo layer's tokens (-1: off; -2: auto,
                         // --mem-budget's planner chooses it)
    double tp_link_gbps; // --tp-link-gbps: the TP link's GB/s, pricing the all-reduce --memo auto's recompute
                         // repeats (required with --tp > 1; 0: not given)
    double offload_budget;  // --offload-budget: the planner may keep this many bytes in the offload pool
    double mem_budget;   // --mem-budget: plan the policy for these activation bytes per rank (0: off)
    double peak_gflops;  // for MFU/HFU; <= 0: the cached `ctron peak` figure of this machine
    // --recompute search (memory/fusion_search.h): the per-layer byte budget, and the rates that price a
    // recompute (--search-rates GFLOPS,GBPS[,LINK_GBPS]; 0: this machine's cached GEMM peak and a measured
    // bandwidth; the TP link's rate, which prices the collectives a remade GEMM repeats, is given under --tp > 1)
    double act_budget_layer, search_gflops, search_gbps, search_link_gbps;
    // LoRA (docs/LORA.md): --lora-rank, --lora-alpha and --lora-fa live in model; --lora-targets' text (NULL:
    // the family's every site), parsed against --arch by the validation, which writes the canonical list here.
    const char *lora_targets;
    char lora_targets_text[96];
    // Parallel layout (docs/PARALLEL.md): ranks = dp × tp, tp consecutive ranks per TP group.
    int tp;              // tensor-parallel size (1: none)
    int pp;              // pipeline stages (1: none); ranks = dp × pp × tp, tp fastest
    int pp_schedule;     // PipeScheduleKind (train/pipe_schedule.h): --pp-schedule 1f1b|interleaved|gpipe|layered
    int virtual_stages;  // --virtual-stages V: model chunks per stage (interleaved; 0: not given)
    int recompute_microbatches;  // --recompute-microbatches N: N of a stage's in-flight contexts keep everything
    int sp;              // sequence parallelism within the TP group
    int tp_solo;         // --tp-solo: one process as TP rank 0 of tp, the others absent (comm_grid_solo)
    int zero;            // 1: ZeRO-1, AdamW state sharded over the dp ranks
    int world_size;      // ranks of the run (the CLI sets it): dp = world_size / tp
    int max_bad_steps;   // stop after this many non-finite steps in a row (0: never); each is skipped
    // Checkpoints (io/checkpoint.h, docs/CHECKPOINTS.md): save to ckpt_dir (NULL: never) every
    // save_every steps (0: only at the end) and at the last step, keeping the newest keep (0: all);
    // stop_after > 0 ends the run after that step although the schedule spans steps.
    const char *ckpt_dir;
    int save_every, keep, stop_after;
    // What the CLI created (ckpt_dir, the log file): a run that ends in an error before writing to
    // them removes them (cli_train_unmake).
    int ckpt_dir_made, log_made;
    // --resume (NULL: a fresh run): resume_step_dir is the checkpoint it resolved to; the CLI took
    // the run's settings from its state.json, and ckpt_dir and data_path may point into these buffers.
    const char *resume;
    // --init-from (NULL: the seed's initialisation): an HF model directory or a ctron checkpoint whose
    // architecture the CLI took (model) and whose weights the run starts from; init_tokenizer_path is
    // its tokenizer.json when the command line named none.
    const char *init_from;
    const char *lora_from; // --lora-from DIR: a peft adapter directory the adapters start from
    const char *lora_out;  // --lora-out DIR: the final checkpoint's adapters as a peft directory (cli_train_main)
    char init_tokenizer_path[4200];
    char resume_step_dir[1024], resume_run_dir[1024], resume_data_path[1024];
    char resume_val_path[1024], resume_tokenizer_path[1024];
    // The texts of the options --resume restored from state.json "options" (string options point here).
    char resume_options[32][192];
    int n_resume_options;
} TrainOptions;

void train_options_default(TrainOptions *o);
// Does the layout fit the model and the world (t divides the ranks and the heads; SP needs t > 1
// and s divisible by t)? 0, or -1 with a message naming the flags. Every rank gets the same answer.
int train_check_layout(const TrainOptions *o, int world_size, char *err, size_t errlen);
// The pipeline schedule of the options (checked: pipe_spec_init's rules); 0, or -1 with the message.
int train_pipe_spec(const TrainOptions *o, PipeSpec *spec, char *err, size_t errlen);
// Does the run go through the pipeline executor (a pipeline, or a schedule other than one-process 1F1B)?
int train_uses_pipeline(const TrainOptions *o);
// The MemoryPolicy the options describe; -1 with a message naming the bad flag.
int train_build_policy(const TrainOptions *o, MemoryPolicy *p, char *err, size_t errlen);
// Runs the whole training on every rank of comm, laid out as dp × tp (each dp group takes its
// share of the step's sequences, gradients are summed across dp groups; a TP group shares each
// layer); returns the process exit code: 0; 1 on a runtime failure; 2 on bad data on any rank;
// 3 when --max-bad-steps non-finite steps came in a row; 128 + signal after SIGINT/SIGTERM (the
// step finished and saved).
int train_run(const TrainOptions *o, Comm *comm);
// --mem-budget / ctron plan: the plan for this run's shape and layout (memory/planner.h); 0, or
// -1 when none fits (*plan is then the one of least memory).
int train_plan(const TrainOptions *o, double budget, MemPlan *plan);
// Prints the plan (or why none fits) for a budget; 0 when one fits.
int train_print_plan(FILE *f, const TrainOptions *o, double budget);
// --recompute search: fills search_gflops (--peak-gflops, the cached `ctron peak` figure, or measured)
// and search_gbps (measured) where not given, once, so every later question gets the same answer.
void train_search_rates(TrainOptions *o);
// The search's pick for the options (memory/fusion_search.h) and the graph's optimum beside it: 0, or -1
// with err when no mode fits --act-budget-layer (the least one needs named).
int train_search_pick(const TrainOptions *o, FusionGraph *g, FusionMode *pick, FusionCut *cut, FusionCut *best,
                      char *err, size_t errlen);
// The header's lines: budget, pick, its bytes and predicted recompute time per layer, the graph's optimum.
void train_print_search(FILE *f, const TrainOptions *o);
// The analytic-model shape of the run (family, layout, dtype, masks).
ActShape train_act_shape(const TrainOptions *o);
// MEMO (train/memo_options.c): the α memo_plan chooses for o->mem_budget on this machine (the host link
// measured through the offload pool, the GEMM rate from the cached `ctron peak` figure or measured), as
// the run's policy with the arena held to the budget; 0, or -1 with why in err. train_print_memo_plan:
// the plan for a budget at given speeds (0: measure; the TP link's: o->tp_link_gbps), and full recompute's
// predicted time beside it.
// On several ranks (o->world_size > 1) it plans with the speeds train_memo_agree_speeds shared, and before
// that only checks that some α fits (nothing measured, nothing printed).
int train_memo_policy(const TrainOptions *o, MemoryPolicy *p, char *err, size_t errlen);
// --memo auto on several ranks: rank 0 measures, every rank of `world` plans with its speeds (each rank's
// own could pick another α, and TP ranks of different α would not run the same collectives). Collective.
void train_memo_agree_speeds(const TrainOptions *o, CommGroup *world);
int train_print_memo_plan(FILE *f, const TrainOptions *o, double budget, double link_gbps, double gemm_gflops);
// Bytes one rank needs, estimated before anything is allocated (the limit check of the CLI):
// parameters, gradients and AdamW state, and activations (an upper bound: no recompute, fp32).
double train_memory_estimate(const TrainOptions *o, double *state_bytes, double *act_bytes);
// Data-parallel groups of the run: world_size / (tp · pp) (1 when the layout does not fit; checked apart).
int train_dp_groups(const TrainOptions *o);
// Model FLOPs of one optimizer step: the paper's Eq. 7 with B = batch × grad_accum sequences.
double train_flops_per_step(const GPTConfig *c, int grad_accum);
// LoRA's change to those model FLOPs for B sequences (no dW GEMMs of the frozen base; the adapters'
// forward and backward); 0 without LoRA. The hardware FLOPs take the same change (the adapters' own
// recompute under full recompute, ~r/h of a forward, is not counted).
double train_lora_flops_delta(const GPTConfig *c, double B);
// The model's block for the FLOP count (memory/flops.h): its k/v width, FFN width and MLP matrices.
FlopBlock train_flop_block(const GPTConfig *c);
#endif
