// RoPE frequency scaling as a model's configuration carries it (a Hugging Face config's rope_scaling /
// rope_parameters, ctron's --rope-scaling, state.json's model.rope_scaling): the type, its numbers, their
// text and their ranges. The frequencies themselves are rope_inv_freq's (backend/cpu/rope.h).
#ifndef CTRON_ROPE_SCALING_H
#define CTRON_ROPE_SCALING_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {   // backend/cpu/rope.h, which the CUDA backend includes, includes this
#endif
// Frequency scaling of a checkpoint's rope_scaling / rope_parameters (transformers' modeling_rope_utils):
// ROPE_PLAIN leaves inv_j alone; ROPE_LINEAR divides every inv_j by factor ("linear": position
// interpolation); ROPE_LLAMA3 is Llama 3.1's: a frequency whose wavelength 2π/inv_j exceeds
// original_max_positions / low_freq_factor is divided by factor, one whose wavelength is below
// original_max_positions / high_freq_factor is kept, and those between are interpolated (the smooth
// factor). The attention scale stays 1/√d in all three (their attention_factor is 1). A zeroed struct
// is ROPE_PLAIN.
typedef enum { ROPE_PLAIN = 0, ROPE_LINEAR = 1, ROPE_LLAMA3 = 2 } RopeType;
typedef struct {
    int type;                         // RopeType
    float factor;                     // linear, llama3: ≥ 1
    float low_freq_factor;            // llama3: > 0
    float high_freq_factor;           // llama3: > low_freq_factor
    int original_max_positions;       // llama3: the pre-training context, ≥ 1
} RopeScaling;
// "linear", "llama3", or "default" for ROPE_PLAIN (transformers' rope_type names), and back (-1: another).
const char *rope_type_name(int type);
int rope_type_from_name(const char *name);
// The scaling's text, as --rope-scaling takes it: "none", "linear:F", "llama3:F:LOW:HIGH:ORIG".
const char *rope_scaling_text(const RopeScaling *sc, char *out, size_t len);   // returns out
// The reverse, with the ranges above; 0, or -1 with why in err.
int rope_scaling_parse(const char *text, RopeScaling *sc, char *err, size_t errlen);
// A scaling's ranges (a checkpoint's or a config's): 0, or -1 with why in err.
int rope_scaling_check(const RopeScaling *sc, char *err, size_t errlen);
#ifdef __cplusplus
}
#endif
#endif
