// peft's LoRA adapter directories (adapter_config.json + adapter_model.safetensors): what
// PeftModel.from_pretrained(base, DIR) loads onto the Hugging Face base, written from a ctron LoRA
// model, and read back to continue, merge, evaluate or generate. Only what ctron runs exactly is read:
// LoRA with scaling α/r on the linears arch/lora.h lists, every layer, no bias, no DoRA, no rsLoRA,
// no per-module ranks; anything else is refused naming the field.
#ifndef CTRON_PEFT_ADAPTER_H
#define CTRON_PEFT_ADAPTER_H
#include <stddef.h>
#include "model/gpt.h"

typedef struct {
    int rank;
    float alpha;
    int rslora;                   // use_rslora: scaled by alpha / sqrt(r)
    float dropout;                // lora_dropout (training only)
    unsigned targets;             // LoraSite bits of the family
    char base[4096];              // base_model_name_or_path ("" when null)
} PeftConfig;

// Writes lora's adapters (a whole host LoRA model) as a new directory out (atomic: whole or not at
// all). base: base_model_name_or_path to record (NULL: null). 0, or -1 with err.
int peft_write(const GPT *lora, const char *out, const char *base, char *err, size_t errlen);
// dir/adapter_config.json for a model of family arch. 0, or -1 with err naming the file and field.
int peft_read_config(const char *dir, LoraFamily lf, PeftConfig *pc, char *err, size_t errlen);
// The adapters of dir into lora (a whole host model built with pc's rank, alpha and targets): every
// adapted linear's A and B present once with its shape, finite, and nothing else. 0, or -1 with err.
int peft_load_adapters(GPT *lora, const char *dir, char *err, size_t errlen);
// The adapters of dir folded into m (a whole model of the base; any backend): W += (α/r)·B·A, what
// peft's merge_and_unload computes. For evaluating and generating with an adapter. 0, or -1 with err.
int peft_merge_into(GPT *m, const char *dir, char *err, size_t errlen);
#endif
