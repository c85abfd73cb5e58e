// Flash attention on the GPU (backend/cuda/flash_attention.cu) against the CPU backend: the same
// random q, k, v, dctx through the CPU's flash kernel and the GPU's, forward (ctx, lse) and backward
// (dq, dk, dv), and against the CPU's standard attention (attention_forward/backward) on the same
// inputs; at odd shapes (s not a multiple of the 64-row tile, head dims 12, 7, 64, 96, 128), with
// dropout 0.1 and 0, nonzero head0/sample0 (the dropout mask must be the CPU's element for element),
// input pointers off 16-byte alignment (the scalar load path), every output poisoned first. Each GPU
// call runs twice: the second result must equal the first bit for bit. Grouped-query cases (kv < a: k,
// v, dk, dv [s, b, kv·d], query head j reading kv head j / (a/kv)) run the same comparisons with the
// same tolerances: the CPU's kernels are themselves checked bitwise against multi-head attention on
// repeat_kv(k, v) (test_attention_gqa).
//
// The query-range forward (flash_attention_forward_rows, MEMO's token ranges): positions [0, 64) and then
// [64, s) into poisoned outputs are bitwise the whole call (ctx rows and lse entries; the first range
// leaves every later row untouched), fp32 and bf16; a range that starts off the tile grid (q0 = 40)
// against the CPU's rows within the tolerances below, the rows outside it untouched.
//
// Tolerances (relative L2):
//  fp32 path (PRECISION_FP32): 1e-5 against both CPU kernels. The GPU sums the same products in
//    another order (dot products of d ≤ 128 terms, rows of ≤ 512 probabilities, online-softmax
//    rescaling per 64-key tile), so the expected difference is a few 1e-7 (host emulation of these
//    kernels measured ≤ 6e-7 at s = 512); 1e-5 leaves an order of magnitude.
//  bf16 path (PRECISION_BF16): q, k, v, dctx, the dropped probabilities and dS are rounded to bf16
//    (unit roundoff 2⁻⁹ ≈ 2e-3) for the tensor-core products, accumulated in fp32. An emulation of
//    exactly this arithmetic measured ctx ≈ 3e-3, lse ≈ 4e-4, dq/dk ≈ 5e-3, dv ≈ 3e-3 against the
//    CPU's fp32 flash at these shapes; the bounds are about 3× that: 1.5e-2 for ctx/dq/dk/dv, 2e-3
//    for lse (lse is dominated by the row max, an O(1) value, so its relative error is small).
//
// Sliding windows (query i sees keys i−W+1..i; backend/cpu/attention.h's attention_first_key): the same
// comparisons, tolerances and reruns at s = 70, 130 and 200 (key tiles wholly left of a query tile's
// window, rows that see no key of their first tile, query tiles past every window of a key tile), windows
// 1, 5, 64, 65, 100, s−1 and s, every padded head width, dropout, grouped-query, misaligned inputs;
// window s is bitwise window 0. Window 1 makes each softmax row a single 1: dS = P ⊙ (dP − D) is 0 in
// exact arithmetic and dq, dk are rounding residue on both sides (D and dP sum the same products in
// other orders), so there they are held to the tolerance relative to dv's norm, not to the CPU's
// residue; and its lse is the row's one score, q·k in bf16 operands with no log-sum term to dilute their
// rounding (measured 2.0e-3 at s = 130), so it is held to the operands' bound, TOL_BF16, not
// TOL_BF16_LSE. The query-range forward with a window: [0, 64) + [64, s) bitwise the whole call, and an
// off-grid range within the tolerances of the CPU's rows.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cuda_check.h"
#include "util/philox.h"

#define TOL_F32 1e-5
#define TOL_BF16 1.5e-2
#define TOL_BF16_LSE 2e-3

typedef struct {
    int s, b, a, d;
    float p;
    int head0;
    uint32_t sample0;
    int misalign;   // device inputs start one float past a 16-byte boundary
    int kv;         // key/value heads (0: a, multi-head)
    int window;     // sliding window (0: the whole causal prefix)
} Case;

static int kv_of(const Case *c) { return c->kv ? c->kv : c->a; }

// The inputs and the CPU's results of one case.
typedef struct {
    size_t n, nk, nl;   // q-side [s, b, a·d], k-side [s, b, kv·d], lse [b, a, s]
    float *q, *k, *v, *g;
    float *ctx, *lse, *dq, *dk, *dv;           // CPU flash
    float *sctx, *sdq, *sdk, *sdv;             // CPU standard attention
} Ref;

static DropoutSite site_of(const Case *c) {
    DropoutSite site = {philox_key_from_seed(1234), 7, 3, SITE_ATTN, c->p};
    return site;
}

static Ref cpu_reference(Backend *cpu, const Case *c) {
    Ref r;
    int h = c->a * c->d;
    size_t ss = (size_t)c->s * c->s, bass = (size_t)c->b * c->a * ss;
    int kv = kv_of(c);
    r.n = (size_t)c->s * c->b * h;
    r.nk = (size_t)c->s * c->b * kv * c->d;
    r.nl = (size_t)c->b * c->a * c->s;
    r.q = host_random(r.n, -2.0f, 2.0f);   // scores of a few units: a peaked softmax
    r.k = host_random(r.nk, -2.0f, 2.0f);
    r.v = host_random(r.nk, -1.0f, 1.0f);
    r.g = host_random(r.n, -1.0f, 1.0f);
    r.ctx = malloc(r.n * 4), r.lse = malloc(r.nl * 4), r.dq = malloc(r.n * 4), r.dk = malloc(r.nk * 4), r.dv = malloc(r.nk * 4);
    r.sctx = malloc(r.n * 4), r.sdq = malloc(r.n * 4), r.sdk = malloc(r.nk * 4), r.sdv = malloc(r.nk * 4);
    DropoutSite site = site_of(c);
    float *scr = malloc(cpu->attention_scratch_floats(cpu, ATTN_SCRATCH_FLASH, c->s, c->b, c->a, kv, h) * 4);
    cpu->flash_attention_forward(cpu, r.ctx, r.lse, r.q, r.k, r.v, scr, c->s, c->b, c->a, kv, h, c->window, c->head0, site,
                                 c->sample0);
    cpu->flash_attention_backward(cpu, r.dq, r.dk, r.dv, r.g, r.q, r.k, r.v, r.ctx, r.lse, scr, c->s, c->b, c->a, kv, h,
                                  c->window, c->head0, site, c->sample0);
    free(scr);
    int drop = c->p > 0.0f;
    float *prob = malloc(bass * 4), *dropped = drop ? malloc(bass * 4) : NULL;
    uint8_t *keep = drop ? malloc(bass) : NULL;
    float *bscr = malloc(cpu->attention_scratch_floats(cpu, ATTN_SCRATCH_BACKWARD, c->s, c->b, c->a, kv, h) * 4);
    cpu->attention_forward(cpu, r.sctx, prob, keep, dropped, r.q, r.k, r.v, c->s, c->b, c->a, kv, h, c->window, c->head0,
                           site, c->sample0, 0);
    cpu->attention_backward(cpu, r.sdq, r.sdk, r.sdv, r.g, prob, keep, dropped, r.q, r.k, r.v, bscr, c->s, c->b, c->a, kv,
                            h, c->p, 0);
    free(prob), free(dropped), free(keep), free(bscr);
    return r;
}

static void ref_free(Ref *r) {
    float *all[] = {r->q, r->k, r->v, r->g, r->ctx, r->lse, r->dq, r->dk, r->dv, r->sctx, r->sdq, r->sdk, r->sdv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}

// An input on the device, one float past the allocation's (256-byte aligned) start when misaligned.
static float *dev_input(Backend *gpu, const float *host, size_t n, int misalign, void **base) {
    float *d = gpu->alloc(gpu, (n + 1) * sizeof(float));
    *base = d;
    gpu->copy(gpu, d + misalign, host, n * sizeof(float), COPY_H2D);
    return d + misalign;
}

// Download n floats, print the error, require it within tol.
static float *expect_close(Backend *gpu, const float *dev, const float *ref, size_t n, double tol, const char *what,
                           const char *label) {
    float *got = host_download(gpu, dev, n * sizeof(float));
    double e = rel_l2(got, ref, n);
    printf("  %-34s %-12s rel L2 %.3g (tolerance %.2g)\n", label, what, e, tol);
    CHECK(e <= tol, "%s %s: relative L2 error %.3g, tolerance %.2g", label, what, e, tol);
    return got;
}
// Window 1's dq or dk (rounding residue, see the top): ‖got − ref‖ within tol of ‖scale_ref‖ (dv's), the
// lengths' ratio folded in so the bound is per element.
static void expect_residue(const float *got, const float *ref, size_t n, const float *scale_ref, size_t ns, double tol,
                           const char *what, const char *label) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
    for (size_t i = 0; i < ns; i++) den += (double)scale_ref[i] * scale_ref[i];
    double e = sqrt((num / (double)n) / (den / (double)ns));
    printf("  %-34s %-12s L2 %.3g of dv's (tolerance %.2g)\n", label, what, e, tol);
    CHECK(isfinite(e) && e <= tol, "%s %s: L2 error %.3g of dv's norm, tolerance %.2g", label, what, e, tol);
}

static void run_case(Backend *gpu, const Case *c, const Ref *r) {
    int bf16 = gpu->precision == PRECISION_BF16, h = c->a * c->d;
    // window 1's lse is one bf16 score alone (no log-sum term): the operands' bound (see the top)
    double tol = bf16 ? TOL_BF16 : TOL_F32, tol_lse = bf16 ? (c->window == 1 ? TOL_BF16 : TOL_BF16_LSE) : TOL_F32;
    int kv = kv_of(c);
    char label[128];
    snprintf(label, sizeof label, "%s s=%d b=%d a=%d kv=%d d=%d p=%.1f%s w=%d", bf16 ? "bf16" : "fp32", c->s, c->b, c->a,
             kv, c->d, (double)c->p, c->misalign ? " unal" : "", c->window);
    DropoutSite site = site_of(c);
    size_t n = r->n, nk = r->nk, nl = r->nl;
    size_t scratch_floats = gpu->attention_scratch_floats(gpu, ATTN_SCRATCH_FLASH, c->s, c->b, c->a, kv, h);
    CHECK(scratch_floats >= nl, "%s: flash scratch %zu floats, the backward needs %zu (one per query row and head)",
          label, scratch_floats, nl);
    void *bq, *bk, *bv, *bg;
    float *q = dev_input(gpu, r->q, n, c->misalign, &bq), *k = dev_input(gpu, r->k, nk, c->misalign, &bk);
    float *v = dev_input(gpu, r->v, nk, c->misalign, &bv), *g = dev_input(gpu, r->g, n, c->misalign, &bg);
    float *scratch = dev_poisoned(gpu, (scratch_floats > nl ? scratch_floats : nl) * sizeof(float));
    // runs 0 and 1 with the case's window; run 2 (window s only) with window 0, which must give its bits
    int runs = c->window >= c->s ? 3 : 2;
    float *out[3][5];   // per run: ctx, lse, dq, dk, dv
    for (int run = 0; run < runs; run++) {
        int w = run < 2 ? c->window : 0;
        float *ctx = dev_poisoned(gpu, n * 4), *lse = dev_poisoned(gpu, nl * 4);
        float *dq = dev_poisoned(gpu, n * 4), *dk = dev_poisoned(gpu, nk * 4), *dv = dev_poisoned(gpu, nk * 4);
        gpu->flash_attention_forward(gpu, ctx, lse, q, k, v, scratch, c->s, c->b, c->a, kv, h, w, c->head0, site, c->sample0);
        gpu->flash_attention_backward(gpu, dq, dk, dv, g, q, k, v, ctx, lse, scratch, c->s, c->b, c->a, kv, h, w, c->head0, site,
                                      c->sample0);
        out[run][0] = ctx, out[run][1] = lse, out[run][2] = dq, out[run][3] = dk, out[run][4] = dv;
    }
    // against the CPU's flash (window 1's dq, dk: their residue at dv's scale)
    int residue = c->window == 1;
    float *got[5];
    got[0] = expect_close(gpu, out[0][0], r->ctx, n, tol, "ctx", label);
    got[1] = expect_close(gpu, out[0][1], r->lse, nl, tol_lse, "lse", label);
    if (residue) {
        got[2] = host_download(gpu, out[0][2], n * 4), got[3] = host_download(gpu, out[0][3], nk * 4);
        expect_residue(got[2], r->dq, n, r->dv, nk, tol, "dq", label);
        expect_residue(got[3], r->dk, nk, r->dv, nk, tol, "dk", label);
    } else {
        got[2] = expect_close(gpu, out[0][2], r->dq, n, tol, "dq", label);
        got[3] = expect_close(gpu, out[0][3], r->dk, nk, tol, "dk", label);
    }
    got[4] = expect_close(gpu, out[0][4], r->dv, nk, tol, "dv", label);
    // against the CPU's standard attention
    const float *std_ref[] = {r->sctx, NULL, r->sdq, r->sdk, r->sdv};
    const char *std_name[] = {"ctx/std", NULL, "dq/std", "dk/std", "dv/std"};
    for (int i = 0; i < 5; i++) {
        if (!std_ref[i]) continue;
        if (residue && (i == 2 || i == 3)) {
            expect_residue(got[i], std_ref[i], i >= 3 ? nk : n, r->sdv, nk, tol, std_name[i], label);
            continue;
        }
        double e = rel_l2(got[i], std_ref[i], i >= 3 ? nk : n);
        printf("  %-34s %-12s rel L2 %.3g (tolerance %.2g)\n", label, std_name[i], e, tol);
        CHECK(e <= tol, "%s %s: relative L2 error %.3g against standard attention, tolerance %.2g", label, std_name[i], e,
              tol);
    }
    // the second run, bit for bit
    const char *names[] = {"ctx (rerun)", "lse (rerun)", "dq (rerun)", "dk (rerun)", "dv (rerun)"};
    for (int i = 0; i < 5; i++) {
        size_t count = i == 1 ? nl : i >= 3 ? nk : n;
        char what[192];
        snprintf(what, sizeof what, "%s %s", label, names[i]);
        CHECK_BYTES_EQUAL(gpu, out[1][i], got[i], count * sizeof(float), what);
        if (runs > 2) {
            snprintf(what, sizeof what, "%s %s, window 0 against window %d", label, names[i], c->window);
            CHECK_BYTES_EQUAL(gpu, out[2][i], got[i], count * sizeof(float), what);
        }
        free(got[i]);
    }
    if (runs > 2) printf("  %-34s window %d bitwise window 0\n", label, c->window);
    for (int run = 0; run < runs; run++)
        for (int i = 0; i < 5; i++) gpu->free(gpu, out[run][i]);
    gpu->free(gpu, scratch);
    gpu->free(gpu, bq), gpu->free(gpu, bk), gpu->free(gpu, bv), gpu->free(gpu, bg);
}


// Rows [p0, p1) of ctx ([s, b, h]) and entries [p0, p1) of every head's lse ([b·a, s]) gathered from full
// host copies (the rows a query-range call writes).
static void gather_rows(float *dst_ctx, float *dst_lse, const float *ctx, const float *lse, const Case *c, int p0, int p1) {
    size_t row = (size_t)c->b * c->a * c->d, nr = (size_t)(p1 - p0);
    memcpy(dst_ctx, ctx + (size_t)p0 * row, nr * row * sizeof(float));
    for (int bj = 0; bj < c->b * c->a; bj++) memcpy(dst_lse + (size_t)bj * nr, lse + (size_t)bj * c->s + p0, nr * sizeof(float));
}

// How many bytes outside rows [p0, p1) are no longer the poison (0xFF).
static size_t touched_outside(const float *ctx, const float *lse, const Case *c, int p0, int p1) {
    size_t row = (size_t)c->b * c->a * c->d, bad = 0;
    for (int i = 0; i < c->s; i++)
        for (size_t x = 0; x < row && (i < p0 || i >= p1); x++) {
            uint32_t u;
            memcpy(&u, ctx + (size_t)i * row + x, 4);
            bad += u != 0xFFFFFFFFu;
        }
    for (int bj = 0; bj < c->b * c->a; bj++)
        for (int i = 0; i < c->s; i++) {
            uint32_t u;
            memcpy(&u, lse + (size_t)bj * c->s + i, 4);
            bad += (i < p0 || i >= p1) && u != 0xFFFFFFFFu;
        }
    return bad;
}

static void rows_case(Backend *gpu, Backend *cpu, const Case *c, const Ref *r) {
    int bf16 = gpu->precision == PRECISION_BF16, h = c->a * c->d, kv = kv_of(c);
    char label[128];
    snprintf(label, sizeof label, "rows %s s=%d b=%d a=%d kv=%d d=%d p=%.1f w=%d", bf16 ? "bf16" : "fp32", c->s, c->b,
             c->a, kv, c->d, (double)c->p, c->window);
    DropoutSite site = site_of(c);
    size_t n = r->n, nl = r->nl;
    float *q = dev_upload(gpu, r->q, n * 4), *k = dev_upload(gpu, r->k, r->nk * 4), *v = dev_upload(gpu, r->v, r->nk * 4);
    float *scratch = dev_poisoned(gpu, gpu->attention_scratch_floats(gpu, ATTN_SCRATCH_FLASH, c->s, c->b, c->a, kv, h) * 4);
    float *ctx = dev_poisoned(gpu, n * 4), *lse = dev_poisoned(gpu, nl * 4);
    gpu->flash_attention_forward(gpu, ctx, lse, q, k, v, scratch, c->s, c->b, c->a, kv, h, c->window, c->head0, site,
                                 c->sample0);
    float *whole_ctx = host_download(gpu, ctx, n * 4), *whole_lse = host_download(gpu, lse, nl * 4);
    gpu->free(gpu, ctx), gpu->free(gpu, lse);
    // [0, 64), then [64, s): the whole call's bits
    ctx = dev_poisoned(gpu, n * 4), lse = dev_poisoned(gpu, nl * 4);
    int split = c->s > 64 ? 64 : c->s;   // one flash tile
    gpu->flash_attention_forward_rows(gpu, ctx, lse, q, k, v, scratch, c->s, 0, split, c->b, c->a, kv, h, c->window,
                                      c->head0, site, c->sample0);
    float *hc = host_download(gpu, ctx, n * 4), *hl = host_download(gpu, lse, nl * 4);
    size_t bad = touched_outside(hc, hl, c, 0, split);
    CHECK(bad == 0, "%s: the range [0, %d) wrote %zu elements outside it", label, split, bad);
    free(hc), free(hl);
    gpu->flash_attention_forward_rows(gpu, ctx, lse, q, k, v, scratch, c->s, split, c->s - split, c->b, c->a, kv, h,
                                      c->window, c->head0, site, c->sample0);
    char what[192];
    snprintf(what, sizeof what, "%s ctx of [0, %d) + [%d, %d) vs the whole call", label, split, split, c->s);
    CHECK_BYTES_EQUAL(gpu, ctx, whole_ctx, n * 4, what);
    snprintf(what, sizeof what, "%s lse of the two ranges vs the whole call", label);
    CHECK_BYTES_EQUAL(gpu, lse, whole_lse, nl * 4, what);
    printf("  %-34s two ranges bitwise the whole call\n", label);
    gpu->free(gpu, ctx), gpu->free(gpu, lse);
    // off the tile grid: [40, s − 5) against the CPU's rows
    int p0 = 40, p1 = c->s - 5;
    if (p1 > p0) {
        size_t nr = (size_t)(p1 - p0), row = (size_t)c->b * h;
        float *cc = malloc(n * 4), *cl = malloc(nl * 4);
        memset(cc, 0xFF, n * 4), memset(cl, 0xFF, nl * 4);
        float *cscr = malloc(cpu->attention_scratch_floats(cpu, ATTN_SCRATCH_FLASH, c->s, c->b, c->a, kv, h) * 4);
        cpu->flash_attention_forward_rows(cpu, cc, cl, r->q, r->k, r->v, cscr, c->s, p0, p1 - p0, c->b, c->a, kv, h,
                                          c->window, c->head0, site, c->sample0);
        ctx = dev_poisoned(gpu, n * 4), lse = dev_poisoned(gpu, nl * 4);
        gpu->flash_attention_forward_rows(gpu, ctx, lse, q, k, v, scratch, c->s, p0, p1 - p0, c->b, c->a, kv, h, c->window,
                                          c->head0, site, c->sample0);
        hc = host_download(gpu, ctx, n * 4), hl = host_download(gpu, lse, nl * 4);
        bad = touched_outside(hc, hl, c, p0, p1);
        CHECK(bad == 0, "%s: the range [%d, %d) wrote %zu elements outside it", label, p0, p1, bad);
        float *gc = malloc(nr * row * 4), *gl = malloc(nr * (size_t)c->b * c->a * 4);
        float *rc = malloc(nr * row * 4), *rl = malloc(nr * (size_t)c->b * c->a * 4);
        gather_rows(gc, gl, hc, hl, c, p0, p1);
        gather_rows(rc, rl, cc, cl, c, p0, p1);
        double ec = rel_l2(gc, rc, nr * row), el = rel_l2(gl, rl, nr * (size_t)c->b * c->a);
        double tol = bf16 ? TOL_BF16 : TOL_F32, tol_lse = bf16 ? TOL_BF16_LSE : TOL_F32;
        printf("  %-34s [%d, %d) vs the CPU's rows: ctx rel L2 %.3g, lse %.3g\n", label, p0, p1, ec, el);
        CHECK(ec <= tol && el <= tol_lse, "%s [%d, %d): ctx %.3g (tolerance %.2g), lse %.3g (%.2g)", label, p0, p1, ec, tol,
              el, tol_lse);
        free(gc), free(gl), free(rc), free(rl), free(hc), free(hl), free(cc), free(cl), free(cscr);
        gpu->free(gpu, ctx), gpu->free(gpu, lse);
    }
    free(whole_ctx), free(whole_lse);
    gpu->free(gpu, q), gpu->free(gpu, k), gpu->free(gpu, v), gpu->free(gpu, scratch);
}

// A query range as the first call on a fresh backend (MEMO's first token range): the bf16 path's operand
// copies (CUDA_SCRATCH_FLASH) hold nothing yet — NaN bytes under the emulation — so the rows its tiles
// read past the range (K and V to the end of the last key tile) must have been packed too: 0 · NaN in
// P·V would reach every row. [0, 40) of s = 130, then the whole call: the same bits in those rows.
static void fresh_rows_case(Precision precision, const Case *c, const Ref *r) {
    Backend *gpu = cuda_or_skip(precision);
    int h = c->a * c->d, kv = kv_of(c), p1 = 40;
    char label[128];
    snprintf(label, sizeof label, "fresh rows %s s=%d [0, %d)", precision == PRECISION_BF16 ? "bf16" : "fp32", c->s, p1);
    DropoutSite site = site_of(c);
    size_t n = r->n, nl = r->nl, nr = (size_t)p1, row = (size_t)c->b * h;
    float *q = dev_upload(gpu, r->q, n * 4), *k = dev_upload(gpu, r->k, r->nk * 4), *v = dev_upload(gpu, r->v, r->nk * 4);
    float *scratch = dev_poisoned(gpu, gpu->attention_scratch_floats(gpu, ATTN_SCRATCH_FLASH, c->s, c->b, c->a, kv, h) * 4);
    float *ctx = dev_poisoned(gpu, n * 4), *lse = dev_poisoned(gpu, nl * 4);
    gpu->flash_attention_forward_rows(gpu, ctx, lse, q, k, v, scratch, c->s, 0, p1, c->b, c->a, kv, h, c->window,
                                      c->head0, site, c->sample0);
    float *hc = host_download(gpu, ctx, n * 4), *hl = host_download(gpu, lse, nl * 4);
    gpu->flash_attention_forward(gpu, ctx, lse, q, k, v, scratch, c->s, c->b, c->a, kv, h, c->window, c->head0, site,
                                 c->sample0);
    float *wc = host_download(gpu, ctx, n * 4), *wl = host_download(gpu, lse, nl * 4);
    float *gc = malloc(nr * row * 4), *gl = malloc(nr * (size_t)c->b * c->a * 4);
    float *rc = malloc(nr * row * 4), *rl = malloc(nr * (size_t)c->b * c->a * 4);
    gather_rows(gc, gl, hc, hl, c, 0, p1);
    gather_rows(rc, rl, wc, wl, c, 0, p1);
    int same = !memcmp(gc, rc, nr * row * 4) && !memcmp(gl, rl, nr * (size_t)c->b * c->a * 4);
    CHECK(same, "%s: the rows differ from the whole call's (ctx rel L2 %.3g)", label, rel_l2(gc, rc, nr * row));
    if (same) printf("  %-34s bitwise the whole call's rows\n", label);
    free(gc), free(gl), free(rc), free(rl), free(hc), free(hl), free(wc), free(wl);
    gpu->free(gpu, ctx), gpu->free(gpu, lse), gpu->free(gpu, q), gpu->free(gpu, k), gpu->free(gpu, v);
    gpu->free(gpu, scratch);
    backend_close(gpu);
}

// The bf16 operands given as kept copies (flash_attention_forward16 / _backward16, the model's path at bf16):
// bitwise the fp32-operand calls on the values the copies hold. The copies start on 16 bytes (cp.async) or
// 2 bytes past it (element loads); all of q, k, v given, or only some (the rest rounded from fp32 as before).
// The backward's O is the forward's ctx rounded to bf16, as the arena keeps it.
static uint16_t *dev_copy16(Backend *gpu, const float *src, size_t n, int misalign, void **base) {
    uint16_t *d = gpu->alloc(gpu, (n + 8) * sizeof(uint16_t));
    *base = d;
    gpu->bf16_pack(gpu, d + misalign, src, n);
    return d + misalign;
}

static void copies_case(Backend *gpu, const Case *c, const Ref *r, int misalign, int only_qv) {
    int h = c->a * c->d, kv = kv_of(c);
    char label[128];
    snprintf(label, sizeof label, "bf16 copies s=%d kv=%d d=%d w=%d%s%s", c->s, kv, c->d, c->window,
             misalign ? " unal" : "", only_qv ? " q,v,o" : "");
    DropoutSite site = site_of(c);
    size_t n = r->n, nk = r->nk, nl = r->nl;
    float *q = dev_upload(gpu, r->q, n * 4), *k = dev_upload(gpu, r->k, nk * 4), *v = dev_upload(gpu, r->v, nk * 4);
    float *g = dev_upload(gpu, r->g, n * 4);
    float *scratch = dev_poisoned(gpu, gpu->attention_scratch_floats(gpu, ATTN_SCRATCH_FLASH, c->s, c->b, c->a, kv, h) * 4);
    float *out[2][5];   // [plain, copies]: ctx, lse, dq, dk, dv
    for (int i = 0; i < 2; i++) {
        out[i][0] = dev_poisoned(gpu, n * 4), out[i][1] = dev_poisoned(gpu, nl * 4), out[i][2] = dev_poisoned(gpu, n * 4);
        out[i][3] = dev_poisoned(gpu, nk * 4), out[i][4] = dev_poisoned(gpu, nk * 4);
    }
    gpu->flash_attention_forward(gpu, out[0][0], out[0][1], q, k, v, scratch, c->s, c->b, c->a, kv, h, c->window,
                                 c->head0, site, c->sample0);
    void *b16[4];
    FlashIn16 in = {dev_copy16(gpu, q, n, misalign, &b16[0]), dev_copy16(gpu, k, nk, misalign, &b16[1]),
                    dev_copy16(gpu, v, nk, misalign, &b16[2]), NULL};
    if (only_qv) in.k = NULL;
    gpu->flash_attention_forward16(gpu, out[1][0], out[1][1], &in, q, k, v, scratch, c->s, 0, c->s, c->b, c->a, kv, h,
                                   c->window, c->head0, site, c->sample0);
    in.ctx = dev_copy16(gpu, out[0][0], n, misalign, &b16[3]);   // the kept O, and its fp32 values
    float *o = gpu->alloc(gpu, n * 4);
    gpu->bf16_unpack(gpu, o, in.ctx, n);
    gpu->flash_attention_backward(gpu, out[0][2], out[0][3], out[0][4], g, q, k, v, o, out[0][1], scratch, c->s, c->b,
                                  c->a, kv, h, c->window, c->head0, site, c->sample0);
    gpu->flash_attention_backward16(gpu, out[1][2], out[1][3], out[1][4], g, &in, only_qv ? NULL : q, k,
                                    only_qv ? NULL : v, NULL, out[1][1], scratch, c->s, c->b, c->a, kv, h, c->window,
                                    c->head0, site, c->sample0);
    const char *names[] = {"ctx", "lse", "dq", "dk", "dv"};
    for (int i = 0; i < 5; i++) {
        char what[192];
        snprintf(what, sizeof what, "%s %s against the fp32 operands' call", label, names[i]);
        size_t count = i == 1 ? nl : i >= 3 ? nk : n;
        float *want = host_download(gpu, out[0][i], count * 4);
        CHECK_BYTES_EQUAL(gpu, out[1][i], want, count * sizeof(float), what);
        free(want);
        gpu->free(gpu, out[0][i]), gpu->free(gpu, out[1][i]);
    }
    printf("  %-34s bitwise the fp32 operands' forward and backward\n", label);
    for (int i = 0; i < 4; i++) gpu->free(gpu, b16[i]);
    gpu->free(gpu, o), gpu->free(gpu, q), gpu->free(gpu, k), gpu->free(gpu, v), gpu->free(gpu, g);
    gpu->free(gpu, scratch);
}

// The bf16 forward with two query tiles a block and 32 rows a warp (CTRON_FLASH_FWD_ROWS=32): ctx and lse
// bitwise the default's (16 rows a warp), over the case's window and over the key-tile-skipping windows.
static void pairs_case(Backend *gpu16, Backend *pairs, const Case *c, const Ref *r) {
    int h = c->a * c->d, kv = kv_of(c);
    DropoutSite site = site_of(c);
    float *got[2][2];
    Backend *be[2] = {gpu16, pairs};
    for (int i = 0; i < 2; i++) {
        float *q = dev_upload(be[i], r->q, r->n * 4), *k = dev_upload(be[i], r->k, r->nk * 4);
        float *v = dev_upload(be[i], r->v, r->nk * 4);
        float *scratch = dev_poisoned(be[i], be[i]->attention_scratch_floats(be[i], ATTN_SCRATCH_FLASH, c->s, c->b, c->a,
                                                                               kv, h) * 4);
        float *ctx = dev_poisoned(be[i], r->n * 4), *lse = dev_poisoned(be[i], r->nl * 4);
        be[i]->flash_attention_forward(be[i], ctx, lse, q, k, v, scratch, c->s, c->b, c->a, kv, h, c->window, c->head0,
                                       site, c->sample0);
        got[i][0] = host_download(be[i], ctx, r->n * 4), got[i][1] = host_download(be[i], lse, r->nl * 4);
        float *bufs[] = {q, k, v, scratch, ctx, lse};
        for (size_t j = 0; j < sizeof bufs / sizeof *bufs; j++) be[i]->free(be[i], bufs[j]);
    }
    char what[160];
    snprintf(what, sizeof what, "32 rows a warp s=%d b=%d a=%d kv=%d d=%d p=%.1f w=%d: ctx", c->s, c->b, c->a, kv, c->d,
             (double)c->p, c->window);
    CHECK(!memcmp(got[0][0], got[1][0], r->n * 4), "%s differs from 16 rows a warp", what);
    CHECK(!memcmp(got[0][1], got[1][1], r->nl * 4), "%s (lse) differs from 16 rows a warp", what);
    for (int i = 0; i < 2; i++) free(got[i][0]), free(got[i][1]);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// The performance target's shape (s = 2048, d = 96, 8 heads), Llama 3 8B's (32 query heads on 8 kv
// heads, d = 128) and GPT-2 124M's: forward and backward timed, the bf16 operands' rounding included (printed,
// not asserted: a report for the run) and the backward's dq/dk/dv of the first and last of the
// timed runs compared bit for bit (determinism at many tiles).
// fwd_rows32: gpu was opened with CTRON_FLASH_FWD_ROWS=32 (the label says so).
static void time_case(Backend *gpu, int fwd_rows32, int s, int b, int a, int kv, int d, float p) {
    int h = a * d, reps = 5;
    size_t n = (size_t)s * b * h, nk = (size_t)s * b * kv * d, nl = (size_t)b * a * s;
    DropoutSite site = {philox_key_from_seed(99), 1, 0, SITE_ATTN, p};
    float *hq = host_random(n, -2.0f, 2.0f), *hg = host_random(n, -1.0f, 1.0f);
    float *q = dev_upload(gpu, hq, n * 4), *k = dev_upload(gpu, hq, nk * 4), *v = dev_upload(gpu, hg, nk * 4);
    float *g = dev_upload(gpu, hg, n * 4), *ctx = dev_poisoned(gpu, n * 4), *lse = dev_poisoned(gpu, nl * 4);
    float *dq = dev_poisoned(gpu, n * 4), *dk = dev_poisoned(gpu, nk * 4), *dv = dev_poisoned(gpu, nk * 4);
    float *scratch = dev_poisoned(gpu, gpu->attention_scratch_floats(gpu, ATTN_SCRATCH_FLASH, s, b, a, kv, h) * 4);
    float *first[3] = {NULL, NULL, NULL};
    double t_fwd = 0, t_bwd = 0;
    for (int rep = 0; rep <= reps; rep++) {   // rep 0 warms up
        double t0 = now_s();
        gpu->flash_attention_forward(gpu, ctx, lse, q, k, v, scratch, s, b, a, kv, h, 0, 0, site, 0);
        gpu->synchronize(gpu);
        double t1 = now_s();
        gpu->flash_attention_backward(gpu, dq, dk, dv, g, q, k, v, ctx, lse, scratch, s, b, a, kv, h, 0, 0, site, 0);
        gpu->synchronize(gpu);
        double t2 = now_s();
        if (rep) t_fwd += t1 - t0, t_bwd += t2 - t1;
        if (rep == 0) {
            first[0] = host_download(gpu, dq, n * 4), first[1] = host_download(gpu, dk, nk * 4);
            first[2] = host_download(gpu, dv, nk * 4);
        }
    }
    t_fwd /= reps, t_bwd /= reps;
    // causal: half of the s² scores; forward 2 GEMMs, backward 5 (this backward computes 7), 2·d flops each per score
    double fl = (double)s * s / 2 * b * a * 2.0 * d;
    const char *kind = gpu->precision != PRECISION_BF16 ? "fp32" : fwd_rows32 ? "bf16 fwd-rows-32" : "bf16";
    printf("  timing %s s=%d b=%d a=%d kv=%d d=%d p=%.1f: forward %.3f ms (%.1f TFLOP/s), backward %.3f ms (%.1f TFLOP/s "
           "counting 5 products)\n", kind, s, b, a, kv, d, (double)p,
           t_fwd * 1e3, 2 * fl / t_fwd * 1e-12, t_bwd * 1e3, 5 * fl / t_bwd * 1e-12);
    CHECK_BYTES_EQUAL(gpu, dq, first[0], n * 4, "timed dq, last run against the first");
    CHECK_BYTES_EQUAL(gpu, dk, first[1], nk * 4, "timed dk, last run against the first");
    CHECK_BYTES_EQUAL(gpu, dv, first[2], nk * 4, "timed dv, last run against the first");
    for (int i = 0; i < 3; i++) free(first[i]);
    float *bufs[] = {q, k, v, g, ctx, lse, dq, dk, dv, scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) gpu->free(gpu, bufs[i]);
    free(hq), free(hg);
}

int main(void) {
    Backend *gpu32 = cuda_or_skip(PRECISION_FP32);
    Backend *gpu16 = cuda_or_skip(PRECISION_BF16);
    char err[256] = "";
    Backend *cpu = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    CHECK(cpu != NULL, "cpu backend: %s", err);
    if (!cpu) return check_summary();
    static const Case cases[] = {
        {37, 3, 4, 12, 0.1f, 5, 9, 1, 0, 0},    // odd s, small d, misaligned inputs (scalar loads)
        {37, 3, 4, 12, 0.0f, 0, 0, 0, 0, 0},    // the same without dropout, vector loads
        {130, 2, 3, 64, 0.1f, 3, 17, 0, 0, 0},    // three tiles, the last of 2 rows
        {130, 2, 3, 64, 0.0f, 0, 0, 0, 0, 0},
        {45, 1, 2, 7, 0.1f, 1, 2, 0, 0, 0},     // d not a multiple of 4 (scalar loads, padded to 32)
        {200, 2, 2, 96, 0.1f, 6, 40, 0, 0, 0},    // d = 96 (the 22B per-rank head)
        {512, 2, 4, 128, 0.1f, 2, 5, 0, 0, 0},    // the larger one, d = 128
        // grouped-query attention: 2 and 3 query heads per kv head, multi-query with misaligned inputs
        {130, 2, 4, 64, 0.1f, 3, 17, 0, 2, 0},
        {70, 2, 6, 32, 0.0f, 0, 0, 0, 2, 0},
        {37, 3, 4, 12, 0.1f, 5, 9, 1, 1, 0},
        // sliding windows (the last field)
        {130, 2, 3, 64, 0.1f, 3, 17, 0, 0, 1},     // each query itself alone
        {130, 2, 3, 64, 0.0f, 0, 0, 0, 0, 5},      // key tile 0 left of query tile 2's window
        {130, 1, 2, 32, 0.1f, 3, 17, 0, 0, 2},     // a key tile's last key seen by the next tile's first query
        {130, 2, 4, 64, 0.1f, 3, 17, 0, 2, 64},    // rows 127.. see no key of tile 0; grouped-query
        {130, 2, 3, 64, 0.0f, 0, 0, 0, 0, 65},
        {70, 2, 6, 32, 0.1f, 0, 0, 0, 2, 69},      // s − 1, grouped-query
        {70, 2, 6, 32, 0.0f, 0, 0, 0, 2, 70},      // s: window 0's bits
        {37, 3, 4, 12, 0.1f, 5, 9, 1, 1, 5},       // misaligned, multi-query, d = 12 (padded to 32)
        {45, 1, 2, 7, 0.1f, 1, 2, 0, 0, 44},       // d not a multiple of 4
        {200, 2, 2, 96, 0.1f, 6, 40, 0, 0, 65},    // d = 96
        {200, 1, 2, 128, 0.0f, 0, 0, 0, 0, 100},   // d = 128
        {200, 1, 2, 128, 0.1f, 2, 5, 0, 0, 200},   // d = 128, window s
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cuda_test_small_only(cases[i].s)) continue;
        Ref r = cpu_reference(cpu, &cases[i]);
        run_case(gpu32, &cases[i], &r);
        run_case(gpu16, &cases[i], &r);
        ref_free(&r);
    }
    static const Case rows[] = {{130, 2, 3, 64, 0.1f, 3, 17, 0, 0, 0}, {200, 2, 4, 32, 0.1f, 6, 40, 0, 2, 0},
                                {37, 3, 4, 12, 0.0f, 0, 0, 0, 0, 0},
                                // windows: rows after 64 start past key tile 0 (5), or in it (65)
                                {200, 2, 4, 32, 0.1f, 6, 40, 0, 2, 5}, {130, 2, 3, 64, 0.0f, 0, 0, 0, 0, 65}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        Ref r = cpu_reference(cpu, &rows[i]);
        CHECK(gpu32->flash_attention_forward_rows && gpu16->flash_attention_forward_rows, "no flash_attention_forward_rows");
        rows_case(gpu32, cpu, &rows[i], &r);
        rows_case(gpu16, cpu, &rows[i], &r);
        ref_free(&r);
    }
    {
        static const Case fresh = {130, 2, 4, 64, 0.1f, 3, 17, 0, 2, 0};
        Ref r = cpu_reference(cpu, &fresh);
        fresh_rows_case(PRECISION_BF16, &fresh, &r);
        fresh_rows_case(PRECISION_FP32, &fresh, &r);
        ref_free(&r);
    }
    CHECK(!gpu32->flash_attention_forward16 && !gpu32->flash_attention_backward16 && !cpu->flash_attention_forward16,
          "flash on bf16 copies offered where flash reads fp32 operands (the CUDA backend at fp32, the CPU)");
    CHECK(gpu16->flash_attention_forward16 && gpu16->flash_attention_backward16, "no flash on bf16 copies at bf16");
    static const Case copies[] = {{130, 2, 4, 64, 0.1f, 3, 17, 0, 2, 0}, {200, 1, 2, 128, 0.1f, 2, 5, 0, 0, 100},
                                  {37, 3, 4, 12, 0.1f, 5, 9, 0, 1, 5}, {70, 2, 6, 32, 0.0f, 0, 0, 0, 2, 0}};
    for (size_t i = 0; gpu16->flash_attention_forward16 && i < sizeof copies / sizeof *copies; i++) {
        Ref r = cpu_reference(cpu, &copies[i]);
        copies_case(gpu16, &copies[i], &r, 0, 0);
        copies_case(gpu16, &copies[i], &r, 1, i == 0);
        copies_case(gpu16, &copies[i], &r, 0, 1);
        ref_free(&r);
    }
    // 32 rows a warp: the same bits for every forward case, and its ranges (a block of one tile) the whole call's
    setenv("CTRON_FLASH_FWD_ROWS", "32", 1);
    Backend *pairs = cuda_or_skip(PRECISION_BF16);
    unsetenv("CTRON_FLASH_FWD_ROWS");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cuda_test_small_only(cases[i].s)) continue;
        Ref r = cpu_reference(cpu, &cases[i]);
        pairs_case(gpu16, pairs, &cases[i], &r);
        ref_free(&r);
    }
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        Ref r = cpu_reference(cpu, &rows[i]);
        rows_case(pairs, cpu, &rows[i], &r);
        ref_free(&r);
    }
    if (cuda_test_timed()) {
        time_case(gpu16, 0, 2048, 4, 8, 8, 96, 0.1f);
        time_case(gpu16, 0, 2048, 4, 8, 8, 96, 0.0f);
        time_case(gpu16, 0, 2048, 2, 32, 8, 128, 0.0f);   // Llama 3 8B's attention (lora-8b-2l's)
        time_case(gpu16, 0, 1024, 16, 12, 12, 64, 0.0f);   // GPT-2 124M's
        time_case(gpu32, 0, 2048, 4, 8, 8, 96, 0.1f);
        time_case(pairs, 1, 2048, 2, 32, 8, 128, 0.0f);
        time_case(pairs, 1, 1024, 16, 12, 12, 64, 0.0f);
    } else {
        printf("  timed cases left out: the emulated GPU shows no speed, or CT_CUDA_TEST_SMALL is set\n");
    }
    backend_close(cpu);
    backend_close(pairs);
    backend_close(gpu16);
    backend_close(gpu32);
    return check_summary();
}
