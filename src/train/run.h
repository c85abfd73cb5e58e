// A training run as an object (DESIGN.md §10): what the run owns, opened by run_open and freed by
// run_close on every path (run_setup.c); one optimizer step (run_step.c); what the run says (run_report.c);
// what leaves it, checkpoints and the sample (run_save.c). train_run (trainer.c) is the loop over them.
#ifndef CTRON_RUN_H
#define CTRON_RUN_H
#include <stdint.h>
#include <stdio.h>
#include "data/dataset.h"
#include "model/gpt.h"
#include "model/workspace.h"
#include "parallel/comm.h"
#include "parallel/comm_device.h"
#include "tokenizer/bpe.h"
#include "train/adamw.h"
#include "train/phase_marks.h"
#include "train/pipeline.h"
#include "train/run_peak.h"
#include "train/schedule.h"
#include "train/trainer.h"
#include "train/zero.h"

// Where a step's time goes: forward, backward (with what it recomputes), clipping + optimizer (the
// device's seconds, from the step's PhaseMarks; with other ranks the optimizer's span their reductions); and
// the bytes this rank moved, by collective and (TP) by purpose.
typedef struct {
    double fwd, bwd, opt;
    CommStats comm;
    uint64_t tp_bytes[TPC_PURPOSES];
    int skipped;          // the numerical guard skipped this step
    int offload;          // --offload: what the step moved to and from the pool, and waited for it
    double offload_out, offload_in, offload_wait;
    int pp;               // a pipeline schedule ran: every stage's wait for transfers (the bubble) and compute
    int n_stages;
    float stage_wait[64], stage_busy[64];
} StepTimes;

// What one step gives the report.
typedef struct {
    float lr;
    double loss, norm;    // over the whole step (every rank); either may be non-finite (the step was skipped)
    double step_s, tps;   // seconds of the step (without validation), tokens per second
    double val;           // the validation loss after the step, or NAN
    StepTimes times;
} StepResult;

typedef struct {
    const TrainOptions *o;
    Comm *comm;
    CommGroup *world, *dpg, *tpg;   // all ranks; this rank's data-parallel and tensor-parallel groups
    int rank, nranks, dp_rank;      // nranks: the data-parallel groups
    // Owned: run_close frees what the has_ flags and pointers say was opened.
    int has_grid, has_data, has_bpe, has_policy, has_model;
    CommGrid grid;                  // dp × pp × tp
    Dataset ds;
    Bpe bpe;                        // --tokenizer's vocabulary, and its file's bytes for the checkpoints
    uint8_t *tokenizer_json;
    size_t tokenizer_bytes;
    FILE *log;                      // --log on rank 0 (NULL: none, or closed after a failed write)
    MemoryPolicy policy;
    GPT m;
    Pipeline pipe, *pl;             // pl: the pipeline executor (NULL: micro-batches one after another)
    PipeSpec spec;
    CommDevice *cdev;               // collectives on device tensors (NULL on the CPU)
    Zero zero_state, *zero;         // zero: ZeRO-1 (NULL: every rank keeps the whole AdamW state)
    AdamW opt;
    size_t *bad_counts;             // the guard's non-finite elements per tensor
    int32_t *tokens, *targets;      // a step's micro-batches, [grad_accum][n_tok] (host_alloc)
    PhaseMarks marks;               // the step's forwards and backwards, timed on the device
    // The schedule: steps start + 1 .. last, batch × grad_accum sequences per step on each dp group.
    LRSchedule sched;
    int start, last;
    size_t n_tok;                   // tokens of a micro-batch
    int seqs_per_rank;
    double flops, hw_flops;         // model and hardware FLOPs of a step (all ranks)
    RunPeak peak;
    // How it goes.
    int tty;                        // progress on one line, rewritten (one process on a terminal)
    int bad_run;                    // non-finite steps in a row
    int completed, saves, saved_at;
    int stdout_failed, log_failed;  // said once; the run goes on and exits 1
    double train_seconds, last_val;
} TrainRun;

// run_setup.c. Opens the run on every rank: 0, or its exit code (2: bad data on a rank; 1: the policy,
// the log, a checkpoint to resume); r can be closed either way.
int run_open(TrainRun *r, const TrainOptions *o, Comm *comm);
void run_close(TrainRun *r);
// --static-plan: records one micro-batch and places every step's buffers from its lifetimes.
StaticPlanReport run_plan_static(TrainRun *r);
// Collective over w: true on every rank when ok is true on every rank (a rank must never go on alone
// into a collective); the sum of x over the ranks (no-op on one; fp32, as the interface moves fp32).
int run_all_ok(CommGroup *w, int ok);
void run_sum_over_ranks(CommGroup *w, float *x, size_t n);

// run_step.c. One optimizer step: 0, or 3 when --max-bad-steps non-finite steps came in a row (said).
int run_step(TrainRun *r, int step, StepResult *s);
// The validation loss over --eval-batches batches (collective over the data-parallel groups).
double run_evaluate(TrainRun *r);

// run_report.c. Before the first step: the model, the layout, the device, the memory policy.
void report_header(TrainRun *r);
void report_static_plan(const StaticPlanReport *p);
// After each step: the log line, the first step's ledger, the progress line.
void report_step(TrainRun *r, int step, const StepResult *s);
// After the last: the summary line (end: the loop's exit code, 0 when it ran to its last step).
void report_done(TrainRun *r, double wall, int end);
// Closes --log, saying so when the last bytes could not be written (r->log_failed).
void report_close_log(TrainRun *r);

// run_save.c. The checkpoint of step (collective; 0 on every rank, or -1 on every rank).
int run_save(TrainRun *r, int step);
// --sample: rank 0 prints sampled text from the whole model (collective under TP and PP).
void run_sample(TrainRun *r);
#endif
