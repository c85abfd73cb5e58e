// The config.json and generation_config.json of a Hugging Face export (ctron export --hf): what
// transformers' own config class writes for the model, with both generations' keys where they moved
// (rope_parameters and rope_theta, dtype and torch_dtype), so that transformers 4.x and 5.x load it.
#ifndef CTRON_HF_CONFIG_WRITE_H
#define CTRON_HF_CONFIG_WRITE_H
#include "model/gpt.h"

// The model's config.json (GPT-2 → GPT2LMHeadModel; llama → LlamaForCausalLM, Qwen2ForCausalLM with
// q/k/v biases, Qwen3ForCausalLM with q/k norms, Phi3ForCausalLM with fused projections, or
// MistralForCausalLM with a sliding window and none of those; the window written so that every layer has it),
// positions = c->seq, weights stored as dtype ("float32" or "bfloat16"). A fresh string (free it with cJSON_free).
char *hf_config_json(const GPTConfig *c, const char *dtype);
// Has transformers a class for c? 0, or -1 with why in err: RoPE on part of each head (rotary_dim) outside Phi-3's
// block (fused projections), whose partial_rotary_factor is the only one transformers applies to the llama block.
int hf_config_exportable(const GPTConfig *c, char *err, size_t errlen);
// generation_config.json: the model's defaults, its BOS/EOS ids (c->tokens; null when none is known).
char *hf_generation_config_json(const GPTConfig *c);
#endif
