// A ctron model written as a Hugging Face model directory that transformers' from_pretrained loads as
// it is: config.json and generation_config.json (io/hf_config_write.h), the weights under their HF
// names and orientation (io/hf_names.h) in model.safetensors, or in shards
// model-0000K-of-0000N.safetensors with model.safetensors.index.json when they outgrow the shard
// size, and the tokenizer file when there is one. Atomic: everything is written into a temporary
// sibling directory, which is renamed to the output at the end; a failure leaves nothing.
#ifndef CTRON_HF_EXPORT_H
#define CTRON_HF_EXPORT_H
#include <stddef.h>
#include "io/safetensors.h"
#include "model/gpt.h"

typedef struct {
    StDtype dtype;                // ST_F32, or ST_BF16 (rounded to nearest even)
    size_t max_shard_bytes;       // a shard's most bytes (0: one file); a larger tensor gets a shard of its own
    const void *tokenizer_json;   // the tokenizer file's bytes, written as tokenizer.json (NULL: none)
    size_t tokenizer_bytes;
} HfExportOptions;

// m: a whole model with host parameters (gpt_init_params). out must not exist (its parent must).
// 0, or -1 with err (nothing is left behind).
int hf_export(const GPT *m, const char *out, const HfExportOptions *o, char *err, size_t errlen);
// A new directory out, whole or not at all: fill writes it as a temporary sibling, which is renamed
// to out at the end (and removed on failure). out must not exist. 0, or -1 with err.
int hf_write_dir_atomic(const char *out, int (*fill)(const char *dir, void *ctx, char *err, size_t errlen), void *ctx,
                        char *err, size_t errlen);
// Is this tokenizer file Hugging Face's format (a "model" object with a "type")? Then the export adds
// tokenizer_config.json so that AutoTokenizer finds a fast tokenizer.
int hf_tokenizer_is_hf(const void *json, size_t bytes);
#endif
