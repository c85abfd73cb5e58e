// The checkpoint flags of ctron train: --ckpt-dir, --save-every, --keep, --stop-after, --resume.
#ifndef CTRON_TRAIN_CKPT_ARGS_H
#define CTRON_TRAIN_CKPT_ARGS_H
#include "train/train_config.h"
#include "train/trainer.h"

// Right after parsing: resolves --resume to a step directory, reads its state.json and merges it
// with the flags in given[] (long option names of the flags on the command line; apply restores a
// recorded option through the parser, train_config_resume), then checks
// that the checkpoint flags fit together. Returns 0, or CTRON_EXIT_USAGE with the message printed.
int cli_train_ckpt_flags(TrainOptions *o, const char *const *given, int n_given, TrainOptionApply apply);
// After every other check: creates --ckpt-dir, so a bad path fails now and not at the first save.
int cli_train_ckpt_dir(const TrainOptions *o);
#endif
