// The CPU's mixed-precision attention with a head wider than the sequence (d > s, issue 24) and with
// several causal blocks: its per-thread bf16 scratch (ATTENTION_BF16_SCRATCH) must hold the head's q, k, v
// and dctx copies (s·d each) and a block of P or dP, or one overwrites another. The forward, the
// backward and the selective recompute are compared with the fp32 kernels (bf16 operands: a few
// 1e-3 apart; a clobbered q is O(1) apart), with the scratch allocated at exactly the macro's size
// (AddressSanitizer under make sanitize reports any write past it). And the planner sizes the
// attention scratch by asking the backend (plan_attention_scratch_bytes), not by a CPU formula.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "backend/cpu/attention.h"
#include "memory/planner.h"
#include "util/common.h"

static float *filled(size_t n, unsigned seed, float scale) {
    float *x = xmalloc(n * sizeof(float));
    unsigned st = seed;
    for (size_t i = 0; i < n; i++) {
        st = st * 1664525u + 1013904223u;
        x[i] = scale * ((float)(st >> 8) / 16777216.0f - 0.5f);
    }
    return x;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

// s rows of [b, a·d] activations; every head d > s.
static void check_shape(int s, int b, int a, int d) {
    int h = a * d, threads = omp_get_max_threads();
    size_t n = (size_t)s * b * h, ss = (size_t)s * s * b * a;
    float *q = filled(n, 1, 2.0f), *k = filled(n, 2, 2.0f), *v = filled(n, 3, 1.0f), *dctx = filled(n, 4, 1.0f);
    float *ctx32 = xcalloc(n * 4), *ctx16 = xcalloc(n * 4), *p32 = xcalloc(ss * 4), *p16 = xcalloc(ss * 4);
    uint16_t *s16 = xmalloc((size_t)threads * ATTENTION_BF16_SCRATCH(s, d) * sizeof(uint16_t));
    DropoutSite site = {.step = 7, .site = SITE_ATTN, .p = 0.0f};
    attention_forward(ctx32, p32, NULL, NULL, q, k, v, s, b, a, a, h, 0, 0, site, 0, 0);
    attention_forward_bf16(ctx16, p16, NULL, NULL, q, k, v, s, b, a, a, h, 0, 0, site, 0, 0, s16);
    double e_ctx = max_diff(ctx32, ctx16, n), e_p = max_diff(p32, p16, ss);
    CHECK(e_ctx < 2e-2 && e_p < 2e-2, "s %d d %d: bf16 forward |ctx| %.3g, |P| %.3g from fp32 (want < 2e-2)", s, d,
          e_ctx, e_p);

    float *dq32 = xcalloc(n * 4), *dk32 = xcalloc(n * 4), *dv32 = xcalloc(n * 4);
    float *dq16 = xcalloc(n * 4), *dk16 = xcalloc(n * 4), *dv16 = xcalloc(n * 4);
    float *scr = xcalloc((size_t)threads * ATTENTION_RECOMPUTE_SCRATCH(s) * 4);
    attention_backward(dq32, dk32, dv32, dctx, p32, NULL, NULL, q, k, v, scr, s, b, a, a, h, 0.0f, 0);
    attention_backward_bf16(dq16, dk16, dv16, dctx, p32, NULL, NULL, q, k, v, scr, s, b, a, a, h, 0.0f, 0, s16);
    double e = fmax(max_diff(dq32, dq16, n), fmax(max_diff(dk32, dk16, n), max_diff(dv32, dv16, n)));
    CHECK(e < 3e-2, "s %d d %d: bf16 backward %.3g from fp32 (want < 3e-2)", s, d, e);
    attention_backward_recompute_bf16(dq16, dk16, dv16, dctx, q, k, v, scr, s, b, a, a, h, 0, 0, site, 0, 0, s16);
    e = fmax(max_diff(dq32, dq16, n), fmax(max_diff(dk32, dk16, n), max_diff(dv32, dv16, n)));
    CHECK(e < 3e-2, "s %d d %d: bf16 selective recompute %.3g from fp32 (want < 3e-2)", s, d, e);
    // The stored backward (from the bf16 forward's P) and the selective recompute run the same causal
    // blocks (64 rows at bf16): the same bits.
    float *dq = xcalloc(n * 4), *dk = xcalloc(n * 4), *dv = xcalloc(n * 4);
    attention_backward_bf16(dq, dk, dv, dctx, p16, NULL, NULL, q, k, v, scr, s, b, a, a, h, 0.0f, 0, s16);
    CHECK(!memcmp(dq, dq16, n * 4) && !memcmp(dk, dk16, n * 4) && !memcmp(dv, dv16, n * 4),
          "s %d d %d: bf16 backward from the stored P differs from the selective recompute's", s, d);
    free(dq); free(dk); free(dv);
    printf("  s %3d d %2d: bf16 - fp32: ctx %.2g, P %.2g, backward %.2g\n", s, d, e_ctx, e_p, e);
    free(q); free(k); free(v); free(dctx); free(ctx32); free(ctx16); free(p32); free(p16); free(s16);
    free(dq32); free(dk32); free(dv32); free(dq16); free(dk16); free(dv16); free(scr);
}

// A backend whose attention scratch is not the CPU's: the planner must quote it.
static size_t odd_scratch(Backend *be, AttnScratchKind kind, int s, int b, int a, int kv, int h) {
    (void)be;
    (void)kv;
    return 1000003u * (size_t)(kind + 1) + (size_t)s * b * a * h;
}

static void check_planner_asks(void) {
    char err[256];
    Backend *cpu = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    CHECK(cpu != NULL, "cpu backend: %s", err);
    if (!cpu) return;
    ActShape sh = {.s = 24, .b = 2, .h = 64, .a = 4, .L = 2, .v = 50, .elem_bytes = 4, .t = 2};
    static const struct { unsigned tempo; int sel; AttnScratchKind kind; } cases[] = {
        {0, 0, ATTN_SCRATCH_BACKWARD}, {TEMPO_SOFTMAX, 0, ATTN_SCRATCH_BACKWARD_TEMPO},
        {0, 1, ATTN_SCRATCH_RECOMPUTE}, {ATTN_FLASH, 1, ATTN_SCRATCH_FLASH}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        // the rank's heads and width: a/t = 2, h/t = 32
        size_t want = cpu->attention_scratch_floats(cpu, cases[i].kind, 24, 2, 2, 2, 32) * sizeof(float);
        size_t got = plan_attention_scratch_bytes(cpu, &sh, 1, cases[i].tempo, cases[i].sel);
        CHECK(got == want, "case %zu: the planner says %zu bytes, the CPU backend %zu", i, got, want);
        size_t none = plan_attention_scratch_bytes(NULL, &sh, omp_get_max_threads(), cases[i].tempo, cases[i].sel);
        CHECK(none == want, "case %zu: no backend at this thread count gives %zu, the CPU backend %zu", i, none, want);
        Backend odd = *cpu;
        odd.attention_scratch_floats = odd_scratch;
        size_t o = plan_attention_scratch_bytes(&odd, &sh, 1, cases[i].tempo, cases[i].sel);
        size_t o_want = odd_scratch(&odd, cases[i].kind, 24, 2, 2, 2, 32) * sizeof(float);
        if (cases[i].kind == ATTN_SCRATCH_RECOMPUTE) {   // the larger of the stored backward's and recompute's
            size_t st = odd_scratch(&odd, ATTN_SCRATCH_BACKWARD, 24, 2, 2, 2, 32) * sizeof(float);
            o_want = st > o_want ? st : o_want;
        }
        CHECK(o == o_want, "case %zu: the planner says %zu bytes, the backend %zu", i, o, o_want);
    }
    backend_close(cpu);
}

// The per-thread layout itself (runs where no bf16 GEMM does): a block's first operand (at most s × the
// 64-row block) in the room, then the head's k, v, q and dctx copies, s·d each.
static void check_layout(void) {
    CHECK(ATTENTION_BF16_A_ROOM(5, 12) == 25 && ATTENTION_BF16_SCRATCH(5, 12) == 265,
          "s 5 d 12: room %zu (want 25 = s²), scratch %zu (want 25 + 4·60)", ATTENTION_BF16_A_ROOM(5, 12),
          ATTENTION_BF16_SCRATCH(5, 12));
    CHECK(ATTENTION_BF16_A_ROOM(16, 8) == 256 && ATTENTION_BF16_SCRATCH(16, 8) == 768,
          "s 16 d 8: room %zu (want 256 = s²), scratch %zu (want 256 + 4·128)", ATTENTION_BF16_A_ROOM(16, 8),
          ATTENTION_BF16_SCRATCH(16, 8));
    CHECK(ATTENTION_BF16_A_ROOM(150, 16) == 9600 && ATTENTION_BF16_SCRATCH(150, 16) == 19200,
          "s 150 d 16: room %zu (want 150·64), scratch %zu (want 9600 + 4·2400)", ATTENTION_BF16_A_ROOM(150, 16),
          ATTENTION_BF16_SCRATCH(150, 16));
}

int main(void) {
    check_layout();
    check_planner_asks();
    check_shape(5, 2, 2, 12);    // d > s: q's s·d > s²
    check_shape(3, 1, 3, 32);    // d ≫ s
    check_shape(16, 1, 2, 8);    // d < s, as before
    check_shape(150, 1, 2, 16);  // three causal blocks of the bf16 GEMMs (64, 64, 22 rows)
    return check_summary();
}
