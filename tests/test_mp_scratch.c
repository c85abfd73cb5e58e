// Mixed precision's bytes outside the ledger, as the budget planner counts them (memory/planner.h):
// the backend's bf16 GEMM operand scratch after one training step (forward, backward, evaluation
// forward) equals plan_gemm_scratch_bytes exactly, for shapes where each of its terms is the largest
// (the output layer's n·v, the MLP's n·4h, attention's threads·(s² + s·d)) and for the policies that
// change it (none, selective, full, mini-seq, flash; not TP/SP, which need a process group); the bf16 weight copy is 2 bytes per parameter
// of plan_rank_params. Under fp32 both are 0 and the planner's budget is unchanged.
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "memory/planner.h"
#include "model/gpt.h"
#include "util/common.h"

typedef struct { const char *what; GPTConfig cfg; LayerRecompute kind; unsigned tempo; int mini; } Case;

static void one_step(GPT *m, const Case *k) {
    int s = k->cfg.seq, b = k->cfg.batch;
    int32_t *tok = xmalloc(sizeof(int32_t) * (size_t)s * b), *tgt = xmalloc(sizeof(int32_t) * (size_t)s * b);
    for (int i = 0; i < s * b; i++) { tok[i] = (i * 7 + 3) % k->cfg.vocab; tgt[i] = (i * 5 + 1) % k->cfg.vocab; }
    StepCtx tr = {1, 1, 0, 1}, ev = {1, 1, 0, 0};
    gpt_forward(m, tok, tgt, s, b, tr, 1.0f / (float)(s * b));
    gpt_backward(m, tok, tr);
    gpt_forward(m, tok, tgt, s, b, ev, 0.0f);
    gpt_release(m);
    free(tok);
    free(tgt);
}

static void check_case(const Case *k) {
    MemoryPolicy pol;
    policy_default(&pol, k->cfg.layers);
    pol.precision = PRECISION_BF16;
    pol.act_dtype = ACT_BF16;
    pol.tempo = k->tempo | (k->mini ? MINI_SEQ : 0);
    pol.mini_seq = k->mini;
    for (int l = 0; l < k->cfg.layers; l++) { pol.kind[l] = k->kind; pol.group_start[l] = l; }
    GPT m;
    gpt_init(&m, &k->cfg, &pol);
    policy_free(&pol);
    gpt_init_weights(&m, 3);
    one_step(&m, k);
    int threads = omp_get_max_threads();
    size_t got = m.be->scratch_bytes(m.be), want = plan_gemm_scratch_bytes(&m.shape, PRECISION_BF16, m.policy.tempo, threads);
    CHECK(got == want, "%s: the backend holds %zu bytes of bf16 scratch, the planner counts %zu", k->what, got, want);
    CHECK(plan_rank_params(&m.shape) == m.n_params, "%s: %zu parameters, the planner counts %zu", k->what, m.n_params,
          plan_rank_params(&m.shape));
    CHECK(plan_gemm_scratch_bytes(&m.shape, PRECISION_FP32, m.policy.tempo, threads) == 0, "%s: fp32 has scratch", k->what);
    printf("  %-34s bf16 GEMM scratch %9zu bytes (backend %9zu), weight copy %zu bytes\n", k->what, want, got,
           2 * m.n_params);
    gpt_free(&m);
}

int main(void) {
    GPTConfig vocab_big = {.layers = 2, .hidden = 32, .heads = 4, .seq = 16, .batch = 2, .vocab = 500, .dropout = 0.1f};
    GPTConfig mlp_big = {.layers = 2, .hidden = 64, .heads = 4, .seq = 16, .batch = 2, .vocab = 40, .dropout = 0.1f};
    GPTConfig attn_big = {.layers = 2, .hidden = 16, .heads = 2, .seq = 64, .batch = 1, .vocab = 40, .dropout = 0.0f};
    Case cases[] = {
        {"n*v largest, none", vocab_big, RECOMPUTE_NONE, 0, 0},
        {"n*v largest, selective", vocab_big, RECOMPUTE_SELECTIVE, 0, 0},
        {"n*v largest, full", vocab_big, RECOMPUTE_FULL, 0, 0},
        {"n*v largest, mini-seq 4", vocab_big, RECOMPUTE_NONE, 0, 4},
        {"n*4h largest, none", mlp_big, RECOMPUTE_NONE, 0, 0},
        {"n*4h largest, mini-seq 3 (uneven)", mlp_big, RECOMPUTE_NONE, 0, 3},
        {"n*4h largest, flash", mlp_big, RECOMPUTE_NONE, ATTN_FLASH, 0},
        {"attention largest, none", attn_big, RECOMPUTE_NONE, 0, 0},
        {"attention largest, selective", attn_big, RECOMPUTE_SELECTIVE, 0, 0},
        {"attention largest, flash", attn_big, RECOMPUTE_NONE, ATTN_FLASH, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);

    // The planner: under bf16 the budget holds the GEMM scratch too, and the weight copy is reported;
    // under fp32 neither exists (plan_memory is the fp32 planner).
    ActShape sh = {.s = 256, .b = 4, .h = 768, .a = 12, .L = 12, .v = 8192, .elem_bytes = 2, .masks = MASKS_BYTES,
                   .dropout = 1, .t = 1, .sp = 0};
    MemPlan p32, p16;
    CHECK(plan_memory(&sh, 2, 1e15, 0.0, &p32) == 0 && p32.gemm_scratch_bytes == 0 && p32.weight_copy_bytes == 0,
          "fp32 plans count no mixed-precision bytes (%zu, %zu)", p32.gemm_scratch_bytes, p32.weight_copy_bytes);
    CHECK(plan_memory_precision(&sh, PRECISION_BF16, NULL, 2, 1e15, 0.0, &p16) == 0, "a huge budget fits under bf16");
    // config S, none: the output layer's dy, 1024·8192, and attention's operands on 2 threads,
    // 2·(256² + 256·64); the backward's x are the arena's bf16 copies. Two bytes each.
    size_t want = (1024 * 8192 + 2 * (256 * 256 + 256 * 64)) * 2;
    CHECK(p16.gemm_scratch_bytes == want, "S under bf16: GEMM scratch %zu, expected %zu", p16.gemm_scratch_bytes, want);
    CHECK(p16.weight_copy_bytes == 2 * plan_rank_params(&sh) && plan_rank_params(&sh) == 91544064,
          "S's weight copy %zu bytes (%zu parameters, expected 91544064 = 8192·768 + 256·768 + 12·(12·768² + 13·768) + 2·768)", p16.weight_copy_bytes, plan_rank_params(&sh));
    // A budget between the fp32 plan's bytes and those plus the scratch: fp32 keeps everything, bf16 must not.
    double budget = (double)(p32.arena_bytes + p32.scratch_bytes) + (double)want / 2;
    MemPlan q32, q16;
    CHECK(plan_memory(&sh, 2, budget, 0.0, &q32) == 0 && q32.extra_flops == 0.0, "fp32 keeps everything");
    CHECK(plan_memory_precision(&sh, PRECISION_BF16, NULL, 2, budget, 0.0, &q16) == 0 &&
              q16.arena_bytes + q16.scratch_bytes + q16.gemm_scratch_bytes <= budget &&
              (q16.extra_flops > 0.0 || q16.passes > 0),
          "bf16 within %.0f bytes: %zu + %zu + %zu, %.3g FLOPs", budget, q16.arena_bytes, q16.scratch_bytes,
          q16.gemm_scratch_bytes, q16.extra_flops);
    return check_summary();
}
