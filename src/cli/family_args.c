#include "cli/family_args.h"
#include <stdio.h>
#include <string.h>
#include "cli/args.h"

const char family_args_usage[] =
    "  --arch gpt2|llama        the block (default gpt2, or the preset's): llama is RMSNorm, grouped-query\n"
    "                           attention, SwiGLU, RoPE and an untied output layer (docs/MEMORY.md)\n"
    "  --kv-heads N             llama: key/value heads, a divisor of the heads (default the heads: MHA)\n"
    "  --head-dim D             llama: each head's width (default hidden/heads; Mistral Nemo: 128 of 5120/32)\n"
    "  --ffn-hidden N           llama: the SwiGLU MLP's width (default 8h/3 rounded up to a multiple of 64)\n"
    "  --tie-embeddings         llama: the output layer is the token embedding (default its own, lm_head)\n"
    "  --qkv-bias               llama: q, k and v carry biases (Qwen2)\n"
    "  --qk-norm                llama: q and k RMS-normalised per head before RoPE (Qwen3; not with --qkv-bias)\n"
    "  --fused-proj             llama: q|k|v stored as one qkv_proj and gate|up as one gate_up_proj, and LoRA\n"
    "                           adapts them so (Phi-3, Phi-4; not with --qkv-bias or --qk-norm)\n"
    "  --sliding-window W       llama: each query attends to its last W positions (Mistral, Phi-3): the\n"
    "                           attention core's FLOPs and flash's time count W keys, not s; no byte changes\n";

void family_args_init(FamilyArgs *f) {
    memset(f, 0, sizeof *f);
    f->arch = -1;
}

int family_args_apply(FamilyArgs *f, const char *cmd, int opt, const char *optarg) {
    switch (opt) {
    case FAMILY_OPT_ARCH:
        f->arch = arch_from_name(optarg);
        if (f->arch < 0) return args_error(cmd, "--arch '%s': expected one of %s", optarg, arch_choices());
        return 0;
    case FAMILY_OPT_KV: return args_int(cmd, "--kv-heads", optarg, 1, 1 << 20, &f->kv_heads);
    case FAMILY_OPT_HEAD_DIM: return args_int(cmd, "--head-dim", optarg, 2, 1 << 16, &f->head_dim);
    case FAMILY_OPT_FFN: return args_int(cmd, "--ffn-hidden", optarg, 1, 1 << 24, &f->ffn);
    case FAMILY_OPT_TIE: f->tie = 1; return 0;
    case FAMILY_OPT_QKV_BIAS: f->qkv_bias = 1; return 0;
    case FAMILY_OPT_QK_NORM: f->qk_norm = 1; return 0;
    case FAMILY_OPT_FUSED_PROJ: f->fused_proj = 1; return 0;
    case FAMILY_OPT_WINDOW: return args_int(cmd, "--sliding-window", optarg, 1, 1 << 30, &f->window);
    }
    return args_error(cmd, "internal: option %d is no family flag", opt);
}

// The first llama-only flag given, or NULL.
static const char *llama_flag(const FamilyArgs *f) {
    return f->kv_heads ? "--kv-heads" : f->head_dim ? "--head-dim" : f->ffn ? "--ffn-hidden" : f->tie ? "--tie-embeddings"
         : f->qkv_bias ? "--qkv-bias" : f->qk_norm ? "--qk-norm" : f->fused_proj ? "--fused-proj"
         : f->window ? "--sliding-window" : NULL;
}

int family_args_resolve(const FamilyArgs *f, const ModelPreset *pr, long hidden, long heads, Family *out, char *err,
                        size_t errlen) {
    int preset_arch = pr ? pr->arch : ARCH_GPT2;
    ArchKind arch = (ArchKind)(f->arch >= 0 ? f->arch : preset_arch);
    const ArchSpec *a = arch_spec(arch);
    const char *flag = llama_flag(f);
    if (flag && arch == ARCH_GPT2)
        return snprintf(err, errlen, "%s is a llama option (--arch llama): GPT-2 has LayerNorm, an FFN of 4h, learned "
                        "positions, MHA and a tied output layer", flag), -1;
    int own = (int)arch == preset_arch;   // a preset's knobs belong to its own family
    long kv = f->kv_heads ? f->kv_heads : own && pr ? pr->kv : 0;
    long ffn = f->ffn ? f->ffn : own && pr ? pr->ffn : 0;
    int tied = f->tie || (own && pr && pr->tied) || a->tied_default;
    int qk_norm = f->qk_norm || (own && pr && pr->qk_norm);
    if (f->qkv_bias && qk_norm)
        return snprintf(err, errlen, "--qkv-bias with %s: no Hugging Face family has q/k/v biases with q/k norms "
                        "(Qwen3's attention_bias also puts a bias on o_proj, which ctron does not have)",
                        f->qk_norm ? "--qk-norm" : "the preset's q/k norms (Qwen3)"), -1;
    int fused = f->fused_proj || (own && pr && pr->fused_proj);
    if (fused && (f->qkv_bias || qk_norm))
        return snprintf(err, errlen, "%s with %s: no Hugging Face family has fused q|k|v and gate|up projections "
                        "with %s (Phi-3's qkv_proj has no bias and no q/k norms)",
                        f->fused_proj ? "--fused-proj" : "the preset's fused projections (Phi-3)",
                        f->qkv_bias ? "--qkv-bias" : f->qk_norm ? "--qk-norm" : "the preset's q/k norms (Qwen3)",
                        f->qkv_bias ? "q/k/v biases" : "q/k norms"), -1;
    if (kv <= 0) kv = heads;
    if (ffn <= 0) ffn = arch_default_ffn(arch, hidden);
    if (heads % kv)
        return snprintf(err, errlen, "--kv-heads %ld does not divide --heads %ld (each key/value head serves a whole "
                        "group of query heads)", kv, heads), -1;
    long d = f->head_dim ? f->head_dim : own && pr && pr->head_dim ? pr->head_dim : hidden / heads;
    if (a->pos == POS_ROPE && f->head_dim && d % 2)
        return snprintf(err, errlen, "--head-dim %ld is odd: RoPE rotates pairs (j, j + d/2)", d), -1;
    if (a->pos == POS_ROPE && !f->head_dim && hidden % heads == 0 && d % 2)
        return snprintf(err, errlen, "--hidden %ld / --heads %ld = head dimension %ld is odd: RoPE rotates pairs (j, "
                        "j + d/2)", hidden, heads, d), -1;
    *out = (Family){arch, kv, ffn, d, tied ? 1 : -1, f->qkv_bias, qk_norm, fused, f->window};
    return 0;
}

int family_check_tp(const Family *fam, int t, char *err, size_t errlen) {
    if (t > 1 && fam->kv % t)
        return snprintf(err, errlen, "--tp %d does not divide --kv-heads %ld (each TP rank takes whole key/value heads; "
                        "choose t dividing %ld)", t, fam->kv, fam->kv), -1;
    if (t > 1 && fam->ffn % t)
        return snprintf(err, errlen, "--tp %d does not divide --ffn-hidden %ld (each TP rank takes ffn/t columns of "
                        "gate, up and down)", t, fam->ffn), -1;
    return 0;
}
