#include "memory/techniques.h"
#include "memory/memory_model.h"
#include <stdio.h>

static const char *labels[TECH_COUNT] = {"no parallelism (t = 1)", "TP baseline", "TP + SP", "TP + selective",
                                         "TP + SP + selective", "full recompute"};
static const char *keys[TECH_COUNT] = {"no_parallel", "tp", "tp_sp", "tp_selective", "tp_sp_selective", "full"};
static const char *formulas[TECH_COUNT] = {"sbh(34+5as/h)", "sbh(10+24/t+5as/(ht))", "sbh(34/t+5as/(ht))",
                                           "sbh(10+24/t)", "34sbh/t", "2sbh"};

const char *technique_label(Technique k) { return k < TECH_COUNT ? labels[k] : "?"; }
const char *technique_key(Technique k) { return k < TECH_COUNT ? keys[k] : "?"; }
const char *technique_formula(Technique k) { return k < TECH_COUNT ? formulas[k] : "?"; }

int technique_applies(long s, int t, Technique k) {
    return !(k == TECH_TP_SP || k == TECH_TP_SP_SELECTIVE) || t < 1 || s % t == 0;
}

size_t technique_layer_bytes(long s, long b, long h, long a, int t, Technique k) {
    ActShape gpt2 = {.s = s, .b = b, .h = h, .a = a, .t = t};
    return technique_layer_bytes_block(&gpt2, k);
}

size_t technique_layer_bytes_block(const ActShape *fam, Technique k) {
    // One layer under a one-layer policy; the layer is its own full-recompute group.
    LayerRecompute kind = k == TECH_TP_SELECTIVE || k == TECH_TP_SP_SELECTIVE ? RECOMPUTE_SELECTIVE
                          : k == TECH_FULL                                    ? RECOMPUTE_FULL
                                                                              : RECOMPUTE_NONE;
    int group_start = 0;
    MemoryPolicy pol = {.layers = 1, .kind = &kind, .group_start = &group_start, .act_dtype = ACT_BF16,
                        .masks = MASKS_BYTES};
    ActShape sh = *fam;
    sh.L = 1;
    sh.v = 0;
    sh.elem_bytes = 2;
    sh.masks = MASKS_BYTES;
    sh.dropout = 1;
    sh.t = k == TECH_NO_PARALLEL ? 1 : fam->t;
    sh.sp = k == TECH_TP_SP || k == TECH_TP_SP_SELECTIVE;
    sh.gelu_bits = 0;
    sh.reversible = 0;   // the paper's block, whatever the configuration
    sh.lora_rank = 0;    // no adapters (the policy carries no LoRA bits either)
    sh.mini_seq = 0;
    size_t sum = 0;
    for (int n = 0; n < ACT_N_LAYER; n++)
        if (n != ACT_LN1_STATS && n != ACT_LN2_STATS) sum += act_layer_name_bytes(&sh, &pol, 0, (ActName)n);
    return sum;
}

double technique_block_constant(const ActShape *fam) {
    // q and the attention output (a·d each), k and v (kv·d each), gate and up (f each), at e = 2: with
    // d = h/a, 4 + 4kv/a + 4f/h
    double h = (double)fam->h, f = fam->ffn > 0 ? (double)fam->ffn : 4.0 * h;
    return 4.0 * (double)act_q_width(fam) / h + 4.0 * (double)act_kv_width(fam) / h + 4.0 * f / h;
}

const char *technique_formula_block(const ActShape *fam, Technique k, char *buf, size_t len) {
    double c = technique_block_constant(fam);
    switch (k) {
    case TECH_NO_PARALLEL: snprintf(buf, len, "sbh(%g+5as/h)", 10 + c); break;
    case TECH_TP: snprintf(buf, len, "sbh(10+%g/t+5as/(ht))", c); break;
    case TECH_TP_SP: snprintf(buf, len, "sbh(%g/t+5as/(ht))", 10 + c); break;
    case TECH_TP_SELECTIVE: snprintf(buf, len, "sbh(10+%g/t)", c); break;
    case TECH_TP_SP_SELECTIVE: snprintf(buf, len, "%gsbh/t", 10 + c); break;
    default: snprintf(buf, len, "%s", technique_formula(k));
    }
    return buf;
}
