// The CUDA backend's LayerNorm, GeLU (every form), dropout, storage formats and embeddings against the
// CPU backend, from the same inputs. Elementwise kernels that use the CPU's formulas (GeLU through
// the shared ctron_tanhf, dropout, bf16, masks, embeddings and their gradients, whose sums run in the
// CPU's row order) must give the CPU's bits; LayerNorm's row and column sums run in another order, so
// its outputs are compared within 1e-5 relative L2. Sizes are odd (37 rows, 45/70 columns, counts
// not multiples of 8 or 32), with one larger case each, vector (h % 4 == 0) and scalar paths, and
// misaligned views. Every GPU output is poisoned first, and each op run twice gives the same bits.
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/dropout.h"
#include "backend/cpu/gelu_fewbit.h"
#include "check.h"
#include "cuda_check.h"

static Backend *cpu, *gpu;

// Tolerance of the LayerNorm comparisons: the GPU sums a row as a tree and dw/db in row chunks, the
// CPU in SIMD lanes and rows in order; both are fp32 sums whose rounding differs by ~1e-7 per row and
// ~3e-6 for the 5000-row column sums (simulated on the host), well inside 1e-5.
#define LN_TOL 1e-5

static float *fdup(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}
// Download two device buffers and require the same bytes (the determinism checks).
static void check_same_dev(const void *a, const void *b, size_t bytes, const char *what) {
    uint8_t *ha = host_download(gpu, a, bytes), *hb = host_download(gpu, b, bytes);
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i++) bad += ha[i] != hb[i];
    CHECK(bad == 0, "%s: a second run differs in %zu of %zu bytes", what, bad, bytes);
    free(ha);
    free(hb);
}
static uint32_t rng_u32(void) {
    cuda_test_rng = cuda_test_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(cuda_test_rng >> 32);
}

// ---- LayerNorm

// Forward at n×h; `off` floats of offset on every tensor (off = 1 with h % 4 == 0: the scalar path).
static void test_layernorm_forward(int n, int h, int off) {
    char what[96];
    size_t nh = (size_t)n * h;
    float *x = host_random(nh + off, -2.0f, 3.0f), *w = host_random(h + off, 0.5f, 1.5f), *b = host_random(h + off, -0.5f, 0.5f);
    float *y = malloc((nh + off) * sizeof(float)), *st = malloc((2 * (size_t)n + off) * sizeof(float));
    cpu->layernorm_forward(cpu, y + off, st + off, x + off, w + off, b + off, n, h);

    float *dx_ = dev_upload(gpu, x, (nh + off) * sizeof(float)), *dw_ = dev_upload(gpu, w, (h + off) * sizeof(float));
    float *db_ = dev_upload(gpu, b, (h + off) * sizeof(float));
    float *dy = dev_poisoned(gpu, (nh + off) * sizeof(float)), *dst = dev_poisoned(gpu, (2 * (size_t)n + off) * sizeof(float));
    float *dy2 = dev_poisoned(gpu, (nh + off) * sizeof(float)), *dst2 = dev_poisoned(gpu, (2 * (size_t)n + off) * sizeof(float));
    gpu->layernorm_forward(gpu, dy + off, dst + off, dx_ + off, dw_ + off, db_ + off, n, h);
    gpu->layernorm_forward(gpu, dy2 + off, dst2 + off, dx_ + off, dw_ + off, db_ + off, n, h);
    snprintf(what, sizeof what, "layernorm_forward y n=%d h=%d off=%d", n, h, off);
    CHECK_CLOSE(gpu, dy + off, y + off, nh, LN_TOL, what);
    snprintf(what, sizeof what, "layernorm_forward stats n=%d h=%d off=%d", n, h, off);
    CHECK_CLOSE(gpu, dst + off, st + off, 2 * (size_t)n, LN_TOL, what);
    snprintf(what, sizeof what, "layernorm_forward twice n=%d h=%d", n, h);
    check_same_dev(dy, dy2, (nh + off) * sizeof(float), what);
    check_same_dev(dst, dst2, (2 * (size_t)n + off) * sizeof(float), what);
    gpu->free(gpu, dx_); gpu->free(gpu, dw_); gpu->free(gpu, db_); gpu->free(gpu, dy); gpu->free(gpu, dst);
    gpu->free(gpu, dy2); gpu->free(gpu, dst2);
    free(x); free(w); free(b); free(y); free(st);
}

// Backward (from_output: Tempo's form from y) at n×h with accumulate 0/1: dx, dw, db.
static void test_layernorm_backward(int n, int h, int from_output, int accumulate) {
    char what[128];
    size_t nh = (size_t)n * h;
    float *x = host_random(nh, -2.0f, 3.0f), *w = host_random(h, 0.5f, 1.5f), *b = host_random(h, -0.5f, 0.5f);
    float *y = malloc(nh * sizeof(float)), *st = malloc(2 * (size_t)n * sizeof(float));
    cpu->layernorm_forward(cpu, y, st, x, w, b, n, h);
    float *dy = host_random(nh, -1.0f, 1.0f), *dx0 = host_random(nh, -1.0f, 1.0f);
    float *dw0 = host_random(h, -1.0f, 1.0f), *db0 = host_random(h, -1.0f, 1.0f);
    float *dx = fdup(dx0, nh), *dw = fdup(dw0, h), *db = fdup(db0, h);
    const float *in = from_output ? y : x;
    if (from_output) cpu->layernorm_backward_from_output(cpu, dx, accumulate, dw, db, dy, y, st, w, b, n, h);
    else cpu->layernorm_backward(cpu, dx, accumulate, dw, db, dy, x, st, w, n, h);

    float *g_in = dev_upload(gpu, in, nh * sizeof(float)), *g_st = dev_upload(gpu, st, 2 * (size_t)n * sizeof(float));
    float *g_w = dev_upload(gpu, w, h * sizeof(float)), *g_b = dev_upload(gpu, b, h * sizeof(float));
    float *g_dy = dev_upload(gpu, dy, nh * sizeof(float));
    float *out[2][3];   // two runs: dx, dw, db
    for (int run = 0; run < 2; run++) {
        out[run][0] = accumulate ? dev_upload(gpu, dx0, nh * sizeof(float)) : dev_poisoned(gpu, nh * sizeof(float));
        out[run][1] = dev_upload(gpu, dw0, h * sizeof(float));
        out[run][2] = dev_upload(gpu, db0, h * sizeof(float));
        if (from_output)
            gpu->layernorm_backward_from_output(gpu, out[run][0], accumulate, out[run][1], out[run][2], g_dy, g_in, g_st, g_w,
                                                g_b, n, h);
        else
            gpu->layernorm_backward(gpu, out[run][0], accumulate, out[run][1], out[run][2], g_dy, g_in, g_st, g_w, n, h);
    }
    const char *name = from_output ? "layernorm_backward_from_output" : "layernorm_backward";
    snprintf(what, sizeof what, "%s dx n=%d h=%d acc=%d", name, n, h, accumulate);
    CHECK_CLOSE(gpu, out[0][0], dx, nh, LN_TOL, what);
    snprintf(what, sizeof what, "%s dw n=%d h=%d acc=%d", name, n, h, accumulate);
    CHECK_CLOSE(gpu, out[0][1], dw, (size_t)h, LN_TOL, what);
    snprintf(what, sizeof what, "%s db n=%d h=%d acc=%d", name, n, h, accumulate);
    CHECK_CLOSE(gpu, out[0][2], db, (size_t)h, LN_TOL, what);
    snprintf(what, sizeof what, "%s twice n=%d h=%d acc=%d", name, n, h, accumulate);
    check_same_dev(out[0][0], out[1][0], nh * sizeof(float), what);
    check_same_dev(out[0][1], out[1][1], h * sizeof(float), what);
    check_same_dev(out[0][2], out[1][2], h * sizeof(float), what);
    for (int run = 0; run < 2; run++)
        for (int k = 0; k < 3; k++) gpu->free(gpu, out[run][k]);
    gpu->free(gpu, g_in); gpu->free(gpu, g_st); gpu->free(gpu, g_w); gpu->free(gpu, g_b); gpu->free(gpu, g_dy);
    free(x); free(w); free(b); free(y); free(st); free(dy); free(dx0); free(dw0); free(db0); free(dx); free(dw); free(db);
}

// ---- GeLU

// GeLU inputs over the interesting range, with both sides of x_min, the far tails and exact zeros.
static float *gelu_inputs(size_t n) {
    float *x = host_random(n, -7.0f, 7.0f);
    static const float special[] = {0.0f, -0.0f, -0.75246141f, -12.0f, -13.0f, 20.0f, -20.0f, 1e-20f, -1e-20f, 3.0f};
    for (size_t i = 0; i < n && i < sizeof special / sizeof special[0]; i++) x[i * 7 % n] = special[i];
    return x;
}

static void test_bias_gelu(int n, int cols, int round_bf16) {
    char what[96];
    size_t total = (size_t)n * cols;
    float *x = gelu_inputs(total), *bias = host_random(cols, -1.0f, 1.0f);
    float *xc = fdup(x, total), *yc = malloc(total * sizeof(float));
    cpu->bias_gelu_forward(cpu, yc, xc, bias, n, cols, round_bf16);
    float *gb = dev_upload(gpu, bias, cols * sizeof(float));
    float *gx[2], *gy[2];
    for (int run = 0; run < 2; run++) {
        gx[run] = dev_upload(gpu, x, total * sizeof(float));
        gy[run] = dev_poisoned(gpu, total * sizeof(float));
        gpu->bias_gelu_forward(gpu, gy[run], gx[run], gb, n, cols, round_bf16);
    }
    snprintf(what, sizeof what, "bias_gelu_forward x n=%d cols=%d bf16=%d", n, cols, round_bf16);
    CHECK_BYTES_EQUAL(gpu, gx[0], xc, total * sizeof(float), what);
    snprintf(what, sizeof what, "bias_gelu_forward y n=%d cols=%d bf16=%d", n, cols, round_bf16);
    CHECK_BYTES_EQUAL(gpu, gy[0], yc, total * sizeof(float), what);
    check_same_dev(gy[0], gy[1], total * sizeof(float), what);
    for (int run = 0; run < 2; run++) { gpu->free(gpu, gx[run]); gpu->free(gpu, gy[run]); }
    gpu->free(gpu, gb);
    free(x); free(bias); free(xc); free(yc);
}

// gelu_forward and gelu_backward (separate and in place) on count elements starting `off` floats in.
static void test_gelu_elementwise(size_t count, int off) {
    char what[96];
    size_t all = count + off;
    float *x = gelu_inputs(all), *dy = host_random(all, -2.0f, 2.0f);
    float *y = malloc(all * sizeof(float)), *dx = malloc(all * sizeof(float));
    cpu->gelu_forward(cpu, y + off, x + off, count);
    cpu->gelu_backward(cpu, dx + off, dy + off, x + off, count);

    float *gx = dev_upload(gpu, x, all * sizeof(float)), *gdy = dev_upload(gpu, dy, all * sizeof(float));
    float *gy = dev_poisoned(gpu, all * sizeof(float)), *gy2 = dev_poisoned(gpu, all * sizeof(float));
    float *gdx = dev_poisoned(gpu, all * sizeof(float));
    gpu->gelu_forward(gpu, gy + off, gx + off, count);
    gpu->gelu_forward(gpu, gy2 + off, gx + off, count);
    snprintf(what, sizeof what, "gelu_forward count=%zu off=%d", count, off);
    CHECK_BYTES_EQUAL(gpu, gy + off, y + off, count * sizeof(float), what);
    check_same_dev(gy, gy2, all * sizeof(float), what);
    gpu->gelu_backward(gpu, gdx + off, gdy + off, gx + off, count);
    snprintf(what, sizeof what, "gelu_backward count=%zu off=%d", count, off);
    CHECK_BYTES_EQUAL(gpu, gdx + off, dx + off, count * sizeof(float), what);
    gpu->gelu_backward(gpu, gdy + off, gdy + off, gx + off, count);   // dx aliasing dy, as the model calls it
    snprintf(what, sizeof what, "gelu_backward in place count=%zu off=%d", count, off);
    CHECK_BYTES_EQUAL(gpu, gdy + off, dx + off, count * sizeof(float), what);
    gpu->free(gpu, gx); gpu->free(gpu, gdy); gpu->free(gpu, gy); gpu->free(gpu, gy2); gpu->free(gpu, gdx);
    free(x); free(dy); free(y); free(dx);
}

// Tempo's GeLU: the branch bits (bitwise) and the backward from the output and the bits.
static void test_gelu_tempo(size_t count) {
    char what[96];
    size_t nbytes = (count + 7) / 8;
    float *x = gelu_inputs(count), *dy = host_random(count, -2.0f, 2.0f);
    float *y = malloc(count * sizeof(float)), *dx = malloc(count * sizeof(float));
    uint8_t *bits = malloc(nbytes);
    cpu->gelu_forward(cpu, y, x, count);
    cpu->gelu_branch_pack(cpu, bits, x, count);
    cpu->gelu_backward_from_output(cpu, dx, dy, y, bits, count);

    float *gx = dev_upload(gpu, x, count * sizeof(float)), *gy = dev_upload(gpu, y, count * sizeof(float));
    float *gdy = dev_upload(gpu, dy, count * sizeof(float));
    uint8_t *gbits = dev_poisoned(gpu, nbytes), *gbits2 = dev_poisoned(gpu, nbytes);
    gpu->gelu_branch_pack(gpu, gbits, gx, count);
    gpu->gelu_branch_pack(gpu, gbits2, gx, count);
    snprintf(what, sizeof what, "gelu_branch_pack count=%zu", count);
    CHECK_BYTES_EQUAL(gpu, gbits, bits, nbytes, what);
    check_same_dev(gbits, gbits2, nbytes, what);

    // From the CPU's bits, so that the backward is compared on the same inputs.
    uint8_t *gcb = dev_upload(gpu, bits, nbytes);
    float *gdx = dev_poisoned(gpu, count * sizeof(float)), *gdx2 = dev_poisoned(gpu, count * sizeof(float));
    gpu->gelu_backward_from_output(gpu, gdx, gdy, gy, gcb, count);
    gpu->gelu_backward_from_output(gpu, gdx2, gdy, gy, gcb, count);
    // The same Newton steps as the CPU: bitwise but for the ~1 % that take the fallback, whose start
    // uses libm's logf on the CPU (a double log rounded to float on the GPU: the two may differ by an
    // ulp, and the settled x with it). 1e-5 relative L2 overall, and at least 99 % identical.
    snprintf(what, sizeof what, "gelu_backward_from_output count=%zu", count);
    CHECK_CLOSE(gpu, gdx, dx, count, 1e-5, what);
    float *got = host_download(gpu, gdx, count * sizeof(float));
    size_t differ = 0;
    for (size_t i = 0; i < count; i++) differ += memcmp(&got[i], &dx[i], sizeof(float)) != 0;
    CHECK(differ * 100 <= count, "%s: %zu of %zu elements not bitwise the CPU's (at most 1 %% allowed)", what, differ,
          count);
    check_same_dev(gdx, gdx2, count * sizeof(float), what);
    // in place (dx aliasing dy), as the model calls it
    gpu->gelu_backward_from_output(gpu, gdy, gdy, gy, gcb, count);
    snprintf(what, sizeof what, "gelu_backward_from_output in place count=%zu", count);
    check_same_dev(gdy, gdx, count * sizeof(float), what);
    free(got);
    gpu->free(gpu, gx); gpu->free(gpu, gy); gpu->free(gpu, gdy); gpu->free(gpu, gbits); gpu->free(gpu, gbits2);
    gpu->free(gpu, gcb); gpu->free(gpu, gdx); gpu->free(gpu, gdx2);
    free(x); free(dy); free(y); free(dx); free(bits);
}

// Few-Bit GeLU at k bits: the codes (bitwise) and the backward from them (bitwise).
static void test_fewbit(int k, size_t count) {
    char what[96];
    const FewBitGelu *t = fewbit_gelu_table(k);
    size_t nbytes = (count * (size_t)k + 7) / 8;
    float *x = host_random(count, -4.0f, 4.0f), *dy = host_random(count, -2.0f, 2.0f);
    for (int j = 0; j < t->levels - 1 && (size_t)j < count; j++) x[(size_t)j * 5 % count] = t->bound[j];   // on a bound
    uint8_t *codes = malloc(nbytes);
    float *dx = malloc(count * sizeof(float));
    cpu->fewbit_gelu_encode(cpu, codes, x, count, t);
    cpu->fewbit_gelu_backward(cpu, dx, dy, codes, count, t);

    float *gx = dev_upload(gpu, x, count * sizeof(float)), *gdy = dev_upload(gpu, dy, count * sizeof(float));
    uint8_t *gc = dev_poisoned(gpu, nbytes), *gc2 = dev_poisoned(gpu, nbytes);
    gpu->fewbit_gelu_encode(gpu, gc, gx, count, t);
    gpu->fewbit_gelu_encode(gpu, gc2, gx, count, t);
    snprintf(what, sizeof what, "fewbit_gelu_encode k=%d count=%zu", k, count);
    CHECK_BYTES_EQUAL(gpu, gc, codes, nbytes, what);
    check_same_dev(gc, gc2, nbytes, what);
    float *gdx = dev_poisoned(gpu, count * sizeof(float));
    gpu->fewbit_gelu_backward(gpu, gdx, gdy, gc, count, t);
    snprintf(what, sizeof what, "fewbit_gelu_backward k=%d count=%zu", k, count);
    CHECK_BYTES_EQUAL(gpu, gdx, dx, count * sizeof(float), what);
    gpu->fewbit_gelu_backward(gpu, gdy, gdy, gc, count, t);   // in place
    snprintf(what, sizeof what, "fewbit_gelu_backward in place k=%d count=%zu", k, count);
    CHECK_BYTES_EQUAL(gpu, gdy, dx, count * sizeof(float), what);
    gpu->free(gpu, gx); gpu->free(gpu, gdy); gpu->free(gpu, gc); gpu->free(gpu, gc2); gpu->free(gpu, gdx);
    free(x); free(dy); free(codes); free(dx);
}

// ---- dropout

static void test_dropout_mask(int s0, int s, int b, int w, uint32_t sample0, float p) {
    char what[128];
    size_t n = (size_t)s * b * w;
    DropoutSite site = {philox_key_from_seed(0x5EEDull + (uint64_t)w), 17, 5, SITE_DROP2, p};
    uint8_t *keep = malloc(n);
    cpu->dropout_mask_sbw(cpu, keep, site, s0, s, b, w, sample0);
    uint8_t *g = dev_poisoned(gpu, n), *g2 = dev_poisoned(gpu, n);
    gpu->dropout_mask_sbw(gpu, g, site, s0, s, b, w, sample0);
    gpu->dropout_mask_sbw(gpu, g2, site, s0, s, b, w, sample0);
    snprintf(what, sizeof what, "dropout_mask_sbw s0=%d s=%d b=%d w=%d sample0=%u p=%g", s0, s, b, w, sample0, (double)p);
    CHECK_BYTES_EQUAL(gpu, g, keep, n, what);
    check_same_dev(g, g2, n, what);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) kept += keep[i];
    CHECK(p > 0.0f ? kept < n && kept > 0 : kept == n, "%s: %zu of %zu kept", what, kept, n);
    gpu->free(gpu, g); gpu->free(gpu, g2);
    free(keep);
}

// dropout_mask_cols (--lora-dropout): columns c0 .. c0+w−1 of rows [r0, r0+rows) of an [s, b, W] mask (rows
// si·b + bi; mini-seq's chunks start mid-sequence and mid-batch); the CPU's equals that block of its whole
// mask (dropout_mask_sbw at width W), the GPU's the CPU's, and the GPU writes no byte past [rows, w].
static void test_dropout_mask_cols(int s, int b, int r0, int rows, int w, int W, int c0, uint32_t sample0, float p) {
    char what[160];
    size_t n = (size_t)rows * w, nW = (size_t)s * b * W;
    DropoutSite site = {philox_key_from_seed(0xD20Full + (uint64_t)W), 9, 3, SITE_LORA + 2, p};
    uint8_t *whole = malloc(nW), *keep = malloc(n), *slice = malloc(n), *back = malloc(n + 64);
    cpu->dropout_mask_sbw(cpu, whole, site, 0, s, b, W, sample0);
    cpu->dropout_mask_cols(cpu, keep, site, r0, rows, b, w, W, c0, sample0);
    for (size_t r = 0; r < (size_t)rows; r++) memcpy(slice + r * w, whole + (r0 + r) * W + c0, (size_t)w);
    snprintf(what, sizeof what, "dropout_mask_cols s=%d b=%d rows [%d, %d) w=%d W=%d c0=%d p=%g", s, b, r0, r0 + rows,
             w, W, c0, (double)p);
    CHECK(memcmp(keep, slice, n) == 0, "%s (CPU) is not its block of dropout_mask_sbw's mask", what);
    uint8_t *g = dev_poisoned(gpu, n + 64);
    gpu->dropout_mask_cols(gpu, g, site, r0, rows, b, w, W, c0, sample0);
    CHECK_BYTES_EQUAL(gpu, g, keep, n, what);
    gpu->copy(gpu, back, g, n + 64, COPY_D2H);
    size_t past = 0;   // the 64 bytes after the block keep dev_poisoned's 0xFF
    for (size_t i = n; i < n + 64; i++) past += back[i] != 0xFF;
    CHECK(past == 0, "%s: the GPU wrote %zu bytes past its [rows, w]", what, past);
    gpu->free(gpu, g);
    free(whole), free(keep), free(slice), free(back);
}

static uint8_t *random_keep(size_t n, float p) {
    uint8_t *k = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) k[i] = cuda_test_uniform(0.0f, 1.0f) >= p;
    return k;
}

// dropout_residual_forward at n×w with keep and/or bias NULL; in place (out = res) too.
static void test_dropout_residual(int n, int w, int with_keep, int with_bias) {
    char what[128];
    size_t nw = (size_t)n * w;
    float p = with_keep ? 0.3f : 0.0f;
    float *res = host_random(nw, -2.0f, 2.0f), *y = host_random(nw, -2.0f, 2.0f), *bias = host_random(w, -1.0f, 1.0f);
    uint8_t *keep = random_keep(nw, p);
    float *out = malloc(nw * sizeof(float));
    cpu->dropout_residual_forward(cpu, out, res, y, with_bias ? bias : NULL, with_keep ? keep : NULL, p, n, w);

    float *gres = dev_upload(gpu, res, nw * sizeof(float)), *gy = dev_upload(gpu, y, nw * sizeof(float));
    float *gb = dev_upload(gpu, bias, w * sizeof(float));
    uint8_t *gk = dev_upload(gpu, keep, nw);
    float *gout = dev_poisoned(gpu, nw * sizeof(float)), *gout2 = dev_poisoned(gpu, nw * sizeof(float));
    gpu->dropout_residual_forward(gpu, gout, gres, gy, with_bias ? gb : NULL, with_keep ? gk : NULL, p, n, w);
    gpu->dropout_residual_forward(gpu, gout2, gres, gy, with_bias ? gb : NULL, with_keep ? gk : NULL, p, n, w);
    snprintf(what, sizeof what, "dropout_residual_forward n=%d w=%d keep=%d bias=%d", n, w, with_keep, with_bias);
    CHECK_BYTES_EQUAL(gpu, gout, out, nw * sizeof(float), what);
    check_same_dev(gout, gout2, nw * sizeof(float), what);
    gpu->dropout_residual_forward(gpu, gres, gres, gy, with_bias ? gb : NULL, with_keep ? gk : NULL, p, n, w);
    snprintf(what, sizeof what, "dropout_residual_forward in place n=%d w=%d keep=%d bias=%d", n, w, with_keep, with_bias);
    CHECK_BYTES_EQUAL(gpu, gres, out, nw * sizeof(float), what);
    gpu->free(gpu, gres); gpu->free(gpu, gy); gpu->free(gpu, gb); gpu->free(gpu, gk); gpu->free(gpu, gout);
    gpu->free(gpu, gout2);
    free(res); free(y); free(bias); free(keep); free(out);
}

// dropout_residual_inverse (reversible blocks): bitwise the CPU's, in place (out = res) too, and it undoes
// dropout_residual_forward to rounding.
static void test_dropout_residual_inverse(int n, int w, int with_keep, int with_bias) {
    char what[128];
    size_t nw = (size_t)n * w;
    float p = with_keep ? 0.3f : 0.0f;
    float *res = host_random(nw, -2.0f, 2.0f), *y = host_random(nw, -2.0f, 2.0f), *bias = host_random(w, -1.0f, 1.0f);
    uint8_t *keep = random_keep(nw, p);
    const float *b = with_bias ? bias : NULL;
    const uint8_t *k = with_keep ? keep : NULL;
    float *fwd = malloc(nw * sizeof(float)), *out = malloc(nw * sizeof(float));
    cpu->dropout_residual_forward(cpu, fwd, res, y, b, k, p, n, w);
    cpu->dropout_residual_inverse(cpu, out, fwd, y, b, k, p, n, w);
    double worst = 0.0;
    for (size_t i = 0; i < nw; i++) worst = fmax(worst, fabs((double)out[i] - (double)res[i]));
    snprintf(what, sizeof what, "dropout_residual_inverse n=%d w=%d keep=%d bias=%d undoes the forward", n, w,
             with_keep, with_bias);
    CHECK(worst <= 2e-6, "%s: %.3g off the residual", what, worst);

    float *gfwd = dev_upload(gpu, fwd, nw * sizeof(float)), *gy = dev_upload(gpu, y, nw * sizeof(float));
    float *gb = dev_upload(gpu, bias, w * sizeof(float));
    uint8_t *gk = dev_upload(gpu, keep, nw);
    float *gout = dev_poisoned(gpu, nw * sizeof(float));
    gpu->dropout_residual_inverse(gpu, gout, gfwd, gy, with_bias ? gb : NULL, with_keep ? gk : NULL, p, n, w);
    snprintf(what, sizeof what, "dropout_residual_inverse n=%d w=%d keep=%d bias=%d", n, w, with_keep, with_bias);
    CHECK_BYTES_EQUAL(gpu, gout, out, nw * sizeof(float), what);
    gpu->dropout_residual_inverse(gpu, gfwd, gfwd, gy, with_bias ? gb : NULL, with_keep ? gk : NULL, p, n, w);
    snprintf(what, sizeof what, "dropout_residual_inverse in place n=%d w=%d keep=%d bias=%d", n, w, with_keep,
             with_bias);
    CHECK_BYTES_EQUAL(gpu, gfwd, out, nw * sizeof(float), what);
    gpu->free(gpu, gfwd); gpu->free(gpu, gy); gpu->free(gpu, gb); gpu->free(gpu, gk); gpu->free(gpu, gout);
    free(res); free(y); free(bias); free(keep); free(fwd); free(out);
}

// dropout_apply (in place) and dropout_backward on count elements `off` in (off = 1: the scalar path).
static void test_dropout_scale(size_t count, int off) {
    char what[96];
    size_t all = count + off;
    float p = 0.15f;
    float *x = host_random(all, -3.0f, 3.0f);
    uint8_t *keep = random_keep(all, p);
    float *xa = fdup(x, all), *dy = malloc(all * sizeof(float));
    cpu->dropout_apply(cpu, xa + off, keep + off, p, count);
    cpu->dropout_backward(cpu, dy + off, x + off, keep + off, p, count);

    float *gx = dev_upload(gpu, x, all * sizeof(float)), *gx2 = dev_upload(gpu, x, all * sizeof(float));
    uint8_t *gk = dev_upload(gpu, keep, all);
    gpu->dropout_apply(gpu, gx + off, gk + off, p, count);
    gpu->dropout_apply(gpu, gx2 + off, gk + off, p, count);
    snprintf(what, sizeof what, "dropout_apply count=%zu off=%d", count, off);
    CHECK_BYTES_EQUAL(gpu, gx + off, xa + off, count * sizeof(float), what);
    check_same_dev(gx, gx2, all * sizeof(float), what);
    float *gsrc = dev_upload(gpu, x, all * sizeof(float)), *gdy = dev_poisoned(gpu, all * sizeof(float));
    gpu->dropout_backward(gpu, gdy + off, gsrc + off, gk + off, p, count);
    snprintf(what, sizeof what, "dropout_backward count=%zu off=%d", count, off);
    CHECK_BYTES_EQUAL(gpu, gdy + off, dy + off, count * sizeof(float), what);
    gpu->free(gpu, gx); gpu->free(gpu, gx2); gpu->free(gpu, gk); gpu->free(gpu, gsrc); gpu->free(gpu, gdy);
    free(x); free(keep); free(xa); free(dy);
}

// ---- storage formats

// fp32 bit patterns that bf16 rounding must get right: NaNs (quiet, signalling, both signs, payloads
// that rounding would carry into the exponent), infinities, the largest finite (rounds to inf),
// denormals, ties to even, zeros; then random patterns and ordinary values.
static float *bf16_inputs(size_t n) {
    static const uint32_t special[] = {
        0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FBFFFFFu, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F80FFFFu,
        0x7F800000u, 0xFF800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x00000001u, 0x80000001u,
        0x007FFFFFu, 0x807FFFFFu, 0x00008000u, 0x00018000u, 0x00007FFFu, 0x3F808000u, 0x3F818000u, 0x3F808001u,
        0x3F807FFFu, 0x00000000u, 0x80000000u, 0x3F800000u, 0xBF800000u, 0x00800000u, 0x007F8000u, 0x4049FDB0u};
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        uint32_t u = i < sizeof special / sizeof special[0] ? special[i] : (i % 3 == 0 ? rng_u32() : 0u);
        if (i >= sizeof special / sizeof special[0] && i % 3 != 0) {
            float v = cuda_test_uniform(-100.0f, 100.0f);
            memcpy(&u, &v, sizeof u);
        }
        memcpy(&x[i], &u, sizeof u);
    }
    return x;
}

static void test_bf16(size_t count, int off) {
    char what[96];
    size_t all = count + off;
    float *x = bf16_inputs(all);
    float *xr = fdup(x, all);
    uint16_t *packed = malloc(all * sizeof(uint16_t));
    cpu->bf16_round(cpu, xr + off, count);
    cpu->bf16_pack(cpu, packed + off, x + off, count);

    float *gx = dev_upload(gpu, x, all * sizeof(float)), *gx2 = dev_upload(gpu, x, all * sizeof(float));
    gpu->bf16_round(gpu, gx + off, count);
    gpu->bf16_round(gpu, gx2 + off, count);
    snprintf(what, sizeof what, "bf16_round count=%zu off=%d", count, off);
    CHECK_BYTES_EQUAL(gpu, gx + off, xr + off, count * sizeof(float), what);
    check_same_dev(gx, gx2, all * sizeof(float), what);
    float *gsrc = dev_upload(gpu, x, all * sizeof(float));
    uint16_t *gp = dev_poisoned(gpu, all * sizeof(uint16_t));
    gpu->bf16_pack(gpu, gp + off, gsrc + off, count);
    snprintf(what, sizeof what, "bf16_pack count=%zu off=%d", count, off);
    CHECK_BYTES_EQUAL(gpu, gp + off, packed + off, count * sizeof(uint16_t), what);
    // both at once: the packed bits, and x rounded in place to their values
    CHECK(gpu->bf16_pack_round != NULL, "the CUDA backend lacks bf16_pack_round");
    if (gpu->bf16_pack_round) {
        uint16_t *gq = dev_poisoned(gpu, all * sizeof(uint16_t));
        gpu->bf16_pack_round(gpu, gq + off, gsrc + off, count);
        snprintf(what, sizeof what, "bf16_pack_round bits count=%zu off=%d", count, off);
        CHECK_BYTES_EQUAL(gpu, gq + off, packed + off, count * sizeof(uint16_t), what);
        snprintf(what, sizeof what, "bf16_pack_round values count=%zu off=%d", count, off);
        CHECK_BYTES_EQUAL(gpu, gsrc + off, xr + off, count * sizeof(float), what);
        gpu->free(gpu, gq);
    }
    gpu->free(gpu, gx); gpu->free(gpu, gx2); gpu->free(gpu, gsrc); gpu->free(gpu, gp);
    free(x); free(xr); free(packed);
}

// Every one of the 65536 bf16 patterns (NaNs, infinities, denormals included) unpacked, `off` in.
static void test_bf16_unpack_all(int off) {
    char what[64];
    size_t count = 65536, all = count + off;
    uint16_t *b = malloc(all * sizeof(uint16_t));
    for (size_t i = 0; i < all; i++) b[i] = (uint16_t)((i - off) * 40503u);   // a permutation of all patterns
    float *f = malloc(all * sizeof(float));
    cpu->bf16_unpack(cpu, f + off, b + off, count);
    uint16_t *gb = dev_upload(gpu, b, all * sizeof(uint16_t));
    float *gf = dev_poisoned(gpu, all * sizeof(float));
    gpu->bf16_unpack(gpu, gf + off, gb + off, count);
    snprintf(what, sizeof what, "bf16_unpack all patterns off=%d", off);
    CHECK_BYTES_EQUAL(gpu, gf + off, f + off, count * sizeof(float), what);
    gpu->free(gpu, gb); gpu->free(gpu, gf);
    free(b); free(f);
}

static void test_mask_bits(size_t n) {
    char what[64];
    size_t nbytes = (n + 7) / 8;
    uint8_t *keep = malloc(n);
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rng_u32();
        keep[i] = (uint8_t)(r % 7 == 0 ? (r >> 8) & 0xFFu : (r >> 8) & 1u);   // bytes other than 0/1 too: bit 0 counts
    }
    uint8_t *bits = malloc(nbytes), *back = malloc(n);
    cpu->mask_pack_bits(cpu, bits, keep, n);
    cpu->mask_unpack_bits(cpu, back, bits, n);
    uint8_t *gk = dev_upload(gpu, keep, n), *gb = dev_poisoned(gpu, nbytes), *gb2 = dev_poisoned(gpu, nbytes);
    gpu->mask_pack_bits(gpu, gb, gk, n);
    gpu->mask_pack_bits(gpu, gb2, gk, n);
    snprintf(what, sizeof what, "mask_pack_bits n=%zu", n);
    CHECK_BYTES_EQUAL(gpu, gb, bits, nbytes, what);
    check_same_dev(gb, gb2, nbytes, what);
    uint8_t *gback = dev_poisoned(gpu, n);
    gpu->mask_unpack_bits(gpu, gback, gb, n);
    snprintf(what, sizeof what, "mask_unpack_bits n=%zu", n);
    CHECK_BYTES_EQUAL(gpu, gback, back, n, what);
    gpu->free(gpu, gk); gpu->free(gpu, gb); gpu->free(gpu, gb2); gpu->free(gpu, gback);
    free(keep); free(bits); free(back);
}

// ---- embedding

// Tokens in [0, v) with many repeats: a third of them one hot token, the rest from a few dozen.
static int32_t *random_tokens(size_t n, int v) {
    int32_t *t = malloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rng_u32();
        t[i] = r % 3 == 0 ? v / 2 : (int32_t)((r >> 4) % (uint32_t)(v < 40 ? v : 40) * (uint32_t)(v / 40 > 0 ? v / 40 : 1));
        if (t[i] >= v) t[i] = v - 1;
    }
    return t;
}

static void test_embedding(int s, int b, int h, int v) {
    char what[128];
    size_t n = (size_t)s * b, nh = n * h, vh = (size_t)v * h;
    int32_t *tok = random_tokens(n, v);
    float *wte = host_random(vh, -1.0f, 1.0f), *wpe = host_random((size_t)s * h, -1.0f, 1.0f);
    float *x = malloc(nh * sizeof(float));
    cpu->embedding_forward(cpu, x, tok, wte, wpe, s, b, h);
    int32_t *gt = dev_upload(gpu, tok, n * sizeof(int32_t));
    float *gwte = dev_upload(gpu, wte, vh * sizeof(float)), *gwpe = dev_upload(gpu, wpe, (size_t)s * h * sizeof(float));
    float *gx = dev_poisoned(gpu, nh * sizeof(float)), *gx2 = dev_poisoned(gpu, nh * sizeof(float));
    gpu->embedding_forward(gpu, gx, gt, gwte, gwpe, s, b, h);
    gpu->embedding_forward(gpu, gx2, gt, gwte, gwpe, s, b, h);
    snprintf(what, sizeof what, "embedding_forward s=%d b=%d h=%d", s, b, h);
    CHECK_BYTES_EQUAL(gpu, gx, x, nh * sizeof(float), what);
    check_same_dev(gx, gx2, nh * sizeof(float), what);

    // backward: dwte and dwpe accumulate onto what they hold
    float *dx = host_random(nh, -1.0f, 1.0f), *dwte0 = host_random(vh, -0.5f, 0.5f);
    float *dwpe0 = host_random((size_t)s * h, -0.5f, 0.5f);
    float *dwte = fdup(dwte0, vh), *dwpe = fdup(dwpe0, (size_t)s * h);
    cpu->embedding_backward(cpu, dwte, dwpe, dx, tok, s, b, h);
    float *gdx = dev_upload(gpu, dx, nh * sizeof(float));
    float *gdwte[2], *gdwpe[2];
    for (int run = 0; run < 2; run++) {
        gdwte[run] = dev_upload(gpu, dwte0, vh * sizeof(float));
        gdwpe[run] = dev_upload(gpu, dwpe0, (size_t)s * h * sizeof(float));
        gpu->embedding_backward(gpu, gdwte[run], gdwpe[run], gdx, gt, s, b, h);
    }
    snprintf(what, sizeof what, "embedding_backward dwte s=%d b=%d h=%d v=%d", s, b, h, v);
    CHECK_BYTES_EQUAL(gpu, gdwte[0], dwte, vh * sizeof(float), what);
    check_same_dev(gdwte[0], gdwte[1], vh * sizeof(float), what);
    snprintf(what, sizeof what, "embedding_backward dwpe s=%d b=%d h=%d", s, b, h);
    CHECK_BYTES_EQUAL(gpu, gdwpe[0], dwpe, (size_t)s * h * sizeof(float), what);
    check_same_dev(gdwpe[0], gdwpe[1], (size_t)s * h * sizeof(float), what);
    // the test means something: the hot token v/2 comes back many times
    size_t hot = 0;
    for (size_t i = 0; i < n; i++) hot += tok[i] == v / 2;
    CHECK(hot >= n / 5 && hot < n, "embedding s=%d b=%d: token %d on %zu of %zu rows, expected about a third", s, b,
          v / 2, hot, n);

    for (int run = 0; run < 2; run++) { gpu->free(gpu, gdwte[run]); gpu->free(gpu, gdwpe[run]); }
    gpu->free(gpu, gt); gpu->free(gpu, gwte); gpu->free(gpu, gwpe); gpu->free(gpu, gx); gpu->free(gpu, gx2);
    gpu->free(gpu, gdx);
    free(tok); free(wte); free(wpe); free(x); free(dx); free(dwte0); free(dwpe0); free(dwte); free(dwpe);
}

// The vocabulary-parallel forms: rows v0 .. v0+vl−1 of wte on this rank, positions from s0 (a
// shard's rows of a longer sequence: wpe has s0 + s rows).
static void test_embedding_vocab(int s0, int s, int b, int h, int v, int v0, int vl) {
    char what[128];
    size_t n = (size_t)s * b, nh = n * h, lh = (size_t)vl * h, ph = (size_t)(s0 + s) * h;
    int32_t *tok = random_tokens(n, v);
    float *wte = host_random(lh, -1.0f, 1.0f), *wpe = host_random(ph, -1.0f, 1.0f);
    float *x = malloc(nh * sizeof(float));
    cpu->embedding_vocab_forward(cpu, x, tok, wte, v0, vl, (int)n, h);
    int32_t *gt = dev_upload(gpu, tok, n * sizeof(int32_t));
    float *gwte = dev_upload(gpu, wte, lh * sizeof(float)), *gwpe = dev_upload(gpu, wpe, ph * sizeof(float));
    float *gx = dev_poisoned(gpu, nh * sizeof(float));
    gpu->embedding_vocab_forward(gpu, gx, gt, gwte, v0, vl, (int)n, h);
    snprintf(what, sizeof what, "embedding_vocab_forward n=%zu h=%d v0=%d vl=%d", n, h, v0, vl);
    CHECK_BYTES_EQUAL(gpu, gx, x, nh * sizeof(float), what);
    size_t mine = 0, zero_rows = 0;
    for (size_t r = 0; r < n; r++) {
        int in = tok[r] >= v0 && tok[r] < v0 + vl;
        mine += in;
        if (!in) zero_rows += x[r * h] == 0.0f && x[r * h + h - 1] == 0.0f;
    }
    CHECK(mine > 0 && mine < n && zero_rows == n - mine, "embedding_vocab_forward: %zu of %zu rows on the rank, %zu zero",
          mine, n, zero_rows);

    // A bf16 table (--base-dtype bf16): the rows widened exactly, = the fp32 lookup of the widened table.
    uint16_t *wte16 = malloc(lh * sizeof(uint16_t));
    float *wide = malloc(lh * sizeof(float)), *x16 = malloc(nh * sizeof(float)), *xw = malloc(nh * sizeof(float));
    cpu->bf16_pack(cpu, wte16, wte, lh);
    cpu->bf16_unpack(cpu, wide, wte16, lh);
    cpu->embedding_vocab_forward(cpu, xw, tok, wide, v0, vl, (int)n, h);
    cpu->embedding_vocab_forward16(cpu, x16, tok, wte16, v0, vl, (int)n, h);
    CHECK(memcmp(x16, xw, nh * sizeof(float)) == 0, "embedding_vocab_forward16 (CPU) != the lookup of the widened table");
    uint16_t *gwte16 = dev_upload(gpu, wte16, lh * sizeof(uint16_t));
    float *gx16 = dev_poisoned(gpu, nh * sizeof(float));
    gpu->embedding_vocab_forward16(gpu, gx16, gt, gwte16, v0, vl, (int)n, h);
    snprintf(what, sizeof what, "embedding_vocab_forward16 n=%zu h=%d v0=%d vl=%d", n, h, v0, vl);
    CHECK_BYTES_EQUAL(gpu, gx16, x16, nh * sizeof(float), what);
    gpu->free(gpu, gx16);
    gpu->free(gpu, gwte16);
    free(wte16), free(wide), free(x16), free(xw);

    cpu->embedding_add_positions(cpu, x, wpe, s0, s, b, h);
    gpu->embedding_add_positions(gpu, gx, gwpe, s0, s, b, h);
    snprintf(what, sizeof what, "embedding_add_positions s0=%d s=%d b=%d h=%d", s0, s, b, h);
    CHECK_BYTES_EQUAL(gpu, gx, x, nh * sizeof(float), what);

    float *dx = host_random(nh, -1.0f, 1.0f), *dwte0 = host_random(lh, -0.5f, 0.5f), *dwpe0 = host_random(ph, -0.5f, 0.5f);
    float *dwte = fdup(dwte0, lh), *dwpe = fdup(dwpe0, ph);
    cpu->embedding_vocab_backward(cpu, dwte, dx, tok, v0, vl, (int)n, h);
    cpu->embedding_positions_backward(cpu, dwpe, dx, s0, s, b, h);
    float *gdx = dev_upload(gpu, dx, nh * sizeof(float));
    float *gdwte[2], *gdwpe[2];
    for (int run = 0; run < 2; run++) {
        gdwte[run] = dev_upload(gpu, dwte0, lh * sizeof(float));
        gdwpe[run] = dev_upload(gpu, dwpe0, ph * sizeof(float));
        gpu->embedding_vocab_backward(gpu, gdwte[run], gdx, gt, v0, vl, (int)n, h);
        gpu->embedding_positions_backward(gpu, gdwpe[run], gdx, s0, s, b, h);
    }
    snprintf(what, sizeof what, "embedding_vocab_backward n=%zu h=%d v0=%d vl=%d", n, h, v0, vl);
    CHECK_BYTES_EQUAL(gpu, gdwte[0], dwte, lh * sizeof(float), what);
    check_same_dev(gdwte[0], gdwte[1], lh * sizeof(float), what);
    snprintf(what, sizeof what, "embedding_positions_backward s0=%d s=%d b=%d h=%d", s0, s, b, h);
    CHECK_BYTES_EQUAL(gpu, gdwpe[0], dwpe, ph * sizeof(float), what);
    check_same_dev(gdwpe[0], gdwpe[1], ph * sizeof(float), what);

    for (int run = 0; run < 2; run++) { gpu->free(gpu, gdwte[run]); gpu->free(gpu, gdwpe[run]); }
    gpu->free(gpu, gt); gpu->free(gpu, gwte); gpu->free(gpu, gwpe); gpu->free(gpu, gx); gpu->free(gpu, gdx);
    free(tok); free(wte); free(wpe); free(x); free(dx); free(dwte0); free(dwpe0); free(dwte); free(dwpe);
}

int main(void) {
    gpu = cuda_or_skip(PRECISION_FP32);
    char err[256] = "";
    cpu = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    CHECK(cpu != NULL, "cpu backend: %s", err);
    if (!cpu) return check_summary();

    // LayerNorm: scalar path (h odd), vector path (h % 4 == 0), misaligned vector-sized rows, wide
    // rows (more columns than a block's threads cover at once), and a larger case.
    test_layernorm_forward(37, 45, 0);
    test_layernorm_forward(37, 68, 0);
    test_layernorm_forward(37, 68, 1);
    test_layernorm_forward(19, 4100, 0);
    test_layernorm_forward(1000, 1024, 0);
    int ln_sizes[][2] = {{37, 45}, {37, 68}, {300, 70}, {5000, 96}, {64, 2052}};
    for (size_t i = 0; i < sizeof ln_sizes / sizeof ln_sizes[0]; i++)
        for (int from_output = 0; from_output < 2; from_output++)
            for (int acc = 0; acc < 2; acc++) test_layernorm_backward(ln_sizes[i][0], ln_sizes[i][1], from_output, acc);

    // GeLU
    for (int round = 0; round < 2; round++) {
        test_bias_gelu(37, 45, round);
        test_bias_gelu(37, 68, round);
        test_bias_gelu(200, 3072, round);
    }
    test_gelu_elementwise(1001, 0);
    test_gelu_elementwise(1001, 1);
    test_gelu_elementwise((size_t)1 << 20, 0);
    test_gelu_tempo(1001);
    test_gelu_tempo(37 * 70);
    test_gelu_tempo((size_t)1 << 20);
    for (int k = 1; k <= FEWBIT_MAX_BITS; k++) {
        test_fewbit(k, 1001);
        test_fewbit(k, 37 * 45);
        test_fewbit(k, ((size_t)1 << 20) + 3);
    }

    // Dropout: rows of a shard (s0 > 0) and later samples (sample0 > 0); widths not multiples of 4.
    test_dropout_mask(5, 13, 3, 70, 11, 0.3f);
    test_dropout_mask(0, 37, 2, 45, 0, 0.1f);
    test_dropout_mask(7, 9, 4, 1, 3, 0.5f);
    test_dropout_mask(3, 64, 4, 1027, 21, 0.2f);
    test_dropout_mask(2, 5, 3, 70, 0, 0.0f);
    test_dropout_mask_cols(13, 3, 0, 39, 35, 70, 35, 11, 0.3f);
    test_dropout_mask_cols(9, 2, 0, 18, 17, 70, 5, 0, 0.25f);
    test_dropout_mask_cols(4, 4, 0, 16, 64, 64, 0, 3, 0.1f);
    test_dropout_mask_cols(13, 3, 13, 13, 35, 70, 35, 11, 0.3f);   // mini-seq 3's second chunk of 39 rows (from 4, 1)
    test_dropout_mask_cols(9, 2, 15, 3, 17, 70, 5, 0, 0.25f);      // mini-seq 6's last chunk of 18 rows
    test_dropout_mask_cols(4, 4, 5, 1, 64, 64, 0, 3, 0.1f);        // one row, (1, 1)
    for (int kp = 0; kp < 2; kp++)
        for (int bs = 0; bs < 2; bs++) {
            test_dropout_residual(37, 45, kp, bs);
            test_dropout_residual(37, 68, kp, bs);
            test_dropout_residual(300, 1024, kp, bs);
            test_dropout_residual_inverse(37, 45, kp, bs);
            test_dropout_residual_inverse(300, 1024, kp, bs);
        }
    test_dropout_scale(37 * 45, 0);
    test_dropout_scale(37 * 45, 1);
    test_dropout_scale((size_t)1 << 20, 0);

    // Storage formats
    test_bf16(1001, 0);
    test_bf16(1001, 1);
    test_bf16(((size_t)1 << 20) + 5, 0);
    test_bf16_unpack_all(0);
    test_bf16_unpack_all(1);
    test_mask_bits(1001);
    test_mask_bits(37 * 70);
    test_mask_bits(((size_t)1 << 20) + 3);

    // Embeddings: repeated tokens; h odd and h % 4 == 0; a larger case.
    test_embedding(13, 3, 45, 50);
    test_embedding(13, 3, 68, 7);
    test_embedding(128, 8, 768, 1000);
    test_embedding_vocab(0, 13, 3, 45, 50, 10, 20);
    test_embedding_vocab(4, 13, 3, 68, 50, 0, 25);
    test_embedding_vocab(64, 128, 8, 256, 1000, 500, 500);

    backend_close(gpu);
    backend_close(cpu);
    return check_summary();
}
