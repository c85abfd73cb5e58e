// ctron generate: text from a checkpoint with the KV-cache inference path (model/generate.h).
#ifndef CTRON_GENERATE_CMD_H
#define CTRON_GENERATE_CMD_H
#include <stdio.h>

void cli_generate_usage(FILE *f);
// argv[0] is "generate". Returns the exit code: 0, 1 (runtime failure) or 2 (usage error).
int cli_generate_main(int argc, char **argv);
#endif
