// ctron plan: the cheapest recompute / mask / Tempo mix whose activations fit a memory budget.
#ifndef CTRON_PLAN_CMD_H
#define CTRON_PLAN_CMD_H
#include <stdio.h>

void cli_plan_usage(FILE *f);
// argv[0] is "plan". Returns 0 when a plan fits, 2 on a usage error or when none fits.
int cli_plan_main(int argc, char **argv);
#endif
