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
    LORA_GATE_UP,                                                    // fused llama (Phi-3's gate_up_proj)
    LORA_SITES
} LoraSite;

// Which linears a model has and what peft calls them: GPT-2's four; llama's seven; llama with fused
// projections (GPTConfig.fused_proj, Phi-3): q|k|v one linear (the qkv site, one A for all three, as
// GPT-2's c_attn) and gate|up one (one A for both).
typedef enum { LORA_FAMILY_GPT2, LORA_FAMILY_LLAMA, LORA_FAMILY_FUSED, LORA_FAMILIES } LoraFamily;
static inline LoraFamily lora_family(int arch, int fused_proj) {
    return arch == ARCH_GPT2 ? LORA_FAMILY_GPT2 : fused_proj ? LORA_FAMILY_FUSED : LORA_FAMILY_LLAMA;
}
const char *lora_family_name(LoraFamily f);   // "gpt2", "llama", "llama --fused-proj"

// A width of the block: h, the query width (heads·d), the k/v width (kv·d), q + 2kv (a fused q|k|v), the
// FFN width, two FFN widths (a fused gate|up).
typedef enum { LW_H, LW_Q, LW_KV, LW_QKV, LW_F, LW_2F } LoraWidth;

// Megatron's split of the base linear and what it makes of the adapter (torchtitan's rule):
// column-parallel base (output rows split) → A [r, in] replicated, B [out/t, r] split by rows, and A's
// gradient is a partial sum over the TP ranks; row-parallel base (input columns split) → A [r, in/t]
// split by columns, its partial x·Aᵀ summed over the TP ranks in the forward, B [out, r] replicated.
typedef enum { LORA_COLUMN, LORA_ROW } LoraParallel;

// A site's shape, the same in every family that has it.
typedef struct {
    const char *target;           // --lora-targets word
    LoraWidth in, out;
    LoraParallel parallel;
    int out_blocks;               // B's row blocks split separately under TP (q|k|v: 3, gate|up: 2)
    int reads_norm1;              // reads the block's first norm's output (q, k, v): layer 0's dL/dx is not
                                  // needed under LoRA (memory_model.h's act_input_grad_dead)
} LoraSiteRow;

const LoraSiteRow *lora_site(LoraSite s);
// peft's module path of site s after the layer ("self_attn.q_proj", "attn.c_attn"), NULL where family f
// has no such linear.
const char *lora_site_module(LoraFamily f, LoraSite s);
// The peft name of layer l's adapter matrix (A: 'A', B: 'B'), e.g.
// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight".
void lora_param_name(LoraFamily f, LoraSite s, int layer, char which, char *buf, size_t len);
// Parses a comma-separated --lora-targets list for family f into a bitmask over LoraSite ("all":
// every site of the family). -1 with err naming the unknown word and the family's targets.
int lora_parse_targets(LoraFamily f, const char *list, unsigned *mask, char *err, size_t errlen);
// The family's sites (the default --lora-targets: all of them) and their words ("q,k,v,o,...").
unsigned lora_family_sites(LoraFamily f);
const char *lora_describe_targets(unsigned mask, char *buf, size_t len);
// The rows of B's blocks for a site with out_blocks > 1 (q|k|v: q, kv, kv; gate|up: f, f), for a model of query
// width q, k/v width kv and FFN width f.
static inline void lora_out_block_rows(LoraSite s, long q, long kv, long f, long rows[3]) {
    rows[0] = s == LORA_QKV ? q : f;
    rows[1] = s == LORA_QKV ? kv : f;
    rows[2] = kv;
}
// The width of one of the block's dimensions for a model of hidden h, query width q, k/v width kv, FFN f.
static inline long lora_width(LoraWidth w, long h, long q, long kv, long f) {
    switch (w) {
    case LW_H: return h;
    case LW_Q: return q;
    case LW_KV: return kv;
    case LW_QKV: return q + 2 * kv;
    case LW_F: return f;
    case LW_2F: return 2 * f;
    }
    return 0;
}
#endif
