// Command-line front end. Usage errors exit with code 2 and a message naming the flag.
#ifndef CTRON_CLI_H
#define CTRON_CLI_H
#include "train/trainer.h"

#define CTRON_EXIT_USAGE 2

// Parses and validates `ctron train` arguments (argv[0] is "train"). Returns 0 when o is ready,
// CTRON_EXIT_USAGE on a usage error (message already printed), or -1 when --help was printed.
// world_size: the ranks of the run (a checkpoint's batch is split over its data-parallel groups).
int cli_parse_train(int argc, char **argv, TrainOptions *o, int world_size);
void cli_train_usage(FILE *f);
int cli_train_main(int argc, char **argv);
#endif
