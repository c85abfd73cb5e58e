// A pipeline rank's activation peak (memory/pipe_memory.h) and the per-stage budget planner
// (memory/stage_planner.h), against numbers worked out by hand from the per-layer table (docs/MEMORY.md).
//
// The shape: s = 64, b = 2, h = 64, a = 4, v = 128, fp32 (e = 4), byte masks (k = 1), dropout on, t = 1:
//   sbh = 8192, as²b = 32768, sb = 128
//   a none layer      66·sbh + 9·as²b + LN statistics 16·sb       = 540672 + 294912 + 2048 = 837632
//   a selective layer 66·sbh + 16·sb (no attn_prob/mask/drop)      = 542720
//   with dropout 0    64·sbh + 4·as²b + 16·sb                      = 524288 + 131072 + 2048 = 657408
//   embedding mask    k·sbh                                         = 8192
//   head              lnf_in e·sbh + lnf_stats 8·sb + lm_in e·sbh + logits 4·sbv = 32768 + 1024 + 32768 + 65536 = 132096
#include <string.h>
#include "check.h"
#include "memory/pipe_memory.h"
#include "memory/planner.h"
#include "memory/stage_planner.h"

enum { NONE_LAYER = 837632, SEL_LAYER = 542720, NODROP_LAYER = 657408, EMB = 8192, HEAD = 132096 };

static ActShape shape(int L, int dropout) {
    return (ActShape){.s = 64, .b = 2, .h = 64, .a = 4, .L = L, .v = 128, .elem_bytes = 4, .masks = MASKS_BYTES,
                      .dropout = dropout, .t = 1, .sp = 0};
}

static void build(MemoryPolicy *p, int L, const char *recompute, const char *method, int n) {
    char err[256];
    memset(p, 0, sizeof *p);
    CHECK(policy_build(p, L, recompute, method, n, NULL, err, sizeof err) == 0, "policy %s: %s", recompute, err);
}

static PipeSpec spec_of(PipeScheduleKind kind, int p, int vs, int m, int L) {
    PipeSpec s;
    char err[256];
    CHECK(pipe_spec_init(&s, kind, p, vs, m, L, err, sizeof err) == 0, "spec: %s", err);
    return s;
}

static size_t peak_of(const PipeSpec *s, const ActShape *sh, const MemoryPolicy *plan, int rank) {
    PipeMemory pm = {s, sh, plan, NULL, 0};
    return pipe_rank_act_peak(&pm, rank);
}

// (a) One stage is the whole model: the one-process peak, whatever the policy.
static void test_one_stage(void) {
    ActShape sh = shape(4, 1);
    CHECK(act_layer_bytes(&sh, NULL, 0) == NONE_LAYER, "a none layer keeps %zu, by hand %d",
          act_layer_bytes(&sh, NULL, 0), NONE_LAYER);
    const char *kinds[][2] = {{"none", NULL}, {"selective", NULL}, {"full", "uniform"}, {"full", "block"}};
    for (int i = 0; i < 4; i++) {
        MemoryPolicy p;
        build(&p, 4, kinds[i][0], kinds[i][1], 2);
        PipeSpec s = spec_of(PIPE_1F1B, 1, 0, 3, 4);
        CHECK(peak_of(&s, &sh, &p, 0) == act_peak_bytes(&sh, &p), "p = 1, %s %s: %zu, act_peak_bytes %zu", kinds[i][0],
              kinds[i][1] ? kinds[i][1] : "", peak_of(&s, &sh, &p, 0), act_peak_bytes(&sh, &p));
        policy_free(&p);
    }
    MemoryPolicy none;
    build(&none, 4, "none", NULL, 0);
    PipeSpec s = spec_of(PIPE_1F1B, 1, 0, 3, 4);
    CHECK(peak_of(&s, &sh, &none, 0) == 4u * NONE_LAYER + EMB + HEAD, "p = 1 none: %zu, by hand %u",
          peak_of(&s, &sh, &none, 0), 4u * NONE_LAYER + EMB + HEAD);
    policy_free(&none);
}

// (b) 1F1B keeps min(p − r, m) micro-batches of its layers on stage r; the first adds their embedding
// masks, the last the head of its one micro-batch. Interleaved and layered from their orders.
static void test_schedules(void) {
    ActShape sh = shape(8, 1);
    MemoryPolicy none;
    build(&none, 8, "none", NULL, 0);
    const int ms[] = {6, 2};
    for (int i = 0; i < 2; i++) {
        int m = ms[i];
        PipeSpec s = spec_of(PIPE_1F1B, 4, 0, m, 8);
        for (int r = 0; r < 4; r++) {
            size_t k = (size_t)(4 - r < m ? 4 - r : m);
            size_t want = k * (2u * NONE_LAYER + (r == 0 ? EMB : 0)) + (r == 3 ? HEAD : 0);
            CHECK(peak_of(&s, &sh, &none, r) == want, "1f1b m=%d stage %d: %zu, by hand %zu", m, r,
                  peak_of(&s, &sh, &none, r), want);
        }
    }
    // Eq. 5: with m ≥ p the first stage holds L layers' worth (p micro-batches × L/p layers).
    PipeSpec s = spec_of(PIPE_1F1B, 4, 0, 6, 8);
    CHECK(peak_of(&s, &sh, &none, 0) - 4u * EMB == 8u * NONE_LAYER, "Eq. 5: %zu layers' bytes, L·layer = %u",
          peak_of(&s, &sh, &none, 0) - 4u * EMB, 8u * NONE_LAYER);
    policy_free(&none);

    // Interleaved p = 4, V = 2, L = 16 (n = 2), m = 8: stage 0's warm-up runs 2(p−1) + (V−1)p = 10 forwards,
    // so 11 chunk-units of n layers are in flight: L(1 + (p−1)/(pV)) = 16 · 11/8 = 22 layers' worth. Without
    // dropout nothing else is held on stage 0.
    ActShape nd = shape(16, 0);
    MemoryPolicy none16;
    build(&none16, 16, "none", NULL, 0);
    CHECK(act_layer_bytes(&nd, NULL, 0) == NODROP_LAYER, "dropout 0 layer %zu, by hand %d", act_layer_bytes(&nd, NULL, 0),
          NODROP_LAYER);
    PipeSpec il = spec_of(PIPE_INTERLEAVED, 4, 2, 8, 16);
    CHECK(peak_of(&il, &nd, &none16, 0) == 22u * NODROP_LAYER, "interleaved stage 0: %zu, 22 layers = %u",
          peak_of(&il, &nd, &none16, 0), 22u * NODROP_LAYER);
    // With dropout the peak comes after F(11) (chunk 0 of micro-batch 7) has replaced B(0) (chunk 1 of 0):
    // still 11 units, 8 of them chunk 0 with an embedding mask (the paper's extra term counts p = 4).
    ActShape dr = shape(16, 1);
    CHECK(peak_of(&il, &dr, &none16, 0) == 22u * NONE_LAYER + 8u * EMB, "interleaved stage 0 with dropout: %zu, by hand %u",
          peak_of(&il, &dr, &none16, 0), 22u * NONE_LAYER + 8u * EMB);
    policy_free(&none16);

    // Layered p = 4, L = 8: stage r holds layers r and r + 4, every forward first: m micro-batches of each
    // (and of the embedding mask on stage 0, of the head on stage 3).
    MemoryPolicy none8;
    build(&none8, 8, "none", NULL, 0);
    PipeSpec ly = spec_of(PIPE_LAYERED, 4, 0, 3, 8);
    for (int r = 0; r < 4; r++) {
        size_t want = 3u * (2u * NONE_LAYER + (r == 0 ? EMB : 0) + (r == 3 ? HEAD : 0));
        CHECK(peak_of(&ly, &sh, &none8, r) == want, "layered stage %d: %zu, by hand %zu", r, peak_of(&ly, &sh, &none8, r),
              want);
    }
    policy_free(&none8);
}

// (c) --recompute-microbatches: 1f1b p = 4, m = 6, L = 8, the plan selective. Stage 0's contexts are
// slots 0..3 and every F takes the lowest free slot: F0..F3 take 0..3, then each B frees the slot the
// next F takes, so the keep-all slots stay in use: always keep_all none contexts + the rest selective.
static void test_keep_all(void) {
    ActShape sh = shape(8, 1);
    MemoryPolicy sel, all;
    build(&sel, 8, "selective", NULL, 0);
    policy_keep_everything(&all, &sel);
    CHECK(act_layer_bytes(&sh, &sel, 0) == SEL_LAYER, "a selective layer keeps %zu, by hand %d",
          act_layer_bytes(&sh, &sel, 0), SEL_LAYER);
    PipeSpec s = spec_of(PIPE_1F1B, 4, 0, 6, 8);
    PipeMemory one = {&s, &sh, &sel, &all, 1}, two = {&s, &sh, &sel, &all, 2};
    // 1 × (2·837632 + 8192) + 3 × (2·542720 + 8192) = 1683456 + 3280896
    CHECK(pipe_rank_act_peak(&one, 0) == 4964352, "keep-all 1, stage 0: %zu, by hand 4964352", pipe_rank_act_peak(&one, 0));
    // 2 × (2·837632 + 8192) + 2 × (2·542720 + 8192)
    CHECK(pipe_rank_act_peak(&two, 0) == 5554176, "keep-all 2, stage 0: %zu, by hand 5554176", pipe_rank_act_peak(&two, 0));
    // stage 3 has one context, slot 0: every micro-batch keeps everything, 2·837632 + the head
    CHECK(pipe_rank_act_peak(&one, 3) == 1807360, "keep-all 1, stage 3: %zu, by hand 1807360", pipe_rank_act_peak(&one, 3));
    policy_free(&sel);
    policy_free(&all);
}

static int same_policy(const MemoryPolicy *a, const MemoryPolicy *b) {
    return a->layers == b->layers && a->masks == b->masks && a->tempo == b->tempo && a->mini_seq == b->mini_seq &&
           !memcmp(a->kind, b->kind, (size_t)a->layers * sizeof *a->kind) &&
           !memcmp(a->group_start, b->group_start, (size_t)a->layers * sizeof *a->group_start);
}

// (d) A budget the last stage fits without recompute and the first (4 micro-batches) does not.
static void test_stage_planner(void) {
    ActShape sh = shape(8, 1);
    PipeSpec s = spec_of(PIPE_1F1B, 4, 0, 4, 8);
    // no recompute: stage 0 4·(2·837632 + 8192) = 6733824, stage 3 2·837632 + 132096 = 1807360
    MemoryPolicy none;
    build(&none, 8, "none", NULL, 0);
    CHECK(peak_of(&s, &sh, &none, 0) == 6733824 && peak_of(&s, &sh, &none, 3) == 1807360, "no-recompute peaks %zu, %zu",
          peak_of(&s, &sh, &none, 0), peak_of(&s, &sh, &none, 3));
    policy_free(&none);
    // room for stage 3 and the largest attention scratch of one thread (selective's ~3.25·s² floats)
    double budget = 1807360.0 + (double)plan_attention_scratch_bytes(NULL, &sh, 1, 0, 1) + 65536.0;
    MemoryPolicy a, b;
    StagePlan ra, rb;
    char err[512] = "";
    CHECK(stage_plan_memory(&s, &sh, PRECISION_FP32, NULL, 1, budget, &a, &ra, err, sizeof err) == 0, "no plan: %s", err);
    CHECK(ra.p == 4 && ra.n_layers == 2, "p %d, %d layers per stage", ra.p, ra.n_layers);
    CHECK(ra.n_full[0] + ra.n_sel[0] > ra.n_full[3] + ra.n_sel[3] && ra.extra_flops[0] > ra.extra_flops[3],
          "stage 0 should recompute more than stage 3: %d full %d sel (%.3g FLOPs) vs %d full %d sel (%.3g)",
          ra.n_full[0], ra.n_sel[0], ra.extra_flops[0], ra.n_full[3], ra.n_sel[3], ra.extra_flops[3]);
    CHECK(ra.n_full[3] == 0 && ra.n_sel[3] == 0, "stage 3 fits as it is: %d full %d selective", ra.n_full[3], ra.n_sel[3]);
    for (int r = 0; r < 4; r++) {
        PipeMemory pm = {&s, &ra.shape, &a, NULL, 0};
        CHECK(ra.peak[r] == pipe_rank_act_peak(&pm, r), "stage %d: reported %zu, pipe_rank_act_peak %zu", r, ra.peak[r],
              pipe_rank_act_peak(&pm, r));
        CHECK((double)(ra.peak[r] + ra.scratch_bytes + ra.gemm_scratch_bytes) <= budget, "stage %d over budget: %zu + %zu",
              r, ra.peak[r], ra.scratch_bytes);
    }
    // stage 0's choice is the cheapest: one fewer selective (or full) layer does not fit
    MemoryPolicy fewer;
    policy_keep_everything(&fewer, &a);
    memcpy(fewer.kind, a.kind, 8 * sizeof *a.kind);
    int last = ra.n_full[0] + ra.n_sel[0] - 1;   // stage 0's layers 0, 1: full first, then selective
    fewer.kind[last] = RECOMPUTE_NONE;
    PipeMemory pf = {&s, &ra.shape, &fewer, NULL, 0};
    CHECK((double)(pipe_rank_act_peak(&pf, 0) + ra.scratch_bytes + ra.gemm_scratch_bytes) > budget,
          "stage 0 fits with layer %d kept whole (%zu): the plan is not the cheapest", last, pipe_rank_act_peak(&pf, 0));
    policy_free(&fewer);
    // every rank computes the same plan
    CHECK(stage_plan_memory(&s, &sh, PRECISION_FP32, NULL, 1, budget, &b, &rb, err, sizeof err) == 0 && same_policy(&a, &b),
          "the plan differs when computed again");
    policy_free(&a);
    policy_free(&b);

    // Nothing fits one byte: the least-memory plan, and the message names the first stage (the most held).
    CHECK(stage_plan_memory(&s, &sh, PRECISION_FP32, NULL, 1, 1.0, &a, &ra, err, sizeof err) == -1 && !ra.fits,
          "1 byte should not fit");
    CHECK(strstr(err, "stage 0 does not fit") && strstr(err, "the least it needs is"), "message: %s", err);
    CHECK(ra.n_full[0] == 2, "stage 0's least memory recomputes both its layers in full (got %d full)", ra.n_full[0]);
    policy_free(&a);
    // --pp above the planner's limit
    PipeSpec big = spec_of(PIPE_1F1B, 65, 0, 1, 65);
    CHECK(stage_plan_memory(&big, &sh, PRECISION_FP32, NULL, 1, 1e12, &a, &ra, err, sizeof err) == -1 &&
          strstr(err, "at most 64 stages"), "65 stages: %s", err);
}

// The whole-model list reproduces the plan through policy_build.
static void test_layer_list(void) {
    MemoryPolicy p, q;
    policy_default(&p, 8);
    LayerRecompute k[8] = {RECOMPUTE_FULL, RECOMPUTE_SELECTIVE, RECOMPUTE_NONE, RECOMPUTE_NONE,
                           RECOMPUTE_FULL, RECOMPUTE_FULL, RECOMPUTE_NONE, RECOMPUTE_SELECTIVE};
    memcpy(p.kind, k, sizeof k);
    char list[256], err[256];
    stage_plan_layer_list(&p, list, sizeof list);
    CHECK(!strcmp(list, "0:full,1:selective,2-3:none,4-5:full,6:none,7:selective"), "list %s", list);
    memset(&q, 0, sizeof q);
    CHECK(policy_build(&q, 8, NULL, NULL, 0, list, err, sizeof err) == 0 && same_policy(&p, &q), "list does not rebuild: %s",
          err);
    policy_free(&p);
    policy_free(&q);
}

int main(void) {
    test_one_stage();
    test_schedules();
    test_keep_all();
    test_stage_planner();
    test_layer_list();
    return check_summary();
}
