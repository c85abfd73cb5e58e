// LoRA adapters as data (DESIGN.md §10): one row per linear a family can adapt, naming the base
// linear, its widths, its tensor-parallel split and its peft name. model/ builds the adapter
// parameters from these rows, memory/ counts them, the CLI parses --lora-targets against them.
#ifndef CTRON_LORA_H
#define CTRON_LORA_H
#include <stddef.h>
#include "arch/arch.h"

// Every adaptable linear of every family (a family uses its own rows). The order is the ledger's
// (ACT_LORA_Q + site) and the checkpoint's (per layer, A then B of each targeted site in this order).
typedef enum {
    LORA_Q, LORA_K, LORA_V, LORA_O, LORA_GATE, LORA_UP, LORA_DOWN,   // llama
    LORA_QKV, LORA_PROJ, LORA_FC, LORA_FC2,                          // GPT-2 (c_attn, attn.c_proj, c_fc, mlp.c_proj)
    LORA_SITES
} LoraSite;

// A width of the block: h, the query width (heads·d), the k/v width (kv·d), q + 2kv (GPT-2's fused
// c_attn), the FFN width.
typedef enum { LW_H, LW_Q, LW_KV, LW_QKV, LW_F } LoraWidth;

// Megatron's split of the base linear and what it makes of the adapter (torchtitan's rule):
// column-parallel base (output rows split) → A [r, in] replicated, B [out/t, r] split by rows, and A's
// gradient is a partial sum over the TP ranks; row-parallel base (input columns split) → A [r, in/t]
// split by columns, its partial x·Aᵀ summed over the TP ranks in the forward, B [out, r] replicated.
typedef enum { LORA_COLUMN, LORA_ROW } LoraParallel;

typedef struct {
    ArchKind arch;
    const char *target;           // --lora-targets word
    const char *module;           // peft's module path after the layer: "self_attn.q_proj"
    const char *prefix;           // peft's prefix up to the layer number
    LoraWidth in, out;
    LoraParallel parallel;
    int out_blocks;               // B's row blocks split separately under TP (3 for GPT-2's q|k|v)
} LoraSiteRow;

const LoraSiteRow *lora_site(LoraSite s);
// The peft name of layer l's adapter matrix (A: 'A', B: 'B'), e.g.
// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight".
void lora_param_name(LoraSite s, int layer, char which, char *buf, size_t len);
// Parses a comma-separated --lora-targets list for family arch into a bitmask over LoraSite ("all":
// every site of the family). -1 with err naming the unknown word and the family's targets.
int lora_parse_targets(ArchKind arch, const char *list, unsigned *mask, char *err, size_t errlen);
// The family's sites (the default --lora-targets: all of them) and their words ("q,k,v,o,...").
unsigned lora_family_sites(ArchKind arch);
const char *lora_describe_targets(unsigned mask, char *buf, size_t len);
// The width of one of the block's dimensions for a model of hidden h, query width q, k/v width kv, FFN f.
static inline long lora_width(LoraWidth w, long h, long q, long kv, long f) {
    switch (w) {
    case LW_H: return h;
    case LW_Q: return q;
    case LW_KV: return kv;
    case LW_QKV: return q + 2 * kv;
    case LW_F: return f;
    }
    return 0;
}
#endif
