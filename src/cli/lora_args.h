// The LoRA flags of the planning commands (ctron plan, plan --cluster): --lora-rank R [--lora-targets LIST]
// [--lora-fa], checked against the family and its widths as ctron train checks them.
#ifndef CTRON_CLI_LORA_ARGS_H
#define CTRON_CLI_LORA_ARGS_H
#include <stddef.h>
#include "arch/lora.h"

// rank 0: none of the other flags may be given (targets NULL, fa 0). Else *sites gets the targets (NULL:
// the family's all), and the rank must not exceed any target's smaller side (hidden h, k/v width kvw, FFN
// f). 0, or -1 with the reason in err.
int lora_args_check(LoraFamily family, int rank, const char *targets, int fa, long h, long qw, long kvw, long f, unsigned *sites,
                    char *err, size_t errlen);
#endif
