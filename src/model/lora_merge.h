// A LoRA model as one plain model (docs/LORA.md): the frozen base of a whole host LoRA model copied
// into a plain model of the same architecture, optionally with every adapted linear merged,
// W += (α/r)·B·A (peft's merge_and_unload). What export --merge, eval/generate --adapter and a
// peft directory's logits rest on.
#ifndef CTRON_LORA_MERGE_H
#define CTRON_LORA_MERGE_H
#include "model/gpt.h"

// c without its LoRA fields: the base model's configuration.
GPTConfig lora_base_config(const GPTConfig *c);
// The data of one tensor of a whole host model, from its trainable or its frozen list.
float *lora_tensor_data(const GPT *m, const ParamInfo *pi);
// The base linear's weight [out, in] that adapter site s of layer l adapts, in plain (NULL: none).
const ParamInfo *lora_base_weight(const GPT *plain, LoraSite s, int layer);
// plain (gpt_init_params of lora_base_config(&lora->cfg)) := lora's base, with the adapters merged
// when merge is set. Both are whole host models.
void lora_to_plain(const GPT *lora, GPT *plain, int merge);
// W += (α/r)·B·A for every adapter of lora (a whole host model) into params, host memory laid out as
// plain's parameters (a whole model of lora's base configuration).
void lora_merge_adapters(const GPT *lora, const GPT *plain, float *params);
#endif
