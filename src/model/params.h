// Parameter layout: one flat buffer, tensors stacked per kind, GPT-2 state-dict names.
#ifndef CTRON_PARAMS_H
#define CTRON_PARAMS_H
#include "model/gpt.h"

// The slices of one block within the stacked [L, ...] tensors.
typedef struct {
    float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} BlockTensors;

BlockTensors block_tensors(const GPTTensors *t, int h, int l);
void bind_tensors(GPTTensors *t, float *base, const GPTConfig *c);
void build_info(GPT *m);
#endif
