// Does a checkpoint verify itself? Its files against checksums.txt (io/ckpt_manifest.h), the step
// recorded three times (state.json, the model's and the optimizer's ctron_step metadata), and
// values a trained model can hold (finite weights and moments, second moments v >= 0).
#ifndef CTRON_CKPT_VERIFY_H
#define CTRON_CKPT_VERIFY_H
#include <stddef.h>
#include "io/checkpoint.h"
#include "io/safetensors.h"

// Every F32 and BF16 (a --base-dtype bf16 run's frozen base) tensor of f is finite, and those named "v.*"
// (AdamW second moments) are >= 0.
// 0, or -1 with err naming the file, the tensor, the element and its value.
int ckpt_check_values(const StFile *f, const char *path, char *err, size_t errlen);
// f's ctron_step metadata, when present, is step. 0, or -1 with err naming both.
int ckpt_check_step(const StFile *f, const char *path, int step, char *err, size_t errlen);
// The whole check of one step directory without a model: state.json, checksums, both safetensors
// files parsed, steps agreeing, values possible. note (may be NULL) receives a remark that is not
// an error ("no checksums.txt: ..."), else "". 0, or -1 with err saying what is wrong.
int ckpt_verify(const char *step_dir, char *note, size_t notelen, char *err, size_t errlen);
#endif
