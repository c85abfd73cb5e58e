// Where a command's model comes from (--model PATH): a Hugging Face model directory (config.json
// and safetensors, io/hf_load.h) or a ctron checkpoint (a run directory or one step_NNNNNNNN
// directory, io/checkpoint.h). Either gives the architecture, then fills a model built from it at
// the sequence length the command chooses.
#ifndef CTRON_MODEL_SOURCE_H
#define CTRON_MODEL_SOURCE_H
#include <stddef.h>
#include "io/checkpoint.h"
#include "io/hf_config.h"

typedef struct {
    int is_hf;
    char path[4096];              // the HF directory, or the checkpoint's step directory
    GPTConfig cfg;                // the architecture; seq = the model's own (a checkpoint's, an HF model's positions)
    HfConfig hf;                  // is_hf: config.json
    CkptState state;              // !is_hf: state.json
    int positions;                // the longest sequence the model takes (0: any: rotary positions)
    int precision;                // the precision it trained in (Precision; HF: fp32)
    char tokenizer[4200];         // its tokenizer.json, or "" when it has none
    char adapter[4096];           // a peft LoRA adapter folded into the weights at load, or ""
} ModelSource;

// Reads the architecture of path. 0; -1 when path is neither an HF directory nor a checkpoint (or
// config.json is bad input: err names the file and field); -2 when it holds checkpoints and none verifies.
int model_source_open(const char *path, ModelSource *src, char *err, size_t errlen);
// --adapter DIR: a peft LoRA adapter for this model, its config checked now (io/peft_adapter.h),
// merged into the weights by model_source_load. 0, or -1 with err.
int model_source_set_adapter(ModelSource *src, const char *dir, char *err, size_t errlen);
// The model to build for sequences of seq tokens in batches of batch: the architecture, with seq,
// batch and dropout 0. -1 with err when the model cannot take seq (a learned position table that is
// shorter, a sliding window).
int model_source_config(const ModelSource *src, int seq, int batch, GPTConfig *out, char *err, size_t errlen);
// Fills m with the weights: m built from model_source_config, the whole model or one TP/PP rank's
// part (its shards are cut from a transient whole host copy). 0, or -1 with err.
int model_source_load(const ModelSource *src, GPT *m, char *err, size_t errlen);
#endif
