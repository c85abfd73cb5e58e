// The Llama block's CPU kernels (backend/cpu/rmsnorm.h, rope.h, swiglu.h; docs/LLAMA-OPS.md).
//
// Gradients: every backward against central differences of a double-precision transcription of the
// forward (step 1e-5, objective L = Σ out ⊙ R accumulated in double), so the only error left is the
// kernel's fp32 rounding; each forward is checked against the same transcription. Error measure:
// max|kernel − reference| / max|reference| over the whole tensor. Odd shapes throughout: widths 6,
// 10, 70 (RMSNorm's dw chunk is 64), heads 3 with kv 1, rows 7, 15, 67.
// Tolerances (measured maxima in brackets, printed by every check):
//   TOL_FWD   2e-6  forward vs double (fp32 rounding, ctron_expf's 2 ulp) [1.2e-7]
//   TOL_FD    1e-5  backward vs finite differences of the double forward [6.0e-7, RMSNorm dx]
//   TOL_SAME  1e-6  two fp32 results equal up to rounding (accumulate flags) [2.2e-10]
//   TOL_TEMPO 1e-5  RMSNorm from its fp32 output vs from its input (x̂ = y / w: one rounding of y) [1.0e-7]
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "backend/backend.h"
#include "backend/cpu/bf16.h"
#include "backend/cpu/rmsnorm.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/swiglu.h"

#define TOL_FWD 2e-6
#define TOL_FD 1e-5
#define TOL_SAME 1e-6
#define TOL_TEMPO 1e-5
#define FD_STEP 1e-5

// ---- data and comparisons
static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float uniform(float lo, float hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((double)(rng_state >> 40) / 16777216.0);
}
static float *alloc_f(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}
static float *rand_f(size_t n, float lo, float hi) {
    float *p = alloc_f(n);
    for (size_t i = 0; i < n; i++) p[i] = uniform(lo, hi);
    return p;
}
static float *copy_f(const float *src, size_t n) {
    float *p = alloc_f(n);
    memcpy(p, src, n * sizeof(float));
    return p;
}
static double *to_d(const float *src, size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    for (size_t i = 0; i < n; i++) p[i] = src[i];
    return p;
}
static float bf16r(float x) { return bf16_to_f32(bf16_from_f32(x)); }

// max|a − ref| / max|ref|
static double rel_err(const float *a, const double *ref, size_t n) {
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - ref[i]));
        scale = fmax(scale, fabs(ref[i]));
    }
    return diff / fmax(scale, 1e-30);
}
static double rel_err_f(const float *a, const float *b, size_t n) {
    double *bd = to_d(b, n), e = rel_err(a, bd, n);
    free(bd);
    return e;
}
static void check_err(const char *what, double err, double tol) {
    printf("  %-64s %.2e (tol %.0e)\n", what, err, tol);
    CHECK(err <= tol, "%s: %.3e > tol %.1e", what, err, tol);
}
static void check_bitwise(const char *what, const float *a, const float *b, size_t n) {
    int same = memcmp(a, b, n * sizeof(float)) == 0;
    printf("  %-64s %s\n", what, same ? "bitwise equal" : "DIFFERENT");
    CHECK(same, "%s: not bitwise equal", what);
}

// Central differences of f with respect to each of x[0..n) (perturbed in place, restored) against
// grad[i·gstride]: max|grad − numeric| / max|numeric|.
typedef double (*objective_fn)(void *ctx);
static double fd_err(objective_fn f, void *ctx, double *x, size_t n, const float *grad, size_t gstride) {
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double orig = x[i], step = FD_STEP * fmax(1.0, fabs(orig));
        x[i] = orig + step;
        double hi = f(ctx);
        x[i] = orig - step;
        double lo = f(ctx);
        x[i] = orig;
        double numeric = (hi - lo) / (2.0 * step);
        diff = fmax(diff, fabs((double)grad[i * gstride] - numeric));
        scale = fmax(scale, fabs(numeric));
    }
    return diff / fmax(scale, 1e-30);
}

// ---------------------------------------------------------------------------------------------------
// RMSNorm
// ---------------------------------------------------------------------------------------------------

typedef struct { double *x, *w, *y, *rstd; const float *r; int n, h; double eps; } RmsRef;

static void rms_ref_forward(RmsRef *c) {
    for (int i = 0; i < c->n; i++) {
        double ss = 0.0;
        for (int j = 0; j < c->h; j++) ss += c->x[(size_t)i * c->h + j] * c->x[(size_t)i * c->h + j];
        c->rstd[i] = 1.0 / sqrt(ss / c->h + c->eps);
        for (int j = 0; j < c->h; j++) c->y[(size_t)i * c->h + j] = c->w[j] * c->x[(size_t)i * c->h + j] * c->rstd[i];
    }
}
static double rms_objective(void *p) {
    RmsRef *c = p;
    rms_ref_forward(c);
    double acc = 0.0;
    for (size_t i = 0; i < (size_t)c->n * c->h; i++) acc += c->y[i] * c->r[i];
    return acc;
}

static void test_rmsnorm(int n, int h) {
    char what[128];
    size_t nh = (size_t)n * h;
    const float eps = 1e-5f;
    float *x = rand_f(nh, -2, 2), *w = rand_f((size_t)h, 0.5f, 1.5f), *r = rand_f(nh, -1, 1);
    for (int j = 0; j < h; j++) x[h + j] *= 1e-3f;   // row 1: mean(x²) ≈ eps, so eps's place shows
    for (int j = 0; j < h; j += 3) w[j] = -w[j];     // negative weights too
    float *y = alloc_f(nh), *rstd = alloc_f((size_t)n);
    rmsnorm_forward(y, rstd, x, w, eps, n, h, 0);

    RmsRef ref = {to_d(x, nh), to_d(w, (size_t)h), calloc(nh, sizeof(double)), calloc((size_t)n, sizeof(double)), r,
                  n, h, (double)eps};
    rms_ref_forward(&ref);
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d forward y vs double", n, h);
    check_err(what, rel_err(y, ref.y, nh), TOL_FWD);
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d forward rstd vs double", n, h);
    check_err(what, rel_err(rstd, ref.rstd, (size_t)n), TOL_FWD);

    // backward: dx overwritten, dw += onto prior content
    float *dx = alloc_f(nh), *dw0 = rand_f((size_t)h, -1, 1), *dw = copy_f(dw0, (size_t)h);
    rmsnorm_backward(dx, 0, dw, r, x, rstd, w, n, h);
    float *dw_added = alloc_f((size_t)h);
    for (int j = 0; j < h; j++) dw_added[j] = dw[j] - dw0[j];
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d backward dx vs finite differences", n, h);
    check_err(what, fd_err(rms_objective, &ref, ref.x, nh, dx, 1), TOL_FD);
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d backward dw vs finite differences", n, h);
    check_err(what, fd_err(rms_objective, &ref, ref.w, (size_t)h, dw_added, 1), TOL_FD);

    // accumulate = 1 adds to dx
    float *dx0 = rand_f(nh, -1, 1), *dx1 = copy_f(dx0, nh), *dw_scratch = alloc_f((size_t)h);
    rmsnorm_backward(dx1, 1, dw_scratch, r, x, rstd, w, n, h);
    for (size_t i = 0; i < nh; i++) dx1[i] -= dx0[i];
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d accumulate: dx += (vs fresh dx)", n, h);
    check_err(what, rel_err_f(dx1, dx, nh), TOL_SAME);

    // Tempo: from the fp32 output equals from the input up to the rounding of y
    float *dx_t = alloc_f(nh), *dw_t = copy_f(dw0, (size_t)h);
    rmsnorm_backward_from_output(dx_t, 0, dw_t, r, y, rstd, w, n, h);
    for (int j = 0; j < h; j++) dw_t[j] -= dw0[j];
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d from output (fp32 y): dx vs from input", n, h);
    check_err(what, rel_err_f(dx_t, dx, nh), TOL_TEMPO);
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d from output (fp32 y): dw vs from input", n, h);
    check_err(what, rel_err_f(dw_t, dw_added, (size_t)h), TOL_TEMPO);

    // round_bf16: y is the bf16 rounding of the fp32 y, rstd unchanged
    float *y16 = alloc_f(nh), *rstd16 = alloc_f((size_t)n), *y_round = alloc_f(nh);
    rmsnorm_forward(y16, rstd16, x, w, eps, n, h, 1);
    for (size_t i = 0; i < nh; i++) y_round[i] = bf16r(y[i]);
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d round_bf16: y = bf16(y)", n, h);
    check_bitwise(what, y16, y_round, nh);
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d round_bf16: rstd unchanged", n, h);
    check_bitwise(what, rstd16, rstd, (size_t)n);
    // from the bf16-stored output: off by bf16's rounding of y (relative 2⁻⁹ per element)
    float *dx_b = alloc_f(nh), *dw_b = alloc_f((size_t)h);
    rmsnorm_backward_from_output(dx_b, 0, dw_b, r, y16, rstd, w, n, h);
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d from output (bf16 y): dx vs from input", n, h);
    check_err(what, rel_err_f(dx_b, dx, nh), 1e-2);
    snprintf(what, sizeof what, "rmsnorm n=%d h=%d from output (bf16 y): dw vs from input", n, h);
    check_err(what, rel_err_f(dw_b, dw_added, (size_t)h), 1e-2);

    free(x), free(w), free(r), free(y), free(rstd), free(ref.x), free(ref.w), free(ref.y), free(ref.rstd);
    free(dx), free(dw0), free(dw), free(dw_added), free(dx0), free(dx1), free(dw_scratch), free(dx_t), free(dw_t);
    free(y16), free(rstd16), free(y_round), free(dx_b), free(dw_b);
}

// A zero weight: from the output, column c of dx and dw[c] are NaN (x̂ = 0/0), the rest is right.
static void test_rmsnorm_zero_weight(void) {
    int n = 7, h = 10, zc = 4;
    size_t nh = (size_t)n * h;
    float *x = rand_f(nh, -2, 2), *w = rand_f((size_t)h, 0.5f, 1.5f), *r = rand_f(nh, -1, 1);
    w[zc] = 0.0f;
    float *y = alloc_f(nh), *rstd = alloc_f((size_t)n), *dx = alloc_f(nh), *dw = alloc_f((size_t)h);
    float *dx_t = alloc_f(nh), *dw_t = alloc_f((size_t)h);
    rmsnorm_forward(y, rstd, x, w, 1e-5f, n, h, 0);
    rmsnorm_backward(dx, 0, dw, r, x, rstd, w, n, h);
    rmsnorm_backward_from_output(dx_t, 0, dw_t, r, y, rstd, w, n, h);
    int nan_where_expected = isnan(dw_t[zc]), others_ok = 1;
    double err = 0.0, scale = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < h; j++) {
            float a = dx_t[(size_t)i * h + j], b = dx[(size_t)i * h + j];
            if (j == zc) { nan_where_expected &= isnan(a); continue; }
            others_ok &= isfinite(a);
            err = fmax(err, fabs((double)a - b));
            scale = fmax(scale, fabs((double)b));
        }
    for (int j = 0; j < h; j++)
        if (j != zc) {
            others_ok &= isfinite(dw_t[j]);
            err = fmax(err, fabs((double)dw_t[j] - dw[j]) / fmax(fabs((double)dw[j]), 1e-6) * scale);
        }
    printf("  %-64s %s\n", "rmsnorm from output, w[4] = 0: dx[:,4], dw[4] NaN", nan_where_expected ? "yes" : "NO");
    CHECK(nan_where_expected, "zero weight: dx[:,%d] and dw[%d] should be NaN", zc, zc);
    CHECK(others_ok, "zero weight: the other columns should stay finite");
    check_err("rmsnorm from output, w[4] = 0: other columns vs from input", err / fmax(scale, 1e-30), TOL_TEMPO);
    free(x), free(w), free(r), free(y), free(rstd), free(dx), free(dw), free(dx_t), free(dw_t);
}

// ---------------------------------------------------------------------------------------------------
// RoPE
// ---------------------------------------------------------------------------------------------------

// HF's inv_freq and angle, in float32 as LlamaRotaryEmbedding computes them.
static float hf_angle(int p, int j, int d, float theta) {
    float e = (float)(2 * j) / (float)d;
    float inv = 1.0f / (float)pow((double)theta, (double)e);
    return (float)p * inv;
}

// A direct transcription of HF (double arithmetic on HF's fp32 angles):
//   cos = cat(cos(freqs), cos(freqs)), sin likewise; rotate_half(x) = cat(−x[d/2:], x[:d/2]);
//   out = x·cos + rotate_half(x)·sin.
// interleaved = 1 gives Meta's pairing (2i, 2i+1) instead: the convention ctron must NOT use.
// rot < d: partial rotary (Phi3's partial_rotary_factor): x[..., :rot] rotates as a head of rot dims, the rest
// passes through (q_rot, q_pass = q[..., :rot], q[..., rot:]; cat(rope(q_rot), q_pass)).
typedef struct { double *x, *y; const float *r; int rows, b, heads, d, pos0, interleaved; float theta; int rot; } RopeRef;

static void rope_ref_forward(RopeRef *c) {
    int d = c->rot, half = d / 2, stride = c->d;
    double *cosv = malloc(sizeof(double) * d), *sinv = malloc(sizeof(double) * d), *rot = malloc(sizeof(double) * d);
    for (int i = 0; i < c->rows; i++) {
        int p = c->pos0 + i / c->b;
        for (int j = 0; j < half; j++) {
            double a = hf_angle(p, j, d, c->theta);
            cosv[j] = cosv[j + half] = cos(a);
            sinv[j] = sinv[j + half] = sin(a);
        }
        for (int hd = 0; hd < c->heads; hd++) {
            const double *x = c->x + ((size_t)i * c->heads + hd) * stride;
            double *y = c->y + ((size_t)i * c->heads + hd) * stride;
            for (int j = d; j < stride; j++) y[j] = x[j];
            if (!c->interleaved) {
                for (int j = 0; j < half; j++) { rot[j] = -x[j + half]; rot[j + half] = x[j]; }
                for (int j = 0; j < d; j++) y[j] = x[j] * cosv[j] + rot[j] * sinv[j];
            } else {
                for (int k = 0; k < half; k++) {
                    y[2 * k] = x[2 * k] * cosv[k] - x[2 * k + 1] * sinv[k];
                    y[2 * k + 1] = x[2 * k + 1] * cosv[k] + x[2 * k] * sinv[k];
                }
            }
        }
    }
    free(cosv), free(sinv), free(rot);
}
static double rope_objective(void *p) {
    RopeRef *c = p;
    rope_ref_forward(c);
    double acc = 0.0;
    for (size_t i = 0; i < (size_t)c->rows * c->heads * c->d; i++) acc += c->y[i] * c->r[i];
    return acc;
}

static void test_rope(int s, int b, int heads, int d, int rot, int pos0, float theta) {
    char what[160], tag[112];
    snprintf(tag, sizeof tag, "rope s=%d b=%d heads=%d d=%d rot=%d pos0=%d theta=%g", s, b, heads, d, rot, pos0, theta);
    int rows = s * b, w = heads * d, positions = pos0 + s;
    size_t n = (size_t)rows * w;
    float *cs = alloc_f(rope_table_floats(positions, rot));   // a table of the rotated dims
    rope_table(cs, positions, rot, theta, NULL);
    float *x = rand_f(n, -1, 1), *r = rand_f(n, -1, 1), *y = alloc_f(n);
    rope_forward(y, x, w, cs, positions, rows, b, heads, d, rot, pos0, 0);

    RopeRef ref = {to_d(x, n), calloc(n, sizeof(double)), r, rows, b, heads, d, pos0, 0, theta, rot};
    rope_ref_forward(&ref);
    snprintf(what, sizeof what, "%s: forward vs HF rotate_half", tag);
    check_err(what, rel_err(y, ref.y, n), TOL_FWD);
    // the same data through Meta's interleaved pairing must come out far away: the test tells them apart
    RopeRef inter = ref;
    inter.interleaved = 1;
    inter.y = calloc(n, sizeof(double));
    rope_ref_forward(&inter);
    double inter_err = rel_err(y, inter.y, n);
    snprintf(what, sizeof what, "%s: vs interleaved pairing (must differ)", tag);
    printf("  %-64s %.2e (must be > 1e-1)\n", what, inter_err);
    CHECK(inter_err > 1e-1, "%s: kernel matches the interleaved pairing (%.3e)", tag, inter_err);

    // backward = transpose: FD of the linear map (the gradient of Σ rope(x) ⊙ r is rope_backward(r))
    float *dx = alloc_f(n);
    rope_backward(dx, r, w, cs, positions, rows, b, heads, d, rot, pos0);
    snprintf(what, sizeof what, "%s: backward vs finite differences", tag);
    check_err(what, fd_err(rope_objective, &ref, ref.x, n, dx, 1), TOL_FD);

    // backward ∘ forward = identity
    float *back = alloc_f(n);
    rope_backward(back, y, w, cs, positions, rows, b, heads, d, rot, pos0);
    // (each pair's error relative to the pair's norm: the rotation preserves it, up to a few roundings; a
    // passed-through dim is its own pair, exact)
    double id_err = 0.0;
    for (size_t i = 0; i < n; i++) {
        size_t j = i % d, half = (size_t)rot / 2, mate = j >= (size_t)rot ? i : j < half ? i + half : i - half;
        double norm = hypot(x[i], x[mate]);
        id_err = fmax(id_err, fabs((double)back[i] - x[i]) / norm);
    }
    snprintf(what, sizeof what, "%s: backward(forward(x)) = x, max err / pair norm", tag);
    check_err(what, id_err, 4.8e-7);   // 4 ulp of 1

    // in place equals out of place; round_bf16 = bf16 of the fp32 result
    float *inplace = copy_f(x, n), *y16 = alloc_f(n), *y_round = alloc_f(n);
    rope_forward(inplace, inplace, w, cs, positions, rows, b, heads, d, rot, pos0, 0);
    snprintf(what, sizeof what, "%s: in place = out of place", tag);
    check_bitwise(what, inplace, y, n);
    rope_forward(y16, x, w, cs, positions, rows, b, heads, d, rot, pos0, 1);
    for (size_t i = 0; i < n; i++) y_round[i] = bf16r(y[i]);
    snprintf(what, sizeof what, "%s: round_bf16 = bf16(y)", tag);
    check_bitwise(what, y16, y_round, n);

    free(cs), free(x), free(r), free(y), free(ref.x), free(ref.y), free(inter.y), free(dx), free(back);
    free(inplace), free(y16), free(y_round);
}

// pos0 > 0 (a sequence shard, a KV cache's new tokens) equals the tail of the run from position 0.
static void test_rope_offset(void) {
    int s = 9, b = 2, heads = 3, d = 10, pos0 = 5, w = heads * d, positions = pos0 + s;
    float *cs = alloc_f(rope_table_floats(positions, d));
    rope_table(cs, positions, d, 10000.0f, NULL);
    size_t n_long = (size_t)positions * b * w, n_tail = (size_t)s * b * w, off = (size_t)pos0 * b * w;
    float *x = rand_f(n_long, -1, 1), *y_long = alloc_f(n_long), *y_tail = alloc_f(n_tail), *dx_tail = alloc_f(n_tail);
    float *dx_long = alloc_f(n_long);
    rope_forward(y_long, x, w, cs, positions, positions * b, b, heads, d, d, 0, 0);
    rope_forward(y_tail, x + off, w, cs, positions, s * b, b, heads, d, d, pos0, 0);
    check_bitwise("rope pos0=5: forward = tail of the run from 0", y_tail, y_long + off, n_tail);
    rope_backward(dx_long, x, w, cs, positions, positions * b, b, heads, d, d, 0);
    rope_backward(dx_tail, x + off, w, cs, positions, s * b, b, heads, d, d, pos0);
    check_bitwise("rope pos0=5: backward = tail of the run from 0", dx_tail, dx_long + off, n_tail);
    free(cs), free(x), free(y_long), free(y_tail), free(dx_tail), free(dx_long);
}

// q and k inside one fused [rows, (a + 2kv)·d] qkv buffer (row stride ld): the same bits as separate
// tensors, v untouched. GQA: a = 3 query heads, kv = 1.
static void test_rope_strided(void) {
    int s = 5, b = 3, a = 3, kv = 1, d = 6, rows = s * b, ld = (a + 2 * kv) * d;
    float *cs = alloc_f(rope_table_floats(s, d));
    rope_table(cs, s, d, 500000.0f, NULL);
    float *qkv = rand_f((size_t)rows * ld, -1, 1), *orig = copy_f(qkv, (size_t)rows * ld);
    float *q = alloc_f((size_t)rows * a * d), *k = alloc_f((size_t)rows * kv * d);
    for (int i = 0; i < rows; i++) {
        memcpy(q + (size_t)i * a * d, orig + (size_t)i * ld, sizeof(float) * a * d);
        memcpy(k + (size_t)i * kv * d, orig + (size_t)i * ld + a * d, sizeof(float) * kv * d);
    }
    rope_forward(qkv, qkv, ld, cs, s, rows, b, a, d, d, 0, 0);
    rope_forward(qkv + a * d, qkv + a * d, ld, cs, s, rows, b, kv, d, d, 0, 0);
    rope_forward(q, q, a * d, cs, s, rows, b, a, d, d, 0, 0);
    rope_forward(k, k, kv * d, cs, s, rows, b, kv, d, d, 0, 0);
    int same = 1;
    for (int i = 0; i < rows; i++) {
        same &= !memcmp(qkv + (size_t)i * ld, q + (size_t)i * a * d, sizeof(float) * a * d);
        same &= !memcmp(qkv + (size_t)i * ld + a * d, k + (size_t)i * kv * d, sizeof(float) * kv * d);
        same &= !memcmp(qkv + (size_t)i * ld + (a + kv) * d, orig + (size_t)i * ld + (a + kv) * d,
                        sizeof(float) * kv * d);
    }
    printf("  %-64s %s\n", "rope in a fused qkv buffer (ld): q, k as separate, v untouched", same ? "yes" : "NO");
    CHECK(same, "rope with a row stride differs from the contiguous tensors");
    free(cs), free(qkv), free(orig), free(q), free(k);
}

// The table is HF's fp32 angle, cos/sin rounded once: within 0.5 ulp (+ the double evaluation) of
// cos/sin of that angle at every position up to 8191. A table built from the double angle would be
// ~5e-4 away at p = 8191 (printed): the test would catch a switch.
static void test_rope_table(int d, float theta) {
    int positions = 8192;
    float *cs = alloc_f(rope_table_floats(positions, d));
    rope_table(cs, positions, d, theta, NULL);
    double err = 0.0, far = 0.0;
    for (int p = 0; p < positions; p++)
        for (int j = 0; j < d / 2; j++) {
            double a = hf_angle(p, j, d, theta);
            err = fmax(err, fabs(cs[(size_t)p * d + j] - cos(a)));
            err = fmax(err, fabs(cs[(size_t)p * d + d / 2 + j] - sin(a)));
            if (p == positions - 1) far = fmax(far, fabs(cs[(size_t)p * d + j] - cos(p * pow(theta, -2.0 * j / d))));
        }
    char what[128];
    snprintf(what, sizeof what, "rope_table d=%d theta=%g p<8192: vs cos/sin of HF's fp32 angle (abs)", d, theta);
    check_err(what, err, 6e-8);
    snprintf(what, sizeof what, "rope_table d=%d p=8191: vs the double angle", d);
    printf("  %-64s %.2e (information: HF's fp32 angle vs a double one)\n", what, far);
    CHECK(far > 1e-5, "the table should follow HF's fp32 angle, not the double one");
    CHECK(cs[0] == 1.0f && cs[d / 2] == 0.0f, "position 0: cos 1, sin 0");
    free(cs);
}

// RoPE scaling (rope_inv_freq): transformers' own frequencies, read off its ROPE_INIT_FUNCTIONS
// (transformers 5.24, float32) and written here as float32 bits, within 1 ulp (ctron's θ^e is a double
// pow rounded once, torch's a float32 pow). Llama 3.1's settings (θ 500000, d 128, factor 8, low 1,
// high 4, original 8192) put j ≤ 28 in the kept band, 29..34 in the smoothed one and j ≥ 35 in the
// divided one; linear factor 4 divides every frequency.
static int ulps(float a, float b) {
    int32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return abs(x - y);
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void test_rope_scaling(void) {
    RopeScaling l3 = {.type = ROPE_LLAMA3, .factor = 8.0f, .low_freq_factor = 1.0f, .high_freq_factor = 4.0f,
                      .original_max_positions = 8192};
    static const struct { int j; uint32_t bits; } hf[] = {
        {0, 1065353216u},  {20, 1015523779u}, {28, 995260192u}, {29, 990772486u}, {30, 984863005u},
        {32, 973706706u}, {34, 960179666u},  {35, 952658054u}, {36, 950223245u}, {63, 883213055u}};
    int worst = 0;
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++) {
        int u = ulps(rope_inv_freq(hf[i].j, 128, 500000.0f, &l3, 0), from_bits(hf[i].bits));
        worst = u > worst ? u : worst;
    }
    printf("  %-64s %d ulp\n", "llama3 inv_freq vs transformers (Llama 3.1, j 0..63 sampled)", worst);
    CHECK(worst <= 1, "llama3 frequencies: %d ulp from transformers'", worst);
    int kept = 0, divided = 0, smoothed = 0;
    for (int j = 0; j < 64; j++) {
        float plain = rope_inv_freq(j, 128, 500000.0f, NULL, 0), got = rope_inv_freq(j, 128, 500000.0f, &l3, 0);
        if (got == plain) kept++;
        else if (got == plain / 8.0f) divided++;
        else if (got < plain && got > plain / 8.0f) smoothed++;
    }
    CHECK(kept == 29 && smoothed == 6 && divided == 29, "llama3 bands: %d kept, %d smoothed, %d divided (expected 29, 6, 29)",
          kept, smoothed, divided);
    static const uint32_t linear[8] = {0x3e800000u, 0x3da1e89bu, 0x3ccccccdu, 0x3c0186e3u,
                                       0x3b23d70au, 0x3a4f3e38u, 0x3983126fu, 0x38a5cb60u};
    RopeScaling lin = {.type = ROPE_LINEAR, .factor = 4.0f};
    worst = 0;
    for (int j = 0; j < 8; j++) {
        int u = ulps(rope_inv_freq(j, 16, 10000.0f, &lin, 0), from_bits(linear[j]));
        worst = u > worst ? u : worst;
    }
    CHECK(worst <= 1, "linear frequencies: %d ulp from transformers'", worst);
    // YaRN at Qwen2.5's long-context settings (head dim 128, θ 1e6, factor 4, original 32768; transformers 5.24's
    // _compute_yarn_parameters): extrapolated up to the correction range, a ramp, then interpolated; and its
    // attention factor 0.1·ln 4 + 1.
    static const uint32_t yarn[64] = {
        0x3f800000u, 0x3f4e4badu, 0x3f263de0u, 0x3f05f6efu, 0x3ed7e89bu, 0x3eadfcffu, 0x3e8c3504u, 0x3e61f835u,
        0x3e361887u, 0x3e12bd91u, 0x3dec7fd6u, 0x3dbe94c6u, 0x3d99940du, 0x3d778513u, 0x3d47763fu, 0x3d20bc1du,
        0x3d0186e3u, 0x3cd0c1a8u, 0x3ca8398bu, 0x3c879008u, 0x3c5a7bf2u, 0x3c301052u, 0x3c0de12du, 0x3be4aa46u,
        0x3bb02377u, 0x3b876388u, 0x3b4fa550u, 0x3b1ed248u, 0x3af241dfu, 0x3ab82bc0u, 0x3a8b8207u, 0x3a527db8u,
        0x3a1e0eb2u, 0x39ec1968u, 0x39af3d02u, 0x39811c3eu, 0x393c93beu, 0x39083e38u, 0x38c23e9au, 0x38881d0au,
        0x383a7753u, 0x38164324u, 0x37f22ce2u, 0x37c327b5u, 0x379d43a4u, 0x377d75d4u, 0x374c3fbeu, 0x372497abu,
        0x3704a2b2u, 0x36d5c441u, 0x36ac431du, 0x368ad0edu, 0x365fba4fu, 0x36344a0eu, 0x361148e3u, 0x35ea2732u,
        0x35bcb0c1u, 0x35980e02u, 0x35751070u, 0x35457babu, 0x351f23e4u, 0x35003decu, 0x34ceaf79u, 0x34a68e4cu};
    RopeScaling yn = yarn_defaults(4.0f, 32768);
    worst = 0;
    int extrapolated = 0, interpolated = 0, ramped = 0;
    for (int j = 0; j < 64; j++) {
        float got = rope_inv_freq(j, 128, 1000000.0f, &yn, 0), plain = rope_inv_freq(j, 128, 1000000.0f, NULL, 0);
        int u = ulps(got, from_bits(yarn[j]));
        worst = u > worst ? u : worst;
        if (got == plain) extrapolated++;
        else if (fabsf(got * 4.0f / plain - 1.0f) < 1e-6f) interpolated++;   // 1 / (4·θ^(2j/d)), to an ulp
        else ramped++;
    }
    CHECK(worst <= 1, "yarn frequencies: %d ulp from transformers'", worst);
    CHECK(extrapolated > 0 && ramped > 0 && interpolated > 0, "yarn bands: %d extrapolated, %d ramped, %d interpolated",
          extrapolated, ramped, interpolated);
    CHECK(yn.attention_factor == 1.138629436111989, "yarn's derived attention factor %.17g, transformers' 1.138629436111989",
          yn.attention_factor);
    float ycs[2 * 128];
    rope_table(ycs, 2, 128, 1000000.0f, &yn);
    float sin3 = (float)sin((double)rope_inv_freq(3, 128, 1000000.0f, &yn, 0));   // position 1, frequency 3
    CHECK(ycs[0] == (float)yn.attention_factor && ycs[128 + 64 + 3] == sin3 * (float)yn.attention_factor,
          "yarn's table is cos/sin × the attention factor");
    // Dynamic NTK (transformers 5.24's LlamaRotaryEmbedding after a forward of T positions): past M = 16 the base
    // grows, θ·(F·T/M − (F − 1))^(D/(D−2)) in float32; up to M it is θ's own (the init, in doubles).
    static const uint32_t dyn_long[8] = {0x3f800000u, 0x3e9577fcu, 0x3dae89c8u, 0x3ccbcfffu,
                                         0x3bedff2bu, 0x3b0af510u, 0x3a224387u, 0x393d7ab5u};
    static const uint32_t dyn_long128[8] = {0x3f800000u, 0x3f4e609au, 0x3f265f9bu, 0x3f061fb7u,
                                            0x3ed84043u, 0x3eae5551u, 0x3e8c8a6fu, 0x3e6298dcu};
    RopeScaling dyn = {.type = ROPE_DYNAMIC, .factor = 4.0f, .original_max_positions = 16};
    RopeScaling dyn128 = {.type = ROPE_DYNAMIC, .factor = 2.0f, .original_max_positions = 4096};
    worst = 0;
    int short_same = 1;
    for (int j = 0; j < 8; j++) {
        int u = ulps(rope_inv_freq(j, 16, 10000.0f, &dyn, 19), from_bits(dyn_long[j]));
        int u128 = ulps(rope_inv_freq(j, 128, 500000.0f, &dyn128, 6000), from_bits(dyn_long128[j]));
        worst = u > worst ? u : worst;
        worst = u128 > worst ? u128 : worst;
        short_same &= rope_inv_freq(j, 16, 10000.0f, &dyn, 16) == rope_inv_freq(j, 16, 10000.0f, NULL, 16);
    }
    CHECK(worst <= 1, "dynamic NTK frequencies past max_position_embeddings: %d ulp from transformers'", worst);
    CHECK(short_same, "dynamic NTK up to max_position_embeddings: the plain frequencies");
    // The table holds cos/sin of the scaled angle.
    float cs[4 * 16];
    rope_table(cs, 4, 16, 10000.0f, &lin);
    CHECK(cs[3 * 16 + 1] == (float)cos((double)(3.0f * rope_inv_freq(1, 16, 10000.0f, &lin, 0))) &&
          cs[3 * 16 + 8 + 1] == (float)sin((double)(3.0f * rope_inv_freq(1, 16, 10000.0f, &lin, 0))),
          "the table is cos/sin of the scaled angle");
    // Text: round trip, and refusals that say what was expected.
    RopeScaling r;
    char text[96], err[256];
    CHECK(rope_scaling_parse("llama3:8:1:4:8192", &r, err, sizeof err) == 0 && !memcmp(&r, &l3, sizeof r),
          "llama3:8:1:4:8192 parses to Llama 3.1's scaling");
    rope_scaling_text(&l3, text, sizeof text);
    CHECK(!strcmp(text, "llama3:8:1:4:8192"), "llama3 text: '%s'", text);
    CHECK(rope_scaling_parse("none", &r, err, sizeof err) == 0 && r.type == ROPE_PLAIN, "none parses");
    CHECK(rope_scaling_parse("yarn:4:32768", &r, err, sizeof err) == 0 && !memcmp(&r, &yn, sizeof r),
          "yarn:4:32768 parses to transformers' defaults: %s", err);
    rope_scaling_text(&yn, text, sizeof text);
    CHECK(!strcmp(text, "yarn:4:32768:1.1386294361119891:32:1:1"), "yarn text: '%s'", text);
    RopeScaling yb;
    CHECK(rope_scaling_parse(text, &yb, err, sizeof err) == 0 && !memcmp(&yb, &yn, sizeof yb), "yarn text round trip");
    CHECK(rope_scaling_parse("yarn:8:2048:1.25:16:2:0", &r, err, sizeof err) == 0 && r.factor == 8.0f &&
              r.original_max_positions == 2048 && r.attention_factor == 1.25 && r.beta_fast == 16.0f &&
              r.beta_slow == 2.0f && r.truncate == 0,
          "yarn with every field parses: %s", err);
    CHECK(rope_scaling_parse("dynamic:4:16", &r, err, sizeof err) == 0 && !memcmp(&r, &dyn, sizeof r), "dynamic:4:16 parses: %s",
          err);
    rope_scaling_text(&dyn, text, sizeof text);
    CHECK(!strcmp(text, "dynamic:4:16"), "dynamic text: '%s'", text);
    static const struct { const char *text, *needle; } bad[] = {
        {"llama3:8:1:4", "four numbers"},          {"llama3:8:4:1:8192", "above low_freq_factor"},
        {"linear:0.5", "expected 1 .. 1e6"},        {"yarn:2", "yarn:FACTOR:ORIGINAL_POSITIONS"},
        {"yarn:4:16:1", "yarn:FACTOR:ORIGINAL_POSITIONS"}, {"yarn:4:16:", "yarn:FACTOR:ORIGINAL_POSITIONS"},
        {"yarn:4:16:1:32:1:2", "TRUNCATE 0 or 1"},  {"yarn:4:16:0:32:1:1", "attention_factor 0"},
        {"yarn:4:16:1:32:-1:1", "beta_slow -1"},    {"yarn:0.5:16", "expected 1 .. 1e6"},
        {"rope:2", "expected none, linear:FACTOR"}, {"dynamic:2", "dynamic:FACTOR:MAX_POSITIONS"},
        {"dynamic:2:16.5", "maximum positions 16.5 are not a positive integer"}, {"dynamic:0.5:16", "expected 1 .. 1e6"},
        {"linear:2x", "linear:FACTOR"},             {"llama3:8:1:4:81.5", "not a positive integer"},
        {"linear:nan", "linear:FACTOR"},            {"llama3:8:0:4:8192", "low_freq_factor 0"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = rope_scaling_parse(bad[i].text, &r, err, sizeof err);
        CHECK(rc == -1 && strstr(err, bad[i].needle), "'%s' refused naming '%s': rc %d, '%s'", bad[i].text,
              bad[i].needle, rc, err);
    }
}

// Positions past the table (or an odd head dimension) stop with a message that names them, exit 1
// (run in a child: ctron_fatal exits).
static void expect_fatal(const char *what, int positions, int rows, int b, int d, int rot, int pos0, const char *needle) {
    int fds[2];
    if (pipe(fds) != 0) { CHECK(0, "pipe failed"); return; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        static float cs[64], x[256];   // static: ctron_fatal's exit must leave no heap block to LeakSanitizer
        rope_forward(x, x, 16, cs, positions, rows, b, 1, d, rot, pos0, 0);
        _exit(0);
    }
    close(fds[1]);
    char msg[512] = {0};
    size_t len = 0;
    ssize_t got;
    while ((got = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0) len += (size_t)got;   // to EOF
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 1 && strstr(msg, needle);
    printf("  %-64s %s", what, ok ? "refused: " : "NOT REFUSED\n");
    if (ok) fputs(msg, stdout);
    CHECK(ok, "%s: expected exit 1 with '%s', got status %d, message '%s'", what, needle, status, msg);
}

static void test_rope_errors(void) {
    // rows 12 at b = 2 from pos0 = 3: positions 3 .. 8, the table has 0 .. 7
    expect_fatal("rope past the table", 8, 12, 2, 6, 6, 3, "positions 3 .. 8 are outside the table's 0 .. 7");
    expect_fatal("rope with an odd head dimension", 8, 2, 1, 5, 5, 0, "5 rotary dims of heads of 5: expected an even");
    expect_fatal("rope rotating more dims than a head's", 8, 2, 1, 6, 8, 0, "8 rotary dims of heads of 6");
    expect_fatal("rope rotating an odd part of a head", 8, 2, 1, 8, 3, 0, "3 rotary dims of heads of 8: expected an even");
}

// ---------------------------------------------------------------------------------------------------
// SwiGLU
// ---------------------------------------------------------------------------------------------------

typedef struct { double *g, *u, *y; const float *r; size_t n; } SwigluRef;

static void swiglu_ref_forward(SwigluRef *c) {
    for (size_t i = 0; i < c->n; i++) c->y[i] = c->g[i] / (1.0 + exp(-c->g[i])) * c->u[i];
}
static double swiglu_objective(void *p) {
    SwigluRef *c = p;
    swiglu_ref_forward(c);
    double acc = 0.0;
    for (size_t i = 0; i < c->n; i++) acc += c->y[i] * c->r[i];
    return acc;
}

// gate and up as the two halves of one [n, 2f] buffer (ld = 2f), their gradients likewise.
static void test_swiglu(int n, int f) {
    char what[128];
    size_t nf = (size_t)n * f, ld = 2 * (size_t)f;
    float *gu = rand_f((size_t)n * ld, -6, 6), *r = rand_f(nf, -1, 1);
    gu[0] = -95.0f;   // the far tails: silu → −0 and → x
    gu[1] = 40.0f;
    float *g = alloc_f(nf), *u = alloc_f(nf);
    for (int i = 0; i < n; i++) {
        memcpy(g + (size_t)i * f, gu + (size_t)i * ld, sizeof(float) * f);
        memcpy(u + (size_t)i * f, gu + (size_t)i * ld + f, sizeof(float) * f);
    }
    float *y = alloc_f(nf);
    swiglu_forward(y, gu, gu + f, (int)ld, n, f, 0);
    SwigluRef ref = {to_d(g, nf), to_d(u, nf), calloc(nf, sizeof(double)), r, nf};
    swiglu_ref_forward(&ref);
    snprintf(what, sizeof what, "swiglu n=%d f=%d forward vs double", n, f);
    check_err(what, rel_err(y, ref.y, nf), TOL_FWD);

    float *dgu = alloc_f((size_t)n * ld), *y_re = alloc_f(nf);
    swiglu_backward(dgu, dgu + f, (int)ld, y_re, r, gu, gu + f, (int)ld, n, f, 0);
    snprintf(what, sizeof what, "swiglu n=%d f=%d backward dgate vs finite differences", n, f);
    double eg = 0.0, eu = 0.0;
    {   // the gradients are strided: compare row by row through contiguous copies
        float *dg = alloc_f(nf), *du = alloc_f(nf);
        for (int i = 0; i < n; i++) {
            memcpy(dg + (size_t)i * f, dgu + (size_t)i * ld, sizeof(float) * f);
            memcpy(du + (size_t)i * f, dgu + (size_t)i * ld + f, sizeof(float) * f);
        }
        eg = fd_err(swiglu_objective, &ref, ref.g, nf, dg, 1);
        eu = fd_err(swiglu_objective, &ref, ref.u, nf, du, 1);
        // dgate may alias gate, dup may alias up: the same bits in place
        float *ip = copy_f(gu, (size_t)n * ld);
        swiglu_backward(ip, ip + f, (int)ld, NULL, r, ip, ip + f, (int)ld, n, f, 0);
        char what_ip[128];
        snprintf(what_ip, sizeof what_ip, "swiglu n=%d f=%d backward in place (dgate = gate, dup = up)", n, f);
        check_bitwise(what_ip, ip, dgu, (size_t)n * ld);
        free(dg), free(du), free(ip);
    }
    check_err(what, eg, TOL_FD);
    snprintf(what, sizeof what, "swiglu n=%d f=%d backward dup vs finite differences", n, f);
    check_err(what, eu, TOL_FD);
    snprintf(what, sizeof what, "swiglu n=%d f=%d backward's recomputed y = forward's y", n, f);
    check_bitwise(what, y_re, y, nf);

    // round_bf16: gate and up rounded in place, y = bf16(the fp32 forward of the rounded inputs)
    float *gu16 = copy_f(gu, (size_t)n * ld), *gu_round = alloc_f((size_t)n * ld), *y16 = alloc_f(nf);
    for (size_t i = 0; i < (size_t)n * ld; i++) gu_round[i] = bf16r(gu[i]);
    swiglu_forward(y16, gu16, gu16 + f, (int)ld, n, f, 1);
    snprintf(what, sizeof what, "swiglu n=%d f=%d round_bf16: gate, up rounded in place", n, f);
    check_bitwise(what, gu16, gu_round, (size_t)n * ld);
    float *y_of_rounded = alloc_f(nf), *y_expect = alloc_f(nf), *scratch = copy_f(gu_round, (size_t)n * ld);
    swiglu_forward(y_of_rounded, scratch, scratch + f, (int)ld, n, f, 0);
    for (size_t i = 0; i < nf; i++) y_expect[i] = bf16r(y_of_rounded[i]);
    snprintf(what, sizeof what, "swiglu n=%d f=%d round_bf16: y = bf16(silu(g16)·u16)", n, f);
    check_bitwise(what, y16, y_expect, nf);
    float *dgu16 = alloc_f((size_t)n * ld), *y16_re = alloc_f(nf);
    swiglu_backward(dgu16, dgu16 + f, (int)ld, y16_re, r, gu16, gu16 + f, (int)ld, n, f, 1);
    snprintf(what, sizeof what, "swiglu n=%d f=%d round_bf16: backward's recomputed y = forward's", n, f);
    check_bitwise(what, y16_re, y16, nf);

    free(gu), free(r), free(g), free(u), free(y), free(ref.g), free(ref.u), free(ref.y), free(dgu), free(y_re);
    free(gu16), free(gu_round), free(y16), free(y_of_rounded), free(y_expect), free(scratch), free(dgu16), free(y16_re);
}

// ---------------------------------------------------------------------------------------------------
// 1 vs 2 threads: every output bitwise equal (rows are independent; RMSNorm's dw sums rows in order)
// ---------------------------------------------------------------------------------------------------

typedef struct { float *rms_y, *rms_rstd, *rms_dx, *rms_dw, *rms_dxt, *rms_dwt, *rope_y, *rope_dx, *sw_y, *sw_dgu, *sw_yre; } Outs;

static void run_all(Outs *o, const float *x, const float *w, const float *dy, const float *gu, const float *cs, int n,
                    int h, int heads, int d, int f, int b) {
    rmsnorm_forward(o->rms_y, o->rms_rstd, x, w, 1e-6f, n, h, 0);
    rmsnorm_backward(o->rms_dx, 0, o->rms_dw, dy, x, o->rms_rstd, w, n, h);
    rmsnorm_backward_from_output(o->rms_dxt, 0, o->rms_dwt, dy, o->rms_y, o->rms_rstd, w, n, h);
    rope_forward(o->rope_y, x, heads * d, cs, n + 1, n, b, heads, d, d, 1, 0);   // positions 1 .. n
    rope_backward(o->rope_dx, dy, heads * d, cs, n + 1, n, b, heads, d, d, 1);
    float *g = copy_f(gu, (size_t)n * 2 * f);
    swiglu_forward(o->sw_y, g, g + f, 2 * f, n, f, 1);
    swiglu_backward(o->sw_dgu, o->sw_dgu + f, 2 * f, o->sw_yre, dy, g, g + f, 2 * f, n, f, 1);
    free(g);
}

static void alloc_outs(Outs *o, int n, int h, int f) {
    size_t nh = (size_t)n * h;
    *o = (Outs){alloc_f(nh), alloc_f((size_t)n), alloc_f(nh), alloc_f((size_t)h), alloc_f(nh), alloc_f((size_t)h),
                alloc_f(nh), alloc_f(nh), alloc_f((size_t)n * f), alloc_f((size_t)n * 2 * f), alloc_f((size_t)n * f)};
}

static void test_threads(void) {
    int n = 67, heads = 13, d = 10, h = heads * d, f = 65, b = 1;   // h = 130: three dw chunks of 64
    size_t nh = (size_t)n * h;
    float *x = rand_f(nh, -2, 2), *w = rand_f((size_t)h, -1.5f, 1.5f), *dy = rand_f(nh, -1, 1);
    float *gu = rand_f((size_t)n * 2 * f, -5, 5), *cs = alloc_f(rope_table_floats(n + 1, d));
    rope_table(cs, n + 1, d, 10000.0f, NULL);
    Outs one, two;
    alloc_outs(&one, n, h, f);
    alloc_outs(&two, n, h, f);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    run_all(&one, x, w, dy, gu, cs, n, h, heads, d, f, b);
    omp_set_num_threads(2);
    run_all(&two, x, w, dy, gu, cs, n, h, heads, d, f, b);
    omp_set_num_threads(saved);
    check_bitwise("threads 1 vs 2: rmsnorm y", one.rms_y, two.rms_y, nh);
    check_bitwise("threads 1 vs 2: rmsnorm rstd", one.rms_rstd, two.rms_rstd, (size_t)n);
    check_bitwise("threads 1 vs 2: rmsnorm dx", one.rms_dx, two.rms_dx, nh);
    check_bitwise("threads 1 vs 2: rmsnorm dw", one.rms_dw, two.rms_dw, (size_t)h);
    check_bitwise("threads 1 vs 2: rmsnorm from output dx", one.rms_dxt, two.rms_dxt, nh);
    check_bitwise("threads 1 vs 2: rmsnorm from output dw", one.rms_dwt, two.rms_dwt, (size_t)h);
    check_bitwise("threads 1 vs 2: rope forward", one.rope_y, two.rope_y, nh);
    check_bitwise("threads 1 vs 2: rope backward", one.rope_dx, two.rope_dx, nh);
    check_bitwise("threads 1 vs 2: swiglu y (bf16)", one.sw_y, two.sw_y, (size_t)n * f);
    check_bitwise("threads 1 vs 2: swiglu dgate, dup", one.sw_dgu, two.sw_dgu, (size_t)n * 2 * f);
    float **po = &one.rms_y, **pt = &two.rms_y;
    for (size_t i = 0; i < sizeof(Outs) / sizeof(float *); i++) free(po[i]), free(pt[i]);
    free(x), free(w), free(dy), free(gu), free(cs);
}

// ---------------------------------------------------------------------------------------------------
// The backend table: the cpu and cpu-guarded entries give the direct calls' bits
// ---------------------------------------------------------------------------------------------------

static float *dev_put(Backend *be, const float *src, size_t n) {
    float *p = be->alloc(be, n * sizeof(float));
    be->copy(be, p, src, n * sizeof(float), COPY_H2D);
    return p;
}
static void dev_get(Backend *be, float *dst, const float *p, size_t n) {
    be->copy(be, dst, p, n * sizeof(float), COPY_D2H);
}

static void test_backend(const char *name) {
    char err[256], what[96];
    Backend *be = backend_open(name, PRECISION_FP32, err, sizeof err);
    CHECK(be != NULL, "backend_open(%s): %s", name, err);
    if (!be) return;
    int n = 11, heads = 3, d = 6, h = heads * d, f = 7, b = 1;
    size_t nh = (size_t)n * h, nf = (size_t)n * f;
    float *x = rand_f(nh, -2, 2), *w = rand_f((size_t)h, 0.5f, 1.5f), *dy = rand_f(nh, -1, 1);
    float *gu = rand_f(2 * nf, -5, 5), *cs = alloc_f(rope_table_floats(n + 1, d));
    rope_table(cs, n + 1, d, 10000.0f, NULL);
    Outs host;
    alloc_outs(&host, n, h, f);
    run_all(&host, x, w, dy, gu, cs, n, h, heads, d, f, b);

    float *dx = dev_put(be, x, nh), *dw_ = dev_put(be, w, (size_t)h), *ddy = dev_put(be, dy, nh);
    float *dgu = dev_put(be, gu, 2 * nf), *dcs = dev_put(be, cs, rope_table_floats(n + 1, d));
    float *y = be->alloc(be, nh * 4), *rstd = be->alloc(be, (size_t)n * 4), *gx = be->alloc(be, nh * 4);
    float *gw = be->alloc(be, (size_t)h * 4), *gxt = be->alloc(be, nh * 4), *gwt = be->alloc(be, (size_t)h * 4);
    float *ry = be->alloc(be, nh * 4), *rdx = be->alloc(be, nh * 4), *sy = be->alloc(be, nf * 4);
    float *sdgu = be->alloc(be, 2 * nf * 4), *syre = be->alloc(be, nf * 4);
    be->rmsnorm_forward(be, y, rstd, dx, dw_, 1e-6f, n, h, 0);
    be->rmsnorm_backward(be, gx, 0, gw, ddy, dx, rstd, dw_, n, h);
    be->rmsnorm_backward_from_output(be, gxt, 0, gwt, ddy, y, rstd, dw_, n, h);
    be->rope_forward(be, ry, dx, h, dcs, n + 1, n, b, heads, d, d, 1, 0);
    be->rope_backward(be, rdx, ddy, h, dcs, n + 1, n, b, heads, d, d, 1);
    be->swiglu_forward(be, sy, dgu, dgu + f, 2 * f, n, f, 1);
    be->swiglu_backward(be, sdgu, sdgu + f, 2 * f, syre, ddy, dgu, dgu + f, 2 * f, n, f, 1);
    struct { const char *what; float *dev, *host; size_t n; } outs[] = {
        {"rmsnorm_forward y", y, host.rms_y, nh}, {"rmsnorm_forward rstd", rstd, host.rms_rstd, (size_t)n},
        {"rmsnorm_backward dx", gx, host.rms_dx, nh}, {"rmsnorm_backward dw", gw, host.rms_dw, (size_t)h},
        {"rmsnorm_backward_from_output dx", gxt, host.rms_dxt, nh},
        {"rmsnorm_backward_from_output dw", gwt, host.rms_dwt, (size_t)h},
        {"rope_forward", ry, host.rope_y, nh}, {"rope_backward", rdx, host.rope_dx, nh},
        {"swiglu_forward y", sy, host.sw_y, nf}, {"swiglu_backward dgate, dup", sdgu, host.sw_dgu, 2 * nf},
        {"swiglu_backward y", syre, host.sw_yre, nf},
    };
    float *back = alloc_f(2 * nf > nh ? 2 * nf : nh);
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        dev_get(be, back, outs[i].dev, outs[i].n);
        snprintf(what, sizeof what, "%s: %s", name, outs[i].what);
        check_bitwise(what, back, outs[i].host, outs[i].n);
    }
    float *all[] = {dx, dw_, ddy, dgu, dcs, y, rstd, gx, gw, gxt, gwt, ry, rdx, sy, sdgu, syre};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) be->free(be, all[i]);
    backend_close(be);
    float **po = &host.rms_y;
    for (size_t i = 0; i < sizeof(Outs) / sizeof(float *); i++) free(po[i]);
    free(x), free(w), free(dy), free(gu), free(cs), free(back);
}

int main(void) {
    printf("RMSNorm\n");
    test_rmsnorm(7, 6);
    test_rmsnorm(7, 10);
    test_rmsnorm(13, 70);
    test_rmsnorm_zero_weight();
    printf("RoPE\n");
    test_rope(5, 3, 3, 6, 6, 0, 10000.0f);   // q: 3 heads
    test_rope(5, 3, 1, 10, 10, 4, 500000.0f);  // k: kv = 1, at an offset, θ ≠ 10000
    test_rope(7, 1, 3, 10, 10, 0, 10000.0f);
    test_rope(5, 3, 3, 12, 8, 0, 10000.0f);    // partial rotary: 8 of 12 dims (Phi-4-mini's 0.75 is 96 of 128)
    test_rope(7, 2, 2, 16, 4, 3, 500000.0f);   // a quarter of the head, at an offset
    test_rope_offset();
    test_rope_strided();
    test_rope_errors();
    test_rope_table(128, 500000.0f);
    test_rope_table(80, 10000.0f);   // 2j/d not exact in fp32
    test_rope_scaling();
    printf("SwiGLU\n");
    test_swiglu(7, 6);
    test_swiglu(5, 10);
    printf("Threads\n");
    test_threads();
    printf("Backend table\n");
    test_backend("cpu");
    test_backend("cpu-guarded");
    return check_summary();
}
