// --base-dtype bf16: LoRA's frozen base stored only in bf16 (base16.c says how each reader gets it).
#ifndef CTRON_BASE16_H
#define CTRON_BASE16_H
#include "model/gpt.h"
#include "model/params.h"

// gpt_init_pp with cfg.base_bf16 under LoRA: the base's bf16 storage, LoRA-FA's fp32 A and the address range
// the views name; base16_free gives them back (and the stage).
void base16_alloc(GPT *m);
void base16_free(GPT *m);
// The stage, once the views are bound (its size is the largest set of widened tensors).
void base16_stage_alloc(GPT *m);
size_t base16_stage_bytes(const GPT *m);
// Layer l's tensors as a pass reads them: block_tensors, with the one-dimensional ones widened into the
// stage under --base-dtype bf16 (valid until the next call; the matrices stay the base's names).
BlockTensors gpt_block_weights(GPT *m, int l);
// The final norm's weight and bias (NULL: none), widened the same way.
void gpt_head_norm_weights(GPT *m, const float **w, const float **b);
// Learned positions s0 .. s0+s−1 (rows of wpe), widened the same way.
const float *gpt_position_rows(GPT *m, int s0, int s);
#endif
