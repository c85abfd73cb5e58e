// The paper's numbers from ctron's analytic model: Table 2's per-layer formulas exactly, Figure 7's
// percentages, Eq. 5/6 for the first pipeline stage, the extra term, and Table 5's MFU/HFU.
// Expected values are computed here from the formulas, not from ctron's own functions.
#include <math.h>
#include <string.h>
#include "check.h"
#include "memory/memory_config.h"
#include "memory/memory_model.h"
#include "memory/presets.h"

// A preset as `ctron memory --preset NAME --sp? --recompute KIND` sets it up (bf16, byte masks, p = 0.1).
static void config(MemoryConfig *c, const ModelPreset *p, int sp, const char *recompute, double iter_time) {
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", p->name);
    c->lay.sh = (ActShape){.s = p->s, .b = p->micro_batch, .h = p->h, .a = p->a, .L = p->L, .v = p->v,
                           .elem_bytes = 2, .masks = MASKS_BYTES, .dropout = 1, .t = p->t, .sp = sp};
    c->lay.p = p->p;
    c->lay.m = p->m;
    c->lay.microbatches = p->global_batch / p->micro_batch / (p->gpus / (p->t * p->p));
    c->dropout = 0.1;
    c->global_batch = p->global_batch;
    c->gpus = p->gpus;
    c->iter_time = iter_time;
    c->peak_tflops = 312.0;
    c->policy.act_dtype = ACT_BF16;
    char err[256];
    int rc = stage_policy_build(&c->policy, &c->lay, recompute, NULL, 1, NULL, err, sizeof err);
    CHECK(rc == 0, "%s: policy %s: %s", p->name, recompute, err);
}

static void table2_exact(void) {
    const ModelPreset *p = preset_find("22B");
    size_t s = (size_t)p->s, b = (size_t)p->micro_batch, h = (size_t)p->h, a = (size_t)p->a, t = (size_t)p->t;
    size_t sbh = s * b * h, as2b = a * s * s * b;
    // sbh(34 + 5as/h) = 34sbh + 5as²b, and so on: every term is an integer for 22B.
    size_t want[TECH_COUNT] = {
        [TECH_NO_PARALLEL] = 34 * sbh + 5 * as2b,
        [TECH_TP] = 10 * sbh + 24 * sbh / t + 5 * as2b / t,
        [TECH_TP_SP] = 34 * sbh / t + 5 * as2b / t,
        [TECH_TP_SELECTIVE] = 10 * sbh + 24 * sbh / t,
        [TECH_TP_SP_SELECTIVE] = 34 * sbh / t,
        [TECH_FULL] = 2 * sbh,
    };
    MemoryConfig c;
    config(&c, p, 1, "selective", 0);
    MemorySummary m;
    memory_summarize(&c, &m);
    for (int k = 0; k < TECH_COUNT; k++) {
        size_t got = technique_layer_bytes((long)s, (long)b, (long)h, (long)a, (int)t, (Technique)k);
        CHECK(got == want[k], "22B %s: %zu bytes, Table 2 says %s = %zu", technique_label((Technique)k), got,
              technique_formula((Technique)k), want[k]);
        CHECK(m.tech_layer[k] == want[k], "22B summary %s: %zu != %zu", technique_key((Technique)k), m.tech_layer[k], want[k]);
    }
    // The configuration's own layers (bf16, byte masks, SP + selective) keep 34sbh/t of the paper's
    // names, plus the LN statistics the paper ignores: 2 × 2 fp32 per row of the s/t shard.
    CHECK(act_layer_core_bytes(&c.lay.sh, &c.policy, 0) == 34 * sbh / t, "22B SP+selective core bytes");
    CHECK(act_layer_bytes(&c.lay.sh, &c.policy, 0) == 34 * sbh / t + 16 * s * b / t, "22B SP+selective with LN stats");
    // p = 1: the first stage's peak is the model's step peak, the number the ledger measures.
    CHECK(m.act.peak == (double)act_peak_bytes(&c.lay.sh, &c.policy), "22B stage peak == act_peak_bytes");
    // Extras with SP and p = 1: the paper's term + final-LN statistics (2 fp32 per row of the shard).
    double paper_extra = (double)(sbh * p->p / t) + 4.0 * sbh / t * (1.0 + (double)p->v / h);
    CHECK(fabs(m.paper_extra - paper_extra) < 0.5, "22B extra term %.0f != %.0f", m.paper_extra, paper_extra);
    CHECK(m.act.extras == paper_extra + 8.0 * s * b / t, "22B extras %.0f != paper %.0f + LN stats", m.act.extras,
          paper_extra);
    policy_free(&c.policy);
}

// Figure 7: percent of the TP baseline, the formulas in doubles, to one decimal.
static void figure7(void) {
    const char *names[] = {"22B", "175B", "530B", "1T"};
    printf("percent of the TP baseline      SP  selective  SP+sel   full  (no parallelism)\n");
    for (int i = 0; i < 4; i++) {
        const ModelPreset *p = preset_find(names[i]);
        double r = 5.0 * p->a * p->s / p->h, t = p->t;
        double base = 10 + 24 / t + r / t;
        double want[TECH_COUNT] = {[TECH_NO_PARALLEL] = 34 + r, [TECH_TP] = base, [TECH_TP_SP] = 34 / t + r / t,
                                   [TECH_TP_SELECTIVE] = 10 + 24 / t, [TECH_TP_SP_SELECTIVE] = 34 / t, [TECH_FULL] = 2};
        MemoryConfig c;
        config(&c, p, 0, "none", 0);
        MemorySummary m;
        memory_summarize(&c, &m);
        for (int k = 0; k < TECH_COUNT; k++) {
            double pct = 100.0 * want[k] / base;
            CHECK(fabs(round(m.tech_pct[k] * 10) - round(pct * 10)) < 0.5, "%s %s: %.1f %%, formula %.1f %%", names[i],
                  technique_label((Technique)k), m.tech_pct[k], pct);
        }
        printf("  %-5s (t=%d, 5as/h=%6.2f)   %5.1f  %9.1f  %6.1f  %5.1f  (%.1f)\n", names[i], p->t, r,
               m.tech_pct[TECH_TP_SP], m.tech_pct[TECH_TP_SELECTIVE], m.tech_pct[TECH_TP_SP_SELECTIVE],
               m.tech_pct[TECH_FULL], m.tech_pct[TECH_NO_PARALLEL]);
        if (i == 0) {   // the figures for 22B
            CHECK(fabs(m.tech_pct[TECH_TP_SP] - 66.8) < 0.05, "22B SP %.2f", m.tech_pct[TECH_TP_SP]);
            CHECK(fabs(m.tech_pct[TECH_TP_SELECTIVE] - 49.4) < 0.05, "22B sel %.2f", m.tech_pct[TECH_TP_SELECTIVE]);
            CHECK(fabs(m.tech_pct[TECH_TP_SP_SELECTIVE] - 16.1) < 0.05, "22B both %.2f", m.tech_pct[TECH_TP_SP_SELECTIVE]);
            CHECK(fabs(m.tech_pct[TECH_FULL] - 7.6) < 0.05, "22B full %.2f", m.tech_pct[TECH_FULL]);
        }
        policy_free(&c.policy);
    }
}

// Eq. 6: with SP + selective the first stage holds 34sbhL/t (1F1B), × (1 + (p−1)/(pm)) interleaved.
static void pipeline_first_stage(void) {
    const char *names[] = {"22B", "175B", "530B", "1T"};
    for (int i = 0; i < 4; i++) {
        const ModelPreset *p = preset_find(names[i]);
        MemoryConfig c;
        config(&c, p, 1, "selective", 0);
        MemorySummary m;
        memory_summarize(&c, &m);
        double sbh = (double)p->s * p->micro_batch * p->h;
        double want = 34.0 * sbh * p->L / p->t;
        if (p->m > 1) want *= 1.0 + (double)(p->p - 1) / ((double)p->p * p->m);
        double stats = 16.0 * p->s * p->micro_batch / p->t * p->L * (p->m > 1 ? 1.0 + (double)(p->p - 1) / ((double)p->p * p->m) : 1.0);
        CHECK(fabs(m.act.layers - stats - want) <= 1e-9 * want, "%s first stage %.6g, Eq. 6 %.6g", names[i],
              m.act.layers - stats, want);
        CHECK(stage_layer_count(&c.lay) == p->L / p->p, "%s layers per stage", names[i]);
        policy_free(&c.policy);
    }
    // 175B interleaved: the first stage holds chunks 0, 8, 16 of 4 layers: layers 0-3, 32-35, 64-67.
    MemoryConfig c;
    config(&c, preset_find("175B"), 1, "selective", 0);
    CHECK(stage_layer(&c.lay, 0) == 0 && stage_layer(&c.lay, 3) == 3 && stage_layer(&c.lay, 4) == 32 &&
          stage_layer(&c.lay, 11) == 67, "175B stage layers");
    policy_free(&c.policy);
    // Full recompute under pipelining groups within a chunk (Megatron): uniform 2 → groups {0,1},{2,3},
    // {4,5}…; block 1 → the first layer of every 4-layer chunk is recomputed, the others stored.
    char err[256];
    MemoryPolicy pol = {0};
    config(&c, preset_find("175B"), 1, "none", 0);
    CHECK(stage_policy_build(&pol, &c.lay, "full", "uniform", 2, NULL, err, sizeof err) == 0, "uniform 2: %s", err);
    CHECK(pol.group_start[5] == 4 && pol.group_start[4] == 4 && pol.kind[95] == RECOMPUTE_FULL, "uniform groups");
    policy_free(&pol);
    CHECK(stage_policy_build(&pol, &c.lay, "full", "block", 1, NULL, err, sizeof err) == 0, "block 1: %s", err);
    CHECK(pol.kind[0] == RECOMPUTE_FULL && pol.kind[1] == RECOMPUTE_NONE && pol.kind[4] == RECOMPUTE_FULL &&
          pol.kind[7] == RECOMPUTE_NONE, "block per chunk");
    policy_free(&pol);
    CHECK(stage_policy_build(&pol, &c.lay, "full", "uniform", 5, NULL, err, sizeof err) != 0 &&
          strstr(err, "--recompute-num-layers") != NULL, "N larger than a chunk is refused: %s", err);
    policy_free(&pol);
    policy_free(&c.policy);
}

// Parameters per rank: the whole model is 12Lh² + 13Lh + vh + sh + 2h.
static void parameters(void) {
    const ModelPreset *p = preset_find("22B");
    MemoryConfig c;
    config(&c, p, 0, "none", 0);
    double h = p->h, want = 12.0 * p->L * h * h + 13.0 * p->L * h + (double)p->v * h + (double)p->s * h + 2 * h;
    double replicated = p->L * 6.0 * h + p->s * h + 2 * h;   // LN, row-parallel biases, positions, final LN
    double got = stage_param_count(&c.lay);
    CHECK(fabs((got - replicated) * p->t + replicated - want) < 1.0, "22B parameters %.0f per rank", got);
    policy_free(&c.policy);
    c.lay.sh.t = 1;
    CHECK(fabs(stage_param_count(&c.lay) - want) < 1.0, "22B parameters at t = 1");
}

// Table 5: MFU and HFU with SP + selective at the published iteration times, 312 TFLOP/s.
static void table5(void) {
    const char *names[] = {"22B", "175B", "530B", "1T"};
    const double mfu[] = {41.5, 51.4, 56.0, 56.3}, hfu[] = {43.7, 52.8, 57.0, 57.0};
    printf("Table 5 (SP + selective)   MFU ctron / paper   HFU ctron / paper\n");
    for (int i = 0; i < 4; i++) {
        const ModelPreset *p = preset_find(names[i]);
        MemoryConfig c;
        config(&c, p, 1, "selective", p->iter_sel_s);
        MemorySummary m;
        memory_summarize(&c, &m);
        printf("  %-5s %6.2f s             %5.2f / %4.1f        %5.2f / %4.1f\n", names[i], p->iter_sel_s,
               100 * m.mfu, mfu[i], 100 * m.hfu, hfu[i]);
        CHECK(fabs(100 * m.mfu - mfu[i]) <= 0.2, "%s MFU %.2f %%, paper %.1f %%", names[i], 100 * m.mfu, mfu[i]);
        CHECK(fabs(100 * m.hfu - hfu[i]) <= 0.2, "%s HFU %.2f %%, paper %.1f %%", names[i], 100 * m.hfu, hfu[i]);
        // Eq. 8 as printed, for the whole model.
        double B = p->global_batch, L = p->L, s = p->s, h = p->h, v = p->v;
        double eq8 = 72 * B * L * s * h * h * (1 + s / (3 * h) + v / (12 * h * L));
        CHECK(fabs(m.hw_flops - eq8) <= 1e-9 * eq8, "%s hardware FLOPs %.6g, Eq. 8 %.6g", names[i], m.hw_flops, eq8);
        policy_free(&c.policy);
    }
}

int main(void) {
    table2_exact();
    figure7();
    pipeline_first_stage();
    parameters();
    table5();
    return check_summary();
}
