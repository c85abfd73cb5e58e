// Recomputation is exact (DESIGN.md §3): with dropout on, 5 training steps give bitwise identical
// losses, gradients and parameters under every recompute policy and every mask mode, for fp32 and
// for bf16 storage and for mixed precision (bf16 GEMMs). Both follow fp32 within 1e-2 relative.
#include <math.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include "check.h"
#include "model/gpt.h"
#include "model/workspace.h"
#include "train/adamw.h"
#include "train/grad_norm.h"
#include "util/common.h"

enum { STEPS = 5, L = 4 };
static const GPTConfig CFG = {.layers = L, .hidden = 32, .heads = 4, .seq = 24, .batch = 3, .vocab = 256, .dropout = 0.1f};

// --offload for the runs that follow (0: none) and its directory (NULL: host memory).
static unsigned g_offload;
static const char *g_offload_dir;
// --static-plan for the runs that follow: the step's buffers placed by the recorded plan.
static int g_static;
static double g_static_peak_over_bound, g_static_saving;   // of the last planned run

typedef struct {
    double loss[STEPS];
    float *grads[STEPS];
    float *params;
} Trace;

static void run(Trace *t, const char *rc, const char *method, int num, const char *list, int dt, MaskMode mm,
                unsigned tempo) {
    MemoryPolicy pol = {0};
    char err[256];
    pol.act_dtype = dt ? ACT_BF16 : ACT_FP32;   // dt: 0 fp32, 1 bf16 storage, 2 mixed precision (bf16 GEMMs)
    pol.precision = dt == 2 ? PRECISION_BF16 : PRECISION_FP32;
    pol.masks = mm;
    pol.tempo = tempo;
    pol.mini_seq = (tempo & MINI_SEQ) ? 5 : 0;   // 5 chunks of 72 rows: uneven, the last one short
    pol.offload = g_offload;
    pol.offload_dir = g_offload_dir;
    if (policy_build(&pol, L, rc, method, num, list, err, sizeof err) != 0) ctron_fatal("%s", err);
    GPT m;
    gpt_init(&m, &CFG, &pol);
    gpt_init_weights(&m, 3);
    if (g_static) {
        int32_t zeros[24 * 3] = {0};
        StepCtx ctx0 = {99, 1, 0, 1};
        StaticPlanReport r = gpt_plan_memory(&m, zeros, zeros, ctx0);
        CHECK(r.lower_bound <= r.peak && r.peak <= r.naive_sum && r.block >= r.peak && r.saved > 0 && r.temporaries > 0,
              "static plan: peak %zu, lower bound %zu, naive %zu", r.peak, r.lower_bound, r.naive_sum);
        g_static_peak_over_bound = (double)r.peak / (double)r.lower_bound;
        g_static_saving = (double)r.block / (double)r.default_bytes;
    }
    AdamW opt;
    adamw_init(&opt, m.be, m.n_params, 0.9f, 0.95f, 1e-8f, 0.1f);
    int s = CFG.seq, b = CFG.batch;
    int32_t tok[24 * 3], tgt[24 * 3];
    for (int step = 1; step <= STEPS; step++) {
        for (int i = 0; i < s * b; i++) { tok[i] = (i * 37 + step * 11) % 256; tgt[i] = (i * 13 + step) % 256; }
        gpt_zero_grad(&m);
        StepCtx ctx = {99, (uint32_t)step, 0, 1};
        t->loss[step - 1] = gpt_forward(&m, tok, tgt, s, b, ctx, 1.0f / (float)(s * b)) / (s * b);
        gpt_backward(&m, tok, ctx);
        t->grads[step - 1] = xmalloc(m.n_params * sizeof(float));
        memcpy(t->grads[step - 1], m.grads, m.n_params * sizeof(float));
        adamw_step(&opt, &m, 2e-3f, grad_clip_scale(grad_global_norm(m.be, m.grads, m.n_params), 1.0f));
    }
    t->params = xmalloc(m.n_params * sizeof(float));
    memcpy(t->params, m.params, m.n_params * sizeof(float));
    adamw_free(&opt);
    gpt_free(&m);
    policy_free(&pol);
}

static const char *const DT[] = {"fp32", "bf16", "mixed bf16"};

static void trace_free(Trace *t) {
    for (int i = 0; i < STEPS; i++) free(t->grads[i]);
    free(t->params);
}

// Relative L2 distance of two gradient sets.
static double grad_rel(const float *a, const float *b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)a[i] * a[i];
    }
    return sqrt(num / den);
}

static void same(const Trace *a, const Trace *b, const char *what) {
    size_t np = gpt_num_params(&CFG);
    CHECK(memcmp(a->loss, b->loss, sizeof a->loss) == 0, "%s: losses differ (%.9g vs %.9g at step 1)", what,
          a->loss[0], b->loss[0]);
    for (int i = 0; i < STEPS; i++)
        CHECK(memcmp(a->grads[i], b->grads[i], np * sizeof(float)) == 0, "%s: gradients differ at step %d", what, i + 1);
    CHECK(memcmp(a->params, b->params, np * sizeof(float)) == 0, "%s: parameters differ", what);
}

int main(void) {
    struct { const char *rc, *method; int num; const char *list, *name; } policies[] = {
        {"selective", NULL, 0, NULL, "selective"},
        {"full", "uniform", 1, NULL, "full uniform 1"},
        {"full", "uniform", 2, NULL, "full uniform 2"},
        {"full", "block", 3, NULL, "full block 3"},
        {NULL, NULL, 0, "0-1:full,2:selective,3:none", "list 0-1:full,2:selective,3:none"}};
    const char *masks[] = {"bytes", "bits", "regen"};
    Trace ref[3];
    for (int dt = 0; dt < 3; dt++) {
        run(&ref[dt], "none", NULL, 0, NULL, dt, MASKS_BYTES, 0);
        for (int mm = 0; mm < 3; mm++)
            for (int pi = -1; pi < 5; pi++) {
                if (pi < 0 && mm == 0) continue;   // the reference itself
                Trace t;
                char what[128];
                if (pi < 0) run(&t, "none", NULL, 0, NULL, dt, (MaskMode)mm, 0);
                else run(&t, policies[pi].rc, policies[pi].method, policies[pi].num, policies[pi].list, dt,
                         (MaskMode)mm, 0);
                snprintf(what, sizeof what, "%s, %s masks, %s", pi < 0 ? "none" : policies[pi].name, masks[mm],
                         DT[dt]);
                same(&ref[dt], &t, what);
                trace_free(&t);
            }
    }
    // Tempo's fused softmax–dropout re-forms the dropped probabilities with the forward's arithmetic:
    // bitwise equal under every policy and mask mode. Its in-place LayerNorm and GeLU recover the
    // input from the output (x̂ = (y − β)/γ; GeLU inverted on its branch): equal up to the rounding
    // of y — fp32 within 1e-5 (relative L2 of each step's gradients), bf16 storage within 2e-2
    // (y is kept in bf16, 8 bits of mantissa) — and exact among themselves under every policy.
    for (int dt = 0; dt < 3; dt++)
        for (int mm = 0; mm < 3; mm += 2)
            for (int pi = -1; pi < 3; pi++) {
                Trace t;
                char what[128];
                if (pi < 0) run(&t, "none", NULL, 0, NULL, dt, (MaskMode)mm, TEMPO_SOFTMAX);
                else run(&t, policies[pi].rc, policies[pi].method, policies[pi].num, NULL, dt, (MaskMode)mm,
                         TEMPO_SOFTMAX);
                snprintf(what, sizeof what, "tempo softmax, %s, %s masks, %s", pi < 0 ? "none" : policies[pi].name,
                         masks[mm], DT[dt]);
                same(&ref[dt], &t, what);
                trace_free(&t);
            }
    size_t np = gpt_num_params(&CFG);
    // Mini-seq recomputes FC1 + GeLU in chunks and runs the output layer in chunks: the same
    // arithmetic on fewer rows at a time (GEMM blocking and the order wte's gradient sums in may
    // differ), so within the same tolerances, and exact among the recompute policies.
    // Flash attention sums the softmax in tiles and does not round P to bf16 (it is never stored):
    // likewise within the tolerances.
    unsigned parts[] = {TEMPO_LAYERNORM, TEMPO_GELU, TEMPO_GELU | TEMPO_LAYERNORM | TEMPO_SOFTMAX, MINI_SEQ,
                        MINI_SEQ | TEMPO_LAYERNORM | TEMPO_SOFTMAX, ATTN_FLASH, ATTN_FLASH | MINI_SEQ | TEMPO_LAYERNORM};
    const char *part_names[] = {"layernorm", "gelu", "all", "mini-seq", "mini+tempo", "flash", "flash+mini+ln"};
    for (int dt = 0; dt < 3; dt++)
        for (int k = 0; k < 7; k++) {
            Trace t, t_full, t_sel;
            run(&t, "none", NULL, 0, NULL, dt, MASKS_BYTES, parts[k]);
            double worst = 0.0, tol = dt ? 2e-2 : 1e-5;
            for (int i = 0; i < STEPS; i++) {
                double r = grad_rel(ref[dt].grads[i], t.grads[i], np);
                worst = r > worst ? r : worst;
            }
            CHECK(worst < tol, "tempo %s, %s: gradients rel L2 %.2e (tolerance %.0e)", part_names[k], DT[dt],
                  worst, tol);
            double lrel = fabs(t.loss[STEPS - 1] - ref[dt].loss[STEPS - 1]) / ref[dt].loss[STEPS - 1];
            CHECK(lrel < tol, "tempo %s, %s: loss rel %.2e", part_names[k], DT[dt], lrel);
            printf("tempo %-9s %s: gradients rel L2 %.2e, loss rel %.2e after %d steps\n", part_names[k],
                   DT[dt], worst, lrel, STEPS);
            run(&t_full, "full", "uniform", 1, NULL, dt, MASKS_REGEN, parts[k]);
            run(&t_sel, "selective", NULL, 0, NULL, dt, MASKS_BITS, parts[k]);
            char what[96];
            snprintf(what, sizeof what, "tempo %s, full uniform 1 vs none, %s", part_names[k], DT[dt]);
            same(&t, &t_full, what);
            snprintf(what, sizeof what, "tempo %s, selective vs none, %s", part_names[k], DT[dt]);
            same(&t, &t_sel, what);
            trace_free(&t);
            trace_free(&t_full);
            trace_free(&t_sel);
        }

    // Offload moves bytes out and back unchanged: bitwise the run without it, under every policy and
    // mask mode, from host memory and from a file, and with the options that keep other tensors.
    char dir[] = "/tmp/ctron-offload-test-XXXXXX";
    if (!mkdtemp(dir)) ctron_fatal("mkdtemp failed");
    int offload_runs = 0;
    for (int dt = 0; dt < 3; dt++)
        for (int mm = 0; mm < 3; mm++)
            for (int pi = -1; pi < 5; pi++) {
                Trace t;
                char what[160];
                g_offload = (1u << ACT_N_OFFLOADABLE) - 1;   // everything a layer keeps
                g_offload_dir = (pi + mm) % 2 ? dir : NULL;
                if (pi < 0) run(&t, "none", NULL, 0, NULL, dt, (MaskMode)mm, 0);
                else run(&t, policies[pi].rc, policies[pi].method, policies[pi].num, policies[pi].list, dt,
                         (MaskMode)mm, 0);
                snprintf(what, sizeof what, "offload all (%s), %s, %s masks, %s", g_offload_dir ? "file" : "host",
                         pi < 0 ? "none" : policies[pi].name, masks[mm], DT[dt]);
                same(&ref[dt], &t, what);
                trace_free(&t);
                offload_runs++;
            }
    unsigned off_parts[] = {TEMPO_GELU | TEMPO_LAYERNORM | TEMPO_SOFTMAX, ATTN_FLASH | MINI_SEQ | TEMPO_LAYERNORM};
    unsigned off_sets[] = {1u << ACT_FC2_IN | 1u << ACT_GELU_BRANCH | 1u << ACT_LN1_STATS,
                           1u << ACT_ATTN_LSE | 1u << ACT_Q | 1u << ACT_K | 1u << ACT_V | 1u << ACT_LN1_IN};
    for (int k = 0; k < 2; k++) {
        Trace t, t_off;
        g_offload = 0;
        run(&t, "selective", NULL, 0, NULL, ACT_BF16, MASKS_BITS, off_parts[k]);
        g_offload = off_sets[k];
        g_offload_dir = k ? dir : NULL;
        run(&t_off, "selective", NULL, 0, NULL, ACT_BF16, MASKS_BITS, off_parts[k]);
        same(&t, &t_off, k ? "offload q,k,v,ln1_in,attn_lse with flash + mini-seq" : "offload fc2_in,gelu_branch with tempo");
        trace_free(&t);
        trace_free(&t_off);
        offload_runs++;
    }
    g_offload = 0;
    g_offload_dir = NULL;
    printf("%d offload runs bitwise equal to the runs without offload\n", offload_runs);

    // A static memory plan places the same arithmetic elsewhere: bitwise the default layout, under
    // every policy and mask mode, with the options and with offload.
    int static_runs = 0;
    double worst_ratio = 0.0, worst_saving = 0.0;
    g_static = 1;
    for (int dt = 0; dt < 3; dt++)
        for (int mm = 0; mm < 3; mm++)
            for (int pi = -1; pi < 5; pi++) {
                Trace t;
                char what[160];
                if (pi < 0) run(&t, "none", NULL, 0, NULL, dt, (MaskMode)mm, 0);
                else run(&t, policies[pi].rc, policies[pi].method, policies[pi].num, policies[pi].list, dt,
                         (MaskMode)mm, 0);
                snprintf(what, sizeof what, "static plan, %s, %s masks, %s", pi < 0 ? "none" : policies[pi].name,
                         masks[mm], DT[dt]);
                same(&ref[dt], &t, what);
                trace_free(&t);
                static_runs++;
                worst_ratio = g_static_peak_over_bound > worst_ratio ? g_static_peak_over_bound : worst_ratio;
                worst_saving = g_static_saving > worst_saving ? g_static_saving : worst_saving;
            }
    unsigned static_parts[] = {TEMPO_GELU | TEMPO_LAYERNORM | TEMPO_SOFTMAX, ATTN_FLASH | MINI_SEQ | TEMPO_LAYERNORM,
                               MINI_SEQ};
    for (int k = 0; k < 3; k++) {
        Trace t, t_plan;
        g_static = 0;
        g_offload = k == 2 ? (1u << ACT_N_OFFLOADABLE) - 1 : 0;
        g_offload_dir = k == 2 ? dir : NULL;
        run(&t, "full", "uniform", 2, NULL, ACT_BF16, MASKS_BITS, static_parts[k]);
        g_static = 1;
        run(&t_plan, "full", "uniform", 2, NULL, ACT_BF16, MASKS_BITS, static_parts[k]);
        same(&t, &t_plan, k == 0 ? "static plan with tempo" : k == 1 ? "static plan with flash + mini-seq" :
                                                               "static plan with mini-seq and offload");
        trace_free(&t);
        trace_free(&t_plan);
        static_runs++;
    }
    g_static = 0;
    g_offload = 0;
    g_offload_dir = NULL;
    rmdir(dir);
    printf("%d static-plan runs bitwise equal to the default layout (plan peak / lower bound <= %.3f, block / "
           "default <= %.3f)\n", static_runs, worst_ratio, worst_saving);

    // bf16 storage changes the numbers a little, not the training.
    double rel = fabs(ref[1].loss[STEPS - 1] - ref[0].loss[STEPS - 1]) / ref[0].loss[STEPS - 1];
    CHECK(rel < 1e-2, "bf16 vs fp32 loss after %d steps: rel diff %.3e", STEPS, rel);
    CHECK(memcmp(ref[0].loss, ref[1].loss, sizeof ref[0].loss) != 0, "bf16 gave exactly the fp32 losses: not rounding?");
    printf("fp32 loss %.6f -> %.6f, bf16 %.6f -> %.6f (rel %.1e after %d steps); 52 runs bitwise equal to their reference\n",
           ref[0].loss[0], ref[0].loss[STEPS - 1], ref[1].loss[0], ref[1].loss[STEPS - 1], rel, STEPS);
    // Mixed precision (bf16 GEMM inputs, fp32 accumulation) likewise.
    double rel_mixed = fabs(ref[2].loss[STEPS - 1] - ref[0].loss[STEPS - 1]) / ref[0].loss[STEPS - 1];
    CHECK(rel_mixed < 1e-2, "mixed bf16 vs fp32 loss after %d steps: rel diff %.3e", STEPS, rel_mixed);
    CHECK(memcmp(ref[1].loss, ref[2].loss, sizeof ref[1].loss) != 0, "mixed precision gave exactly bf16 storage's losses: "
          "are the GEMMs in bf16?");
    printf("mixed bf16 %.6f -> %.6f (rel %.1e to fp32 after %d steps)\n", ref[2].loss[0], ref[2].loss[STEPS - 1],
           rel_mixed, STEPS);
    trace_free(&ref[0]);
    trace_free(&ref[1]);
    trace_free(&ref[2]);
    return check_summary();
}
