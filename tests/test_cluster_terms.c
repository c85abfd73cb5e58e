// The cluster planner's explicit time-model terms of issue 28, each against its formula: the two-tier
// DP bandwidth, the bucketed DP overlap (exposed tail, contention, ZeRO-1's all-gather under the next
// forward), gradient bytes by precision, the TP overlap modes, the launch gaps, and uneven first/last
// stages (Llama 3 405B's 126 layers on 16 stages); the search with fixed values and uneven splits.
#include <math.h>
#include <string.h>
#include "check.h"
#include "memory/cluster_search.h"
#include "memory/param_count.h"
#include "memory/cluster_time.h"
#include "memory/presets.h"
#include "memory/stage_model.h"

#define GIB 1073741824.0

static ClusterJob job_of(const char *name, int nodes) {
    const ModelPreset *p = preset_find(name);
    return (ClusterJob){.s = p->s, .h = p->h, .a = p->a, .L = p->L, .v = p->v, .B = p->global_batch, .gpus_per_node = 8,
                        .nodes = nodes, .e = 2, .reserve_bytes = 8.0 * GIB, .arch = p->arch, .kv = p->kv, .ffn = p->ffn,
                        .tie = p->arch ? -1 : 0};
}

static ClusterLayout layout(int t, int p, int v, int d, int mb, int sp, int zero, ClusterRecompute rc) {
    return (ClusterLayout){t, p, v, d, mb, sp, zero, rc, 0, 0};
}

static void check_two_tier(const GpuSpec *g) {
    ClusterJob job = job_of("175B", 8);
    // t·p = 2: four ranks of each DP group share a node and drive four NICs: 4 × 25 GB/s
    ClusterLayout a = layout(2, 1, 1, 32, 1, 0, 0, CR_FULL);
    CHECK(fabs(cluster_dp_bandwidth(&job, g, &a) - 100e9) < 1, "t·p=2 across nodes: %.4g B/s, expected 100e9",
          cluster_dp_bandwidth(&job, g, &a));
    // t·p = 8: one rank per node, its own NIC; a group inside a node: NVLink
    ClusterLayout b = layout(8, 1, 1, 8, 1, 0, 0, CR_FULL);
    CHECK(cluster_dp_bandwidth(&job, g, &b) == 25e9, "t·p=8: %.4g B/s, expected 25e9", cluster_dp_bandwidth(&job, g, &b));
    ClusterJob one = job;
    one.nodes = 1;
    ClusterLayout c = layout(2, 1, 1, 4, 1, 0, 0, CR_FULL);
    CHECK(cluster_dp_bandwidth(&one, g, &c) == 300e9, "a DP group inside a node: NVLink");
    // 1 rank per GPU with 16 per node would be 16 × 25 = 400 > NVLink's 300: capped
    ClusterLayout d = layout(1, 1, 1, 64, 1, 0, 0, CR_FULL);
    CHECK(cluster_dp_bandwidth(&job, g, &d) == 200e9, "t·p=1, 8 per node: 8 NICs = 200 GB/s");
}

static void check_dp(const GpuSpec *g) {
    ClusterJob job = job_of("175B", 8);
    ClusterLayout lay = layout(8, 1, 1, 8, 1, 0, 0, CR_FULL);
    double P = 1e9, bw = 25e9;
    double all = cluster_allreduce_time(g, bw, 8, 4.0 * P);
    CHECK(fabs(cluster_dp_time(&job, g, &lay, P) - all) < 1e-12, "fp32 all-reduce of 1e9 parameters");
    job.grad_bytes = 2;
    CHECK(fabs(cluster_dp_time(&job, g, &lay, P) - cluster_allreduce_time(g, bw, 8, 2.0 * P)) < 1e-12,
          "bf16 gradients: half the bytes");
    job.grad_bytes = 4;
    // Without --dp-overlap everything is exposed, whatever the backward.
    double hid;
    CHECK(cluster_dp_exposed(&job, g, &lay, P, 100.0, 100.0, &hid) == cluster_dp_time(&job, g, &lay, P) && hid == 0,
          "no overlap: all exposed");
    // With it: 1e9 parameters in buckets of 40M (max(40M, 8M)): 25 buckets, the last (40M) the tail.
    job.dp_overlap = 1;
    double bucket = cluster_allreduce_time(g, bw, 8, 4.0 * 40e6), total = 25 * bucket;
    double x = cluster_dp_exposed(&job, g, &lay, P, 100.0, 0.0, &hid);
    CHECK(fabs(x - (bucket + g->overlap_cost * 24 * bucket)) < 1e-9 && fabs(hid - 24 * bucket) < 1e-9,
          "a long backward hides all but the last bucket, at overlap_cost: %.6g s, expected %.6g", x,
          bucket + g->overlap_cost * 24 * bucket);
    x = cluster_dp_exposed(&job, g, &lay, P, 0.0, 0.0, &hid);
    CHECK(fabs(x - total) < 1e-9 && hid == 0, "no backward to hide under: all %.6g s exposed (got %.6g)", total, x);
    double half = 12 * bucket;
    x = cluster_dp_exposed(&job, g, &lay, P, half, 0.0, &hid);
    CHECK(fabs(x - (total - half + g->overlap_cost * half)) < 1e-9, "what outlasts the backward is exposed");
    // ZeRO-1: reduce-scatter in the backward, the bf16 weights' all-gather under the next forward.
    lay.zero = 1;
    double rs = cluster_allgather_time(g, bw, 8, 4.0 * 40e6), ag = cluster_allgather_time(g, bw, 8, 2.0 * 40e6);
    x = cluster_dp_exposed(&job, g, &lay, P, 100.0, 100.0, &hid);
    CHECK(fabs(x - (rs + ag + g->overlap_cost * 24 * (rs + ag))) < 1e-9, "ZeRO-1 overlapped: tails %.6g s, got %.6g",
          rs + ag + g->overlap_cost * 24 * (rs + ag), x);
    x = cluster_dp_exposed(&job, g, &lay, P, 100.0, 0.0, &hid);
    CHECK(fabs(x - (rs + g->overlap_cost * 24 * rs + 25 * ag)) < 1e-9, "ZeRO-1 with no forward to hide the all-gather");
    // The gradient buffer follows the reduction's precision: 2 + 2 + 12 bytes per parameter.
    CHECK(cluster_state_bytes_per_param(&job) == 18.0, "fp32 gradients: 18 bytes per parameter");
    job.grad_bytes = 2;
    CHECK(cluster_state_bytes_per_param(&job) == 16.0, "bf16 gradients: 16 bytes per parameter");
    ClusterPrediction p16, p32;
    ClusterLayout l8 = layout(8, 8, 1, 1, 1, 1, 0, CR_SELECTIVE);
    cluster_predict(&job, g, &l8, 1, &p16);
    job.grad_bytes = 4;
    cluster_predict(&job, g, &l8, 1, &p32);
    CHECK(fabs(p32.mem[1].grads - 2 * p16.mem[1].grads) < 1, "gradient memory %.0f vs %.0f", p32.mem[1].grads,
          p16.mem[1].grads);
    cluster_prediction_free(&p16);
    cluster_prediction_free(&p32);
}

static void check_tp_overlap(const GpuSpec *g) {
    ClusterJob job = job_of("22B", 1);
    for (int sp = 0; sp <= 1; sp++) {
        ClusterLayout lay = layout(8, 1, 1, 1, 4, sp, 0, CR_NONE);
        LayerTime lt[TP_OVERLAP_COUNT];
        for (int o = 0; o < TP_OVERLAP_COUNT; o++) {
            job.tp_overlap = o;
            cluster_layer_time(&job, g, &lay, 0, &lt[o]);
        }
        // none: every collective at its own time; the GEMMs and element-wise kernels do not change
        double ar = cluster_allreduce_time(g, g->nvlink_bw, 8, 2.0 * 2048 * 4 * 6144);
        double ag = cluster_allgather_time(g, g->nvlink_bw, 8, 2.0 * 2048 * 4 * 6144);
        double none_f = sp ? 4 * ag : 2 * ar, none_b = sp ? 6 * ag : 2 * ar;
        CHECK(fabs(lt[TP_OVERLAP_NONE].comm_f - none_f) < 1e-12 && fabs(lt[TP_OVERLAP_NONE].comm_b - none_b) < 1e-12,
              "sp=%d none: %.6g / %.6g s, expected %.6g / %.6g", sp, lt[TP_OVERLAP_NONE].comm_f,
              lt[TP_OVERLAP_NONE].comm_b, none_f, none_b);
        CHECK(lt[TP_OVERLAP_BACKWARD].comm_f == lt[TP_OVERLAP_NONE].comm_f &&
                  lt[TP_OVERLAP_BACKWARD].comm_b < lt[TP_OVERLAP_NONE].comm_b,
              "sp=%d backward: the forward exposed, the backward partly hidden", sp);
        // (without SP the backward's two all-reduces already hide under the weight gradients)
        CHECK(lt[TP_OVERLAP_FULL].comm_f < lt[TP_OVERLAP_BACKWARD].comm_f &&
                  (sp ? lt[TP_OVERLAP_FULL].comm_b < lt[TP_OVERLAP_BACKWARD].comm_b
                      : lt[TP_OVERLAP_FULL].comm_b == lt[TP_OVERLAP_BACKWARD].comm_b),
              "sp=%d full: less exposed than backward (%.6g, %.6g)", sp, lt[TP_OVERLAP_FULL].comm_f,
              lt[TP_OVERLAP_FULL].comm_b);
        CHECK(lt[TP_OVERLAP_FULL].gemm_f == lt[TP_OVERLAP_NONE].gemm_f, "the GEMMs do not depend on the overlap");
    }
}

static void check_launch_gaps(const GpuSpec *g) {
    ClusterJob job = job_of("22B", 1);
    ClusterLayout lay = layout(8, 1, 1, 1, 4, 0, 0, CR_NONE);
    LayerTime lt;
    cluster_layer_time(&job, g, &lay, 0, &lt);
    // GPT-2's layer: 14 forward kernels (4 GEMMs, 6 element-wise, 4 of attention) and 2 all-reduces; 26
    // backward (bias gradients included) and 2
    CHECK(lt.kernels_f == 16 && lt.kernels_b == 28 && lt.kernels_sel == 4, "kernels %g / %g / %g", lt.kernels_f,
          lt.kernels_b, lt.kernels_sel);
    ClusterPrediction p;
    cluster_predict(&job, g, &lay, 0, &p);
    // one micro-batch (global batch 4 = mb) × (48 layers × 44 kernels + embedding 5 + head 10) × 2 µs
    double want = (48 * 44 + 15) * 2e-6;
    CHECK(fabs(p.part[PART_OVERHEAD] - want) < 1e-12, "overhead %.6g s, expected %.6g", p.part[PART_OVERHEAD], want);
    GpuSpec q = *g;
    q.launch_gap = 0;
    ClusterPrediction p0;
    cluster_predict(&job, &q, &lay, 0, &p0);
    CHECK(p0.part[PART_OVERHEAD] == 0 && fabs(p.step_s - p0.step_s - want) < 1e-9, "no gap: the step %.6g s less",
          want);
}

static void check_uneven(const GpuSpec *g) {
    // Llama 3 405B as its paper runs it: 126 layers on 16 stages, the first and last one layer fewer.
    ClusterJob job = job_of("llama3-405b", 1024);
    int first, last;
    CHECK(cluster_uneven_split(126, 16, &first, &last) == 0 && first == 7 && last == 7, "126 on 16: %d, %d", first, last);
    // BLOOM's 70 layers on 12 stages: 6 on each of ten, 5 on the first and the last
    CHECK(cluster_uneven_split(70, 12, &first, &last) == 0 && first == 5 && last == 5, "70 on 12: %d, %d", first, last);
    CHECK(cluster_uneven_split(5, 8, &first, &last) != 0, "5 layers on 8 stages: no split");
    ClusterLayout lay = layout(8, 16, 1, 64, 1, 1, 1, CR_SELECTIVE);
    lay.first = 7, lay.last = 7;
    char err[200] = "";
    CHECK(cluster_layout_check(&job, g, &lay, err, sizeof err) == 0, "first=7,last=7: %s", err);
    int sum = 0;
    for (int r = 0; r < 16; r++) sum += cluster_stage_layers(&job, &lay, r);
    CHECK(cluster_stage_layers(&job, &lay, 0) == 7 && cluster_stage_layers(&job, &lay, 1) == 8 &&
              cluster_stage_layers(&job, &lay, 15) == 7 && sum == 126,
          "stages 7, 8, …, 7 (sum %d)", sum);
    ClusterPrediction p;
    cluster_predict(&job, g, &lay, 1, &p);
    // A middle stage's weights: 8 layers' parameters (bf16), stage 0 seven and the embedding.
    ActShape sh;
    cluster_job_shape(&job, 1, 8, 1, &sh);
    StageLayout sl = {sh, 16, 1, 32};
    StageSplit sp = {7, 7};
    CHECK(fabs(p.mem[1].weights - 2 * stage_param_count_split(&sl, &sp, 1)) < 1 &&
              fabs(stage_param_count_split(&sl, &sp, 1) * 7 / 8 - stage_param_count_split(&sl, &sp, 14) * 7 / 8) < 1,
          "middle stages: 8 layers' weights");
    CHECK(p.mem[1].activations > p.mem[0].activations * 8.0 / 7 * 15 / 16 * 0.99 && p.mem[0].layers == 7 &&
              p.mem[1].layers == 8,
          "stage 1 holds 8 layers × 15 in flight, stage 0 7 × 16");
    cluster_prediction_free(&p);
    // The split that does not work, and uneven stages without a pipeline.
    lay.first = 5, lay.last = 5;
    CHECK(cluster_layout_check(&job, g, &lay, err, sizeof err) != 0 && strstr(err, "do not split evenly"),
          "126 − 10 over 14 stages: refused (%s)", err);
    lay.p = 1, lay.d = 1024, lay.first = 7;
    CHECK(cluster_layout_check(&job, g, &lay, err, sizeof err) != 0 && strstr(err, "need p > 1"), "p=1: %s", err);
}

static void check_search_fix(const GpuSpec *g) {
    ClusterJob job = job_of("llama3-405b", 1024);
    ClusterLimits lim;
    cluster_limits_default(&lim);
    lim.fix = layout(8, 16, 1, 0, 1, 0, 0, CR_NONE);
    lim.fix_mask = FIX_T | FIX_P | FIX_MB;
    ClusterResults r;
    CHECK(cluster_search(&job, g, &lim, &r) == 0 && r.n_fit > 0, "t=8, p=16 fixed: nothing fits");
    int all = 1;
    for (int i = 0; i < r.n; i++)
        all &= r.c[i].lay.t == 8 && r.c[i].lay.p == 16 && r.c[i].lay.mb == 1 && r.c[i].lay.first == 7 &&
               r.c[i].lay.last == 7 && r.c[i].lay.d == 64;
    CHECK(all && r.n > 1, "every layout searched keeps t=8, p=16, mb=1, with stages 7, 8, …, 7 (%d layouts)", r.n);
    cluster_results_free(&r);
}

// --fp8: the linears' GEMMs at the FP8 peak with 1-byte operands, the casts; the FP8 weight copies and
// the linears' inputs saved in FP8. --attention flash: no s×s scores in time or memory.
static void check_fp8_flash(const GpuSpec *g) {
    ClusterJob job = job_of("llama3-70b", 8);
    ClusterLayout lay = layout(4, 4, 1, 4, 1, 1, 1, CR_SELECTIVE);
    LayerTime b16, f8;
    cluster_layer_time(&job, g, &lay, 0, &b16);
    job.fp8 = 1;
    cluster_layer_time(&job, g, &lay, 0, &f8);
    // 8192 tokens × (h/t + 2·kv·d/t) × h: compute-bound, so FP8 halves it (the same wave efficiency)
    double ratio = f8.gemm_f / b16.gemm_f;
    CHECK(ratio > 0.49 && ratio < 0.51, "FP8 forward GEMMs %.4g of bf16's", ratio);
    double n = 8192, h = 8192, ht = h / 4, kvt = 8 * 128 / 4.0, ft = 28672 / 4.0, e = 2;
    double casts_f = n * (h + ht + h + ft) * (e + 1) / (g->hbm_bw * g->hbm_eff);
    double casts_b = n * (ht + 2 * kvt + h + 2 * ft + h) * (e + 1) / (g->hbm_bw * g->hbm_eff);
    CHECK(fabs(f8.elem_f - b16.elem_f - casts_f) < 1e-12 && fabs(f8.elem_b - b16.elem_b - casts_b) < 1e-12,
          "FP8 casts %.6g / %.6g s", f8.elem_f - b16.elem_f, f8.elem_b - b16.elem_b);
    CHECK(f8.kernels_f == b16.kernels_f + 4 && f8.attn_f == b16.attn_f, "four casts forward; attention stays bf16");
    ClusterPrediction p8, p16;
    cluster_predict(&job, g, &lay, 1, &p8);
    job.fp8 = 0;
    cluster_predict(&job, g, &lay, 1, &p16);
    // stage 1: 20 layers; +2 bytes per layer parameter; the QKV, Proj and FC1 inputs (SP shards, s/t rows)
    // halved in every selective layer, × its 3 micro-batches in flight (SwiGLU keeps no FC2 input)
    ActShape sh;
    cluster_job_shape(&job, 1, 4, 1, &sh);
    double lp = 20 * (double)param_layer_count(&sh);
    CHECK(fabs(p8.mem[1].weights - p16.mem[1].weights - 2 * lp) < 1, "FP8 weight copies: +%.0f bytes, expected %.0f",
          p8.mem[1].weights - p16.mem[1].weights, 2 * lp);
    double half = 0.5 * (double)(act_tensor_bytes(&sh, ACT_QKV_IN) + act_tensor_bytes(&sh, ACT_PROJ_IN) +
                                 act_tensor_bytes(&sh, ACT_FC1_IN));
    CHECK(fabs(p16.mem[1].activations - p8.mem[1].activations - 20 * 3 * half) < 1,
          "FP8 saved inputs: −%.0f bytes, expected %.0f", p16.mem[1].activations - p8.mem[1].activations, 60 * half);
    CHECK(p8.step_s < p16.step_s, "FP8 is faster: %.4g < %.4g s", p8.step_s, p16.step_s);
    cluster_prediction_free(&p8);
    cluster_prediction_free(&p16);
    // flash: the attention core never writes the scores: no (4e + 1)·S bytes, and less memory
    job.flash = 1;
    LayerTime fl;
    cluster_layer_time(&job, g, &lay, 0, &fl);
    CHECK(fl.attn_f < b16.attn_f && fl.rc_flash > 0 && fl.kernels_f == b16.kernels_f - 3,
          "flash attention: %.4g s (standard %.4g), recompute %.4g s, %g kernels (standard %g)", fl.attn_f, b16.attn_f,
          fl.rc_flash, fl.kernels_f, b16.kernels_f);
    ClusterLayout none = layout(4, 4, 1, 4, 1, 1, 1, CR_NONE);
    ClusterPrediction pf, ps;
    cluster_predict(&job, g, &none, 1, &pf);
    job.flash = 0;
    cluster_predict(&job, g, &none, 1, &ps);
    // llama has no dropout: the softmax output is its one s×s tensor, per layer × stage 0's 4 in flight
    double scores = (double)act_tensor_bytes(&sh, ACT_ATTN_PROB);
    CHECK(ps.mem[0].activations - pf.mem[0].activations >= 0.999 * 20 * 4 * scores,
          "flash keeps no s×s tensors: %.4g GiB less, the scores are %.4g", (ps.mem[0].activations - pf.mem[0].activations) / GIB,
          20 * 4 * scores / GIB);
    CHECK(pf.part[PART_RECOMPUTE] > 0 && ps.part[PART_RECOMPUTE] == 0, "flash's backward recomputes the scores");
    cluster_prediction_free(&pf);
    cluster_prediction_free(&ps);
}

// More DP buckets: a smaller exposed tail.
static void check_bucket_size(const GpuSpec *g) {
    ClusterJob job = job_of("175B", 8);
    job.dp_overlap = 1;
    ClusterLayout lay = layout(8, 1, 1, 8, 1, 0, 0, CR_FULL);
    double hid, big, small;
    job.dp_bucket = 500e6;
    big = cluster_dp_exposed(&job, g, &lay, 1e9, 100.0, 0.0, &hid);
    job.dp_bucket = 50e6;
    small = cluster_dp_exposed(&job, g, &lay, 1e9, 100.0, 0.0, &hid);
    double b500 = cluster_allreduce_time(g, 25e9, 8, 4.0 * 500e6), b50 = cluster_allreduce_time(g, 25e9, 8, 4.0 * 50e6);
    CHECK(fabs(big - (b500 + g->overlap_cost * b500)) < 1e-9 && fabs(small - (b50 + g->overlap_cost * 19 * b50)) < 1e-9,
          "buckets of 500M: %.4g s; of 50M: %.4g s", big, small);
}

// Heads of another width than h/a (Qwen3 0.6B: h 1024, 16 heads of 128, q 2048 wide): the attention core's
// batched GEMMs run at K = d (QKᵀ) and N = d (P·V); q_proj and o_proj are a·d wide. A head_dim equal to h/a
// is the default to the bit.
static void check_head_width(const GpuSpec *g) {
    ClusterJob job = job_of("qwen3-0.6b", 1);
    ClusterLayout lay = layout(2, 1, 1, 4, 2, 0, 0, CR_NONE);
    LayerTime wide, plain, same;
    job.head_dim = 128;
    job.qk_norm = 1;
    cluster_layer_time(&job, g, &lay, 0, &wide);
    job.head_dim = 0;
    cluster_layer_time(&job, g, &lay, 0, &plain);
    job.head_dim = 64;   // = h/a
    cluster_layer_time(&job, g, &lay, 0, &same);
    CHECK(memcmp(&plain, &same, sizeof plain) == 0, "head_dim = h/a differs from the default");
    double s = (double)job.s, bat = lay.mb * (double)job.a / lay.t;
    double want = cluster_gemm_time(g, s, s, 128, bat, job.e) + cluster_gemm_time(g, s, 128, s, bat, job.e);
    CHECK(fabs(wide.attn_f - want - (plain.attn_f - cluster_gemm_time(g, s, s, 64, bat, job.e) -
                                     cluster_gemm_time(g, s, 64, s, bat, job.e))) < 1e-12 * want,
          "attention at d 128: %.9g s, the batched GEMMs at K = N = 128 give %.9g (the element-wise part as at d 64)",
          wide.attn_f, want);
    CHECK(wide.gemm_f > plain.gemm_f && wide.gemm_b > plain.gemm_b && wide.elem_f > plain.elem_f,
          "q 2048 wide: the linears %.6g > %.6g s, element-wise %.6g > %.6g", wide.gemm_f, plain.gemm_f, wide.elem_f,
          plain.elem_f);
}

int main(void) {
    const GpuSpec *a100 = gpu_kind_find("a100-80g"), *h100 = gpu_kind_find("h100-80g");
    check_two_tier(a100);
    check_dp(a100);
    check_tp_overlap(a100);
    check_launch_gaps(a100);
    check_uneven(h100);
    check_search_fix(h100);
    check_fp8_flash(h100);
    check_bucket_size(a100);
    check_head_width(h100);
    return check_summary();
}
