#include "memory/presets.h"
#include <strings.h>
#include "arch/arch.h"

// Table 3 of the paper (s = 2048, v = 51200; interleaving m = 3 for 175B and 530B) with Table 5's
// iteration times. GPT-2 (Radford et al. 2019): s = 1024 and the 50257-token vocabulary padded to
// 50304 = 393·128, as Megatron (--make-vocab-size-divisible-by 128) and nanoGPT do, so every
// power-of-two t up to 128 divides it; micro-batch 8 and GPT-2's global batch of 512 sequences.
static const ModelPreset presets[] = {
    {"22B", "GPT 22B (paper Table 3)", 64, 6144, 48, 2048, 51200, 8, 1, 1, 8, 4, 4, 1.42, 1.10, ARCH_GPT2, 0, 0, 0, 0, 0, 0},
    {"175B", "GPT-3 175B (paper Table 3)", 96, 12288, 96, 2048, 51200, 8, 8, 3, 64, 64, 1, 18.13, 13.75, ARCH_GPT2, 0, 0, 0, 0, 0, 0},
    {"530B", "MT-NLG 530B (paper Table 3)", 128, 20480, 105, 2048, 51200, 8, 35, 3, 280, 280, 1, 49.05, 37.83, ARCH_GPT2, 0, 0, 0, 0, 0, 0},
    {"1T", "GPT 1T (paper Table 3)", 160, 25600, 128, 2048, 51200, 8, 64, 1, 512, 512, 1, 94.42, 71.49, ARCH_GPT2, 0, 0, 0, 0, 0, 0},
    {"gpt2", "GPT-2 124M", 12, 768, 12, 1024, 50304, 1, 1, 1, 1, 512, 8, 0, 0, ARCH_GPT2, 0, 0, 0, 0, 0, 0},
    {"gpt2-medium", "GPT-2 350M", 16, 1024, 24, 1024, 50304, 1, 1, 1, 1, 512, 8, 0, 0, ARCH_GPT2, 0, 0, 0, 0, 0, 0},
    {"gpt2-large", "GPT-2 774M", 20, 1280, 36, 1024, 50304, 1, 1, 1, 1, 512, 8, 0, 0, ARCH_GPT2, 0, 0, 0, 0, 0, 0},
    {"gpt2-xl", "GPT-2 1.5B", 25, 1600, 48, 1024, 50304, 1, 1, 1, 1, 512, 8, 0, 0, ARCH_GPT2, 0, 0, 0, 0, 0, 0},
    // Llama 3 (the Llama 3 paper's Table 3): GQA with 8 key/value heads, SwiGLU, RMSNorm, RoPE, an untied
    // output layer, the 128256-token vocabulary (= 501·256: every power-of-two t up to 256 divides it),
    // the pre-training context s = 8192 and its 16M-token batch of 2048 sequences. The layouts are the
    // fastest the cluster planner finds on 8-GPU H100 nodes (docs/PLANNER.md): 8B on one node, 70B on
    // 64 GPUs, 405B on 1152 (its 126 layers take p = 18; the paper's p = 16 pipeline is uneven).
    {"llama3-8b", "Llama 3 8B", 32, 4096, 32, 8192, 128256, 1, 1, 1, 8, 2048, 2, 0, 0, ARCH_LLAMA, 8, 14336, 0, 0, 0, 0},
    {"llama3-70b", "Llama 3 70B", 64, 8192, 80, 8192, 128256, 4, 4, 5, 64, 2048, 1, 0, 0, ARCH_LLAMA, 8, 28672, 0, 0, 0, 0},
    {"llama3-405b", "Llama 3 405B", 128, 16384, 126, 8192, 128256, 8, 18, 1, 1152, 2048, 1, 0, 0, ARCH_LLAMA, 8, 53248, 0, 0, 0, 0},
    // Llama 3.2 1B and 3B (Meta's model cards and config.json): the same block, vocabulary and pre-training
    // context, the output layer tied to the embedding; the sizes people fine-tune (LoRA) on one GPU, so one
    // GPU, micro-batch 2 at s = 8192. (Their config.json's llama3 RoPE scaling changes no byte.)
    {"llama3.2-1b", "Llama 3.2 1B", 32, 2048, 16, 8192, 128256, 1, 1, 1, 1, 2048, 2, 0, 0, ARCH_LLAMA, 8, 8192, 1, 0, 0, 0},
    {"llama3.2-3b", "Llama 3.2 3B", 24, 3072, 28, 8192, 128256, 1, 1, 1, 1, 2048, 2, 0, 0, ARCH_LLAMA, 8, 8192, 1, 0, 0, 0},
    // Qwen3's dense models (Qwen's config.json, model_type qwen3): the llama block with 8 key/value heads, q and
    // k RMS-normalised per head before RoPE (q_norm, k_norm), heads 128 wide in every size (so q and the
    // attention output are a·128 wide: 2048 for 0.6B's hidden 1024, 4096 for 4B's 2560, 8192 for 32B's 5120),
    // the 151936-token vocabulary (= 1187·128: every power-of-two t up to 128 divides it); 0.6B, 1.7B and 4B
    // tie the output layer to the embedding. s follows the Llama rows' convention, the pre-training context
    // rather than max_position_embeddings (Llama 3.2 declares 131072 and has s = 8192 here): Qwen3 pre-trains
    // at 4096 (the Qwen3 technical report's stages 1 and 2; its long-context stage 3 runs at 32768, and
    // config.json declares 40960 = 32768 + 8192 of output): give --seq 32768 or 40960 for those. Qwen3
    // publishes no batch size: the Llama rows' 2048 sequences. 0.6B, 1.7B and 4B as Llama 3.2's rows: one GPU,
    // micro-batch 2. 8B, 14B and 32B as llama3-8b's: one 8-GPU H100 node, at the fastest layout ctron plan
    // --cluster finds there at s = 4096 (8B: t = 2, mb 4; 14B: t = 4, p = 2, v = 5, mb 8; 32B: t = 4, p = 2, v = 2,
    // mb 2).
    {"qwen3-0.6b", "Qwen3 0.6B", 16, 1024, 28, 4096, 151936, 1, 1, 1, 1, 2048, 2, 0, 0, ARCH_LLAMA, 8, 3072, 1, 128, 1, 0},
    {"qwen3-1.7b", "Qwen3 1.7B", 16, 2048, 28, 4096, 151936, 1, 1, 1, 1, 2048, 2, 0, 0, ARCH_LLAMA, 8, 6144, 1, 128, 1, 0},
    {"qwen3-4b", "Qwen3 4B", 32, 2560, 36, 4096, 151936, 1, 1, 1, 1, 2048, 2, 0, 0, ARCH_LLAMA, 8, 9728, 1, 128, 1, 0},
    {"qwen3-8b", "Qwen3 8B", 32, 4096, 36, 4096, 151936, 2, 1, 1, 8, 2048, 4, 0, 0, ARCH_LLAMA, 8, 12288, 0, 128, 1, 0},
    {"qwen3-14b", "Qwen3 14B", 40, 5120, 40, 4096, 151936, 4, 2, 5, 8, 2048, 8, 0, 0, ARCH_LLAMA, 8, 17408, 0, 128, 1, 0},
    {"qwen3-32b", "Qwen3 32B", 64, 5120, 64, 4096, 151936, 4, 2, 2, 8, 2048, 2, 0, 0, ARCH_LLAMA, 8, 25600, 0, 128, 1, 0},
    // Phi-3 mini and medium, Phi-4 (Microsoft's config.json, model_type phi3): the llama block with q|k|v one
    // qkv_proj and gate|up one gate_up_proj (the same parameters), untied; mini is MHA, medium and Phi-4 have 10
    // key/value heads (so t is 1 or 2 within a node), Phi-3 the 32064-token vocabulary, Phi-4 100352. s: Phi-3's
    // 4096; Phi-4's 16384 (its config.json's context, reached in mid-training after 4096: unlike the rows above,
    // not the pre-training context). Neither publishes a batch in sequences: 2048. mini as qwen3-4b: one GPU,
    // micro-batch 2; medium and Phi-4 as qwen3-14b: one 8-GPU H100 node at the fastest layout ctron plan
    // --cluster finds there (both t = 2, p = 4, v = 5; mb 4 at s = 4096, mb 1 at 16384).
    {"phi-3-mini", "Phi-3 mini 3.8B", 32, 3072, 32, 4096, 32064, 1, 1, 1, 1, 2048, 2, 0, 0, ARCH_LLAMA, 32, 8192, 0, 0, 0, 1},
    {"phi-3-medium", "Phi-3 medium 14B", 40, 5120, 40, 4096, 32064, 2, 4, 5, 8, 2048, 4, 0, 0, ARCH_LLAMA, 10, 17920, 0, 0, 0, 1},
    {"phi-4", "Phi-4 14.7B", 40, 5120, 40, 16384, 100352, 2, 4, 5, 8, 2048, 1, 0, 0, ARCH_LLAMA, 10, 17920, 0, 0, 0, 1},
    // Phi-4-mini (Phi-4-mini-instruct's config.json): the same fused block with 24 heads of 128 and 8 key/value
    // heads, the output layer tied to the embedding, the 200064-token vocabulary. Its RoPE rotates 96 of each
    // head's 128 dims (partial_rotary_factor 0.75), which changes no parameter and no saved byte: the preset has no
    // field for it. s: its LongRoPE's original context, 4096 (config.json declares 131072); as phi-3-mini: one
    // GPU, micro-batch 2.
    {"phi-4-mini", "Phi-4-mini 3.8B", 24, 3072, 32, 4096, 200064, 1, 1, 1, 1, 2048, 2, 0, 0, ARCH_LLAMA, 8, 8192, 1, 0, 0, 1},
};

int preset_count(void) { return (int)(sizeof presets / sizeof presets[0]); }

const ModelPreset *preset_at(int i) { return i >= 0 && i < preset_count() ? &presets[i] : 0; }

const ModelPreset *preset_find(const char *name) {
    for (int i = 0; i < preset_count(); i++)
        if (strcasecmp(name, presets[i].name) == 0) return &presets[i];
    return 0;
}

const char *preset_names(void) {
    return "22B, 175B, 530B, 1T, gpt2, gpt2-medium, gpt2-large, gpt2-xl, llama3-8b, llama3-70b, llama3-405b, "
           "llama3.2-1b, llama3.2-3b, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, qwen3-14b, qwen3-32b, phi-3-mini, "
           "phi-3-medium, phi-4, phi-4-mini";
}

int preset_group(const char *name, const char **names) {
    static const struct { const char *group; const char *names[PRESET_GROUP_MAX]; int n; } groups[] = {
        {"paper", {"22B", "175B", "530B", "1T"}, 4},
        {"llama3", {"llama3-8b", "llama3-70b", "llama3-405b"}, 3},
        {"llama3.2", {"llama3.2-1b", "llama3.2-3b"}, 2},
        {"qwen3", {"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b"}, 6},
        {"phi3", {"phi-3-mini", "phi-3-medium", "phi-4", "phi-4-mini"}, 4},
    };
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        if (strcasecmp(name, groups[g].group) == 0) {
            for (int i = 0; i < groups[g].n; i++) names[i] = groups[g].names[i];
            return groups[g].n;
        }
    return 0;
}
