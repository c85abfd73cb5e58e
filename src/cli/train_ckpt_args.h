// The checkpoint flags of ctron train: --ckpt-dir, --save-every, --keep, --stop-after, --resume, in the
// passes of cli/train_passes.h. Each returns 0, or CTRON_EXIT_USAGE with the message printed.
#ifndef CTRON_TRAIN_CKPT_ARGS_H
#define CTRON_TRAIN_CKPT_ARGS_H
#include "train/train_config.h"
#include "train/trainer.h"

// Flags (right after parsing): resolves --resume to a step directory, reads its state.json and merges
// it with the flags in given[] (long option names of the flags on the command line; apply restores a
// recorded option through the parser, train_config_resume). Nothing without --resume.
int cli_train_resume(TrainOptions *o, const char *const *given, int n_given, TrainOptionApply apply);
// Validation: the checkpoint flags fit together (--save-every and --keep need --ckpt-dir; --stop-after
// within --steps).
int cli_train_ckpt_check(const TrainOptions *o, const char *const *given, int n_given);
// Environment: --resume with --tokenizer: the file defines the vocabulary the checkpoint was trained with.
int cli_train_resume_tokenizer(const TrainOptions *o, const char *const *given, int n_given);
// Environment, after every other check: creates --ckpt-dir, so a bad path fails now and not at the first save.
int cli_train_ckpt_dir(TrainOptions *o);
#endif
