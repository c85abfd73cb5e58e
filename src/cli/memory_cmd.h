// ctron memory: the analytic activation model for any shape and layout (memory/memory_config.h).
#ifndef CTRON_MEMORY_CMD_H
#define CTRON_MEMORY_CMD_H
#include <stdio.h>

void cli_memory_usage(FILE *f);
// argv[0] is "memory". Returns the exit code: 0, or 2 on a usage error (message printed).
int cli_memory_main(int argc, char **argv);
#endif
