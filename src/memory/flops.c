#include "memory/flops.h"
#include "arch/lora.h"
#include "memory/memory_model.h"
#include "memory/memo_model.h"

double flops_model(double B, double L, double s, double h, double v) {
    return 72.0 * B * L * s * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * h * L));
}

double flops_recompute_selective(double B, double s, double h) { return 12.0 * B * s * s * h; }

double flops_recompute_full(double B, double s, double h, int skip_fc2) {
    return 24.0 * B * s * h * h * (1.0 + s / (6.0 * h)) - (skip_fc2 ? 8.0 * B * s * h * h : 0.0);
}

static double q_width(double h, const FlopBlock *b) { return b && b->q_width > 0.0 ? b->q_width : h; }

// The keys each query's core runs over, the paper's dense count: s, or a shorter sliding window.
static double keys(double s, const FlopBlock *b) { return b && b->window > 0.0 && b->window < s ? b->window : s; }

static int paper_shape(double h, const FlopBlock *b) {
    return !b || (b->kv_width == h && b->ffn == 4.0 * h && b->mlp_mats == 1 && q_width(h, b) == h && b->window <= 0.0);
}

// One layer's forward per sequence, and the part of it after the MLP's inner activation (the down
// projection, which a group's last recomputed layer skips).
static double layer_forward(double s, double h, const FlopBlock *b) {
    double q = q_width(h, b);
    return 2.0 * s * h * (q + 2.0 * b->kv_width) + 2.0 * s * q * h + 4.0 * s * keys(s, b) * q +
           2.0 * s * h * b->ffn * (b->mlp_mats + 1);
}

double flops_layer_forward_block(double s, double h, const FlopBlock *blk) {
    FlopBlock g = {h, 4.0 * h, 1, h, 0.0};
    return layer_forward(s, h, blk ? blk : &g);
}

double flops_recompute_memo_block(double B, double s, double h, double frac, const FlopBlock *blk) {
    FlopBlock g = {h, 4.0 * h, 1, h, 0.0};
    if (!blk) blk = &g;
    double core = 4.0 * s * keys(s, blk) * q_width(h, blk), down = 2.0 * s * h * blk->ffn;
    return B * ((1.0 - frac) * (layer_forward(s, h, blk) - core - down) + (1.0 - frac * frac) * core);
}

double flops_model_block(double B, double L, double s, double h, double v, const FlopBlock *blk) {
    if (paper_shape(h, blk)) return flops_model(B, L, s, h, v);
    return B * (3.0 * L * layer_forward(s, h, blk) + 6.0 * s * h * v);
}

// One more forward of a full-recompute layer (less the down projection for a group's last layer).
double flops_recompute_full_block(double B, double s, double h, int skip_down, const FlopBlock *blk) {
    if (paper_shape(h, blk)) return flops_recompute_full(B, s, h, skip_down);
    return B * (layer_forward(s, h, blk) - (skip_down ? 2.0 * s * h * blk->ffn : 0.0));
}

// A selective layer's core again (Eq. 8 − Eq. 7), over each query's keys.
double flops_recompute_selective_block(double B, double s, double h, const FlopBlock *blk) {
    return flops_recompute_selective(B, s, q_width(h, blk)) * keys(s, blk) / s;
}

double flops_hardware_block(double B, double s, double h, double v, const MemoryPolicy *policy, int layers,
                            int ctron_full, const FlopBlock *blk) {
    double total = flops_model_block(B, layers, s, h, v, blk);
    for (int l = 0; l < layers && policy; l++) {
        LayerRecompute k = policy->kind[l];
        if (k == RECOMPUTE_SELECTIVE) total += flops_recompute_selective_block(B, s, h, blk);
        if (k == RECOMPUTE_MEMO) {   // its later positions, and (without flash) the core in backward as selective's
            double r = s >= 1.0 ? (double)memo_swap_positions((long)s, policy_memo_alpha(policy, l)) / s : 0.0;
            total += flops_recompute_memo_block(B, s, h, r, blk);
            if (!(policy->tempo & ATTN_FLASH)) total += flops_recompute_selective_block(B, s, h, blk);
        }
        if (k == RECOMPUTE_FULL) {
            int g0 = policy->group_start[l];
            int last = l + 1 == layers || policy->kind[l + 1] != RECOMPUTE_FULL || policy->group_start[l + 1] != g0;
            total += flops_recompute_full_block(B, s, h, ctron_full && last, blk);
        }
    }
    return total;
}

double flops_hardware(double B, double s, double h, double v, const MemoryPolicy *policy, int layers, int ctron_full) {
    return flops_hardware_block(B, s, h, v, policy, layers, ctron_full, NULL);
}

FlopBlock flops_block_of(const ActShape *sh) {
    double h = (double)sh->h;
    FlopBlock b = {(double)act_kv_width(sh), sh->ffn > 0 ? (double)sh->ffn : 4.0 * h, sh->swiglu ? 2 : 1,
                   (double)act_q_width(sh), (double)sh->window};
    return b;
}

double flops_lora_delta(const ActShape *sh, double B) {
    if (sh->lora_rank <= 0) return 0.0;
    FlopBlock blk = flops_block_of(sh);
    double h = (double)sh->h, s = (double)sh->s, L = (double)sh->L, r = (double)sh->lora_rank;
    double linears = h * (blk.q_width + 2 * blk.kv_width) + blk.q_width * h + h * blk.ffn * (blk.mlp_mats + 1);
    double delta = -2 * B * s * (L * linears + h * (double)sh->v);
    // Layer 0's dL/dx is never read (memory_model.h's act_input_grad_dead): its q, k and v GEMMs and their
    // adapters compute none
    int dead = act_input_grad_dead(sh, 0);
    if (dead) delta -= 2 * B * s * h * (blk.q_width + 2 * blk.kv_width);
    for (int k = 0; k < LORA_SITES; k++) {
        if (!(sh->lora_sites >> k & 1u)) continue;
        const LoraSiteRow *row = lora_site((LoraSite)k);
        double in = (double)flops_lora_width(sh, row->in, 1), out = (double)flops_lora_width(sh, row->out, 1);
        delta += L * 2 * B * s * r * ((in + out) + (2 * out + in) + (sh->lora_fa ? 0 : in));
        if (dead && row->reads_norm1) delta -= 2 * B * s * r * in;
    }
    return delta;
}

long flops_lora_width(const ActShape *sh, LoraWidth w, long t) {
    FlopBlock blk = flops_block_of(sh);
    return lora_width(w, sh->h, (long)blk.q_width / t, (long)blk.kv_width / t, (long)blk.ffn / t);
}

FlopPair flops_lora_layer(const ActShape *sh, double B) {
    FlopPair f = {0.0, 0.0};
    if (sh->lora_rank <= 0) return f;
    long t = sh->t > 1 ? sh->t : 1;
    double per = 2.0 * B * (double)sh->s * (double)sh->lora_rank;   // 2·rows·r: a width's GEMM
    for (int k = 0; k < LORA_SITES; k++) {
        if (!(sh->lora_sites >> k & 1u)) continue;
        const LoraSiteRow *row = lora_site((LoraSite)k);
        double in = (double)flops_lora_width(sh, row->in, t), out = (double)flops_lora_width(sh, row->out, t);
        f.fwd += per * (in + out);
        f.bwd += per * (2.0 * out + in + (sh->lora_fa ? 0.0 : in));
    }
    return f;
}
