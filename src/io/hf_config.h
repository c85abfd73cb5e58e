// A Hugging Face model's config.json → ctron's model configuration. model_type gpt2
// (GPT2LMHeadModel), llama, mistral (Llama's tensors and a sliding window), qwen2 (Llama + q/k/v biases),
// qwen3 (Llama + per-head q/k RMSNorm, head_dim 128 when absent; attention_bias is refused) and phi3 (Llama
// with q|k|v and gate|up each one tensor; its window as Mistral's; RoPE unscaled or longrope, on the first
// int(head_dim · partial_rotary_factor) dims of each head: model.rotary_dim, 0 for all). Keys of both
// transformers generations are read: the RoPE base from 5.x's rope_parameters.rope_theta or 4.x's top-level
// rope_theta, the weights' dtype from 5.x's "dtype" or 4.x's "torch_dtype". A key that is absent takes the
// default of transformers' own config class (docs/HF.md lists them), except the sizes, which must be given.
// The sliding window is read as each family's modeling code applies it: Mistral's and Phi-3's sliding_window on
// every layer; Qwen2's and Qwen3's only with use_sliding_window, on the layers from max_window_layers on or on
// layer_types' "sliding_attention" ones. A window on every layer is model.sliding_window; one on only some
// layers is kept apart, and hf_config_apply refuses a sequence it would cut short (ctron runs one window on
// every layer or none).
// RoPE scaling of rope_type linear and llama3 is read (model.rope_scaling); what ctron cannot run exactly
// (other RoPE scalings, an o_proj bias, another activation, an odd head_dim, quantised weights) is refused with
// the field and the reason.
#ifndef CTRON_HF_CONFIG_H
#define CTRON_HF_CONFIG_H
#include <stddef.h>
#include "model/gpt.h"

typedef struct {
    char model_type[16];          // "gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3"
    GPTConfig model;              // the architecture, resolved (seq, batch and dropout are 0: the run's); its
                                  // sliding_window: the window of every layer (0: none, or not every layer's)
    int max_positions;            // n_positions / max_position_embeddings
    int partial_window;           // a window on only some layers (Qwen2's max_window_layers, a mixed layer_types);
                                  // 0: none such
    int partial_layers;           // how many layers have it
    char partial_key[24];         // the field that gives it to them ("max_window_layers" or "layer_types")
    char dtype[16];               // the weights' dtype as recorded ("float32", ...), "" when not given
} HfConfig;   // (bos_token_id / eos_token_id: model.tokens)

// Parses config.json's text (path names it in messages). 0, or -1 with err naming the file and the field.
int hf_config_parse(const char *text, size_t len, const char *path, HfConfig *c, char *err, size_t errlen);
// Reads and parses path.
int hf_config_read(const char *path, HfConfig *c, char *err, size_t errlen);
// generation_config.json's text: its bos_token_id / eos_token_id, where given, replace t's (transformers'
// generate reads them there first). 0, or -1 with err naming the file and the field.
int hf_generation_config_parse(const char *text, size_t len, const char *path, SpecialTokens *t, char *err,
                               size_t errlen);
// The model a run with run->seq positions (and its batch and dropout) builds from c: run's
// architecture fields are replaced by c's. Refuses a sequence the model cannot take: longer than a
// learned position table (GPT-2's n_positions), or longer than a window only some layers have. A window on
// every layer takes any sequence.
int hf_config_apply(const HfConfig *c, GPTConfig *run, const char *path, char *err, size_t errlen);
#endif
