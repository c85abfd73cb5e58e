#include "arch/lora.h"
#include <stdio.h>
#include <string.h>

#define LLAMA_PEFT "base_model.model.model.layers."
#define GPT2_PEFT "base_model.model.transformer.h."

// peft's module names for LlamaForCausalLM and GPT2LMHeadModel; lora_A [r, in], lora_B [out, r] for
// both (GPT-2's Conv1D only changes how peft merges, fan_in_fan_out, not the adapters' orientation).
static const LoraSiteRow ROWS[LORA_SITES] = {
    [LORA_Q] = {ARCH_LLAMA, "q", "self_attn.q_proj", LLAMA_PEFT, LW_H, LW_Q, LORA_COLUMN, 1},
    [LORA_K] = {ARCH_LLAMA, "k", "self_attn.k_proj", LLAMA_PEFT, LW_H, LW_KV, LORA_COLUMN, 1},
    [LORA_V] = {ARCH_LLAMA, "v", "self_attn.v_proj", LLAMA_PEFT, LW_H, LW_KV, LORA_COLUMN, 1},
    [LORA_O] = {ARCH_LLAMA, "o", "self_attn.o_proj", LLAMA_PEFT, LW_Q, LW_H, LORA_ROW, 1},
    [LORA_GATE] = {ARCH_LLAMA, "gate", "mlp.gate_proj", LLAMA_PEFT, LW_H, LW_F, LORA_COLUMN, 1},
    [LORA_UP] = {ARCH_LLAMA, "up", "mlp.up_proj", LLAMA_PEFT, LW_H, LW_F, LORA_COLUMN, 1},
    [LORA_DOWN] = {ARCH_LLAMA, "down", "mlp.down_proj", LLAMA_PEFT, LW_F, LW_H, LORA_ROW, 1},
    [LORA_QKV] = {ARCH_GPT2, "qkv", "attn.c_attn", GPT2_PEFT, LW_H, LW_QKV, LORA_COLUMN, 3},
    [LORA_PROJ] = {ARCH_GPT2, "proj", "attn.c_proj", GPT2_PEFT, LW_Q, LW_H, LORA_ROW, 1},
    [LORA_FC] = {ARCH_GPT2, "fc", "mlp.c_fc", GPT2_PEFT, LW_H, LW_F, LORA_COLUMN, 1},
    [LORA_FC2] = {ARCH_GPT2, "fc2", "mlp.c_proj", GPT2_PEFT, LW_F, LW_H, LORA_ROW, 1},
};

const LoraSiteRow *lora_site(LoraSite s) { return &ROWS[s]; }

void lora_param_name(LoraSite s, int layer, char which, char *buf, size_t len) {
    snprintf(buf, len, "%s%d.%s.lora_%c.weight", ROWS[s].prefix, layer, ROWS[s].module, which);
}

unsigned lora_family_sites(ArchKind arch) {
    unsigned mask = 0;
    for (int s = 0; s < LORA_SITES; s++)
        if (ROWS[s].arch == arch) mask |= 1u << s;
    return mask;
}

const char *lora_describe_targets(unsigned mask, char *buf, size_t len) {
    size_t k = 0;
    if (len) buf[0] = '\0';
    for (int s = 0; s < LORA_SITES && k < len; s++)
        if (mask >> s & 1u) k += (size_t)snprintf(buf + k, len - k, "%s%s", k ? "," : "", ROWS[s].target);
    return buf;
}

int lora_parse_targets(ArchKind arch, const char *list, unsigned *mask, char *err, size_t errlen) {
    unsigned family = lora_family_sites(arch), out = 0;
    char words[64];
    if (!strcmp(list, "all")) {
        *mask = family;
        return 0;
    }
    const char *p = list;
    while (1) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        int found = -1, other = -1;
        for (int s = 0; s < LORA_SITES; s++)
            if (strlen(ROWS[s].target) == n && !strncmp(ROWS[s].target, p, n)) {
                if (ROWS[s].arch == arch) found = s;
                else other = s;
            }
        if (found < 0) {
            lora_describe_targets(family, words, sizeof words);
            if (other >= 0)
                snprintf(err, errlen, "--lora-targets: '%.*s' is a %s linear, not one of --arch %s (its targets: %s, or all)",
                         (int)n, p, arch_spec(ROWS[other].arch)->name, arch_spec(arch)->name, words);
            else
                snprintf(err, errlen, "--lora-targets: unknown target '%.*s' (--arch %s has %s, or all)", (int)n, p,
                         arch_spec(arch)->name, words);
            return -1;
        }
        out |= 1u << found;
        if (!end) break;
        p = end + 1;
    }
    *mask = out;
    return 0;
}
