// The cluster planner (memory/cluster_*.h) against the paper: Table 5's iteration times (full
// recompute and SP + selective, the paper's t, p, v and batches, A100-80GB constants) within 15 %
// and at the values the model predicts today, the speed-up within 5 points, Table 4's 22B layer;
// the per-stage memory against stage_model's first stage and Eq. 5/6; the building blocks.
// Prints the calibration table that docs/PLANNER.md quotes.
#include <math.h>
#include <string.h>
#include "check.h"
#include "memory/cluster_model.h"
#include "memory/cluster_time.h"
#include "memory/presets.h"
#include "memory/stage_model.h"

#define GIB 1073741824.0

static ClusterJob job_of(const ModelPreset *pr) {
    return (ClusterJob){.s = pr->s, .h = pr->h, .a = pr->a, .L = pr->L, .v = pr->v, .B = pr->global_batch,
                        .gpus_per_node = 8, .nodes = pr->gpus / 8, .e = 2, .dp_overlap = 0, .reserve_bytes = 8.0 * GIB};
}

// A stage's peak under a mixed policy (what recompute=plan gives a stage: full layers first). Backward
// rebuilds a full layer only after the layers above it in the chunk are freed, so the rebuild adds to the
// stored bytes only what exceeds them; under a uniform policy it adds the whole transient.
static void check_mixed_stage_peak(void) {
    StageLayout sl = {{.s = 2048, .b = 1, .h = 1024, .a = 16, .L = 8, .v = 51200, .elem_bytes = 2, .masks = MASKS_BYTES,
                       .dropout = 1, .t = 1},
                      2, 1, 8};
    MemoryPolicy pol;
    policy_default(&pol, 8);
    for (int l = 0; l < 8; l++) pol.group_start[l] = l;
    pol.kind[0] = pol.kind[4] = RECOMPUTE_FULL;   // the first layer of each stage full, the rest keep everything
    for (int r = 0; r < 2; r++) {
        StageActivations a;
        stage_activations_at(&sl, &pol, r, &a);
        size_t chunk = 0;
        for (int i = 0; i < 4; i++) chunk += act_layer_bytes(&sl.sh, &pol, 4 * r + i);
        size_t first = act_layer_bytes(&sl.sh, &pol, 4 * r), w = stage_recompute_working(&sl.sh, &pol, 4 * r);
        double over = first + w > chunk ? (double)(first + w - chunk) : 0.0;
        CHECK(a.working == (double)w && w > 0 && a.rebuild_over == over && a.peak == a.held + over,
              "stage %d: working %.0f (expected %zu), over %.0f (expected %.0f), peak %.0f = held %.0f + over", r, a.working,
              w, a.rebuild_over, over, a.peak, a.held);
    }
    for (int l = 0; l < 8; l++) pol.kind[l] = RECOMPUTE_FULL;
    StageActivations u;
    stage_activations_at(&sl, &pol, 1, &u);
    CHECK(u.rebuild_over == u.working && u.peak == u.held + u.working, "uniform full: over %.0f, working %.0f",
          u.rebuild_over, u.working);
    policy_free(&pol);
}

int main(void) {
    check_mixed_stage_peak();
    const GpuSpec *g = gpu_kind_find("a100-80g");
    CHECK(g && g->peak_flops == 312e12 && g->sms == 108, "the A100-80GB entry: 312 TFLOP/s, 108 SMs");
    // Table 5. Today's predictions (s): a change to the model that moves them must update them here
    // and in docs/PLANNER.md.
    static const struct { const char *name; double full, sel; } want[] = {
        {"22B", 1.383, 1.038}, {"175B", 17.744, 13.058}, {"530B", 48.221, 35.935}, {"1T", 94.636, 70.883}};
    // Issue 28: the calibration rows stay within the error they had before the model's new terms
    // (launch gaps, …): mean |error| 3.2 %, the worst 6.1 % (22B SP + selective).
    double sum_abs = 0, worst = 0;
    printf("%-5s %-22s %9s %9s %8s   %6s %6s\n", "model", "layout", "predicted", "paper", "error", "MFU", "HFU");
    for (int i = 0; i < 4; i++) {
        const ModelPreset *pr = preset_find(want[i].name);
        ClusterJob job = job_of(pr);
        double ts[2];
        for (int k = 0; k < 2; k++) {
            ClusterLayout lay = {pr->t, pr->p, pr->m, 1, pr->micro_batch, k, 0, k ? CR_SELECTIVE : CR_FULL, 0, 0};
            ClusterPrediction p;
            cluster_predict(&job, g, &lay, 1, &p);
            double paper = k ? pr->iter_sel_s : pr->iter_full_s, w = k ? want[i].sel : want[i].full;
            double err = p.step_s / paper - 1.0;
            printf("%-5s %-22s %9.3f %9.2f %+7.1f%%   %5.1f%% %5.1f%%\n", pr->name, k ? "SP + selective" : "full recompute",
                   p.step_s, paper, 100 * err, 100 * p.mfu, 100 * p.hfu);
            sum_abs += fabs(err);
            if (fabs(err) > worst) worst = fabs(err);
            CHECK(fabs(err) < 0.15, "%s %s: predicted %.3f s, paper %.2f s (%+.1f%%, target 15%%)", pr->name,
                  k ? "sp+selective" : "full", p.step_s, paper, 100 * err);
            CHECK(fabs(p.step_s / w - 1.0) < 0.005, "%s %s: predicted %.4f s, the model gave %.3f s", pr->name,
                  k ? "sp+selective" : "full", p.step_s, w);
            CHECK(p.fits, "%s %s: the paper ran it on 80 GB A100s but the model says %s", pr->name, k ? "sel" : "full",
                  p.reason);
            double sum = 0;
            for (int q = 0; q < PART_COUNT; q++) sum += p.part[q];
            CHECK(fabs(sum - p.step_s) < 1e-9 * p.step_s, "%s: the parts sum to %.6f, not the step %.6f", pr->name, sum, p.step_s);
            // HFU/MFU: Eq. 8 / Eq. 7 for selective; full adds a forward (×4/3 on the layers)
            double L = pr->L, s = pr->s, h = pr->h, v = pr->v;
            double ratio = k ? (1 + s / (3 * h) + v / (12 * h * L)) / (1 + s / (6 * h) + v / (12 * h * L))
                             : (4.0 / 3 * (1 + s / (6 * h)) + v / (12 * h * L)) / (1 + s / (6 * h) + v / (12 * h * L));
            CHECK(fabs(p.hfu / p.mfu - ratio) < 1e-9, "%s: HFU/MFU %.6f, expected %.6f", pr->name, p.hfu / p.mfu, ratio);
            ts[k] = p.step_s;
            // Stage 0's activations: Eq. 6 (34sbhL/t) × the interleave factor for SP + selective, plus
            // the embedding mask and the attention core recomputed in backward.
            if (k == 1 && pr->p > 1) {
                StageLayout sl = {{.s = pr->s, .b = 1, .h = pr->h, .a = pr->a, .L = pr->L, .v = pr->v, .elem_bytes = 2,
                                   .masks = MASKS_BYTES, .dropout = 1, .t = pr->t, .sp = 1},
                                  pr->p, pr->m, pr->global_batch};
                double sbh = s * h, eq6 = 34.0 * sbh * (L / pr->p) / pr->t * stage_layer_factor(&sl);
                double core = 5.0 * pr->a * s * s / pr->t;   // 2 + 1 + 2 bytes of as²b/t, transient
                double emb = sbh / pr->t * stage_in_flight(&sl);
                // LN statistics (mean and 1/σ of two LNs, fp32, s/t rows per layer) are counted by ctron, not by the paper
                double stats = 16.0 * s / pr->t * (L / pr->p) * stage_layer_factor(&sl);
                CHECK(fabs(p.mem[0].activations - (eq6 + core + emb + stats)) < 1.0,
                      "%s stage 0 activations %.0f, Eq. 6 × factor + core + mask + stats %.0f", pr->name,
                      p.mem[0].activations, eq6 + core + emb + stats);
                for (int r = 1; r < pr->p; r++)
                    CHECK(p.mem[r].activations <= p.mem[0].activations + 4.0 * s * v / pr->t + 4.0 * s * h,
                          "%s: stage %d holds more activations (%.0f) than the first (%.0f)", pr->name, r,
                          p.mem[r].activations, p.mem[0].activations);
            }
            cluster_prediction_free(&p);
        }
        double gain = 100 * (ts[0] / ts[1] - 1), paper = 100 * (pr->iter_full_s / pr->iter_sel_s - 1);
        printf("%-5s %-22s %8.1f%% %8.1f%% %+7.1f pt\n", pr->name, "speed-up", gain, paper, gain - paper);
        CHECK(fabs(gain - paper) < 5.0, "%s: speed-up %.1f%%, paper %.1f%% (target 5 points)", pr->name, gain, paper);
    }
    CHECK(sum_abs / 8 <= 0.0323 && worst <= 0.061, "Table 5: mean |error| %.2f%% (was 3.23%%), worst %.2f%% (was 6.1%%)",
          100 * sum_abs / 8, 100 * worst);
    printf("Table 5: mean |error| %.2f%%, worst %.2f%%\n", 100 * sum_abs / 8, 100 * worst);
    // Table 4: the 22B layer (b = 4, t = 8), ms. forward / backward; full and selective add their recompute.
    const ModelPreset *pr = preset_find("22B");
    ClusterJob job = job_of(pr);
    static const struct { const char *what; int sp; ClusterRecompute rc; double fwd, bwd; double want_f, want_b; } t4[] = {
        {"no recompute", 0, CR_NONE, 7.7, 11.9, 7.569, 11.816},
        {"sequence parallel", 1, CR_NONE, 7.2, 11.8, 6.981, 11.718},
        {"full recompute", 0, CR_FULL, 7.7, 19.5, 7.569, 19.385},
        {"selective", 0, CR_SELECTIVE, 7.7, 13.2, 7.569, 12.916},
        {"selective + SP", 1, CR_SELECTIVE, 7.2, 13.1, 6.981, 12.818}};
    printf("\nTable 4, 22B, one layer (ms)      fwd: pred paper    bwd: pred paper    combined: pred paper  error\n");
    for (int i = 0; i < 5; i++) {
        ClusterLayout lay = {8, 1, 1, 1, 4, t4[i].sp, 0, t4[i].rc, 0, 0};
        LayerTime lt;
        cluster_layer_time(&job, g, &lay, 0, &lt);
        double f = 1e3 * (lt.gemm_f + lt.attn_f + lt.elem_f + lt.comm_f);
        double b = 1e3 * (lt.gemm_b + lt.attn_b + lt.elem_b + lt.comm_b);
        if (t4[i].rc == CR_FULL) b += f;
        if (t4[i].rc == CR_SELECTIVE) b += 1e3 * lt.rc_sel;
        double c = f + b, pc = t4[i].fwd + t4[i].bwd;
        printf("  %-30s %6.2f %5.1f      %6.2f %5.1f        %6.2f %5.1f      %+5.1f%%\n", t4[i].what, f, t4[i].fwd, b,
               t4[i].bwd, c, pc, 100 * (c / pc - 1));
        CHECK(fabs(f / t4[i].want_f - 1) < 0.005 && fabs(b / t4[i].want_b - 1) < 0.005,
              "Table 4 %s: %.3f / %.3f ms, the model gave %.3f / %.3f", t4[i].what, f, b, t4[i].want_f, t4[i].want_b);
        CHECK(fabs(c / pc - 1) < 0.06, "Table 4 %s: combined %.2f ms vs the paper's %.1f", t4[i].what, c, pc);
    }
    // Building blocks. A 108-tile GEMM is one full wave; 109 tiles take two.
    GpuSpec q = *g;
    CHECK(fabs(cluster_wave_efficiency(&q, 256 * 108, 128, 1) - 1.0) < 1e-12, "108 tiles: one full wave");
    CHECK(fabs(cluster_wave_efficiency(&q, 256 * 109, 128, 1) - 109.0 / 216) < 1e-12, "109 tiles: two waves");
    // A large square GEMM is compute-bound at gemm_eff of peak; a K = 1 GEMM is memory-bound.
    double big = cluster_gemm_time(&q, 27648, 8192, 8192, 1, 2);
    CHECK(fabs(big - 2.0 * 27648 * 8192 * 8192 / (312e12 * 0.8)) < 1e-9, "square GEMM %.6f s", big);
    double thin = cluster_gemm_time(&q, 8192, 8192, 1, 1, 2);
    CHECK(fabs(thin - 2.0 * (8192 + 8192 + 8192.0 * 8192) / (2.039e12 * 0.8)) < 1e-12, "K = 1 GEMM is HBM-bound");
    // Ring formulas: all-reduce of N bytes on 8 ranks moves 2·7/8·N per link.
    double ar = cluster_allreduce_time(&q, 300e9, 8, 1e9);
    CHECK(fabs(ar - (1.75e9 / (300e9 * 0.78) + 14 * 5e-6)) < 1e-12, "ring all-reduce %.6f s", ar);
    CHECK(cluster_allreduce_time(&q, 300e9, 1, 1e9) == 0.0, "one rank: no all-reduce");
    // Layout checks.
    ClusterLayout bad = {16, 4, 1, 1, 1, 0, 0, CR_SELECTIVE, 0, 0};
    char err[160];
    ClusterJob j175 = job_of(preset_find("175B"));
    CHECK(cluster_layout_check(&j175, g, &bad, err, sizeof err) != 0 && strstr(err, "larger than the 8 GPUs"),
          "t = 16 on 8-GPU nodes must be refused (%s)", err);
    return check_summary();
}
