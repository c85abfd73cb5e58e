// The three passes of `ctron train`'s command line (DESIGN.md §10), in the order cli_parse_train runs
// them; each returns 0, or CTRON_EXIT_USAGE with one message printed (-1 from the first: --help and
// --list-options printed, exit 0).
//   1. flags (train_flags.c): each flag's type and bounds, getopt and apply_option; then what --resume
//      restores from the checkpoint's state.json, through the same apply_option.
//   1b. --init-from (train_init_from.c): the architecture of the model the run starts from (before
//      --resume's restoring, which it excludes).
//   2. validation (train_validate.c): the options against the model and each other: the family, the
//      shapes, the layout, the policy, combinations of flags. Reads nothing outside the options.
//   3. environment (train_env.c): what the run meets outside: the device, this machine's memory and
//      CPU, the --mem-budget plan sized for them, the files (data, tokenizer, log, --ckpt-dir).
#ifndef CTRON_TRAIN_PASSES_H
#define CTRON_TRAIN_PASSES_H
#include "train/trainer.h"

// The long names of the flags the command line gave, in order (--resume merges by them); at most cap
// (the number of options) are kept.
typedef struct {
    const char *name[128];
    int n, cap;
} TrainGiven;

int train_given(const TrainGiven *g, const char *flag);

int train_flags_parse(int argc, char **argv, TrainOptions *o, TrainGiven *given);
int train_flags_resume(TrainOptions *o, const TrainGiven *given);
int train_init_from(TrainOptions *o, const TrainGiven *given);
int train_validate(TrainOptions *o, const TrainGiven *given);
int train_check_environment(TrainOptions *o, const TrainGiven *given);
#endif
