#ifndef CTRON_EXPORT_CMD_H
#define CTRON_EXPORT_CMD_H
#include <stdio.h>

void cli_export_usage(FILE *f);
int cli_export_main(int argc, char **argv);
#endif
