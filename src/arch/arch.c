#include "arch/arch.h"
#include <string.h>

static const ArchSpec ARCH_TABLE[ARCH_COUNT] = {
    //  name     norm        mlp         pos          bias tied untie gqa ffn       eps    dropout
    [ARCH_GPT2] = {"gpt2", NORM_LAYER, MLP_GELU, POS_LEARNED, 1, 1, 0, 0, FFN_4H, 1e-5f, 0.1f},
    [ARCH_LLAMA] = {"llama", NORM_RMS, MLP_SWIGLU, POS_ROPE, 0, 0, 1, 1, FFN_8H_3, 1e-5f, 0.0f},
};

const ArchSpec *arch_spec(ArchKind k) { return &ARCH_TABLE[k >= 0 && k < ARCH_COUNT ? k : ARCH_GPT2]; }

int arch_from_name(const char *name) {
    for (int k = 0; k < ARCH_COUNT; k++)
        if (name && strcmp(name, ARCH_TABLE[k].name) == 0) return k;
    return -1;
}

const char *arch_choices(void) { return "gpt2|llama"; }

// In 64 bits: an absurd --hidden must reach the memory estimate's refusal, not overflow here.
long arch_default_ffn(ArchKind k, long hidden) {
    if (arch_spec(k)->ffn_default == FFN_4H) return 4 * hidden;
    long f = (8 * hidden + 2) / 3;
    return (f + 63) / 64 * 64;
}
