// The model family's flags as ctron train spells them (--arch, --kv-heads, --head-dim, --ffn-hidden,
// --tie-embeddings, --qkv-bias, --qk-norm, --fused-proj, --sliding-window), shared by the planning commands (ctron memory, ctron plan and
// ctron plan --cluster), with train's checks and messages: a llama flag with GPT-2, kv-heads that do
// not divide the heads, an odd head dimension under RoPE, a t that splits a key/value head or the FFN.
#ifndef CTRON_FAMILY_ARGS_H
#define CTRON_FAMILY_ARGS_H
#include <getopt.h>
#include <stddef.h>
#include "arch/arch.h"
#include "memory/presets.h"

enum { FAMILY_OPT_ARCH = 900, FAMILY_OPT_KV, FAMILY_OPT_FFN, FAMILY_OPT_TIE, FAMILY_OPT_QKV_BIAS, FAMILY_OPT_HEAD_DIM,
       FAMILY_OPT_QK_NORM, FAMILY_OPT_FUSED_PROJ, FAMILY_OPT_WINDOW };
// The entries of a getopt_long table.
#define FAMILY_LONG_OPTIONS                                                                                   \
    {"arch", required_argument, 0, FAMILY_OPT_ARCH}, {"kv-heads", required_argument, 0, FAMILY_OPT_KV},       \
        {"ffn-hidden", required_argument, 0, FAMILY_OPT_FFN}, {"tie-embeddings", no_argument, 0, FAMILY_OPT_TIE}, \
        {"qkv-bias", no_argument, 0, FAMILY_OPT_QKV_BIAS}, {"head-dim", required_argument, 0, FAMILY_OPT_HEAD_DIM}, \
        {"qk-norm", no_argument, 0, FAMILY_OPT_QK_NORM}, {"fused-proj", no_argument, 0, FAMILY_OPT_FUSED_PROJ},     \
        {"sliding-window", required_argument, 0, FAMILY_OPT_WINDOW}

// The case labels of a command's option switch that hand the option to family_args_apply.
#define FAMILY_OPT_CASES                                                                                          \
    case FAMILY_OPT_ARCH: case FAMILY_OPT_KV: case FAMILY_OPT_FFN: case FAMILY_OPT_TIE: case FAMILY_OPT_QKV_BIAS:   \
    case FAMILY_OPT_HEAD_DIM: case FAMILY_OPT_QK_NORM: case FAMILY_OPT_FUSED_PROJ: case FAMILY_OPT_WINDOW

typedef struct {
    int arch;                  // ArchKind; -1 when --arch is not given
    int kv_heads, ffn;         // 0 when not given
    int head_dim;              // 0 when not given (hidden / heads)
    int tie, qkv_bias;         // the flags were given
    int qk_norm;               // --qk-norm was given
    int fused_proj;            // --fused-proj was given
    int window;                // --sliding-window W (0 when not given)
} FamilyArgs;

// The model the flags and a preset's family make (0 knobs already filled in).
typedef struct {
    ArchKind arch;
    long kv, ffn;
    long head_dim;             // each head's width (hidden / heads unless --head-dim)
    int tie;                   // 1 tied, -1 untied (act_shape_set_family's)
    int qkv_bias;
    int qk_norm;               // q and k RMS-normalised per head (Qwen3)
    int fused_proj;            // q|k|v one qkv_proj, gate|up one gate_up_proj (Phi-3)
    long window;               // sliding window W (Mistral, Phi-3; 0: none): FLOPs and flash's time, no bytes
} Family;

// The usage text of the flags (two-space indent, for the commands' --help).
extern const char family_args_usage[];
void family_args_init(FamilyArgs *f);
// One of the FAMILY_OPT_* options: 0, or the usage error's exit code.
int family_args_apply(FamilyArgs *f, const char *cmd, int opt, const char *optarg);
// The flags over a preset's family (pr: its arch, kv, head_dim, ffn, tying, q/k norms and fused projections,
// 0 for the family's default; NULL: no preset, GPT-2 unless --arch; a preset of another family than --arch
// gives no knobs), checked against the
// heads and hidden size: 0 with *out filled, or -1 with the message (naming the flag and value) in err for
// the caller's usage error.
int family_args_resolve(const FamilyArgs *f, const ModelPreset *pr, long hidden, long heads, Family *out, char *err,
                        size_t errlen);
// Tensor parallelism over the family: t must divide the key/value heads and the FFN width (each TP rank
// takes whole key/value heads and ffn/t columns of the MLP). 0, or -1 with the message in err.
int family_check_tp(const Family *fam, int t, char *err, size_t errlen);
#endif
