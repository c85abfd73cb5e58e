// ctron ckpt verify DIR: does each checkpoint of a run verify itself, and which one would --resume take?
#ifndef CTRON_CKPT_CMD_H
#define CTRON_CKPT_CMD_H
#include <stdio.h>

void cli_ckpt_usage(FILE *f);
// argv[0] is "ckpt". 0 when every checkpoint verifies, 1 when one does not, 2 on a usage error.
int cli_ckpt_main(int argc, char **argv);
#endif
