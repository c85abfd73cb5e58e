// The training run: data, model, optimizer, schedule, evaluation, progress and the JSON log.
#ifndef CTRON_TRAINER_H
#define CTRON_TRAINER_H
#include <stdint.h>
#include "model/gpt.h"

typedef struct {
    GPTConfig model;
    int steps, grad_accum, warmup, eval_every, eval_batches, print_every, threads, sample_tokens;
    float lr, min_lr, weight_decay, beta1, beta2, clip;
    double val_frac;
    uint64_t seed;
    const char *data_path, *log_path, *sample_prompt;
    int show_ledger;     // print measured vs predicted ledger after the first step
} TrainOptions;

void train_options_default(TrainOptions *o);
// Runs the whole training; returns the process exit code (0, or 1 on a runtime failure).
int train_run(const TrainOptions *o);
// Model FLOPs of one optimizer step: 6·N·tokens + 12·L·s²·h per sequence (attention scores and ·V,
// forward and backward).
double train_flops_per_step(const GPTConfig *c, int grad_accum);
#endif
