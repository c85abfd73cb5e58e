#include "memory/techniques.h"
#include "memory/memory_model.h"

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
    // One layer under a one-layer policy; the layer is its own full-recompute group.
    LayerRecompute kind = k == TECH_TP_SELECTIVE || k == TECH_TP_SP_SELECTIVE ? RECOMPUTE_SELECTIVE
                          : k == TECH_FULL                                    ? RECOMPUTE_FULL
                                                                              : RECOMPUTE_NONE;
    int group_start = 0;
    MemoryPolicy pol = {.layers = 1, .kind = &kind, .group_start = &group_start, .act_dtype = ACT_BF16,
                        .masks = MASKS_BYTES};
    ActShape sh = {.s = s, .b = b, .h = h, .a = a, .L = 1, .v = 0, .elem_bytes = 2, .masks = MASKS_BYTES,
                   .dropout = 1, .t = k == TECH_NO_PARALLEL ? 1 : t,
                   .sp = k == TECH_TP_SP || k == TECH_TP_SP_SELECTIVE};
    return act_layer_core_bytes(&sh, &pol, 0);
}
