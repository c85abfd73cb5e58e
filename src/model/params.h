// Parameter layout: one flat buffer, tensors stacked per kind, named by the family's table.
#ifndef CTRON_PARAMS_H
#define CTRON_PARAMS_H
#include "model/gpt.h"

// The slices of one block within the stacked [L, ...] tensors (params.c's BUFFERS order).
typedef struct {
    float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} BlockTensors;

// Layer l's slices (m gives this rank's widths); NULL for a buffer the family has not.
BlockTensors block_tensors(const GPT *m, const GPTTensors *t, int l);
// Layer l's slices that exist and their element counts (at most 12): what a per-layer reduction covers.
int block_buffers(const GPT *m, const GPTTensors *t, int l, float **ptr, size_t *count);
// This rank's parameter count, the views into base, and the names and shard descriptions.
size_t local_num_params(const GPT *m);
void bind_tensors(const GPT *m, GPTTensors *t, float *base);
void build_info(GPT *m);
// Mixed precision: makes the bf16 copy of the parameters from the masters when they changed since
// (gpt_params_changed); nothing under fp32.
void gpt_refresh_params16(GPT *m);
#endif
