// ctron memory --lora-rank: full fine-tuning, LoRA and LoRA-FA of one model and layout side by side,
// from the analytic model (the ledger's activations, fp32 model states; docs/LORA.md).
#ifndef CTRON_LORA_REPORT_H
#define CTRON_LORA_REPORT_H
#include <stdio.h>
#include "memory/memory_config.h"

// v[0] full fine-tuning, v[1] LoRA, v[2] LoRA-FA: the same model, layout and policy otherwise.
void lora_report_text(FILE *f, const MemoryConfig v[3]);
#endif
