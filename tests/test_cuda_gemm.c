// The CUDA GEMMs (src/backend/cuda/gemm.cu) against the CPU backend on the same inputs: linear_forward,
// linear_forward_acc (y += x·Wᵀ onto known values),
// linear_backward, bias_backward and linear_forward_rows, fp32 and bf16 (w16 given), at odd shapes with
// strided views (ldx > in, ldy > out, ldx_out > in) and misaligned pointers (views starting one float in),
// bias NULL or not, dx NULL or not, accumulate on and off, db NULL or not, and a GPT-2-sized shape. Every
// GPU output buffer starts poisoned (NaN bytes) or, where the op accumulates, with known values; the
// columns of a strided view past its width must come back exactly as they were. Each op runs twice and
// must give the same bits; under bf16, x16 given (and x NULL) must give the same bits as x rounded by the
// backend.
//
// Tolerances (relative L2 over the view).
//   fp32, 1e-5: both sides compute the same fp32 products; only the summation order differs (cuBLASLt's
//   tiles against OpenBLAS's). For k terms that is about sqrt(k)·2^-24 relative for these well-scaled
//   random inputs (k ≤ 3072 here: < 4e-6), while a wrong index, stride, transpose or beta is O(1).
//   bf16, 5e-5: both sides round x, W and dy to the same bf16 bits (bf16_from_f32), every product of two
//   bf16 values is exact in fp32 and both accumulate in fp32, so again only the summation order differs,
//   plus the rounding of the CPU's native bf16 dot-product instructions (pairs of products added before
//   the accumulation), a few 2^-24 per term. A bf16 rounding missed or done differently (x or dy fed in
//   fp32, truncation instead of round-to-nearest-even) shows as ~1e-3, twenty times the tolerance.
//   On the GPU's tensor cores a bf16 GEMM is not exactly an fp32 GEMM of the rounded operands: the MMA
//   aligns a block of products to the largest exponent and truncates before adding it to the fp32
//   accumulator (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021), so the error grows
//   with the reduction length k. Measured on an H100 (cuBLASLt, CUDA 13): 5.75e-5 at k = 50304 (dx of
//   GPT-2's output layer), within 1e-5 for k <= 3072. The bf16 tolerances therefore grow as sqrt(k)
//   past k = 512 (tc_tol: 9.9e-5 at k = 50304, 2.4e-5 at 3072), still ten times under a missed rounding.
//   Bias gradients: fp32 sums of dy (fp32 at both precisions) over ≤ 2050 rows in two different fixed
//   orders; with the positive-mean inputs used the rounding is ~sqrt(n)·2^-24 relative < 3e-6: 1e-5.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/cpu/bf16.h"
#include "check.h"
#include "cuda_check.h"

#define TOL_FP32 1e-5
#define TOL_BF16 5e-5
#define TOL_DB 1e-5

// The tensor cores' bf16 GEMM against an fp32 GEMM of the same rounded operands, reduction length k.
static double tc_tol(int k) { return k > 512 ? TOL_FP32 * sqrt(k / 512.0) : TOL_FP32; }
// bf16 on the GPU against the CPU's bf16: the CPU's own rounding (TOL_BF16) and the tensor cores'.
static double bf16_tol(int k) { return TOL_BF16 - TOL_FP32 + tc_tol(k); }

typedef struct {
    int n, in, out;
    int ldx, ldy, ldxo;   // row strides of x, of y and dy, of dx
    int off;              // x, y, dy, dx, w and bias views start this many floats into their buffers
} Case;


static void *alloc_n(size_t n, size_t size) { return malloc((n ? n : 1) * size); }
static float *fdup(const float *p, size_t n) {
    float *q = malloc((n ? n : 1) * sizeof(float));
    memcpy(q, p, n * sizeof(float));
    return q;
}
static float *fdownload(Backend *gpu, const void *dev, size_t n) { return host_download(gpu, dev, n * sizeof(float)); }
static float *poison_buf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    memset(p, 0xFF, n * sizeof(float));
    return p;
}
// The CPU's copy of an initial output: the same, but a poisoned view zeroed (the CPU overwrites it; no
// NaN should reach its reference even if a library read C with beta 0).
static float *cpu_start(const float *init, size_t total, int off, int rows, int cols, int ld, int poisoned) {
    float *c = fdup(init, total);
    if (poisoned)
        for (int r = 0; r < rows; r++) memset(c + off + (size_t)r * ld, 0, (size_t)cols * sizeof(float));
    return c;
}
// bf16 round trip of a host array (the value a bf16 GEMM multiplies).
static float *rounded(const float *x, size_t n) {
    float *r = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) r[i] = bf16_to_f32(bf16_from_f32(x[i]));
    return r;
}
static uint16_t *packed(const float *x, int ld, int rows, int cols) {
    uint16_t *p = alloc_n((size_t)rows * cols, sizeof(uint16_t));
    bf16_pack_rows(p, cols, x, ld, rows, cols);
    return p;
}

// got's view [rows, cols] (row stride ld, starting at off) within tol of ref's view; every element outside
// the view bitwise as init had it.
static void check_view(const float *got, const float *ref, const float *init, size_t total, int off, int rows, int cols,
                       int ld, double tol, const char *what) {
    float *a = alloc_n((size_t)rows * cols, sizeof(float));
    float *b = alloc_n((size_t)rows * cols, sizeof(float));
    size_t outside_bad = 0;
    for (size_t i = 0; i < total; i++) {
        long j = (long)i - off;
        int inside = j >= 0 && j / ld < rows && j % ld < cols;
        if (inside) {
            size_t v = (size_t)(j / ld) * cols + (size_t)(j % ld);
            a[v] = got[i];
            b[v] = ref[i];
        } else if (memcmp(&got[i], &init[i], sizeof(float))) {
            outside_bad++;
        }
    }
    double e = rel_l2(a, b, (size_t)rows * cols);
    CHECK(e <= tol, "%s: relative L2 error %.3g, tolerance %.1g", what, e, tol);
    CHECK(outside_bad == 0, "%s: %zu elements outside the [%d, %d] view (row stride %d) were written", what,
          outside_bad, rows, cols, ld);
    free(a);
    free(b);
}
static void check_same_bits(const float *a, const float *b, size_t n, const char *what) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    CHECK(bad == 0, "%s: %zu of %zu floats differ between two runs", what, bad, n);
}

// ---- linear_forward
static void run_forward(Backend *cpu, Backend *gpu, const Case *t, int bf16, int with_bias) {
    char what[160];
    snprintf(what, sizeof what, "forward %s n=%d in=%d out=%d ldx=%d ldy=%d off=%d bias=%d", bf16 ? "bf16" : "fp32",
             t->n, t->in, t->out, t->ldx, t->ldy, t->off, with_bias);
    size_t nx = (size_t)t->off + (size_t)t->n * t->ldx, ny = (size_t)t->off + (size_t)t->n * t->ldy;
    size_t nw = (size_t)t->off + (size_t)t->out * t->in, nb = (size_t)t->off + (size_t)t->out;
    float *x = host_random(nx, -1.0f, 1.0f), *w = host_random(nw, -1.0f, 1.0f), *bias = host_random(nb, -1.0f, 1.0f);
    uint16_t *w16 = bf16 ? packed(w + t->off, t->in, t->out, t->in) : NULL;
    uint16_t *x16 = bf16 ? packed(x + t->off, t->ldx, t->n, t->in) : NULL;
    const float *b_h = with_bias ? bias + t->off : NULL;

    float *y_init = poison_buf(ny);
    float *y_cpu = cpu_start(y_init, ny, t->off, t->n, t->out, t->ldy, 1);
    cpu->linear_forward(cpu, y_cpu + t->off, t->ldy, x + t->off, NULL, t->ldx, w + t->off, w16, b_h, t->n, t->in,
                            t->out);

    float *d_x = dev_upload(gpu, x, nx * sizeof(float)), *d_w = dev_upload(gpu, w, nw * sizeof(float));
    float *d_bias = dev_upload(gpu, bias, nb * sizeof(float));
    uint16_t *d_w16 = bf16 ? dev_upload(gpu, w16, (size_t)t->out * t->in * sizeof(uint16_t)) : NULL;
    uint16_t *d_x16 = bf16 ? dev_upload(gpu, x16, (size_t)t->n * t->in * sizeof(uint16_t)) : NULL;
    const float *b_d = with_bias ? d_bias + t->off : NULL;
    float *d_y = dev_upload(gpu, y_init, ny * sizeof(float));
    gpu->linear_forward(gpu, d_y + t->off, t->ldy, d_x + t->off, NULL, t->ldx, d_w + t->off, d_w16, b_d, t->n, t->in,
                        t->out);
    float *y1 = fdownload(gpu, d_y, ny);
    check_view(y1, y_cpu, y_init, ny, t->off, t->n, t->out, t->ldy, bf16 ? bf16_tol(t->in) : TOL_FP32, what);

    // Twice: the same bits.
    gpu->copy(gpu, d_y, y_init, ny * sizeof(float), COPY_H2D);
    gpu->linear_forward(gpu, d_y + t->off, t->ldy, d_x + t->off, NULL, t->ldx, d_w + t->off, d_w16, b_d, t->n, t->in,
                        t->out);
    float *y2 = fdownload(gpu, d_y, ny);
    snprintf(what + strlen(what), sizeof what - strlen(what), " (run twice)");
    check_same_bits(y1, y2, ny, what);
    free(y2);

    if (bf16) {
        // x16 given, x NULL: the GEMM reads the same bits the backend's own rounding gave.
        gpu->copy(gpu, d_y, y_init, ny * sizeof(float), COPY_H2D);
        gpu->linear_forward(gpu, d_y + t->off, t->ldy, NULL, d_x16, t->ldx, d_w + t->off, d_w16, b_d, t->n, t->in,
                            t->out);
        float *y3 = fdownload(gpu, d_y, ny);
        check_same_bits(y1, y3, ny, "forward bf16: x16 given against x rounded by the backend");
        free(y3);
        // The bf16 GEMM is the fp32 GEMM of the rounded operands (GPU only: holds without the CPU's bf16).
        float *xr = rounded(x, nx), *wr = rounded(w, nw);
        float *d_xr = dev_upload(gpu, xr, nx * sizeof(float)), *d_wr = dev_upload(gpu, wr, nw * sizeof(float));
        gpu->copy(gpu, d_y, y_init, ny * sizeof(float), COPY_H2D);
        gpu->linear_forward(gpu, d_y + t->off, t->ldy, d_xr + t->off, NULL, t->ldx, d_wr + t->off, NULL, b_d, t->n,
                            t->in, t->out);
        float *y4 = fdownload(gpu, d_y, ny);
        check_view(y1, y4, y_init, ny, t->off, t->n, t->out, t->ldy, tc_tol(t->in),
                   "forward bf16 against the GPU's fp32 GEMM of the bf16-rounded operands");
        free(y4);
        gpu->free(gpu, d_xr);
        gpu->free(gpu, d_wr);
        free(xr);
        free(wr);
    }
    free(y1);
    gpu->free(gpu, d_x); gpu->free(gpu, d_w); gpu->free(gpu, d_bias); gpu->free(gpu, d_y);
    if (d_w16) gpu->free(gpu, d_w16);
    if (d_x16) gpu->free(gpu, d_x16);
    free(x); free(w); free(bias); free(w16); free(x16); free(y_init); free(y_cpu);
}

// ---- linear_forward_acc: y += x·Wᵀ (beta 1) onto known values, GPU against CPU; y's padding untouched.
static void run_forward_acc(Backend *cpu, Backend *gpu, const Case *t, int bf16) {
    char what[160];
    snprintf(what, sizeof what, "forward_acc %s n=%d in=%d out=%d ldx=%d ldy=%d off=%d", bf16 ? "bf16" : "fp32", t->n,
             t->in, t->out, t->ldx, t->ldy, t->off);
    size_t nx = (size_t)t->off + (size_t)t->n * t->ldx, ny = (size_t)t->off + (size_t)t->n * t->ldy;
    size_t nw = (size_t)t->off + (size_t)t->out * t->in;
    float *x = host_random(nx, -1.0f, 1.0f), *w = host_random(nw, -1.0f, 1.0f), *y_init = host_random(ny, -4.0f, 4.0f);
    uint16_t *w16 = bf16 ? packed(w + t->off, t->in, t->out, t->in) : NULL;
    float *y_cpu = fdup(y_init, ny);
    cpu->linear_forward_acc(cpu, y_cpu + t->off, t->ldy, x + t->off, NULL, t->ldx, w + t->off, w16, t->n, t->in,
                            t->out);
    float *d_x = dev_upload(gpu, x, nx * sizeof(float)), *d_w = dev_upload(gpu, w, nw * sizeof(float));
    uint16_t *d_w16 = bf16 ? dev_upload(gpu, w16, (size_t)t->out * t->in * sizeof(uint16_t)) : NULL;
    float *d_y = dev_upload(gpu, y_init, ny * sizeof(float));
    gpu->linear_forward_acc(gpu, d_y + t->off, t->ldy, d_x + t->off, NULL, t->ldx, d_w + t->off, d_w16, t->n, t->in,
                            t->out);
    float *y1 = fdownload(gpu, d_y, ny);
    check_view(y1, y_cpu, y_init, ny, t->off, t->n, t->out, t->ldy, bf16 ? bf16_tol(t->in) : TOL_FP32, what);
    free(y1);
    gpu->free(gpu, d_x); gpu->free(gpu, d_w); gpu->free(gpu, d_y);
    if (d_w16) gpu->free(gpu, d_w16);
    free(x); free(w); free(w16); free(y_init); free(y_cpu);
}

// ---- linear_backward
static void run_backward(Backend *cpu, Backend *gpu, const Case *t, int bf16, int accumulate, int with_dx,
                         int with_db) {
    char what[200], w2[320];
    snprintf(what, sizeof what, "backward %s n=%d in=%d out=%d ldx=%d lddy=%d ldx_out=%d off=%d acc=%d dx=%d db=%d",
             bf16 ? "bf16" : "fp32", t->n, t->in, t->out, t->ldx, t->ldy, t->ldxo, t->off, accumulate, with_dx, with_db);
    size_t nx = (size_t)t->off + (size_t)t->n * t->ldx, ndy = (size_t)t->off + (size_t)t->n * t->ldy;
    size_t ndx = (size_t)t->off + (size_t)t->n * t->ldxo, nw = (size_t)t->off + (size_t)t->out * t->in;
    size_t nb = (size_t)t->off + (size_t)t->out;
    float *x = host_random(nx, -1.0f, 1.0f), *w = host_random(nw, -1.0f, 1.0f), *dy = host_random(ndy, -0.5f, 1.0f);
    uint16_t *w16 = bf16 ? packed(w + t->off, t->in, t->out, t->in) : NULL;
    uint16_t *x16 = bf16 ? packed(x + t->off, t->ldx, t->n, t->in) : NULL;
    float *dx_init = accumulate ? host_random(ndx, -1.0f, 1.0f) : poison_buf(ndx);
    float *dw_init = host_random(nw, -1.0f, 1.0f), *db_init = host_random(nb, -1.0f, 1.0f);

    float *dx_cpu = cpu_start(dx_init, ndx, t->off, t->n, t->in, t->ldxo, !accumulate);
    float *dw_cpu = fdup(dw_init, nw), *db_cpu = fdup(db_init, nb);
    cpu->linear_backward(cpu, with_dx ? dx_cpu + t->off : NULL, t->ldxo, accumulate, dw_cpu + t->off,
                             with_db ? db_cpu + t->off : NULL, dy + t->off, t->ldy, x + t->off, NULL, t->ldx,
                             w + t->off, w16, t->n, t->in, t->out);

    float *d_x = dev_upload(gpu, x, nx * sizeof(float)), *d_w = dev_upload(gpu, w, nw * sizeof(float));
    float *d_dy = dev_upload(gpu, dy, ndy * sizeof(float));
    uint16_t *d_w16 = bf16 ? dev_upload(gpu, w16, (size_t)t->out * t->in * sizeof(uint16_t)) : NULL;
    uint16_t *d_x16 = bf16 ? dev_upload(gpu, x16, (size_t)t->n * t->in * sizeof(uint16_t)) : NULL;
    float *d_dx = dev_upload(gpu, dx_init, ndx * sizeof(float)), *d_dw = dev_upload(gpu, dw_init, nw * sizeof(float));
    float *d_db = dev_upload(gpu, db_init, nb * sizeof(float));
    float *res[3][3];   // [run][dx, dw, db]
    for (int run = 0; run < 3; run++) {
        if (run == 2 && !bf16) break;
        gpu->copy(gpu, d_dx, dx_init, ndx * sizeof(float), COPY_H2D);
        gpu->copy(gpu, d_dw, dw_init, nw * sizeof(float), COPY_H2D);
        gpu->copy(gpu, d_db, db_init, nb * sizeof(float), COPY_H2D);
        // Run 2 (bf16): x16 given and x NULL.
        gpu->linear_backward(gpu, with_dx ? d_dx + t->off : NULL, t->ldxo, accumulate, d_dw + t->off,
                             with_db ? d_db + t->off : NULL, d_dy + t->off, t->ldy, run == 2 ? NULL : d_x + t->off,
                             run == 2 ? d_x16 : NULL, t->ldx, d_w + t->off, d_w16, t->n, t->in, t->out);
        res[run][0] = fdownload(gpu, d_dx, ndx);
        res[run][1] = fdownload(gpu, d_dw, nw);
        res[run][2] = fdownload(gpu, d_db, nb);
    }
    double tol_dx = bf16 ? bf16_tol(t->out) : TOL_FP32, tol_dw = bf16 ? bf16_tol(t->n) : TOL_FP32;
    snprintf(w2, sizeof w2, "%s: dx", what);
    if (with_dx) check_view(res[0][0], dx_cpu, dx_init, ndx, t->off, t->n, t->in, t->ldxo, tol_dx, w2);
    else check_same_bits(res[0][0], dx_init, ndx, w2);   // dx NULL: the buffer is not touched
    snprintf(w2, sizeof w2, "%s: dW", what);
    check_view(res[0][1], dw_cpu, dw_init, nw, t->off, t->out, t->in, t->in, tol_dw, w2);
    snprintf(w2, sizeof w2, "%s: db", what);
    if (with_db) check_view(res[0][2], db_cpu, db_init, nb, t->off, 1, t->out, t->out, TOL_DB, w2);
    else check_same_bits(res[0][2], db_init, nb, w2);
    for (int run = 1; run < (bf16 ? 3 : 2); run++) {
        const char *how = run == 1 ? "run twice" : "x16 given against x rounded by the backend";
        snprintf(w2, sizeof w2, "%s: dx (%s)", what, how);
        check_same_bits(res[0][0], res[run][0], ndx, w2);
        snprintf(w2, sizeof w2, "%s: dW (%s)", what, how);
        check_same_bits(res[0][1], res[run][1], nw, w2);
        snprintf(w2, sizeof w2, "%s: db (%s)", what, how);
        check_same_bits(res[0][2], res[run][2], nb, w2);
    }
    if (bf16 && !with_db) {
        // linear_backward16: dy given as its bf16 copy, contiguous (the GEMMs the backend runs on its own packing:
        // the same bits) or at a wider row stride (the output layer's gradient as crossentropy_deferred16 leaves
        // it, 2·out: other GEMM plans, within tc_tol, and the same bits twice).
        CHECK(gpu->linear_backward16 != NULL, "%s: no linear_backward16 at bf16", what);
        for (int wide = 0; gpu->linear_backward16 && wide < 2; wide++) {
            int ld16 = wide ? 2 * t->out : t->out;
            uint16_t *dy16 = calloc((size_t)t->n * ld16, sizeof(uint16_t));
            for (int r = 0; r < t->n; r++)
                for (int c = 0; c < t->out; c++)
                    dy16[(size_t)r * ld16 + c] = bf16_from_f32(dy[t->off + (size_t)r * t->ldy + c]);
            uint16_t *d_dy16 = dev_upload(gpu, dy16, (size_t)t->n * ld16 * sizeof(uint16_t));
            float *got[2][2];
            for (int run = 0; run < 2; run++) {
                gpu->copy(gpu, d_dx, dx_init, ndx * sizeof(float), COPY_H2D);
                gpu->copy(gpu, d_dw, dw_init, nw * sizeof(float), COPY_H2D);
                gpu->linear_backward16(gpu, with_dx ? d_dx + t->off : NULL, t->ldxo, accumulate, d_dw + t->off, d_dy16,
                                       ld16, run ? NULL : d_x + t->off, run ? d_x16 : NULL, t->ldx, d_w16, t->n, t->in,
                                       t->out);
                got[run][0] = fdownload(gpu, d_dx, ndx);
                got[run][1] = fdownload(gpu, d_dw, nw);
            }
            const char *how = wide ? "dy16 at row stride 2·out" : "dy16 given";
            snprintf(w2, sizeof w2, "%s: linear_backward16 dx (%s)", what, how);
            if (!wide) check_same_bits(got[0][0], res[0][0], ndx, w2);
            else if (with_dx) check_view(got[0][0], res[0][0], dx_init, ndx, t->off, t->n, t->in, t->ldxo, tc_tol(t->out), w2);
            check_same_bits(got[1][0], got[0][0], ndx, w2);
            snprintf(w2, sizeof w2, "%s: linear_backward16 dW (%s)", what, how);
            if (!wide) check_same_bits(got[0][1], res[0][1], nw, w2);
            else check_view(got[0][1], res[0][1], dw_init, nw, t->off, t->out, t->in, t->in, tc_tol(t->n), w2);
            check_same_bits(got[1][1], got[0][1], nw, w2);
            for (int run = 0; run < 2; run++) free(got[run][0]), free(got[run][1]);
            gpu->free(gpu, d_dy16);
            free(dy16);
        }
    }
    if (bf16) {
        // dx and dW of the bf16 GEMMs are the fp32 GEMMs of the rounded x, W and dy (GPU only).
        float *xr = rounded(x, nx), *wr = rounded(w, nw), *dyr = rounded(dy, ndy);
        float *d_xr = dev_upload(gpu, xr, nx * sizeof(float)), *d_wr = dev_upload(gpu, wr, nw * sizeof(float));
        float *d_dyr = dev_upload(gpu, dyr, ndy * sizeof(float));
        gpu->copy(gpu, d_dx, dx_init, ndx * sizeof(float), COPY_H2D);
        gpu->copy(gpu, d_dw, dw_init, nw * sizeof(float), COPY_H2D);
        gpu->linear_backward(gpu, with_dx ? d_dx + t->off : NULL, t->ldxo, accumulate, d_dw + t->off, NULL,
                             d_dyr + t->off, t->ldy, d_xr + t->off, NULL, t->ldx, d_wr + t->off, NULL, t->n, t->in,
                             t->out);
        float *dx4 = fdownload(gpu, d_dx, ndx), *dw4 = fdownload(gpu, d_dw, nw);
        snprintf(w2, sizeof w2, "%s: dx against the GPU's fp32 GEMM of the rounded operands", what);
        if (with_dx) check_view(res[0][0], dx4, dx_init, ndx, t->off, t->n, t->in, t->ldxo, tc_tol(t->out), w2);
        snprintf(w2, sizeof w2, "%s: dW against the GPU's fp32 GEMM of the rounded operands", what);
        check_view(res[0][1], dw4, dw_init, nw, t->off, t->out, t->in, t->in, tc_tol(t->n), w2);
        free(dx4); free(dw4);
        gpu->free(gpu, d_xr); gpu->free(gpu, d_wr); gpu->free(gpu, d_dyr);
        free(xr); free(wr); free(dyr);
    }
    for (int run = 0; run < 3; run++) {
        if (run == 2 && !bf16) break;
        for (int k = 0; k < 3; k++) free(res[run][k]);
    }
    gpu->free(gpu, d_x); gpu->free(gpu, d_w); gpu->free(gpu, d_dy); gpu->free(gpu, d_dx); gpu->free(gpu, d_dw);
    gpu->free(gpu, d_db);
    if (d_w16) gpu->free(gpu, d_w16);
    if (d_x16) gpu->free(gpu, d_x16);
    free(x); free(w); free(dy); free(w16); free(x16); free(dx_init); free(dw_init); free(db_init);
    free(dx_cpu); free(dw_cpu); free(db_cpu);
}

// ---- bias_backward: db[c] += Σ_r dy[r, c]
static void run_bias_backward(Backend *cpu, Backend *gpu, int n, int cols, int lddy, int off) {
    char what[120];
    snprintf(what, sizeof what, "bias_backward n=%d cols=%d lddy=%d off=%d", n, cols, lddy, off);
    size_t ndy = (size_t)off + (size_t)n * lddy, nb = (size_t)off + (size_t)cols;
    float *dy = host_random(ndy, -1.0f, 2.0f), *db_init = host_random(nb, -1.0f, 1.0f);
    float *db_cpu = fdup(db_init, nb);
    cpu->bias_backward(cpu, db_cpu + off, dy + off, lddy, n, cols);
    float *d_dy = dev_upload(gpu, dy, ndy * sizeof(float)), *d_db = dev_upload(gpu, db_init, nb * sizeof(float));
    gpu->bias_backward(gpu, d_db + off, d_dy + off, lddy, n, cols);
    float *r1 = fdownload(gpu, d_db, nb);
    check_view(r1, db_cpu, db_init, nb, off, 1, cols, cols, TOL_DB, what);
    gpu->copy(gpu, d_db, db_init, nb * sizeof(float), COPY_H2D);
    gpu->bias_backward(gpu, d_db + off, d_dy + off, lddy, n, cols);
    float *r2 = fdownload(gpu, d_db, nb);
    snprintf(what + strlen(what), sizeof what - strlen(what), " (run twice)");
    check_same_bits(r1, r2, nb, what);
    // Accumulates: a second call on top of the first adds the same sums again.
    gpu->bias_backward(gpu, d_db + off, d_dy + off, lddy, n, cols);
    cpu->bias_backward(cpu, db_cpu + off, dy + off, lddy, n, cols);
    float *r3 = fdownload(gpu, d_db, nb);
    check_view(r3, db_cpu, db_init, nb, off, 1, cols, cols, TOL_DB, "bias_backward called twice accumulates");
    free(r1); free(r2); free(r3);
    gpu->free(gpu, d_dy); gpu->free(gpu, d_db);
    free(dy); free(db_init); free(db_cpu);
}

// ---- linear_forward_rows (inference): one row (the GEMV) and several
static void run_rows(Backend *cpu, Backend *gpu, int n, int in, int out, int bf16, int with_bias) {
    char what[120];
    snprintf(what, sizeof what, "forward_rows %s n=%d in=%d out=%d bias=%d", bf16 ? "bf16" : "fp32", n, in, out,
             with_bias);
    int ldx = in + 3, ldy = out + 2;   // strided for n > 1 (the GEMV reads one row whatever the stride)
    size_t nx = (size_t)n * ldx, ny = (size_t)n * ldy, nw = (size_t)out * in;
    float *x = host_random(nx, -1.0f, 1.0f), *w = host_random(nw, -1.0f, 1.0f), *bias = host_random(out, -1.0f, 1.0f);
    uint16_t *w16 = bf16 ? packed(w, in, out, in) : NULL;
    float *y_init = poison_buf(ny), *y_cpu = cpu_start(y_init, ny, 0, n, out, ldy, 1);
    cpu->linear_forward_rows(cpu, y_cpu, ldy, x, ldx, w, w16, with_bias ? bias : NULL, n, in, out);
    float *d_x = dev_upload(gpu, x, nx * sizeof(float)), *d_w = dev_upload(gpu, w, nw * sizeof(float));
    float *d_bias = dev_upload(gpu, bias, (size_t)out * sizeof(float));
    uint16_t *d_w16 = bf16 ? dev_upload(gpu, w16, nw * sizeof(uint16_t)) : NULL;
    float *d_y = dev_upload(gpu, y_init, ny * sizeof(float));
    const float *b_d = with_bias ? d_bias : NULL;
    gpu->linear_forward_rows(gpu, d_y, ldy, d_x, ldx, d_w, d_w16, b_d, n, in, out);
    float *y1 = fdownload(gpu, d_y, ny);
    check_view(y1, y_cpu, y_init, ny, 0, n, out, ldy, bf16 ? bf16_tol(in) : TOL_FP32, what);
    gpu->copy(gpu, d_y, y_init, ny * sizeof(float), COPY_H2D);
    gpu->linear_forward_rows(gpu, d_y, ldy, d_x, ldx, d_w, d_w16, b_d, n, in, out);
    float *y2 = fdownload(gpu, d_y, ny);
    char w2[160];
    snprintf(w2, sizeof w2, "%s (run twice)", what);
    check_same_bits(y1, y2, ny, w2);
    // The same rows through linear_forward (cuBLASLt): equal within fp32 rounding.
    gpu->copy(gpu, d_y, y_init, ny * sizeof(float), COPY_H2D);
    gpu->linear_forward(gpu, d_y, ldy, d_x, NULL, ldx, d_w, d_w16, b_d, n, in, out);
    float *y3 = fdownload(gpu, d_y, ny);
    snprintf(w2, sizeof w2, "%s against linear_forward", what);
    check_view(y1, y3, y_init, ny, 0, n, out, ldy, bf16 ? tc_tol(in) : TOL_FP32, w2);
    free(y1); free(y2); free(y3);
    gpu->free(gpu, d_x); gpu->free(gpu, d_w); gpu->free(gpu, d_bias); gpu->free(gpu, d_y);
    if (d_w16) gpu->free(gpu, d_w16);
    free(x); free(w); free(bias); free(w16); free(y_init); free(y_cpu);
}

// The split is a path of its own: with CTRON_GEMM_SPLIT_K=0 (read when a backend opens) the same dW
// comes out of one pass, within fp32 rounding of the split's but not the same bits (another summation
// order: proof that CTRON_GEMM_SPLIT_K=1, which main sets for the cases above, ran them split). Any value
// but 0 or 1 is refused by the open.
static void run_split_switch(Precision prec) {
    const int n = 4096, in = 16, out = 64;
    float *x = host_random((size_t)n * in, -1.0f, 1.0f), *dy = host_random((size_t)n * out, -0.5f, 1.0f);
    float *dw[2];
    for (int off = 0; off < 2; off++) {
        setenv("CTRON_GEMM_SPLIT_K", off ? "0" : "1", 1);
        Backend *gpu = cuda_or_skip(prec);
        float *d_x = dev_upload(gpu, x, (size_t)n * in * sizeof(float));
        float *d_dy = dev_upload(gpu, dy, (size_t)n * out * sizeof(float));
        float *d_dw = gpu->alloc(gpu, (size_t)out * in * sizeof(float));
        gpu->memset(gpu, d_dw, 0, (size_t)out * in * sizeof(float));
        uint16_t *d_w16 = NULL;
        if (prec == PRECISION_BF16) {
            d_w16 = gpu->alloc(gpu, (size_t)out * in * sizeof(uint16_t));
            gpu->memset(gpu, d_w16, 0, (size_t)out * in * sizeof(uint16_t));
        }
        gpu->linear_backward(gpu, NULL, in, 0, d_dw, NULL, d_dy, out, d_x, NULL, in, NULL, d_w16, n, in, out);
        dw[off] = fdownload(gpu, d_dw, (size_t)out * in);
        gpu->free(gpu, d_x); gpu->free(gpu, d_dy); gpu->free(gpu, d_dw);
        if (d_w16) gpu->free(gpu, d_w16);
        backend_close(gpu);
    }
    const char *p = prec == PRECISION_BF16 ? "bf16" : "fp32";
    double num = 0.0, den = 0.0;
    int differ = 0;
    for (int i = 0; i < out * in; i++) {
        num += ((double)dw[0][i] - dw[1][i]) * ((double)dw[0][i] - dw[1][i]);
        den += (double)dw[1][i] * dw[1][i];
        differ += memcmp(&dw[0][i], &dw[1][i], sizeof(float)) != 0;
    }
    CHECK(sqrt(num / den) < TOL_FP32, "%s dW n=%d split against CTRON_GEMM_SPLIT_K=0: rel L2 %.3g", p, n,
          sqrt(num / den));
    CHECK(differ > 0, "%s dW n=%d: split and unsplit gave the same bits in all %d elements (no split ran?)", p, n,
          out * in);
    setenv("CTRON_GEMM_SPLIT_K", "2", 1);
    char err[512] = "";
    Backend *bad = backend_open("cuda", prec, err, sizeof err);
    CHECK(!bad && strstr(err, "CTRON_GEMM_SPLIT_K='2'") && strstr(err, "expected 1"),
          "CTRON_GEMM_SPLIT_K=2: the open must refuse it, naming the value (got '%s')", err);
    if (bad) backend_close(bad);
    setenv("CTRON_GEMM_SPLIT_K", "1", 1);
    free(x); free(dy); free(dw[0]); free(dw[1]);
}

static void suite(Precision prec) {
    char err[512] = "";
    Backend *cpu = backend_open("cpu", prec, err, sizeof err);
    if (!cpu) {
        fprintf(stderr, "FAIL: cannot open the CPU backend: %s\n", err);
        exit(1);
    }
    Backend *gpu = cuda_or_skip(prec);
    int bf16 = prec == PRECISION_BF16;
    const Case odd[] = {
        {37, 45, 29, 51, 33, 47, 0},     // odd everything, strided views
        {37, 45, 29, 51, 33, 47, 1},     // the same one float into every buffer (4-byte aligned pointers)
        {5, 8, 12, 8, 12, 8, 0},         // contiguous, tiny
        {300, 64, 36, 68, 40, 64, 0},    // vector paths (widths and strides multiples of 4), many row chunks
        {1031, 24, 20, 24, 20, 24, 3},   // many rows, narrow, misaligned
    };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        for (int b = 0; b < 2; b++) run_forward(cpu, gpu, &odd[i], bf16, b);
        run_forward_acc(cpu, gpu, &odd[i], bf16);
        for (int acc = 0; acc < 2; acc++) {
            run_backward(cpu, gpu, &odd[i], bf16, acc, 1, 1);
            run_backward(cpu, gpu, &odd[i], bf16, acc, 1, 0);
        }
        run_backward(cpu, gpu, &odd[i], bf16, 0, 0, 1);   // dx NULL (the input needs no gradient)
    }
    // gemm.cu's split-K (gemm_ksplit: few output tiles, a long k): the weight gradient over 4096 rows into
    // 16×64 (4 chunks of 1024 rows; strided, misaligned views staged), x·Wᵀ with in 4096 into 16 outputs
    // (LoRA's x·Aᵀ: 4 chunks of the input width), and 2048 rows at 2 chunks with dW accumulated onto known
    // values (beta 1 through the partials' sum). k 4100 is no multiple of a chunk: one pass.
    const Case split[] = {
        {4096, 16, 64, 20, 68, 20, 1},
        {64, 4096, 16, 4096, 16, 4096, 0},
        {2048, 64, 48, 64, 48, 64, 0},
        {4100, 16, 64, 16, 64, 16, 0},
    };
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++) {
        run_forward(cpu, gpu, &split[i], bf16, 0);
        run_forward_acc(cpu, gpu, &split[i], bf16);
        run_backward(cpu, gpu, &split[i], bf16, 1, 1, 0);
        run_backward(cpu, gpu, &split[i], bf16, 0, 0, 1);
    }
    // GPT-2 124M shapes at a few hundred rows: the fused QKV projection with its bias, the MLP's 4h, and
    // the LM head's vocabulary (no bias).
    const Case big[] = {
        {515, 768, 2304, 768, 2304, 768, 0},
        {259, 3072, 768, 3072, 768, 3072, 0},
        {67, 768, 50304, 768, 50304, 768, 0},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        int with_bias = big[i].out != 50304;
        run_forward(cpu, gpu, &big[i], bf16, with_bias);
        run_backward(cpu, gpu, &big[i], bf16, 1, 1, with_bias);
    }
    if (!bf16) {   // one kernel at both precisions (it sums fp32 dy): run once
        run_bias_backward(cpu, gpu, 37, 29, 33, 0);
        run_bias_backward(cpu, gpu, 37, 29, 33, 1);
        run_bias_backward(cpu, gpu, 1000, 300, 300, 0);
        run_bias_backward(cpu, gpu, 2050, 129, 131, 2);
        run_bias_backward(cpu, gpu, 16, 2304, 2304, 0);
        run_bias_backward(cpu, gpu, 1, 7, 7, 0);
    }
    for (int b = 0; b < 2; b++) {
        run_rows(cpu, gpu, 1, 45, 29, bf16, b);     // scalar GEMV
        run_rows(cpu, gpu, 1, 64, 37, bf16, b);     // vector GEMV (in a multiple of 8)
        run_rows(cpu, gpu, 1, 768, 2304, bf16, b);
        run_rows(cpu, gpu, 5, 45, 29, bf16, b);
        run_rows(cpu, gpu, 5, 768, 2304, bf16, b);
    }
    backend_close(gpu);
    backend_close(cpu);
    run_split_switch(prec);
}

int main(void) {
    setenv("CTRON_GEMM_SPLIT_K", "1", 1);   // the split-K cases run split (it is opt-in)
    suite(PRECISION_FP32);
    suite(PRECISION_BF16);
    return check_summary();
}
