// ctron's parameters under their Hugging Face names and orientation. Llama-family models use HF's
// names and nn.Linear's [out, in] already (model/params.c). GPT-2's state-dict names gain
// GPT2LMHeadModel's "transformer." prefix, and its Conv1D weights (c_attn, c_proj, c_fc) are [in, out]
// in HF files, the transpose of ctron's; its position table has n_positions rows in HF, seq in ctron.
#ifndef CTRON_HF_NAMES_H
#define CTRON_HF_NAMES_H
#include <stddef.h>
#include "model/gpt.h"

// pi's name in an HF state dict.
void hf_param_name(const GPTConfig *c, const ParamInfo *pi, char *buf, size_t len);
// Is pi stored transposed in HF files (a GPT-2 Conv1D weight)?
int hf_param_transposed(const GPTConfig *c, const ParamInfo *pi);
// pi's shape in HF files (rows, cols; cols 0 for a vector): transposed for Conv1D, and GPT-2's position
// table with `positions` rows.
void hf_param_shape(const GPTConfig *c, const ParamInfo *pi, int positions, int64_t shape[2]);
// Is pi GPT-2's learned position table (whose HF rows beyond seq ctron does not hold)?
int hf_param_is_positions(const GPTConfig *c, const ParamInfo *pi);
// A tensor an HF file may hold that is no parameter: GPT-2's attention-mask buffers (attn.bias,
// attn.masked_bias) and old Llama files' rotary inv_freq. Loaders skip them.
int hf_is_buffer(const char *name);
// The ctron parameter a file's tensor name is, for GPT-2 with or without the "transformer." prefix
// (GPT2Model's own files have none); NULL when it names none of m's.
const ParamInfo *hf_find_param(const GPT *m, const char *file_name);
#endif
