// The planners with adapters (issue 27): the budget planner keeps what LoRA and LoRA-FA keep (a budget
// that fits LoRA-FA as it is but not LoRA; every plan's peak the analytic model's for its policy), and
// the cluster planner's per-GPU model states, DP traffic and FLOPs of a LoRA job against numbers worked
// by hand for a small llama.
#include <math.h>
#include <string.h>
#include "check.h"
#include "arch/lora.h"
#include "memory/cluster_model.h"
#include "memory/cluster_time.h"
#include "memory/flops.h"
#include "memory/planner.h"
#include "memory/presets.h"

// A tiny llama: s 64, b 4, h 64, 4 heads, 2 kv heads, FFN 128, 4 layers, v 256, fp32; LoRA r 8 on all seven.
static ActShape tiny(int fa) {
    ActShape sh = {.s = 64, .b = 4, .h = 64, .a = 4, .L = 4, .v = 256, .elem_bytes = 4, .masks = MASKS_BYTES, .t = 1};
    act_shape_set_family(&sh, ARCH_LLAMA, 2, 128, -1, 0, 0);
    sh.lora_rank = 8;
    sh.lora_sites = lora_family_sites(LORA_FAMILY_LLAMA);
    sh.lora_fa = fa;
    return sh;
}

// The plan's peak is the analytic model's for the policy it becomes (what the ledger measures).
static size_t policy_peak(const MemPlan *p, const ActShape *sh) {
    MemoryPolicy pol;
    plan_policy(p, sh, &pol);
    ActShape chunked = *sh;   // mini-seq's chunks are the shape's (the model's shape carries the policy's)
    chunked.mini_seq = pol.mini_seq;
    size_t b = act_peak_bytes(&chunked, &pol);
    policy_free(&pol);
    return b;
}

static void check_budget_planner(void) {
    ActShape lora = tiny(0), fa = tiny(1);
    CHECK(act_keep_bits(&lora) == (LORA_FROZEN | lora.lora_sites << LORA_TARGET_SHIFT), "LoRA's keep bits");
    CHECK(act_keep_bits(&fa) == (LORA_FROZEN | LORA_FA | fa.lora_sites << LORA_TARGET_SHIFT), "LoRA-FA's keep bits");
    MemPlan pl, pf;
    CHECK(plan_memory(&lora, 1, 64.0 * 1048576, 0, &pl) == 0 && plan_memory(&fa, 1, 64.0 * 1048576, 0, &pf) == 0,
          "64 MiB fits both");
    CHECK(pl.n_full == 0 && pl.n_sel == 0 && pf.n_full == 0 && pf.n_sel == 0 && pl.tempo == act_keep_bits(&lora) &&
              pf.tempo == act_keep_bits(&fa), "64 MiB: nothing recomputed, nothing but LoRA's bits");
    // ctron train --lora-rank 8 [--lora-fa] measures these (tests/test_mem_budget.sh): LoRA keeps qkv_in,
    // proj_in and fc1_in of every layer on top, 3·e·s·b·h = 3·4·64·4·64 bytes each. Layer 0 keeps no ln1_in
    // (e·s·b·h = 65536 B) nor ln1_stats (4·s·b = 1024 B): nothing reads its input gradient.
    CHECK(pf.act_peak == 3712000 - 66560 && pl.act_peak == 3712000 - 66560 + 4 * 196608,
          "none: LoRA-FA %zu (3645440), LoRA %zu (4431872)", pf.act_peak, pl.act_peak);
    CHECK(policy_peak(&pl, &lora) == pl.act_peak && policy_peak(&pf, &fa) == pf.act_peak, "the model's peaks");
    // A later pipeline stage planned alone (the cluster planner's stage_plan): its first layer is the model's
    // layer 4, whose input gradient the stage before reads, so it keeps its ln1_in and ln1_stats
    ActShape later = fa;
    later.first_layer = 4;
    MemPlan pv;
    CHECK(plan_memory(&later, 1, 64.0 * 1048576, 0, &pv) == 0 && pv.act_peak == 3712000 &&
              policy_peak(&pv, &later) == pv.act_peak && !act_input_grad_dead(&later, 0) && act_input_grad_dead(&fa, 0),
          "a later stage's LoRA-FA: %zu (3712000: no layer without an input gradient)", pv.act_peak);
    // A budget of LoRA-FA's own (its arena and scratch): LoRA-FA as it is; LoRA must take something
    double budget = (double)(pf.arena_bytes + pf.scratch_bytes);
    CHECK(plan_memory(&fa, 1, budget, 0, &pf) == 0 && pf.n_full == 0 && pf.n_sel == 0 &&
              (pf.tempo & ~act_keep_bits(&fa)) == 0 && pf.masks == MASKS_BYTES, "LoRA-FA fits its own budget as it is");
    CHECK(plan_memory(&lora, 1, budget, 0, &pl) == 0, "LoRA fits it with some technique");
    CHECK(pl.n_full + pl.n_sel > 0 || (pl.tempo & ~act_keep_bits(&lora)) != 0, "LoRA takes a technique (%d full, %d "
          "selective, tempo %#x)", pl.n_full, pl.n_sel, pl.tempo);
    CHECK((double)(pl.arena_bytes + pl.scratch_bytes) <= budget && policy_peak(&pl, &lora) == pl.act_peak &&
              (pl.tempo & act_keep_bits(&lora)) == act_keep_bits(&lora), "LoRA's plan within the budget, exact, its bits kept");
    CHECK(!(pl.tempo & MINI_SEQ), "no mini-seq for llama (the planners offer it to no SwiGLU MLP)");
    // One layer, budgets down to where it is rebuilt: the plan's peak is its rebuild's (first_work: no ln1_stats)
    for (int f = 0; f <= 1; f++) {
        ActShape one = tiny(f);
        one.L = 1;
        MemPlan p0, p;
        CHECK(plan_memory(&one, 1, 64.0 * 1048576, 0, &p0) == 0, "one layer fits 64 MiB");
        int full = 0;
        for (double b = (double)(p0.arena_bytes + p0.scratch_bytes); b > 0 && !full; b *= 0.97)
            if (plan_memory(&one, 1, b, 0, &p) == 0 && p.n_full == 1) {
                full = 1;
                CHECK(policy_peak(&p, &one) == p.act_peak, "fa %d: one full layer's plan %zu, the model's %zu", f,
                      p.act_peak, policy_peak(&p, &one));
            }
        CHECK(full, "fa %d: some budget rebuilds the layer", f);
    }
}

// GPT-2 with LoRA / LoRA-FA on every site: from what keeping everything needs down to nothing fitting, every
// plan is exact (the analytic peak of its policy is the plan's) and within its budget, and some plans take
// mini-seq, whose chunked MLP runs the adapters.
static void check_gpt2_minis(void) {
    for (int fa = 0; fa <= 1; fa++) {
        ActShape sh = {.s = 64, .b = 4, .h = 64, .a = 4, .L = 4, .v = 256, .elem_bytes = 4, .masks = MASKS_BYTES, .t = 1};
        act_shape_set_family(&sh, ARCH_GPT2, 4, 256, 1, 0, 0);
        sh.lora_rank = 8;
        sh.lora_sites = lora_family_sites(LORA_FAMILY_GPT2);
        sh.lora_fa = fa;
        MemPlan p;
        CHECK(plan_memory(&sh, 1, 64.0 * 1048576, 0, &p) == 0, "GPT-2 LoRA fa %d: 64 MiB fits", fa);
        double top = (double)(p.arena_bytes + p.scratch_bytes);
        int plans = 0, minis = 0;
        for (double budget = top; budget > top / 20; budget *= 0.9) {
            if (plan_memory(&sh, 1, budget, 0, &p) != 0) break;
            plans++;
            minis += (p.tempo & MINI_SEQ) != 0;
            CHECK((double)(p.arena_bytes + p.scratch_bytes) <= budget && policy_peak(&p, &sh) == p.act_peak &&
                      (p.tempo & act_keep_bits(&sh)) == act_keep_bits(&sh),
                  "GPT-2 LoRA fa %d, budget %.0f: the plan (arena %zu + scratch %zu, tempo %#x, %d full %d selective) within "
                  "it, exact (%zu, policy %zu), LoRA's bits kept", fa, budget, p.arena_bytes, p.scratch_bytes, p.tempo,
                  p.n_full, p.n_sel, p.act_peak, policy_peak(&p, &sh));
        }
        CHECK(plans > 3 && minis > 0, "GPT-2 LoRA fa %d: %d plans, %d with mini-seq", fa, plans, minis);
        // With an offload pool too: layer 0's bills are its own (no ln1_in to offload), and the plan's peak, stage
        // and pool are still the policy's (act_peak_bytes holds the stage; act_offload_pool_bytes the pool)
        int offloading = 0;
        for (double budget = top * 0.6; budget > top / 20; budget *= 0.8) {
            if (plan_memory(&sh, 1, budget, 64.0 * 1048576, &p) != 0) break;
            MemoryPolicy pol;
            plan_policy(&p, &sh, &pol);
            ActShape chunked = sh;
            chunked.mini_seq = pol.mini_seq;
            offloading += p.offload != 0;
            CHECK(policy_peak(&p, &sh) == p.act_peak && act_offload_pool_bytes(&chunked, &pol) == p.pool_bytes,
                  "GPT-2 LoRA fa %d, budget %.0f, offload %#x: peak %zu (policy %zu), pool %zu (policy %zu)", fa, budget,
                  p.offload, p.act_peak, policy_peak(&p, &sh), p.pool_bytes, act_offload_pool_bytes(&chunked, &pol));
            policy_free(&pol);
        }
        CHECK(offloading > 0, "GPT-2 LoRA fa %d: some plan offloads", fa);
        // The plan's arena is what the model allocates for its policy (peak + 64 B of alignment per entry, the
        // adapters' names among the entries): a plan that leaves them out can be over --mem-budget at gpt_init.
        CHECK(plan_memory(&sh, 1, top * 0.5, 0, &p) == 0, "GPT-2 LoRA fa %d: half the budget fits", fa);
        MemoryPolicy pol;
        plan_policy(&p, &sh, &pol);
        CHECK(p.arena_bytes == p.act_peak + (size_t)act_max_entries(&pol) * 64,
              "GPT-2 LoRA fa %d: the plan's arena %zu, the model's %zu + %d entries × 64", fa, p.arena_bytes, p.act_peak,
              act_max_entries(&pol));
        policy_free(&pol);
    }
}

// Llama with h 256, 4 heads, 2 kv heads (d 64), FFN 512, 4 layers, v 1024, s 128, global batch 8; 8 GPUs.
static ClusterJob job_of(int rank, int fa) {
    return (ClusterJob){.s = 128, .h = 256, .a = 4, .L = 4, .v = 1024, .B = 8, .gpus_per_node = 8, .nodes = 1, .e = 2,
                        .reserve_bytes = 1e9, .arch = ARCH_LLAMA, .kv = 2, .ffn = 512, .tie = -1, .lora_rank = rank,
                        .lora_fa = fa};
}

static void check_cluster(void) {
    const GpuSpec *g = gpu_kind_find("h100-80g");
    ClusterLayout lay = {.t = 2, .p = 1, .v = 1, .d = 4, .mb = 1, .sp = 0, .zero = 0, .rc = CR_NONE};
    ClusterJob full = job_of(0, 0), lora = job_of(8, 0), fa = job_of(8, 1);
    ClusterPrediction pfull, plora, pfa;
    cluster_predict(&full, g, &lay, 1, &pfull);
    cluster_predict(&lora, g, &lay, 1, &plora);
    cluster_predict(&fa, g, &lay, 1, &pfa);
    CHECK(pfull.fits && plora.fits && pfa.fits, "the small job fits: %s %s %s", pfull.reason, plora.reason, pfa.reason);
    // The base on one of t = 2 ranks: per layer q 256·128, k and v 256·64 each, o 128·256, gate and up 256·256
    // each, down 256·256, two norms 256 each = 295424; 4 layers; embedding and lm_head 1024·256/2 each; final norm
    double base = 4 * 295424.0 + 2 * 131072.0 + 256;
    // Adapters, r 8: A of q, k, v, gate, up [8, 256] whole (5·2048), of o [8, 128] and of down [8, 256] (their
    // input split): 13312 a layer; B of q [128, 8], k and v [64, 8], gate and up [256, 8] (rows split), of o and
    // down [256, 8] whole: 10240 a layer
    double a_par = 4 * 13312.0, b_par = 4 * 10240.0;
    CHECK(cluster_stage_adapters(&lora, &lay, 0, 0) == a_par + b_par && cluster_stage_adapters(&fa, &lay, 0, 1) == b_par &&
              cluster_stage_adapters(&lora, &lay, 0, 1) == a_par + b_par, "adapter counts per rank");
    StageMemory *f = &pfull.mem[0], *l = &plora.mem[0], *x = &pfa.mem[0];
    // Full fine-tuning: 2 + 4 + 12 bytes a parameter. LoRA: the frozen base 2 bytes (its bf16 copy), the
    // adapters 2 + 4 + 12; LoRA-FA: A frozen as the base
    CHECK(f->weights == 2 * base && f->grads == 4 * base && f->optimizer == 12 * base, "full: %.0f %.0f %.0f", f->weights,
          f->grads, f->optimizer);
    CHECK(l->weights == 2 * (base + a_par + b_par) && l->grads == 4 * (a_par + b_par) && l->optimizer == 12 * (a_par + b_par),
          "LoRA: %.0f %.0f %.0f", l->weights, l->grads, l->optimizer);
    CHECK(x->weights == 2 * (base + a_par + b_par) && x->grads == 4 * b_par && x->optimizer == 12 * b_par,
          "LoRA-FA: %.0f %.0f %.0f", x->weights, x->grads, x->optimizer);
    // Per GPU in all: 2·1444096 + 2·94208 + 16·40960 = 3731968 bytes of model states under LoRA-FA
    CHECK(x->weights + x->grads + x->optimizer == 3731968.0, "LoRA-FA's model states %.0f, expected 3731968",
          x->weights + x->grads + x->optimizer);
    // Activations: LoRA-FA drops qkv_in, proj_in and fc1_in of every layer: at t = 2 without SP qkv_in and
    // fc1_in are whole [s, b, h] (bf16: 2·128·256 each) and proj_in the rank's half (128·128·2)
    double drop = 4 * (2.0 * 128 * 256 * 2 + 128 * 128 * 2);
    CHECK(fabs((l->activations - x->activations) - drop) < 0.5, "LoRA − LoRA-FA activations %.0f, expected %.0f",
          l->activations - x->activations, drop);
    CHECK(x->total == x->weights + x->grads + x->optimizer + x->activations + x->workspace + x->reserve, "the sum");
    // DP: only the trained adapters are reduced (no --dp-overlap: all exposed)
    CHECK(fabs(pfa.part[PART_DP_COMM] - cluster_dp_time(&fa, g, &lay, b_par)) < 1e-15 &&
              fabs(plora.part[PART_DP_COMM] - cluster_dp_time(&lora, g, &lay, a_par + b_par)) < 1e-15 &&
              fabs(pfull.part[PART_DP_COMM] - cluster_dp_time(&full, g, &lay, base)) < 1e-15,
          "DP reduces what trains: %.4g %.4g %.4g s", pfa.part[PART_DP_COMM], plora.part[PART_DP_COMM],
          pfull.part[PART_DP_COMM]);
    // FLOPs: the full step's less the base's weight gradients (2·B·s per weight of its linears and the output
    // layer), plus per site the adapters' forward 2·B·s·r·(in + out) and backward 2·B·s·r·(2·out + in), and dA
    // 2·B·s·r·in under LoRA. B·s = 1024; whole-model widths: q (256, 256), k, v (256, 128), o (256, 256),
    // gate, up (256, 512), down (512, 256).
    double Bs = 8 * 128.0, weights = 4 * (256.0 * (256 + 2 * 128) + 256 * 256 + 3 * 256 * 512) + 256 * 1024.0;
    double in_sum = 256 * 6 + 512.0, io[7][2] = {{256, 256}, {256, 128}, {256, 128}, {256, 256}, {256, 512},
                                                 {256, 512}, {512, 256}};
    double ad = 0;
    for (int k = 0; k < 7; k++) ad += (io[k][0] + io[k][1]) + (2 * io[k][1] + io[k][0]);
    // Layer 0 computes no dL/dx through q, k and v (the frozen embedding reads none): its base GEMMs'
    // 2·B·s·h·(q + 2kv) and the three adapters' dx, 2·B·s·r·in each
    double dead = 2 * Bs * 256 * (256 + 2 * 128.0) + 3 * 2 * Bs * 8 * 256;
    double fa_delta = -2 * Bs * weights + 4 * 2 * Bs * 8 * ad - dead, lora_delta = fa_delta + 4 * 2 * Bs * 8 * in_sum;
    ActShape sh;
    cluster_job_shape(&fa, 8, 1, 0, &sh);
    CHECK(fabs(flops_lora_delta(&sh, 8) - fa_delta) < 1, "LoRA-FA's FLOPs delta %.6g, expected %.6g",
          flops_lora_delta(&sh, 8), fa_delta);
    cluster_job_shape(&lora, 8, 1, 0, &sh);
    CHECK(fabs(flops_lora_delta(&sh, 8) - lora_delta) < 1, "LoRA's FLOPs delta");
    ActShape fs;
    cluster_job_shape(&full, 8, 1, 0, &fs);
    FlopBlock blk = flops_block_of(&fs);
    double model = flops_model_block(8, 4, 128, 256, 1024, &blk);
    CHECK(fabs(pfa.mfu * pfa.step_s * 8 * g->peak_flops - (model + fa_delta)) < 1e-3 * model,
          "MFU counts LoRA-FA's model FLOPs");
    // TP: the row-parallel sites (o, down) all-reduce their partial x·Aᵀ, n·r elements (s·mb = 128 rows, r 8,
    // bf16) each, once a layer per site in the forward; the column-parallel ones need no collective
    // (the backward's collectives change only because the base's dW GEMMs they hid under are gone: the
    // same for LoRA and LoRA-FA)
    LayerTime tf, tl, tx;
    cluster_layer_time(&full, g, &lay, 0, &tf);
    cluster_layer_time(&lora, g, &lay, 0, &tl);
    cluster_layer_time(&fa, g, &lay, 0, &tx);
    double site_ar = cluster_allreduce_time(g, g->nvlink_bw, 2, 128 * 8 * 2.0);
    CHECK(fabs((tx.comm_f - tf.comm_f) - 2 * site_ar) < 1e-18 && tl.comm_f == tx.comm_f && tl.comm_b == tx.comm_b &&
              site_ar > 0,
          "LoRA's TP traffic a layer: forward %.6g s more (expected 2 × %.6g); LoRA vs LoRA-FA backward %.6g vs %.6g s",
          tx.comm_f - tf.comm_f, site_ar, tl.comm_b, tx.comm_b);
    // The step of a real shape (Llama 3 8B, s 8192, on 8 GPUs, d 8): no weight-gradient GEMMs for the base (2/3 of
    // the linears' work left), plus the adapters' skinny GEMMs: N or K = r = 16, a wave of tiles each, bound by
    // reading their [8192, in] operand (0.81 in all: on a small job like the one above they cost more than the
    // base's dW they save), the optimizer and the DP reduction over the adapters only
    const ModelPreset *m = preset_find("llama3-8b");
    ClusterJob big = {.s = m->s, .h = m->h, .a = m->a, .L = m->L, .v = m->v, .B = 64, .gpus_per_node = 8, .nodes = 1,
                      .e = 2, .reserve_bytes = 8e9, .arch = m->arch, .kv = m->kv, .ffn = m->ffn, .tie = -1};
    ClusterJob big_fa = big;
    big_fa.lora_rank = 16;
    big_fa.lora_fa = 1;
    ClusterLayout one = {.t = 1, .p = 1, .v = 1, .d = 8, .mb = 1, .zero = 1, .rc = CR_FULL};
    ClusterPrediction bf, bx;
    cluster_predict(&big, g, &one, 0, &bf);
    cluster_predict(&big_fa, g, &one, 0, &bx);
    double ratio = bx.part[PART_GEMM] / bf.part[PART_GEMM];
    CHECK(ratio > 0.80 && ratio < 0.82 && bx.part[PART_OPTIMIZER] < 1e-2 * bf.part[PART_OPTIMIZER] &&
              bx.part[PART_DP_COMM] < 1e-2 * bf.part[PART_DP_COMM],
          "Llama 3 8B LoRA-FA / full: GEMMs %.4f (expected 0.81: dX and the forward, 2/3, plus the adapters), "
          "optimizer %.3g / %.3g s, DP %.3g / %.3g s", ratio, bx.part[PART_OPTIMIZER], bf.part[PART_OPTIMIZER],
          bx.part[PART_DP_COMM], bf.part[PART_DP_COMM]);
    cluster_prediction_free(&pfull);
    cluster_prediction_free(&plora);
    cluster_prediction_free(&pfa);
}

int main(void) {
    check_budget_planner();
    check_gpt2_minis();
    check_cluster();
    return check_summary();
}
