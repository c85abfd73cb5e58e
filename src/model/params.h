// Parameter layout: one flat buffer, tensors stacked per kind, named by the family's table.
#ifndef CTRON_PARAMS_H
#define CTRON_PARAMS_H
#include "model/gpt.h"

// The slices of one block within the stacked [L, ...] tensors (params.c's BUFFERS order).
typedef struct {
    float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b, *qk_norm_w;
} BlockTensors;

// Layer l's slices (m gives this rank's widths); NULL for a buffer the family has not.
BlockTensors block_tensors(const GPT *m, const GPTTensors *t, int l);
// Layer l's slices that exist and their element counts (at most BLOCK_BUFFERS_MAX): what a per-layer reduction covers.
enum { BLOCK_BUFFERS_MAX = 13 };
int block_buffers(const GPT *m, const GPTTensors *t, int l, float **ptr, size_t *count);
// This rank's parameter count, the views into base, and the names and shard descriptions.
size_t local_num_params(const GPT *m);
void bind_tensors(const GPT *m, GPTTensors *t, float *base);
void build_info(GPT *m);
// W's bf16 copy under mixed precision (in params16 or, for a frozen tensor, frozen16), else NULL.
const uint16_t *gpt_w16(const GPT *m, const float *w);
// How gpt_init_weights draws a tensor (ParamInfo.init).
typedef enum { INIT_ONES, INIT_ZERO, INIT_NORMAL, INIT_NORMAL_RESID, INIT_LORA_A } Init;
// The base model's tensors in the whole model's list (the adapters follow them: full_index n, n+1, ...).
int base_tensor_count(const GPTConfig *c);

// LoRA adapters (adapters.c, from arch/lora.h's rows). Floats of this rank's A stacks and B stacks; the
// whole model's adapter tensors; their views laid out at a_base and b_base (A then B of each targeted
// site, in site order); their ParamInfo entries (after the base's n tensors in the whole model's list),
// each into m->info (trainable) or m->frozen_info (A under LoRA-FA, after the base's frozen tensors);
// the name of the whole model's adapter tensor k (0 when k is not one).
size_t adapter_a_floats(const GPT *m);
size_t adapter_b_floats(const GPT *m);
int adapter_tensor_count(const GPTConfig *c);
void adapter_bind(const GPT *m, LoraTensors *t, float *a_base, float *b_base);
void adapter_build_info(GPT *m, int n_base);
int adapter_full_name(const GPTConfig *c, int k, char *buf, size_t len);
// Mixed precision: makes the bf16 copy of the parameters from the masters when they changed since
// (gpt_params_changed); nothing under fp32.
void gpt_refresh_params16(GPT *m);
#endif
