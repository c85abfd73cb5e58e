#ifndef CTRON_EVAL_CMD_H
#define CTRON_EVAL_CMD_H
#include <stdio.h>
#include "io/model_source.h"

void cli_eval_usage(FILE *f);
int cli_eval_main(int argc, char **argv);
// ctron eval --ids --dump [--grads] (cli/eval_dump.c): runs the batch of ids_path through the model
// of src and writes out_path. Returns the command's exit code (2: bad input, 1: a write failed).
int eval_dump(const ModelSource *src, const char *ids_path, const char *out_path, int grads);
#endif
