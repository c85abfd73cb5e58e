#include "memory/reversible_model.h"
#include "memory/flops.h"

int act_rev_attn_half(ActName name) {
    switch (name) {
    case ACT_LN1_IN: case ACT_QKV_IN: case ACT_Q: case ACT_K: case ACT_V: case ACT_ATTN_PROB: case ACT_ATTN_MASK:
    case ACT_ATTN_DROP: case ACT_PROJ_IN: case ACT_DROP1_MASK: case ACT_LN1_STATS: case ACT_ATTN_LSE:
    case ACT_Q_NORM_IN: case ACT_K_NORM_IN: case ACT_Q_NORM_STATS: case ACT_K_NORM_STATS:
    case ACT_LORA_Q: case ACT_LORA_K: case ACT_LORA_V: case ACT_LORA_O: case ACT_LORA_QKV: case ACT_LORA_PROJ:
        return 1;   // the attention half's (its adapters' x·Aᵀ too)
    default:
        return 0;
    }
}

size_t act_rev_half_bytes(const ActShape *sh, unsigned tempo, int attn) {
    size_t sum = 0;
    for (int n = 0; n < ACT_N_LAYER; n++)
        if (act_rev_attn_half((ActName)n) == attn && act_kept(RECOMPUTE_NONE, 1, tempo, (ActName)n))
            sum += act_tensor_bytes(sh, (ActName)n);
    return sum;
}

size_t act_rev_peak_bytes(const ActShape *sh, const MemoryPolicy *p) {
    size_t peak = act_forward_end_bytes(sh, p);   // the layers keep nothing unless stored
    if (p && p->rev_store) return peak;           // backward only releases: the head, then layer by layer
    unsigned tempo = p ? p->tempo : 0;
    size_t attn = act_rev_half_bytes(sh, tempo, 1), mlp = act_rev_half_bytes(sh, tempo, 0);
    size_t held = act_tensor_bytes(sh, ACT_EMB_MASK) + act_tensor_bytes(sh, ACT_REV_X1) +
                  act_tensor_bytes(sh, ACT_REV_X2) + (attn > mlp ? attn : mlp);
    return held > peak ? held : peak;
}

double flops_rev_recompute(double B, const ActShape *sh, const MemoryPolicy *p) {
    if (!sh->reversible || (p && p->rev_store)) return 0.0;
    FlopBlock blk = flops_block_of(sh);
    return (double)sh->L * flops_recompute_full_block(B, (double)sh->s, (double)sh->h, 0, &blk);
}

int rev_arena_entries(const ActShape *sh) { return sh->reversible ? 2 : 0; }
