#include "memory/memo_model.h"
#include "memory/flops.h"
#include "arch/lora.h"
#include "parallel/comm.h"

long memo_swap_positions(long s, double alpha) {
    if (alpha >= 1.0) return s;
    if (alpha <= 0.0) return 0;
    long r = (long)(alpha * (double)s) / MEMO_TILE * MEMO_TILE;
    return r < s ? r : s;
}

int policy_has_memo(const MemoryPolicy *p) {
    for (int l = 0; p && l < p->layers; l++)
        if (p->kind[l] == RECOMPUTE_MEMO) return 1;
    return 0;
}

// What a selective layer keeps but the input, the masks and LoRA's x·Aᵀ (kept whole: docs/MEMORY.md): the
// tensors whose rows follow the tokens.
int memo_swaps(const ActShape *sh, unsigned tempo, ActName name) {
    if (name == ACT_LN1_IN || act_is_mask(name) || act_is_lora(name) || (int)name >= (int)ACT_N_LAYER) return 0;
    return act_kept(RECOMPUTE_SELECTIVE, 1, tempo, name) && act_elements(sh, name) > 0;
}

long memo_layer_positions(const ActShape *sh, const MemoryPolicy *p, int l) {
    if (!p || l < 0 || l >= p->layers || p->kind[l] != RECOMPUTE_MEMO) return 0;
    return memo_swap_positions(sh->s, policy_memo_alpha(p, l));
}

// Bytes of r positions of `name` (every such tensor is s × (the rest)).
static size_t slice_bytes(const ActShape *sh, ActName name, long r) {
    size_t per_position = act_elements(sh, name) / (size_t)sh->s;
    return per_position * (size_t)r * (act_is_fp32_always(name) ? 4 : (size_t)sh->elem_bytes);
}

size_t act_memo_swap_name_bytes(const ActShape *sh, const MemoryPolicy *p, int l, ActName name) {
    if (!p || p->kind[l] != RECOMPUTE_MEMO || !memo_swaps(sh, p->tempo, name)) return 0;
    return slice_bytes(sh, name, memo_layer_positions(sh, p, l));
}

size_t act_memo_swap_bytes(const ActShape *sh, const MemoryPolicy *p, int l) {
    return act_layer_names_sum(sh, p, l, act_memo_swap_name_bytes, 1);
}

size_t act_memo_span(const ActShape *sh, const MemoryPolicy *p, int l) {
    return act_layer_names_sum(sh, p, l, act_memo_swap_name_bytes, 64);
}

size_t act_memo_stage_bytes(const ActShape *sh, const MemoryPolicy *p) {
    size_t span[2] = {0, 0};
    int k = 0;   // the k-th layer that swaps goes to slot k mod 2 (model/offload_sched.c's pool_regions_plan)
    for (int l = 0; p && l < sh->L && l < p->layers; l++) {
        size_t x = act_memo_span(sh, p, l);
        if (!x) continue;
        if (x > span[k & 1]) span[k & 1] = x;
        k++;
    }
    return span[0] + span[1];
}

size_t act_memo_pool_bytes(const ActShape *sh, const MemoryPolicy *p) {
    size_t sum = 0;
    for (int l = 0; p && l < sh->L && l < p->layers; l++) sum += act_memo_swap_bytes(sh, p, l);
    return sum;
}

size_t act_memo_working_bytes(const ActShape *sh, const MemoryPolicy *p, int l) {
    if (!p || p->kind[l] != RECOMPUTE_MEMO) return 0;
    size_t sum = 0;
    for (int n = 0; n < ACT_N_LAYER; n++) {
        ActName name = (ActName)n;
        if (memo_swaps(sh, p->tempo, name) || name == ACT_DROP1_MASK || name == ACT_DROP2_MASK)
            sum += act_tensor_bytes(sh, name);
    }
    return sum;
}

static double pos(double x) { return x > 0.0 ? x : 0.0; }

MemoTime memo_layer_time(const MemoLayerCost *c, double a) {
    MemoTime t;
    double linear = c->fwd_s - c->attn_s - c->down_s;
    t.recompute_s = (1.0 - a) * (linear + c->lora_s) + (1.0 - a * a) * c->attn_s;
    t.tp_s = c->tp_bytes > 0.0 && c->tp_link_bps > 0.0 ? (1.0 - a) * c->tp_bytes / c->tp_link_bps : 0.0;
    t.transfer_s = c->link_bps > 0.0 ? a * c->swap_bytes / c->link_bps : (a > 0.0 ? 1e30 : 0.0);
    // Without LoRA fwd_s and 2·fwd_s (the adapter terms are 0): fwd_s + 2·fwd_s rounds as 3·fwd_s did.
    t.forward_s = c->fwd_s + c->lora_fwd_s;
    t.backward_s = 2.0 * c->fwd_s - c->frozen_s + c->lora_bwd_s;
    // Forward: the slice goes out while the next layer computes its forward. Backward: the previous
    // layer's slice comes in while this one recomputes its range (its collectives too) and runs its backward.
    t.stall_s = pos(t.transfer_s - t.forward_s) + pos(t.transfer_s - (t.backward_s + t.recompute_s + t.tp_s));
    t.layer_s = t.forward_s + t.backward_s + t.recompute_s + t.tp_s + t.stall_s;
    return t;
}

double memo_recompute_tp_bytes(const ActShape *sh, long positions) {
    if (sh->t <= 1 || positions <= 0) return 0.0;
    uint64_t proj = (uint64_t)positions * (uint64_t)sh->b * (uint64_t)sh->h * sizeof(float);   // [rows, h] fp32
    return (double)comm_bytes_for(COMM_ALLREDUCE, sh->t, proj);
}

double memo_recompute_lora_flops(const ActShape *sh, long positions) {
    if (sh->lora_rank <= 0 || positions <= 0) return 0.0;
    long t = sh->t > 1 ? sh->t : 1;
    double rows = (double)positions * (double)sh->b, sum = 0.0;
    for (int k = 0; k < LORA_SITES; k++) {
        const LoraSiteRow *row = lora_site((LoraSite)k);
        // the down projection (the site that reads the FFN width): the block's output is not made again
        if (!(sh->lora_sites >> k & 1u) || row->in == LW_F) continue;
        // B's rows on this rank: a column site's out/t, a row site's (o, proj) all h (as model/adapters.c)
        sum += 2.0 * rows * (double)sh->lora_rank * (double)flops_lora_width(sh, row->out, t);
    }
    return sum;
}

MemoLayerCost memo_layer_cost(const ActShape *sh, const MemoryPolicy *p, double gemm_flops, double link_bps,
                              double tp_link_bps) {
    FlopBlock blk = flops_block_of(sh);
    double s = (double)sh->s, b = (double)sh->b, h = (double)sh->h, t = sh->t > 1 ? (double)sh->t : 1.0;
    // a TP rank's share: its heads' attention and its columns of every linear (the norms, a few
    // element-wise passes, are left out as they are for one process)
    double attn = 2.0 * s * s * h * b / t;   // causal: half of Eq. 7's 4·s²·h
    double fwd = (b * flops_layer_forward_block(s, h, &blk) - 2.0 * s * s * h * b) / t;
    double down = 2.0 * s * b * h * blk.ffn / t;
    // LoRA: the adapters' own GEMMs on this rank; the frozen base's skipped dW GEMMs, one forward of its linears
    FlopPair adapters = flops_lora_layer(sh, b);
    double frozen = sh->lora_rank > 0 ? fwd - attn : 0.0;
    // the bytes of every position: the slice of α = 1 (the same for every memo layer)
    size_t bytes = 0;
    for (int n = 0; n < ACT_N_LAYER; n++)
        if (memo_swaps(sh, p->tempo, (ActName)n)) bytes += slice_bytes(sh, (ActName)n, sh->s);
    MemoLayerCost c = {fwd / gemm_flops, attn / gemm_flops, down / gemm_flops, (double)bytes, link_bps,
                       memo_recompute_lora_flops(sh, sh->s) / gemm_flops, memo_recompute_tp_bytes(sh, sh->s), tp_link_bps,
                       adapters.fwd / gemm_flops, adapters.bwd / gemm_flops, frozen / gemm_flops};
    return c;
}
