// The CUDA backend's loss and optimizer kernels against the CPU backend on the same inputs:
// cross-entropy over the whole vocabulary (forward+backward and loss only), the vocabulary-parallel
// trio (partial, combine, backward) with t ranks simulated on one device, AdamW (decay on and off,
// with and without the bf16 copy, aligned and misaligned views), Σ x² and the non-finite count; the
// multi-tensor AdamW and statistics (many tensors of odd sizes and alignments, a planted NaN found)
// and the deferred loss (the bits of the returned sums); the step's guard on the device (step_guard,
// adamw_update_guarded, step_take: the host's clipping and skipping to the bit).
// Every GPU output starts poisoned (NaN bytes); every op runs twice and must give the same bits.
//
// Tolerances, and why:
//  - loss (returned Σ and row_loss): within 1e-6 relative of an exact reference (double, libm exp),
//    and within 1e-6 + the CPU's own distance from that reference of the CPU. The row's max is exact
//    on both sides, but the CPU's Σ exp(z − max) is an fp32 SIMD sum: at 50304 columns each lane
//    adds thousands of terms and lands ~1e-5 relative off (measured), ~1e-6 on the loss; the GPU's
//    (≈100 terms a thread, then a tree) is within a few ulp. So 1e-6 against the CPU alone is not
//    reachable at the large size, and the reference says which side is right.
//  - gradient: 1e-5 relative L2 against the CPU (exp(z − lse) moves with lse), 3e-6 against the
//    exact reference (lse rounded to fp32, z − lse rounded, ctron_expf's ~2 ulp).
//  - the vocab backward from the same lse, AdamW, the bf16 copy: bitwise. Both sides evaluate the
//    same IEEE single operations in the same order with no FMA contraction (the CPU is built -std=c11,
//    the GPU code uses __fmul_rn / __fadd_rn / __fdiv_rn / __fsqrt_rn), ctron_expf is the same source.
//  - the partials' max and target logit: bitwise (a max and a copy); their Σ exp as the loss above.
//  - Σ x²: 1e-12 relative (both double, every x² exact in double; only the order of additions differs).
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/bf16.h"
#include "cuda_check.h"

static int rand_index(int n) {
    int i = (int)(cuda_test_uniform(0.0f, 1.0f) * (float)n);
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}
static double rel_diff(double a, double b) { return fabs(a - b) / (fabs(b) > 0 ? fabs(b) : 1.0); }
static int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }
static float *dev_floats(Backend *gpu, const float *host, size_t n) {
    return dev_upload(gpu, host, n * sizeof(float));
}
static float *dup_floats(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

// The exact reference: per row of z [n, ld] over columns [0, k), max m and Σ exp(z − m) in double
// with libm's exp; lse = m + log Σ. Writes the row's Σ (as float) to sum_out and lse − z[target]
// to loss_out (either may be NULL); returns Σ over the rows of the loss.
static double ref_rows(const float *z, int ld, int k, const int32_t *tg, int n, float *sum_out, float *loss_out,
                       double *lse_out) {
    double total = 0.0;
    for (int r = 0; r < n; r++) {
        const float *row = z + (size_t)r * ld;
        double m = -INFINITY, sum = 0.0;
        for (int c = 0; c < k; c++) m = row[c] > m ? row[c] : m;
        for (int c = 0; c < k; c++) sum += exp((double)row[c] - m);
        double lse = m + log(sum);
        if (sum_out) sum_out[r] = (float)sum;
        if (lse_out) lse_out[r] = lse;
        if (tg) {
            double l = lse - row[tg[r]];
            if (loss_out) loss_out[r] = (float)l;
            total += l;
        }
    }
    return total;
}
// The exact gradient gs·(softmax − onehot) of z [n, v] from ref_rows' lse.
static float *ref_grad(const float *z, const int32_t *tg, const double *lse, int n, int v, float gs) {
    float *g = malloc((size_t)n * v * sizeof(float));
    for (int r = 0; r < n; r++)
        for (int c = 0; c < v; c++)
            g[(size_t)r * v + c] = (float)((exp((double)z[(size_t)r * v + c] - lse[r]) - (c == tg[r])) * gs);
    return g;
}
// The GPU's loss `got` against the exact `ref` (1e-6 relative) and the CPU's `cpu` (1e-6 + the CPU's
// distance from the exact value).
static void check_loss(const char *what, double got, double cpu, double ref) {
    double cpu_off = rel_diff(cpu, ref);
    CHECK(rel_diff(got, ref) <= 1e-6, "%s: loss %.9g, exact %.9g (relative %.3g)", what, got, ref, rel_diff(got, ref));
    CHECK(rel_diff(got, cpu) <= 1e-6 + cpu_off, "%s: loss %.9g, CPU %.9g (relative %.3g; the CPU is %.3g from exact)",
          what, got, cpu, rel_diff(got, cpu), cpu_off);
}
// The same for n floats downloaded from dev, by relative L2.
static void check_rows(Backend *gpu, const char *what, const float *dev, const float *cpu, const float *ref, size_t n,
                       double tol) {
    float *got = host_download(gpu, dev, n * sizeof(float));
    double e_ref = rel_l2(got, ref, n), e_cpu = rel_l2(got, cpu, n), cpu_off = rel_l2(cpu, ref, n);
    CHECK(e_ref <= tol, "%s: relative L2 error %.3g from exact, tolerance %.1g", what, e_ref, tol);
    CHECK(e_cpu <= tol + cpu_off, "%s: relative L2 error %.3g from the CPU, which is %.3g from exact (tolerance %.1g + that)",
          what, e_cpu, cpu_off, tol);
    free(got);
}

// ---- cross-entropy over the whole vocabulary
// Logits [n, v] in [-6, 6) with planted rows: row 2 has its max in the last column (the online max
// grows at the very end) and that column as target (a loss near 0), row 3 its max in column 0, row 4
// is constant. Targets: row 0 → column 0, row 1 → column v−1, the rest random.
static void make_ce_inputs(int n, int v, float **logits_out, int32_t **targets_out) {
    float *z = host_random((size_t)n * v, -6.0f, 6.0f);
    int32_t *t = malloc((size_t)n * sizeof(int32_t));
    for (int r = 0; r < n; r++) t[r] = rand_index(v);
    t[0] = 0;
    if (n > 1) t[1] = v - 1;
    if (n > 2) { z[2 * (size_t)v + v - 1] = 30.0f; t[2] = v - 1; }
    if (n > 3) { z[3 * (size_t)v] = 25.0f; t[3] = 5 % v; }
    if (n > 4) for (int c = 0; c < v; c++) z[4 * (size_t)v + c] = 0.5f;
    *logits_out = z;
    *targets_out = t;
}

static void test_ce_whole(Backend *gpu, Backend *cpu, int n, int v, float gs) {
    char what[160];
    size_t nv = (size_t)n * v;
    float *z, *cpu_grad, *cpu_rl = malloc((size_t)n * sizeof(float));
    int32_t *tg;
    make_ce_inputs(n, v, &z, &tg);
    cpu_grad = dup_floats(z, nv);
    double cpu_loss = cpu->crossentropy_forward_backward(cpu, cpu_grad, tg, cpu_rl, n, v, gs);
    float *cpu_rl_eval = malloc((size_t)n * sizeof(float));
    double cpu_loss_eval = cpu->crossentropy_loss(cpu, z, tg, cpu_rl_eval, n, v);

    int32_t *d_t = dev_upload(gpu, tg, (size_t)n * sizeof(int32_t));
    float *d_z = dev_floats(gpu, z, nv);
    float *d_rl = dev_poisoned(gpu, (size_t)n * sizeof(float));
    double loss = gpu->crossentropy_forward_backward(gpu, d_z, d_t, d_rl, n, v, gs);
    snprintf(what, sizeof what, "crossentropy_forward_backward n=%d v=%d", n, v);
    float *ref_rl = malloc((size_t)n * sizeof(float));
    double *ref_lse = malloc((size_t)n * sizeof(double));
    double ref_loss = ref_rows(z, v, v, tg, n, NULL, ref_rl, ref_lse);
    float *ref_g = ref_grad(z, tg, ref_lse, n, v, gs);
    check_loss(what, loss, cpu_loss, ref_loss);
    check_rows(gpu, what, d_rl, cpu_rl, ref_rl, (size_t)n, 1e-6);
    CHECK_CLOSE(gpu, d_z, cpu_grad, nv, 1e-5, what);
    CHECK_CLOSE(gpu, d_z, ref_g, nv, 3e-6, what);
    float *g_grad = host_download(gpu, d_z, nv * sizeof(float));
    float *g_rl = host_download(gpu, d_rl, (size_t)n * sizeof(float));
    double host_sum = 0.0;
    for (int r = 0; r < n; r++) host_sum += g_rl[r];
    CHECK(rel_diff(loss, host_sum) <= 1e-12, "%s: returned %.17g, Σ row_loss %.17g", what, loss, host_sum);
    // the planted row 2: target = argmax by 30 over values below 6, loss ≈ 50303·e^-24 or less
    if (n > 2) CHECK(g_rl[2] >= 0.0f && g_rl[2] < 1e-4f, "%s: row 2 loss %g, want ≈ 0", what, g_rl[2]);
    // gradient rows sum to 0 (softmax sums to 1, minus the onehot): |Σ| ≪ gs
    for (int r = 0; r < n && r < 5; r++) {
        double s = 0.0;
        for (int c = 0; c < v; c++) s += g_grad[(size_t)r * v + c];
        CHECK(fabs(s) <= 1e-4 * gs, "%s: row %d of the gradient sums to %g", what, r, s);
    }

    // twice: the same bits
    float *d_z2 = dev_floats(gpu, z, nv);
    float *d_rl2 = dev_poisoned(gpu, (size_t)n * sizeof(float));
    double loss2 = gpu->crossentropy_forward_backward(gpu, d_z2, d_t, d_rl2, n, v, gs);
    snprintf(what, sizeof what, "crossentropy_forward_backward n=%d v=%d, run twice", n, v);
    CHECK(same_double(loss, loss2), "%s: loss %.17g then %.17g", what, loss, loss2);
    CHECK_BYTES_EQUAL(gpu, d_z2, g_grad, nv * sizeof(float), what);
    CHECK_BYTES_EQUAL(gpu, d_rl2, g_rl, (size_t)n * sizeof(float), what);

    // loss only: the forward's bits, logits untouched
    float *d_z3 = dev_floats(gpu, z, nv);
    float *d_rl3 = dev_poisoned(gpu, (size_t)n * sizeof(float));
    double loss3 = gpu->crossentropy_loss(gpu, d_z3, d_t, d_rl3, n, v);
    snprintf(what, sizeof what, "crossentropy_loss n=%d v=%d", n, v);
    CHECK(same_double(loss, loss3), "%s: loss %.17g, forward_backward's %.17g", what, loss3, loss);
    check_loss(what, loss3, cpu_loss_eval, ref_loss);
    CHECK_BYTES_EQUAL(gpu, d_rl3, g_rl, (size_t)n * sizeof(float), what);
    CHECK_BYTES_EQUAL(gpu, d_z3, z, nv * sizeof(float), what);

    // rows in two calls (head_chunks' mini-sequences; the second starts mid-buffer, for odd v at
    // another alignment): the same bits per row
    int n1 = n / 2 + 1;
    float *d_z4 = dev_floats(gpu, z, nv);
    float *d_rl4 = dev_poisoned(gpu, (size_t)n * sizeof(float));
    double la = gpu->crossentropy_forward_backward(gpu, d_z4, d_t, d_rl4, n1, v, gs);
    double lb = gpu->crossentropy_forward_backward(gpu, d_z4 + (size_t)n1 * v, d_t + n1, d_rl4 + n1, n - n1, v, gs);
    snprintf(what, sizeof what, "crossentropy_forward_backward n=%d v=%d in chunks of %d and %d", n, v, n1, n - n1);
    CHECK(rel_diff(la + lb, loss) <= 1e-12, "%s: %.17g, in one call %.17g", what, la + lb, loss);
    CHECK_BYTES_EQUAL(gpu, d_z4, g_grad, nv * sizeof(float), what);
    CHECK_BYTES_EQUAL(gpu, d_rl4, g_rl, (size_t)n * sizeof(float), what);

    // the logits one float past a 16-byte boundary (every row through the scalar loads): the same bits
    float *d_buf = gpu->alloc(gpu, (nv + 1) * sizeof(float));
    gpu->copy(gpu, d_buf + 1, z, nv * sizeof(float), COPY_H2D);
    float *d_rl5 = dev_poisoned(gpu, (size_t)n * sizeof(float));
    double l5 = gpu->crossentropy_forward_backward(gpu, d_buf + 1, d_t, d_rl5, n, v, gs);
    snprintf(what, sizeof what, "crossentropy_forward_backward n=%d v=%d, logits misaligned", n, v);
    CHECK(same_double(l5, loss), "%s: loss %.17g, aligned %.17g", what, l5, loss);
    CHECK_BYTES_EQUAL(gpu, d_buf + 1, g_grad, nv * sizeof(float), what);
    CHECK_BYTES_EQUAL(gpu, d_rl5, g_rl, (size_t)n * sizeof(float), what);

    void *dev[] = {d_t, d_z, d_rl, d_z2, d_rl2, d_z3, d_rl3, d_z4, d_rl4, d_buf, d_rl5};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) gpu->free(gpu, dev[i]);
    free(z); free(tg); free(cpu_grad); free(cpu_rl); free(cpu_rl_eval); free(g_grad); free(g_rl);
    free(ref_rl); free(ref_lse); free(ref_g);
}

// A NaN logit in one row: that row's loss is NaN on both backends (the step guard reads the loss), and
// the other rows keep their values.
static void test_ce_nan_logit(Backend *gpu, Backend *cpu, int n, int v) {
    char what[160];
    size_t nv = (size_t)n * v;
    float *z, *cpu_rl = malloc((size_t)n * sizeof(float));
    int32_t *tg;
    make_ce_inputs(n, v, &z, &tg);
    z[(size_t)v + v / 2] = NAN;   // row 1, not its target
    float *cpu_z = dup_floats(z, nv);
    double cpu_loss = cpu->crossentropy_forward_backward(cpu, cpu_z, tg, cpu_rl, n, v, 1.0f);
    int32_t *d_t = dev_upload(gpu, tg, (size_t)n * sizeof(int32_t));
    float *d_z = dev_floats(gpu, z, nv), *d_rl = dev_poisoned(gpu, (size_t)n * sizeof(float));
    double loss = gpu->crossentropy_forward_backward(gpu, d_z, d_t, d_rl, n, v, 1.0f);
    float *g_rl = host_download(gpu, d_rl, (size_t)n * sizeof(float));
    snprintf(what, sizeof what, "crossentropy_forward_backward n=%d v=%d, a NaN logit in row 1", n, v);
    CHECK(isnan(cpu_loss) && isnan(loss) && isnan(cpu_rl[1]) && isnan(g_rl[1]),
          "%s: loss %g (CPU %g), row 1 %g (CPU %g), want NaN", what, loss, cpu_loss, g_rl[1], cpu_rl[1]);
    for (int r = 0; r < n; r++)
        if (r != 1) CHECK(rel_diff(g_rl[r], cpu_rl[r]) <= 1e-6, "%s: row %d %g, CPU %g", what, r, g_rl[r], cpu_rl[r]);
    gpu->free(gpu, d_t); gpu->free(gpu, d_z); gpu->free(gpu, d_rl);
    free(z); free(tg); free(cpu_z); free(cpu_rl); free(g_rl);
}

// ---- the vocabulary-parallel trio, t ranks of vl columns each on one device
// The model's vocabulary is n_valid ≤ t·vl; the padded columns hold 1e4 (they would dominate any
// sum that took them in). Compared with the CPU's trio and with the whole-vocabulary GPU kernel.
static void test_vocab_parallel(Backend *gpu, Backend *cpu, int n, int n_valid, int t, int vl, float gs) {
    char what[160];
    float *full;
    int32_t *tg;
    make_ce_inputs(n, n_valid, &full, &tg);
    if (n > 5) tg[5] = vl - 1;   // either side of the first shard boundary
    if (n > 6) tg[6] = vl;
    size_t nl = (size_t)n * vl, np = (size_t)t * n * 3;
    float **shard = malloc((size_t)t * sizeof(float *));
    for (int q = 0; q < t; q++) {
        shard[q] = malloc(nl * sizeof(float));
        for (int r = 0; r < n; r++)
            for (int j = 0; j < vl; j++) {
                int c = q * vl + j;
                shard[q][(size_t)r * vl + j] = c < n_valid ? full[(size_t)r * n_valid + c] : 1e4f;
            }
    }
    int32_t *d_t = dev_upload(gpu, tg, (size_t)n * sizeof(int32_t));

    // partials
    float *cpu_parts = malloc(np * sizeof(float));
    for (int q = 0; q < t; q++)
        cpu->crossentropy_vocab_partial(cpu, cpu_parts + (size_t)q * n * 3, shard[q], tg, n, vl, q * vl, n_valid);
    float **d_sh = malloc((size_t)t * sizeof(float *));
    for (int q = 0; q < t; q++) d_sh[q] = dev_floats(gpu, shard[q], nl);
    float *d_parts = dev_poisoned(gpu, np * sizeof(float));
    for (int q = 0; q < t; q++)
        gpu->crossentropy_vocab_partial(gpu, d_parts + (size_t)q * n * 3, d_sh[q], d_t, n, vl, q * vl, n_valid);
    float *g_parts = host_download(gpu, d_parts, np * sizeof(float));
    snprintf(what, sizeof what, "crossentropy_vocab_partial n=%d n_valid=%d t=%d vl=%d", n, n_valid, t, vl);
    size_t bad_exact = 0;
    float *g_sum = malloc((size_t)t * n * sizeof(float)), *c_sum = malloc((size_t)t * n * sizeof(float));
    for (size_t i = 0; i < (size_t)t * n; i++) {
        bad_exact += memcmp(&g_parts[3 * i], &cpu_parts[3 * i], sizeof(float)) != 0;
        bad_exact += memcmp(&g_parts[3 * i + 2], &cpu_parts[3 * i + 2], sizeof(float)) != 0;
        g_sum[i] = g_parts[3 * i + 1];
        c_sum[i] = cpu_parts[3 * i + 1];
    }
    CHECK(bad_exact == 0, "%s: %zu max / target entries differ from the CPU's", what, bad_exact);
    float *r_sum = malloc((size_t)t * n * sizeof(float));
    for (int q = 0; q < t; q++) {
        int k = n_valid - q * vl < 0 ? 0 : n_valid - q * vl < vl ? n_valid - q * vl : vl;
        if (k > 0) ref_rows(shard[q], vl, k, NULL, n, r_sum + (size_t)q * n, NULL, NULL);
        else for (int r = 0; r < n; r++) r_sum[(size_t)q * n + r] = 0.0f;
    }
    double e_ref = rel_l2(g_sum, r_sum, (size_t)t * n), e_cpu = rel_l2(g_sum, c_sum, (size_t)t * n);
    double cpu_off = rel_l2(c_sum, r_sum, (size_t)t * n);
    CHECK(e_ref <= 1e-6, "%s: Σexp relative L2 error %.3g from exact", what, e_ref);
    CHECK(e_cpu <= 1e-6 + cpu_off, "%s: Σexp relative L2 error %.3g from the CPU, which is %.3g from exact", what,
          e_cpu, cpu_off);
    double e;
    float *d_parts2 = dev_poisoned(gpu, np * sizeof(float));
    for (int q = 0; q < t; q++)
        gpu->crossentropy_vocab_partial(gpu, d_parts2 + (size_t)q * n * 3, d_sh[q], d_t, n, vl, q * vl, n_valid);
    snprintf(what, sizeof what, "crossentropy_vocab_partial n=%d n_valid=%d t=%d, run twice", n, n_valid, t);
    CHECK_BYTES_EQUAL(gpu, d_parts2, g_parts, np * sizeof(float), what);

    // combine
    float *cpu_lse = malloc((size_t)n * sizeof(float)), *cpu_rl = malloc((size_t)n * sizeof(float));
    double cpu_loss = cpu->crossentropy_vocab_combine(cpu, cpu_lse, cpu_rl, cpu_parts, t, n);
    float *d_lse = dev_poisoned(gpu, (size_t)n * sizeof(float)), *d_rl = dev_poisoned(gpu, (size_t)n * sizeof(float));
    double loss = gpu->crossentropy_vocab_combine(gpu, d_lse, d_rl, d_parts, t, n);
    snprintf(what, sizeof what, "crossentropy_vocab_combine n=%d n_valid=%d t=%d", n, n_valid, t);
    float *ref_rl = malloc((size_t)n * sizeof(float)), *ref_lse_f = malloc((size_t)n * sizeof(float));
    double *ref_lse = malloc((size_t)n * sizeof(double));
    double ref_loss = ref_rows(full, n_valid, n_valid, tg, n, NULL, ref_rl, ref_lse);
    for (int r = 0; r < n; r++) ref_lse_f[r] = (float)ref_lse[r];
    check_loss(what, loss, cpu_loss, ref_loss);
    check_rows(gpu, what, d_lse, cpu_lse, ref_lse_f, (size_t)n, 1e-6);
    check_rows(gpu, what, d_rl, cpu_rl, ref_rl, (size_t)n, 1e-6);
    float *g_lse = host_download(gpu, d_lse, (size_t)n * sizeof(float));
    double loss_again = gpu->crossentropy_vocab_combine(gpu, d_lse, d_rl, d_parts, t, n);
    CHECK(same_double(loss, loss_again), "%s: twice %.17g then %.17g", what, loss, loss_again);
    CHECK_BYTES_EQUAL(gpu, d_lse, g_lse, (size_t)n * sizeof(float), what);
    // from the CPU's own parts: only logf's last ulp may differ (≤ 2 ulp of lse after adding the max)
    float *d_cparts = dev_floats(gpu, cpu_parts, np);
    float *d_lse_c = dev_poisoned(gpu, (size_t)n * sizeof(float)), *d_rl_c = dev_poisoned(gpu, (size_t)n * sizeof(float));
    double loss_c = gpu->crossentropy_vocab_combine(gpu, d_lse_c, d_rl_c, d_cparts, t, n);
    snprintf(what, sizeof what, "crossentropy_vocab_combine n=%d t=%d from the CPU's parts", n, t);
    CHECK(rel_diff(loss_c, cpu_loss) <= 1e-6, "%s: loss %.9g, CPU %.9g", what, loss_c, cpu_loss);
    float *g_lse_c = host_download(gpu, d_lse_c, (size_t)n * sizeof(float));
    size_t off_ulp = 0;
    for (int r = 0; r < n; r++) {
        float ulp = nextafterf(fabsf(cpu_lse[r]), INFINITY) - fabsf(cpu_lse[r]);
        off_ulp += !(fabsf(g_lse_c[r] - cpu_lse[r]) <= 2.0f * ulp);
    }
    CHECK(off_ulp == 0, "%s: %zu of %d lse more than 2 ulp from the CPU's", what, off_ulp, n);

    // the whole vocabulary on the GPU: the same loss and gradient
    float *d_full = dev_floats(gpu, full, (size_t)n * n_valid);
    float *d_rl_w = dev_poisoned(gpu, (size_t)n * sizeof(float));
    double loss_w = gpu->crossentropy_forward_backward(gpu, d_full, d_t, d_rl_w, n, n_valid, gs);
    snprintf(what, sizeof what, "vocab-parallel t=%d vs whole vocabulary n=%d v=%d", t, n, n_valid);
    CHECK(rel_diff(loss, loss_w) <= 1e-6, "%s: loss %.9g, whole %.9g", what, loss, loss_w);
    float *g_rl_w = host_download(gpu, d_rl_w, (size_t)n * sizeof(float));
    CHECK_CLOSE(gpu, d_rl, g_rl_w, (size_t)n, 1e-6, what);
    float *g_full = host_download(gpu, d_full, (size_t)n * n_valid * sizeof(float));

    // backward from the GPU's lse, shards assembled: the whole-vocabulary gradient, padding exactly 0
    for (int q = 0; q < t; q++)
        gpu->crossentropy_vocab_backward(gpu, d_sh[q], d_lse, d_t, n, vl, q * vl, n_valid, gs);
    float *assembled = malloc((size_t)n * n_valid * sizeof(float));
    size_t pad_bad = 0, pad_count = 0;
    for (int q = 0; q < t; q++) {
        float *gq = host_download(gpu, d_sh[q], nl * sizeof(float));
        for (int r = 0; r < n; r++)
            for (int j = 0; j < vl; j++) {
                int c = q * vl + j;
                float x = gq[(size_t)r * vl + j];
                uint32_t bits;
                memcpy(&bits, &x, sizeof bits);
                if (c < n_valid) assembled[(size_t)r * n_valid + c] = x;
                else { pad_count++; pad_bad += bits != 0; }
            }
        free(gq);
    }
    snprintf(what, sizeof what, "crossentropy_vocab_backward n=%d n_valid=%d t=%d vs the whole vocabulary", n, n_valid, t);
    e = rel_l2(assembled, g_full, (size_t)n * n_valid);
    CHECK(e <= 1e-5, "%s: relative L2 error %.3g", what, e);
    CHECK(pad_bad == 0, "%s: %zu of %zu padded columns not +0", what, pad_bad, pad_count);

    // backward from the CPU's lse on fresh shards: the CPU's bits
    snprintf(what, sizeof what, "crossentropy_vocab_backward n=%d n_valid=%d t=%d from the CPU's lse", n, n_valid, t);
    float *d_clse = dev_floats(gpu, cpu_lse, (size_t)n);
    for (int q = 0; q < t; q++) {
        float *cg = dup_floats(shard[q], nl);
        cpu->crossentropy_vocab_backward(cpu, cg, cpu_lse, tg, n, vl, q * vl, n_valid, gs);
        gpu->copy(gpu, d_sh[q], shard[q], nl * sizeof(float), COPY_H2D);
        gpu->crossentropy_vocab_backward(gpu, d_sh[q], d_clse, d_t, n, vl, q * vl, n_valid, gs);
        CHECK_BYTES_EQUAL(gpu, d_sh[q], cg, nl * sizeof(float), what);
        free(cg);
    }

    void *dev[] = {d_t, d_parts, d_parts2, d_lse, d_rl, d_cparts, d_lse_c, d_rl_c, d_full, d_rl_w, d_clse};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) gpu->free(gpu, dev[i]);
    for (int q = 0; q < t; q++) { gpu->free(gpu, d_sh[q]); free(shard[q]); }
    free(d_sh); free(shard); free(full); free(tg); free(cpu_parts); free(g_parts); free(g_sum); free(c_sum);
    free(cpu_lse); free(cpu_rl); free(g_lse); free(g_lse_c); free(g_rl_w); free(g_full); free(assembled);
    free(r_sum); free(ref_rl); free(ref_lse_f); free(ref_lse);
}

// ---- AdamW: three steps, the CPU's bits. off[]: element offsets of p, g, m, v, w16 from their
// allocations (equal offsets: the float4 path with a scalar head; unequal: the scalar path).
static void test_adamw(Backend *gpu, Backend *cpu, size_t n, float wd, int with_w16, const int off[5]) {
    char what[200];
    snprintf(what, sizeof what, "adamw_update n=%zu wd=%g w16=%d offsets %d,%d,%d,%d,%d", n, (double)wd, with_w16,
             off[0], off[1], off[2], off[3], off[4]);
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, gs = 0.8f;
    float *p = host_random(n, -1.0f, 1.0f);
    float *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    uint16_t *w16 = with_w16 ? malloc(n * sizeof(uint16_t)) : NULL;
    float *d_p = gpu->alloc(gpu, (n + 4) * sizeof(float)), *d_g = gpu->alloc(gpu, (n + 4) * sizeof(float));
    float *d_m = gpu->alloc(gpu, (n + 4) * sizeof(float)), *d_v = gpu->alloc(gpu, (n + 4) * sizeof(float));
    uint16_t *d_w16 = with_w16 ? dev_poisoned(gpu, (n + 4) * sizeof(uint16_t)) : NULL;
    float *P = d_p + off[0], *G = d_g + off[1], *M = d_m + off[2], *V = d_v + off[3];
    uint16_t *W = with_w16 ? d_w16 + off[4] : NULL;
    gpu->copy(gpu, P, p, n * sizeof(float), COPY_H2D);
    gpu->copy(gpu, M, m, n * sizeof(float), COPY_H2D);
    gpu->copy(gpu, V, v, n * sizeof(float), COPY_H2D);
    for (int step = 1; step <= 3; step++) {
        float *g = host_random(n, -1.0f, 1.0f);
        if (step == 1) g[0] = 0.0f;   // v̂ = 0: the update is 0/(0+eps) (+ decay)
        if (n > 2) g[n - 1] = 1e3f;
        gpu->copy(gpu, G, g, n * sizeof(float), COPY_H2D);
        float lr = 3e-4f * (float)step;
        float bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
        cpu->adamw_update(cpu, p, w16, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2, gs);
        gpu->adamw_update(gpu, P, W, G, M, V, n, lr, b1, b2, eps, wd, bc1, bc2, gs);
        free(g);
    }
    CHECK_BYTES_EQUAL(gpu, P, p, n * sizeof(float), what);
    CHECK_BYTES_EQUAL(gpu, M, m, n * sizeof(float), what);
    CHECK_BYTES_EQUAL(gpu, V, v, n * sizeof(float), what);
    if (with_w16) {
        CHECK_BYTES_EQUAL(gpu, W, w16, n * sizeof(uint16_t), what);
        // and each is bf16(p) of the GPU's p
        float *gp = host_download(gpu, P, n * sizeof(float));
        uint16_t *gw = host_download(gpu, W, n * sizeof(uint16_t));
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += gw[i] != bf16_from_f32(gp[i]);
        CHECK(bad == 0, "%s: %zu of %zu bf16 copies are not bf16(p)", what, bad, n);
        // the elements either side of the view untouched (still the poison)
        uint16_t edge[2];
        if (off[4] > 0) {
            gpu->copy(gpu, edge, W - 1, sizeof(uint16_t), COPY_D2H);
            CHECK(edge[0] == 0xFFFF, "%s: w16[-1] written (%#x)", what, edge[0]);
        }
        gpu->copy(gpu, edge + 1, W + n, sizeof(uint16_t), COPY_D2H);
        CHECK(edge[1] == 0xFFFF, "%s: w16[n] written (%#x)", what, edge[1]);
        free(gp);
        free(gw);
    }
    // p's neighbours untouched (alloc zero-fills)
    float after;
    gpu->copy(gpu, &after, P + n, sizeof(float), COPY_D2H);
    CHECK(after == 0.0f, "%s: p[n] written (%g)", what, (double)after);
    gpu->free(gpu, d_p); gpu->free(gpu, d_g); gpu->free(gpu, d_m); gpu->free(gpu, d_v);
    if (d_w16) gpu->free(gpu, d_w16);
    free(p); free(m); free(v); free(w16);
}

// ---- Σ x² (double) at size n, from an aligned and a misaligned copy
static void test_sum_squares(Backend *gpu, Backend *cpu, size_t n) {
    char what[120];
    snprintf(what, sizeof what, "sum_squares n=%zu", n);
    float *x = host_random(n, -2.0f, 2.0f);
    double want = cpu->sum_squares(cpu, x, n);
    float *d_x = dev_floats(gpu, x, n);
    float *d_buf = gpu->alloc(gpu, (n + 1) * sizeof(float));
    gpu->copy(gpu, d_buf + 1, x, n * sizeof(float), COPY_H2D);
    double got = gpu->sum_squares(gpu, d_x, n);
    CHECK(rel_diff(got, want) <= 1e-12, "%s: %.17g, CPU %.17g (relative %.3g)", what, got, want, rel_diff(got, want));
    double again = gpu->sum_squares(gpu, d_x, n);
    CHECK(same_double(got, again), "%s: twice %.17g then %.17g", what, got, again);
    double mis = gpu->sum_squares(gpu, d_buf + 1, n);
    CHECK(same_double(got, mis), "%s: misaligned %.17g, aligned %.17g", what, mis, got);
    // a view that starts one element in (the model's per-tensor ranges)
    if (n > 1) {
        double want1 = cpu->sum_squares(cpu, x + 1, n - 1), got1 = gpu->sum_squares(gpu, d_x + 1, n - 1);
        CHECK(rel_diff(got1, want1) <= 1e-12, "%s: from element 1 %.17g, CPU %.17g", what, got1, want1);
    }
    gpu->free(gpu, d_x);
    gpu->free(gpu, d_buf);
    free(x);
}

static float float_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_count_nonfinite(Backend *gpu, Backend *cpu) {
    size_t n = 1000003;
    float *x = host_random(n, -100.0f, 100.0f);
    x[0] = NAN;
    x[n - 1] = INFINITY;
    x[4097] = -INFINITY;
    x[500001] = float_bits(0xFFC00001u);   // a negative NaN with a payload
    x[777] = float_bits(0x7F800001u);      // a signalling NaN
    x[1] = FLT_MAX;                        // finite extremes: not counted
    x[2] = -FLT_MAX;
    x[3] = float_bits(1u);                 // the smallest denormal
    x[4] = -0.0f;
    float *d_x = dev_floats(gpu, x, n);
    size_t cpu_count = cpu->count_nonfinite(cpu, x, n);
    CHECK(cpu_count == 5, "count_nonfinite: the CPU counts %zu, 5 planted", cpu_count);
    size_t got = gpu->count_nonfinite(gpu, d_x, n);
    CHECK(got == 5, "count_nonfinite n=%zu: %zu, want 5", n, got);
    got = gpu->count_nonfinite(gpu, d_x, n);
    CHECK(got == 5, "count_nonfinite n=%zu, twice: %zu, want 5", n, got);
    got = gpu->count_nonfinite(gpu, d_x + 1, n - 1);
    CHECK(got == 4, "count_nonfinite from element 1: %zu, want 4", got);
    got = gpu->count_nonfinite(gpu, d_x, n - 1);
    CHECK(got == 4, "count_nonfinite without the last: %zu, want 4", got);
    got = gpu->count_nonfinite(gpu, d_x + 4096, 2);
    CHECK(got == 1, "count_nonfinite [4096, 4098): %zu, want 1", got);
    got = gpu->count_nonfinite(gpu, d_x + 5, 700);
    CHECK(got == 0, "count_nonfinite [5, 705): %zu, want 0", got);
    got = gpu->count_nonfinite(gpu, d_x, 0);
    CHECK(got == 0, "count_nonfinite n=0: %zu, want 0", got);
    // dense: every third element +inf, at two alignments
    size_t m = 100003, want = (m + 2) / 3;
    for (size_t i = 0; i < m; i++) x[i] = i % 3 == 0 ? INFINITY : (float)i;
    float *d_y = dev_floats(gpu, x, m);
    got = gpu->count_nonfinite(gpu, d_y, m);
    CHECK(got == want, "count_nonfinite, every third of %zu: %zu, want %zu", m, got, want);
    CHECK(cpu->count_nonfinite(cpu, x, m) == want, "count_nonfinite: the CPU disagrees on every third");
    got = gpu->count_nonfinite(gpu, d_y + 1, m - 1);
    CHECK(got == want - 1, "count_nonfinite, every third from element 1: %zu, want %zu", got, want - 1);
    gpu->free(gpu, d_x);
    gpu->free(gpu, d_y);
    free(x);
}

// ---- many tensors at once (optim.cu's multi-tensor path). A model-like flat layout: `count` tensors
// of odd sizes back to back (so their starts fall at every alignment; some span several of the
// kernel's 65536-element chunks, some are empty), decay on every other one, the moments at
// state_off elements from the parameters' offsets (ZeRO's pieces: 0 keeps p, g, m, v lined up,
// 1 makes every tensor take the scalar path). The same bits as the CPU's per-tensor AdamW, three
// steps; the table changes between calls (a re-upload) and stays (the cached table).
static const size_t mt_sizes[] = {1, 3, 0, 7, 65535, 65536, 65537, 5, 131075, 2, 200003, 4, 13, 64, 65541, 9, 1023,
                                  4097, 6, 1, 33, 70001, 17, 8, 129, 11, 65536, 3, 250007, 2};
enum { MT_COUNT = (int)(sizeof mt_sizes / sizeof mt_sizes[0]) };

static void test_adamw_multi(Backend *gpu, Backend *cpu, int with_w16, size_t state_off) {
    char what[160];
    snprintf(what, sizeof what, "adamw_update_multi: %d tensors, w16=%d, moments at +%zu", MT_COUNT, with_w16,
             state_off);
    size_t total = 0, offs[MT_COUNT];
    for (int i = 0; i < MT_COUNT; i++) { offs[i] = total + 1; total += mt_sizes[i] + 1; }   // odd starts
    total += 1;
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, gs = 0.7f;
    float *p = host_random(total, -1.0f, 1.0f), *m = calloc(total + state_off, sizeof(float));
    float *v = calloc(total + state_off, sizeof(float));
    uint16_t *w16 = with_w16 ? calloc(total, sizeof(uint16_t)) : NULL;
    float *d_p = dev_floats(gpu, p, total), *d_g = gpu->alloc(gpu, total * sizeof(float));
    float *d_m = gpu->alloc(gpu, (total + state_off) * sizeof(float));
    float *d_v = gpu->alloc(gpu, (total + state_off) * sizeof(float));
    uint16_t *d_w16 = with_w16 ? gpu->alloc(gpu, total * sizeof(uint16_t)) : NULL;
    AdamWSlice hs[MT_COUNT], ds[MT_COUNT];
    for (int i = 0; i < MT_COUNT; i++) {
        size_t o = offs[i];
        float wd = i % 2 ? 0.1f : 0.0f;
        hs[i] = (AdamWSlice){p + o, w16 ? w16 + o : NULL, NULL, m + o + state_off, v + o + state_off, mt_sizes[i], wd};
        ds[i] = (AdamWSlice){d_p + o, d_w16 ? d_w16 + o : NULL, d_g + o, d_m + o + state_off, d_v + o + state_off,
                             mt_sizes[i], wd};
    }
    for (int step = 1; step <= 3; step++) {
        float *g = host_random(total, -1.0f, 1.0f);
        g[offs[4]] = 1e3f;
        gpu->copy(gpu, d_g, g, total * sizeof(float), COPY_H2D);
        float lr = 3e-4f * (float)step, bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
        for (int i = 0; i < MT_COUNT; i++)
            cpu->adamw_update(cpu, hs[i].p, hs[i].w16, g + offs[i], hs[i].m, hs[i].v, hs[i].n, lr, b1, b2, eps,
                              hs[i].wd, bc1, bc2, gs);
        if (step == 2) {   // a different table: the first 7 tensors, then the rest
            gpu->adamw_update_multi(gpu, ds, 7, lr, b1, b2, eps, bc1, bc2, gs);
            gpu->adamw_update_multi(gpu, ds + 7, MT_COUNT - 7, lr, b1, b2, eps, bc1, bc2, gs);
        } else {
            gpu->adamw_update_multi(gpu, ds, MT_COUNT, lr, b1, b2, eps, bc1, bc2, gs);
        }
        free(g);
    }
    CHECK_BYTES_EQUAL(gpu, d_p, p, total * sizeof(float), what);
    CHECK_BYTES_EQUAL(gpu, d_m, m, (total + state_off) * sizeof(float), what);
    CHECK_BYTES_EQUAL(gpu, d_v, v, (total + state_off) * sizeof(float), what);
    if (with_w16) CHECK_BYTES_EQUAL(gpu, d_w16, w16, total * sizeof(uint16_t), what);
    gpu->free(gpu, d_p); gpu->free(gpu, d_g); gpu->free(gpu, d_m); gpu->free(gpu, d_v);
    if (d_w16) gpu->free(gpu, d_w16);
    free(p); free(m); free(v); free(w16);
}

// Σ x² and the non-finite count of many ranges in one pass: each Σ within 1e-12 of the CPU's
// sum_squares of that range, the counts exact; a NaN planted in one tensor and an inf in another
// are found in those tensors only (the trainer's first non-finite gradient), and both sums are not
// finite there and finite everywhere else.
static void test_stats_multi(Backend *gpu, Backend *cpu) {
    size_t total = 0, offs[MT_COUNT];
    for (int i = 0; i < MT_COUNT; i++) { offs[i] = total + (size_t)(i % 3); total += mt_sizes[i] + (size_t)(i % 3); }
    float *x = host_random(total, -3.0f, 3.0f);
    const int nan_at = 10, inf_at = 28;   // 200003 and 250007 elements: several chunks each
    x[offs[nan_at] + mt_sizes[nan_at] - 1] = NAN;
    x[offs[inf_at] + 70000] = -INFINITY;
    float *d_x = dev_floats(gpu, x, total);
    const float *hx[MT_COUNT], *dx[MT_COUNT];
    size_t n[MT_COUNT], bad[MT_COUNT], cbad[MT_COUNT];
    double sq[MT_COUNT], csq[MT_COUNT];
    for (int i = 0; i < MT_COUNT; i++) {
        hx[i] = x + offs[i];
        dx[i] = d_x + offs[i];
        n[i] = mt_sizes[i];
    }
    cpu->tensor_stats_multi(cpu, hx, n, MT_COUNT, csq, cbad);
    for (int rep = 0; rep < 2; rep++) {   // the second call reuses the uploaded table
        memset(bad, 0xAB, sizeof bad);
        gpu->tensor_stats_multi(gpu, dx, n, MT_COUNT, sq, bad);
        for (int i = 0; i < MT_COUNT; i++) {
            size_t want_bad = i == nan_at || i == inf_at;
            CHECK(bad[i] == want_bad && cbad[i] == want_bad, "tensor_stats_multi rep %d, tensor %d (%zu elements): "
                  "%zu non-finite (CPU %zu), want %zu", rep, i, n[i], bad[i], cbad[i], want_bad);
            double one = cpu->sum_squares(cpu, hx[i], n[i]);
            CHECK(same_double(one, csq[i]), "tensor %d: the CPU's multi-tensor Σ x² is not its sum_squares", i);
            if (want_bad) CHECK(!isfinite(sq[i]), "tensor %d: Σ x² %g over a non-finite value", i, sq[i]);
            else CHECK(rel_diff(sq[i], one) <= 1e-12, "tensor_stats_multi rep %d, tensor %d (%zu elements): Σ x² "
                       "%.17g, CPU %.17g", rep, i, n[i], sq[i], one);
        }
    }
    // only the counts, or only the sums
    size_t bad2[MT_COUNT];
    gpu->tensor_stats_multi(gpu, dx, n, MT_COUNT, NULL, bad2);
    CHECK(memcmp(bad, bad2, sizeof bad) == 0, "tensor_stats_multi: the counts alone differ");
    double sq2[MT_COUNT];
    gpu->tensor_stats_multi(gpu, dx + 1, n + 1, MT_COUNT - 1, sq2, NULL);
    CHECK(same_double(sq2[0], sq[1]) && same_double(sq2[MT_COUNT - 2], sq[MT_COUNT - 1]),
          "tensor_stats_multi: a range's sum depends on the other ranges of the call");
    gpu->free(gpu, d_x);
    free(x);
}

// The deferred loss (crossentropy_deferred, loss_end_microbatch, loss_take): two micro-batches of
// two chunks each give the bits of adding crossentropy_forward_backward's returned sums (from 0 per
// micro-batch, then from 0 over the step), the same rows and gradients; on the CPU too.
static void test_ce_deferred(Backend *gpu, Backend *cpu, int n, int v) {
    char what[96];
    snprintf(what, sizeof what, "crossentropy_deferred n=%d v=%d", n, v);
    float *z[2];
    int32_t *tg[2];
    make_ce_inputs(n, v, &z[0], &tg[0]);
    make_ce_inputs(n, v, &z[1], &tg[1]);
    size_t nv = (size_t)n * v;
    int half = n / 2;
    for (int side = 0; side < 2; side++) {
        Backend *be = side ? cpu : gpu;
        double step_sum = 0.0;
        float *grad_a[2], *grad_b[2];
        for (int mb = 0; mb < 2; mb++) {   // returned sums, added as the model did
            int32_t *t = side ? tg[mb] : dev_upload(gpu, tg[mb], (size_t)n * sizeof(int32_t));
            float *za = side ? dup_floats(z[mb], nv) : dev_floats(gpu, z[mb], nv);
            float *rl = side ? malloc((size_t)n * sizeof(float)) : gpu->alloc(gpu, (size_t)n * sizeof(float));
            double mb_sum = 0.0;
            mb_sum += be->crossentropy_forward_backward(be, za, t, rl, half, v, 0.25f);
            mb_sum += be->crossentropy_forward_backward(be, za + (size_t)half * v, t + half, rl + half, n - half, v, 0.25f);
            step_sum += mb_sum;
            grad_a[mb] = za;
            if (side) free(rl); else gpu->free(gpu, rl);
            if (!side) gpu->free(gpu, t);
        }
        for (int mb = 0; mb < 2; mb++) {   // deferred
            int32_t *t = side ? tg[mb] : dev_upload(gpu, tg[mb], (size_t)n * sizeof(int32_t));
            float *zb = side ? dup_floats(z[mb], nv) : dev_floats(gpu, z[mb], nv);
            float *rl = side ? malloc((size_t)n * sizeof(float)) : gpu->alloc(gpu, (size_t)n * sizeof(float));
            be->crossentropy_deferred(be, zb, t, rl, half, v, 0.25f, 1);
            be->crossentropy_deferred(be, zb + (size_t)half * v, t + half, rl + half, n - half, v, 0.25f, 1);
            be->loss_end_microbatch(be);
            grad_b[mb] = zb;
            if (side) free(rl); else gpu->free(gpu, rl);
            if (!side) gpu->free(gpu, t);
        }
        double got = be->loss_take(be), again = be->loss_take(be);
        CHECK(same_double(got, step_sum), "%s on %s: deferred %.17g, returned sums %.17g", what, be->name, got,
              step_sum);
        CHECK(again == 0.0, "%s on %s: a second loss_take gives %g, want 0", what, be->name, again);
        for (int mb = 0; mb < 2; mb++) {
            if (side) {
                CHECK(memcmp(grad_a[mb], grad_b[mb], nv * sizeof(float)) == 0, "%s on cpu: gradients differ", what);
                free(grad_a[mb]);
                free(grad_b[mb]);
            } else {
                float *ga = host_download(gpu, grad_a[mb], nv * sizeof(float));
                CHECK_BYTES_EQUAL(gpu, grad_b[mb], ga, nv * sizeof(float), what);
                free(ga);
                gpu->free(gpu, grad_a[mb]);
                gpu->free(gpu, grad_b[mb]);
            }
        }
    }
    // evaluation (train 0): the logits untouched, the loss as crossentropy_loss's
    int32_t *d_t = dev_upload(gpu, tg[0], (size_t)n * sizeof(int32_t));
    float *d_z = dev_floats(gpu, z[0], nv), *d_rl = gpu->alloc(gpu, (size_t)n * sizeof(float));
    double want = gpu->crossentropy_loss(gpu, d_z, d_t, d_rl, n, v);
    gpu->crossentropy_deferred(gpu, d_z, d_t, d_rl, n, v, 1.0f, 0);
    gpu->loss_end_microbatch(gpu);
    double got = gpu->loss_take(gpu);
    CHECK(same_double(got, want), "%s, evaluation: %.17g, crossentropy_loss %.17g", what, got, want);
    CHECK_BYTES_EQUAL(gpu, d_z, z[0], nv * sizeof(float), "crossentropy_deferred (evaluation) wrote the logits");
    gpu->free(gpu, d_t); gpu->free(gpu, d_z); gpu->free(gpu, d_rl);
    for (int i = 0; i < 2; i++) { free(z[i]); free(tg[i]); }
}

// The gradient left in bf16 (crossentropy_deferred16, the CUDA backend at bf16): the same loss sum as
// crossentropy_deferred's, and row r's first v bf16 values in its own storage are its fp32 gradient rounded
// (bf16_from_f32), bit for bit. v odd (rows and their bf16 halves off 16 bytes: the scalar stores) and even.
static void test_ce_deferred16(Backend *gpu, Backend *gpu16, int n, int v) {
    char what[96];
    snprintf(what, sizeof what, "crossentropy_deferred16 n=%d v=%d", n, v);
    float *z;
    int32_t *tg;
    make_ce_inputs(n, v, &z, &tg);
    size_t nv = (size_t)n * v;
    int32_t *t = dev_upload(gpu, tg, (size_t)n * sizeof(int32_t)), *t16 = dev_upload(gpu16, tg, (size_t)n * sizeof(int32_t));
    float *za = dev_floats(gpu, z, nv), *zb = dev_floats(gpu16, z, nv);
    float *rl = gpu->alloc(gpu, (size_t)n * sizeof(float)), *rl16 = gpu16->alloc(gpu16, (size_t)n * sizeof(float));
    gpu->crossentropy_deferred(gpu, za, t, rl, n, v, 0.25f, 1);
    gpu->loss_end_microbatch(gpu);
    gpu16->crossentropy_deferred16(gpu16, zb, t16, rl16, n, v, 0.25f);
    gpu16->loss_end_microbatch(gpu16);
    double want = gpu->loss_take(gpu), got = gpu16->loss_take(gpu16);
    CHECK(same_double(got, want), "%s: loss %.17g, crossentropy_deferred's %.17g", what, got, want);
    float *ga = host_download(gpu, za, nv * sizeof(float));
    uint16_t *gb = host_download(gpu16, zb, nv * sizeof(float));
    size_t bad = 0;
    for (size_t r = 0; r < (size_t)n; r++)
        for (size_t c = 0; c < (size_t)v; c++) bad += gb[2 * v * r + c] != bf16_from_f32(ga[v * r + c]);
    CHECK(bad == 0, "%s: %zu of %zu bf16 gradients differ from the fp32 gradient rounded", what, bad, nv);
    free(ga), free(gb), free(z), free(tg);
    gpu->free(gpu, t), gpu->free(gpu, za), gpu->free(gpu, rl);
    gpu16->free(gpu16, t16), gpu16->free(gpu16, zb), gpu16->free(gpu16, rl16);
}

// The step's guard on the device (step_guard, adamw_update_guarded, step_take; issue 30): on each backend
// the bits of the host's way — sum_squares, backend_clip_scale(√Σ, max_norm) on the host, then
// adamw_update_multi with that factor, or nothing where the loss or the norm is not finite: the loss sum
// and Σ g² read back, and p, m, v, w16 after the update, bitwise. With clipping on (max_norm 1 against a
// norm of ~180), off (max_norm 0), not reached (1e6), a NaN gradient and an infinite loss (skipped:
// nothing written).
enum { GUARD_FINITE, GUARD_NAN_GRAD, GUARD_INF_LOSS };
static void test_step_guard(Backend *be, float max_norm, int poison) {
    char what[128];
    snprintf(what, sizeof what, "step_guard on %s: max_norm %g, %s", be->name, max_norm,
             poison == GUARD_FINITE ? "finite" : poison == GUARD_NAN_GRAD ? "a NaN gradient" : "an infinite loss");
    const size_t n = 100003, half = 50001;
    const int rows = 5, v = 77;
    float *logits, *p = host_random(n, -1.0f, 1.0f), *g = host_random(n, -1.0f, 1.0f);
    float *m = host_random(n, -0.1f, 0.1f), *vv = host_random(n, 0.0f, 0.1f);
    int32_t *tg;
    make_ce_inputs(rows, v, &logits, &tg);
    if (poison == GUARD_NAN_GRAD) g[777] = NAN;
    if (poison == GUARD_INF_LOSS) {   // row 0's loss lse − z[target] overflows to +inf (fp32) on both backends
        logits[tg[0]] = -3e38f;
        logits[(tg[0] + 1) % v] = 3e38f;
    }
    float *d_z = dev_floats(be, logits, (size_t)rows * v), *d_rl = be->alloc(be, (size_t)rows * sizeof(float));
    int32_t *d_t = dev_upload(be, tg, (size_t)rows * sizeof(int32_t));
    float *d_g = dev_floats(be, g, n);
    float *d[2][4];   // [reference, guarded][p, m, v, w16 (as uint16_t)]
    for (int k = 0; k < 2; k++) {
        d[k][0] = dev_floats(be, p, n);
        d[k][1] = dev_floats(be, m, n);
        d[k][2] = dev_floats(be, vv, n);
        d[k][3] = be->alloc(be, n * sizeof(uint16_t));
    }
    AdamWSlice sl[2][2];
    for (int k = 0; k < 2; k++) {
        uint16_t *w16 = (uint16_t *)d[k][3];
        sl[k][0] = (AdamWSlice){d[k][0], w16, d_g, d[k][1], d[k][2], half, 0.1f};
        sl[k][1] = (AdamWSlice){d[k][0] + half, w16 + half, d_g + half, d[k][1] + half, d[k][2] + half, n - half, 0.0f};
    }
    const float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, bc1 = 0.19f, bc2 = 0.0975f;
    // the host's way
    double loss_ref = be->crossentropy_loss(be, d_z, d_t, d_rl, rows, v);
    double sq_ref = be->sum_squares(be, d_g, n), norm = sqrt(sq_ref);
    int skip = !isfinite(loss_ref) || !isfinite(norm);
    CHECK(skip == (poison != GUARD_FINITE), "%s: the host's verdict %d", what, skip);
    if (!skip) be->adamw_update_multi(be, sl[0], 2, lr, b1, b2, eps, bc1, bc2, backend_clip_scale(norm, max_norm));
    // the device's
    be->crossentropy_deferred(be, d_z, d_t, d_rl, rows, v, 1.0f, 0);
    be->loss_end_microbatch(be);
    be->step_guard(be, d_g, n, max_norm);
    be->adamw_update_guarded(be, sl[1], 2, lr, b1, b2, eps, bc1, bc2);
    double loss_sum = -1.0, sumsq = -1.0;
    be->step_take(be, &loss_sum, &sumsq);
    CHECK(same_double(loss_sum, loss_ref), "%s: step_take's loss %.17g, crossentropy_loss %.17g", what, loss_sum,
          loss_ref);
    CHECK(same_double(sumsq, sq_ref), "%s: step_take's Σ g² %.17g, sum_squares %.17g", what, sumsq, sq_ref);
    CHECK(be->loss_take(be) == 0.0, "%s: the loss sum is not 0 after step_take", what);
    const float *host[3] = {p, m, vv};
    for (int a = 0; a < 4; a++) {
        size_t bytes = n * (a == 3 ? sizeof(uint16_t) : sizeof(float));
        void *want = host_download(be, d[0][a], bytes);
        CHECK_BYTES_EQUAL(be, d[1][a], want, bytes, what);
        if (skip && a < 3) CHECK(memcmp(want, host[a], bytes) == 0, "%s: a skipped step changed the state", what);
        free(want);
    }
    for (int k = 0; k < 2; k++)
        for (int a = 0; a < 4; a++) be->free(be, d[k][a]);
    be->free(be, d_z); be->free(be, d_rl); be->free(be, d_t); be->free(be, d_g);
    free(logits); free(tg); free(p); free(g); free(m); free(vv);
}

int main(void) {
    Backend *gpu = cuda_or_skip(PRECISION_FP32);
    char err[256] = "";
    Backend *cpu = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    if (!cpu) {
        fprintf(stderr, "cannot open the CPU backend: %s\n", err);
        return 1;
    }

    test_ce_whole(gpu, cpu, 37, 1001, 0.37f);
    test_ce_whole(gpu, cpu, 64, 50304, 1.0f / 64.0f);
    test_ce_whole(gpu, cpu, 3, 7, 2.0f);   // fewer columns than one warp's groups
    test_ce_nan_logit(gpu, cpu, 9, 1001);

    test_vocab_parallel(gpu, cpu, 37, 1001, 2, 501, 0.37f);      // one padded column on rank 1
    test_vocab_parallel(gpu, cpu, 37, 1001, 3, 334, 0.5f);       // t = 3, one padded column
    test_vocab_parallel(gpu, cpu, 64, 50257, 2, 25152, 1.0f / 64.0f);   // GPT-2's vocabulary padded to 50304
    test_vocab_parallel(gpu, cpu, 9, 40, 4, 16, 1.0f);           // rank 3 entirely padding (k = 0)

    static const int aligned[5] = {0, 0, 0, 0, 0}, shifted[5] = {1, 1, 1, 1, 1}, mixed[5] = {1, 0, 2, 3, 1};
    const int *offsets[3] = {aligned, shifted, mixed};
    const size_t sizes[] = {1, 3, 7, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int o = 0; o < 3; o++)
            for (int w = 0; w < 2; w++) {
                test_adamw(gpu, cpu, sizes[s], 0.1f, w, offsets[o]);
                if (sizes[s] == 100003) test_adamw(gpu, cpu, sizes[s], 0.0f, w, offsets[o]);
            }

    const size_t ss[] = {1, 5, 37, 1024, 1025, 100003, 3145733};
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) test_sum_squares(gpu, cpu, ss[i]);

    test_count_nonfinite(gpu, cpu);

    for (int w = 0; w < 2; w++) {
        test_adamw_multi(gpu, cpu, w, 0);
        test_adamw_multi(gpu, cpu, w, 1);
    }
    test_stats_multi(gpu, cpu);
    test_ce_deferred(gpu, cpu, 37, 1001);
    test_ce_deferred(gpu, cpu, 64, 50304);
    {
        CHECK(!gpu->crossentropy_deferred16 && !cpu->crossentropy_deferred16, "crossentropy_deferred16 at fp32");
        Backend *gpu16 = cuda_or_skip(PRECISION_BF16);
        CHECK(gpu16->crossentropy_deferred16 != NULL, "no crossentropy_deferred16 at bf16");
        if (gpu16->crossentropy_deferred16) {
            test_ce_deferred16(gpu, gpu16, 37, 1001);
            test_ce_deferred16(gpu, gpu16, 64, 50304);
            test_ce_deferred16(gpu, gpu16, 3, 7);
            test_ce_deferred16(gpu, gpu16, 5, 8192 + 4);   // 512 threads a row: windows of 8192 columns
        }
        backend_close(gpu16);
    }
    for (int side = 0; side < 2; side++) {
        Backend *be = side ? cpu : gpu;
        test_step_guard(be, 1.0f, GUARD_FINITE);
        test_step_guard(be, 0.0f, GUARD_FINITE);
        test_step_guard(be, 1e6f, GUARD_FINITE);
        test_step_guard(be, 1.0f, GUARD_NAN_GRAD);
        test_step_guard(be, 1.0f, GUARD_INF_LOSS);
    }

    backend_close(cpu);
    backend_close(gpu);
    return check_summary();
}
