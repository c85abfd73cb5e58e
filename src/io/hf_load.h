// Loading a Hugging Face model directory (config.json, and model.safetensors or the shards that
// model.safetensors.index.json names) into a ctron model. Files are mapped, not read: a tensor is
// widened to fp32 straight into the model and its pages are given back (io/safetensors.h), so the
// import holds the fp32 model plus one tensor, never a second copy of the model.
#ifndef CTRON_HF_LOAD_H
#define CTRON_HF_LOAD_H
#include <stddef.h>
#include "io/hf_config.h"
#include "model/gpt.h"

// Does dir look like an HF model directory (it holds config.json)?
int hf_is_model_dir(const char *dir);
// dir/config.json, parsed (io/hf_config.h). 0, or -1 with err naming the file and the field.
int hf_dir_config(const char *dir, HfConfig *c, char *err, size_t errlen);
// Fills m's parameters from dir. m was built from dir's config (hf_config_apply) at any layout: the
// whole model (gpt_init_params, or gpt_init with t = p = 1, on any device), or one TP/PP rank's
// shards, which are cut from a transient whole-model copy (gpt_shard_from_full). Everything is
// checked before anything is written: config.json agrees with m, every shard is there, every
// parameter is present once with its HF shape and a float dtype (F32, BF16, F16), every tensor of
// the files is a parameter (or a known buffer), every value is finite. On error m is unchanged and
// err names the file and the tensor or field. 0 or -1.
int hf_load_into(GPT *m, const char *dir, char *err, size_t errlen);
// LoRA at one process (t = p = 1): the base's tensors of dir straight into m's frozen storage, one tensor at a
// time through one fp32 staging buffer (no whole-model host copy): fp32, or under --base-dtype bf16 rounded to
// bf16 (a BF16 file's values exactly). The same checks as hf_load_into; the adapters are left as they are.
int hf_load_frozen_base(GPT *m, const char *dir, char *err, size_t errlen);
#endif
