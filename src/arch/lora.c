#include "arch/lora.h"
#include <stdio.h>
#include <string.h>
#include "util/common.h"

// A site's shape (lora_A [r, in], lora_B [out, r] in every family: GPT-2's Conv1D only changes how peft
// merges, fan_in_fan_out, not the adapters' orientation).
static const LoraSiteRow ROWS[LORA_SITES] = {
    [LORA_Q] = {"q", LW_H, LW_Q, LORA_COLUMN, 1, 1},
    [LORA_K] = {"k", LW_H, LW_KV, LORA_COLUMN, 1, 1},
    [LORA_V] = {"v", LW_H, LW_KV, LORA_COLUMN, 1, 1},
    [LORA_O] = {"o", LW_Q, LW_H, LORA_ROW, 1, 0},
    [LORA_GATE] = {"gate", LW_H, LW_F, LORA_COLUMN, 1, 0},
    [LORA_UP] = {"up", LW_H, LW_F, LORA_COLUMN, 1, 0},
    [LORA_DOWN] = {"down", LW_F, LW_H, LORA_ROW, 1, 0},
    [LORA_QKV] = {"qkv", LW_H, LW_QKV, LORA_COLUMN, 3, 1},
    [LORA_PROJ] = {"proj", LW_Q, LW_H, LORA_ROW, 1, 0},
    [LORA_FC] = {"fc", LW_H, LW_F, LORA_COLUMN, 1, 0},
    [LORA_FC2] = {"fc2", LW_F, LW_H, LORA_ROW, 1, 0},
    [LORA_GATE_UP] = {"gate_up", LW_H, LW_2F, LORA_COLUMN, 2, 0},
};

// peft's module paths of each family's linears (GPT2LMHeadModel, LlamaForCausalLM, Phi3ForCausalLM), and
// the prefix up to the layer number.
static const struct {
    const char *name, *prefix;
    const char *module[LORA_SITES];
} FAMILIES[LORA_FAMILIES] = {
    [LORA_FAMILY_GPT2] = {"gpt2", "base_model.model.transformer.h.",
                          {[LORA_QKV] = "attn.c_attn", [LORA_PROJ] = "attn.c_proj", [LORA_FC] = "mlp.c_fc",
                           [LORA_FC2] = "mlp.c_proj"}},
    [LORA_FAMILY_LLAMA] = {"llama", "base_model.model.model.layers.",
                           {[LORA_Q] = "self_attn.q_proj", [LORA_K] = "self_attn.k_proj", [LORA_V] = "self_attn.v_proj",
                            [LORA_O] = "self_attn.o_proj", [LORA_GATE] = "mlp.gate_proj", [LORA_UP] = "mlp.up_proj",
                            [LORA_DOWN] = "mlp.down_proj"}},
    [LORA_FAMILY_FUSED] = {"llama --fused-proj", "base_model.model.model.layers.",
                           {[LORA_QKV] = "self_attn.qkv_proj", [LORA_O] = "self_attn.o_proj",
                            [LORA_GATE_UP] = "mlp.gate_up_proj", [LORA_DOWN] = "mlp.down_proj"}},
};

const LoraSiteRow *lora_site(LoraSite s) { return &ROWS[s]; }
const char *lora_family_name(LoraFamily f) { return FAMILIES[f].name; }
const char *lora_site_module(LoraFamily f, LoraSite s) { return FAMILIES[f].module[s]; }

void lora_param_name(LoraFamily f, LoraSite s, int layer, char which, char *buf, size_t len) {
    const char *module = FAMILIES[f].module[s];
    // targets are parsed against the family, so a site it lacks here is a caller's bug, not a name to write
    if (!module) ctron_fatal("lora_param_name: family %s has no site %s", FAMILIES[f].name, ROWS[s].target);
    snprintf(buf, len, "%s%d.%s.lora_%c.weight", FAMILIES[f].prefix, layer, module, which);
}

unsigned lora_family_sites(LoraFamily f) {
    unsigned mask = 0;
    for (int s = 0; s < LORA_SITES; s++)
        if (FAMILIES[f].module[s]) mask |= 1u << s;
    return mask;
}

const char *lora_describe_targets(unsigned mask, char *buf, size_t len) {
    size_t k = 0;
    if (len) buf[0] = '\0';
    for (int s = 0; s < LORA_SITES && k < len; s++)
        if (mask >> s & 1u) k += (size_t)snprintf(buf + k, len - k, "%s%s", k ? "," : "", ROWS[s].target);
    return buf;
}

// "--arch gpt2 and --arch llama --fused-proj": the families other than f that have site s ("" if none).
static const char *other_families(LoraFamily f, int s, char *buf, size_t len) {
    size_t k = 0;
    buf[0] = '\0';
    for (int g = 0; g < LORA_FAMILIES && k < len; g++)
        if (g != (int)f && FAMILIES[g].module[s])
            k += (size_t)snprintf(buf + k, len - k, "%s--arch %s", k ? " and " : "", FAMILIES[g].name);
    return buf;
}

int lora_parse_targets(LoraFamily f, const char *list, unsigned *mask, char *err, size_t errlen) {
    unsigned family = lora_family_sites(f), out = 0;
    char words[96];
    if (!strcmp(list, "all")) {
        *mask = family;
        return 0;
    }
    const char *p = list;
    while (1) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        int site = -1;
        for (int s = 0; s < LORA_SITES; s++)
            if (strlen(ROWS[s].target) == n && !strncmp(ROWS[s].target, p, n)) site = s;
        if (site < 0 || !(family >> site & 1u)) {
            lora_describe_targets(family, words, sizeof words);
            char others[96];
            if (site >= 0 && other_families(f, site, others, sizeof others)[0])
                snprintf(err, errlen, "--lora-targets: '%.*s' is a linear of %s, not of --arch %s (its targets: %s, "
                         "or all)", (int)n, p, others, FAMILIES[f].name, words);
            else
                snprintf(err, errlen, "--lora-targets: unknown target '%.*s' (--arch %s has %s, or all)", (int)n, p,
                         FAMILIES[f].name, words);
            return -1;
        }
        out |= 1u << site;
        if (!end) break;
        p = end + 1;
    }
    *mask = out;
    return 0;
}
