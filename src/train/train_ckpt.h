// Checkpointing a training run: what state.json records of the run, when to save, resuming, and
// how --resume combines the command line with the checkpoint's settings.
#ifndef CTRON_TRAIN_CKPT_H
#define CTRON_TRAIN_CKPT_H
#include <stddef.h>
#include "io/checkpoint.h"
#include "train/adamw.h"
#include "train/schedule.h"
#include "train/trainer.h"

// The last step this process runs: --stop-after when set, else --steps.
int train_ckpt_last_step(const TrainOptions *o);
// A checkpoint is due after step: every --save-every steps and at the last step (with --ckpt-dir).
int train_ckpt_due(const TrainOptions *o, int step, int last);
// The record of the run after step (the schedule as resolved by the trainer).
void train_ckpt_state(const TrainOptions *o, const AdamW *opt, const LRSchedule *sched, int step, CkptState *st);
// Saves (save_index counts this process's saves from 1, for the crash test hook) and prints a
// line. Returns 0, or -1 with the error printed.
int train_ckpt_save(const TrainOptions *o, const GPT *m, const AdamW *opt, const LRSchedule *sched, int step,
                    int save_index, const void *tokenizer_json, size_t tokenizer_bytes);
// Loads o->resume_step_dir into m and opt. Returns the step to continue after, or -1 (printed).
int train_ckpt_resume(const TrainOptions *o, GPT *m, AdamW *opt);

// --resume: every flag in given[] (long option names) that shapes the training trajectory must
// agree with the checkpoint; every such flag not given takes the checkpoint's value. --steps may
// differ (the cosine schedule then spans the new total), --data may be another path to the data.
// Returns 0, or -1 with a message naming the flag in err.
int train_ckpt_merge(TrainOptions *o, const CkptState *st, const char *const *given, int n_given, char *err,
                     size_t errlen);
#endif
