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
// ROPE_LONGROPE is Phi-3's LongRoPE (_compute_longrope_parameters): inv_j divided by short_factor[j] when
// the sequence rotated is at most original_max_positions long and by long_factor[j] when it is longer (the
// run's --seq decides: a training forward's length, as transformers takes max(position_ids) + 1), and cos and
// sin scaled by attention_factor (√(1 + ln(max/orig) / ln(orig)) when the config gives none).
// ROPE_YARN is YaRN (Peng et al. 2023; transformers' _compute_yarn_parameters, Qwen2.5's and Qwen3's long
// context): inv_j blends inv_j / factor (interpolation) and inv_j (extrapolation) by a linear ramp over the
// frequencies between the correction dims of beta_fast and beta_slow rotations in original_max_positions
// (floor and ceil when truncate), and cos and sin are scaled by attention_factor (0.1·ln(factor) + 1 when the
// config gives none).
// ROPE_DYNAMIC is dynamic NTK scaling (transformers' _compute_dynamic_ntk_parameters): for a sequence of T
// positions past max_position_embeddings M (original_max_positions here) the base becomes
// θ·(F·T/M − (F − 1))^(D/(D−2)), D > 2 the rotated dims, in float32 tensor arithmetic (transformers recomputes
// it in the forward from the positions' tensor); up to M the base is θ (its init, in Python doubles). The run's
// --seq is T, as longrope's switch.
typedef enum {
    ROPE_PLAIN = 0, ROPE_LINEAR = 1, ROPE_LLAMA3 = 2, ROPE_LONGROPE = 3, ROPE_YARN = 4, ROPE_DYNAMIC = 5
} RopeType;
enum {
    ROPE_MAX_FACTORS = 128,        // longrope's factors: one per rotated frequency, R/2 (up to 256 rotated dims)
    ROPE_SCALING_TEXT_MAX = 4096   // rope_scaling_text's longest (longrope: 2 · 128 numbers)
};
typedef struct {
    int type;                         // RopeType
    float factor;                     // linear, llama3, yarn, dynamic: ≥ 1
    float low_freq_factor;            // llama3: > 0
    float high_freq_factor;           // llama3: > low_freq_factor
    int original_max_positions;       // llama3, longrope, yarn: the pre-training context, ≥ 1 (dynamic: the config's
                                      // max_position_embeddings, past which it scales)
    int n_factors;                    // longrope: d/2
    double attention_factor;          // longrope, yarn: cos and sin × this (> 0)
    float beta_fast, beta_slow;       // yarn: the ramp's ends in rotations (> 0; transformers' 32 and 1)
    int truncate;                     // yarn: the correction range floored and ceiled (1, transformers' default) or not
    float short_factor[ROPE_MAX_FACTORS], long_factor[ROPE_MAX_FACTORS];   // longrope: each > 0
} RopeScaling;
// "linear", "llama3", "longrope", "yarn", "dynamic", or "default" for ROPE_PLAIN (transformers' rope_type names),
// and back (-1: another).
const char *rope_type_name(int type);
int rope_type_from_name(const char *name);
// The scaling's text, as --rope-scaling takes it: "none", "linear:F", "llama3:F:LOW:HIGH:ORIG",
// "longrope:ORIG:ATTENTION:S0,S1,…:L0,L1,…", "yarn:F:ORIG:ATTENTION:BETA_FAST:BETA_SLOW:TRUNCATE",
// "dynamic:F:MAX" (every number round-trips; len ROPE_SCALING_TEXT_MAX holds any). --rope-scaling also takes
// "yarn:F:ORIG", with transformers' defaults for the rest (yarn_defaults).
const char *rope_scaling_text(const RopeScaling *sc, char *out, size_t len);   // returns out
// YaRN's attention factor when a config gives none (transformers' get_mscale): 0.1·mscale·ln(factor) + 1, 1 for a
// factor up to 1; with mscale and mscale_all_dim both given, the ratio of the two.
double yarn_attention_factor(double factor, double mscale, double mscale_all_dim);
// A yarn scaling of factor and original context with transformers' defaults: the attention factor derived from
// factor as given (a config's double, not its float32 rounding), beta_fast 32, beta_slow 1, truncate.
RopeScaling yarn_defaults(double factor, int original_max_positions);
// A short description for messages: the text, or for longrope "longrope (N factors, original ORIG, attention A)".
const char *rope_scaling_label(const RopeScaling *sc, char *out, size_t len);   // returns out
// A key that tells two scalings apart in at most 96 bytes: the text, or longrope's numbers with a 64-bit hash
// of its factors (what ranks and a resume compare: the option records hold 192 bytes).
const char *rope_scaling_key(const RopeScaling *sc, char *out, size_t len);   // returns out
// Does the table of a sequence of `positions` take longrope's long factors?
static inline int rope_long_factors(const RopeScaling *sc, int positions) {
    return sc && sc->type == ROPE_LONGROPE && positions > sc->original_max_positions;
}
// The reverse, with the ranges above; 0, or -1 with why in err.
int rope_scaling_parse(const char *text, RopeScaling *sc, char *err, size_t errlen);
// A scaling's ranges (a checkpoint's or a config's): 0, or -1 with why in err.
int rope_scaling_check(const RopeScaling *sc, char *err, size_t errlen);
#ifdef __cplusplus
}
#endif
#endif
