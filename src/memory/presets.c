#include "memory/presets.h"
#include <strings.h>

// Table 3 of the paper (s = 2048, v = 51200; interleaving m = 3 for 175B and 530B) with Table 5's
// iteration times. GPT-2 (Radford et al. 2019): s = 1024 and the 50257-token vocabulary padded to
// 50304 = 393·128, as Megatron (--make-vocab-size-divisible-by 128) and nanoGPT do, so every
// power-of-two t up to 128 divides it; micro-batch 8 and GPT-2's global batch of 512 sequences.
static const ModelPreset presets[] = {
    {"22B", "GPT 22B (paper Table 3)", 64, 6144, 48, 2048, 51200, 8, 1, 1, 8, 4, 4, 1.42, 1.10},
    {"175B", "GPT-3 175B (paper Table 3)", 96, 12288, 96, 2048, 51200, 8, 8, 3, 64, 64, 1, 18.13, 13.75},
    {"530B", "MT-NLG 530B (paper Table 3)", 128, 20480, 105, 2048, 51200, 8, 35, 3, 280, 280, 1, 49.05, 37.83},
    {"1T", "GPT 1T (paper Table 3)", 160, 25600, 128, 2048, 51200, 8, 64, 1, 512, 512, 1, 94.42, 71.49},
    {"gpt2", "GPT-2 124M", 12, 768, 12, 1024, 50304, 1, 1, 1, 1, 512, 8, 0, 0},
    {"gpt2-medium", "GPT-2 350M", 16, 1024, 24, 1024, 50304, 1, 1, 1, 1, 512, 8, 0, 0},
    {"gpt2-large", "GPT-2 774M", 20, 1280, 36, 1024, 50304, 1, 1, 1, 1, 512, 8, 0, 0},
    {"gpt2-xl", "GPT-2 1.5B", 25, 1600, 48, 1024, 50304, 1, 1, 1, 1, 512, 8, 0, 0},
};

int preset_count(void) { return (int)(sizeof presets / sizeof presets[0]); }

const ModelPreset *preset_at(int i) { return i >= 0 && i < preset_count() ? &presets[i] : 0; }

const ModelPreset *preset_find(const char *name) {
    for (int i = 0; i < preset_count(); i++)
        if (strcasecmp(name, presets[i].name) == 0) return &presets[i];
    return 0;
}

const char *preset_names(void) { return "22B, 175B, 530B, 1T, gpt2, gpt2-medium, gpt2-large, gpt2-xl"; }
