// Finite-difference checks of every CPU op's backward against its forward.
//
// For each op we take a scalar objective L = Σ out ⊙ R (R a fixed random tensor; for cross-entropy L is
// the summed loss itself), get the analytic gradient from the op's backward, and compare it, element by
// element, with central differences (L(x + ε) − L(x − ε)) / 2ε computed with the op's forward. Ops
// compute in fp32; L is accumulated in double. Every element of every tensor is checked (the shapes are
// small), and the error measure is max-abs normalised:
//
//     err = max_i |analytic_i − numeric_i| / max(max_i |numeric_i|, 1e-6)
//
// Tolerances (measured maxima over 8 seeds and 1, 2, 4 threads in brackets):
//   TOL_AFFINE    2e-4  ops whose output is affine in the perturbed tensor (linear, embedding, dropout,
//                       attention dv): the difference quotient is exact up to the fp32 rounding of the
//                       forward, so the only error is rounding noise [1.4e-5].
//   TOL_NONLINEAR 1e-3  layernorm, GeLU, attention dq/dk, cross-entropy: rounding noise plus the O(ε²)
//                       truncation error of the central difference [1.7e-4, attention dk].
//   TOL_SAME      1e-5  two analytic results that must agree up to fp32 rounding: the accumulate flags
//                       (result − prior content vs a fresh result), grad_scale, dx = NULL [1.8e-7].
// FD_SEED (a -D define) changes the random data.
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/crossentropy.h"
#include "backend/cpu/dropout.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/gelu.h"
#include "backend/cpu/layernorm.h"
#include "backend/cpu/linear.h"
#include "util/philox.h"

#define TOL_AFFINE 2e-4
#define TOL_NONLINEAR 1e-3
#define TOL_SAME 1e-5

#define EPS_AFFINE 1e-2f    // any ε works for an affine map; larger means less rounding noise
#define EPS_NONLINEAR 3e-3f // balances O(ε²) truncation against rounding noise / ε

// ---------------------------------------------------------------------------------------------------
// Deterministic random numbers (xorshift64) and buffers
// ---------------------------------------------------------------------------------------------------

#ifndef FD_SEED
#define FD_SEED 0x9E3779B97F4A7C15ull
#endif
static uint64_t rng_state = FD_SEED;

static uint64_t xorshift64(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static float uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(xorshift64() >> 40) / 16777216.0);
}

static float *alloc_floats(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}

static float *alloc_rand(size_t n, float lo, float hi) {
    float *p = alloc_floats(n);
    for (size_t i = 0; i < n; i++) p[i] = uniform(lo, hi);
    return p;
}

static float *alloc_fill(size_t n, float value) {
    float *p = alloc_floats(n);
    for (size_t i = 0; i < n; i++) p[i] = value;
    return p;
}

static float *alloc_copy(const float *src, size_t n) {
    float *p = alloc_floats(n);
    memcpy(p, src, n * sizeof(float));
    return p;
}

// Σ y ⊙ r over a [rows, cols] matrix; y and r share the row stride ld. Accumulated in double.
static double dot_rows(const float *y, const float *r, int rows, int cols, int ld) {
    double acc = 0.0;
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < cols; c++) acc += (double)y[(size_t)i * ld + c] * (double)r[(size_t)i * ld + c];
    return acc;
}

// max|a − b| / max(max|b|, 1e-6) over n elements.
static double max_rel_diff(const float *a, const float *b, size_t n) {
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
        ref = fmax(ref, fabs((double)b[i]));
    }
    return diff / fmax(ref, 1e-6);
}

// (after − before), the part a "+=" backward added, into out.
static void subtract(float *out, const float *after, const float *before, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = after[i] - before[i];
}

// ---------------------------------------------------------------------------------------------------
// The finite-difference comparison, for any objective
// ---------------------------------------------------------------------------------------------------

typedef double (*objective_fn)(void *ctx);

// Central differences of f(ctx) with respect to each element of the [rows, cols] matrix x (row stride
// ldx; x is perturbed in place and restored), against the analytic gradient grad (row stride ldg).
// Returns max|analytic − numeric| / max(max|numeric|, 1e-6).
static double fd_error(objective_fn f, void *ctx, float *x, int rows, int cols, int ldx, const float *grad,
                       int ldg, float eps) {
    double max_diff = 0.0, max_num = 0.0;
    for (int i = 0; i < rows; i++) {
        for (int c = 0; c < cols; c++) {
            float *p = x + (size_t)i * ldx + c;
            float orig = *p, hi = orig + eps, lo = orig - eps;
            *p = hi;
            double f_hi = f(ctx);
            *p = lo;
            double f_lo = f(ctx);
            *p = orig;
            double numeric = (f_hi - f_lo) / ((double)hi - (double)lo); // the step actually taken in fp32
            double analytic = grad[(size_t)i * ldg + c];
            max_diff = fmax(max_diff, fabs(analytic - numeric));
            max_num = fmax(max_num, fabs(numeric));
        }
    }
    return max_diff / fmax(max_num, 1e-6);
}

static void fd_check(const char *op, const char *tensor, objective_fn f, void *ctx, float *x, int rows, int cols,
                     int ldx, const float *grad, int ldg, float eps, double tol) {
    double err = fd_error(f, ctx, x, rows, cols, ldx, grad, ldg, eps);
    printf("  %-38s d%-6s fd rel err %.2e (tol %.0e)\n", op, tensor, err, tol);
    CHECK(err < tol, "%s: d%s finite-difference rel err %.3e >= tol %.1e", op, tensor, err, tol);
}

// Dense tensor of n elements.
static void fd_check_vec(const char *op, const char *tensor, objective_fn f, void *ctx, float *x, size_t n,
                         const float *grad, float eps, double tol) {
    fd_check(op, tensor, f, ctx, x, 1, (int)n, (int)n, grad, (int)n, eps, tol);
}

static void same_check(const char *op, const char *what, const float *a, const float *b, size_t n) {
    double err = max_rel_diff(a, b, n);
    printf("  %-38s %-40s rel diff %.2e (tol %.0e)\n", op, what, err, TOL_SAME);
    CHECK(err < TOL_SAME, "%s: %s rel diff %.3e >= tol %.1e", op, what, err, TOL_SAME);
}

// ---------------------------------------------------------------------------------------------------
// linear: y = x Wᵀ + b, with row strides on x, y and dy
// ---------------------------------------------------------------------------------------------------

typedef struct {
    const float *x, *w, *bias, *r;
    float *y;
    int n, in, out, ldx, ldy;
} LinearCtx;

static double linear_objective(void *p) {
    LinearCtx *c = p;
    linear_forward(c->y, c->ldy, c->x, c->ldx, c->w, c->bias, c->n, c->in, c->out);
    return dot_rows(c->y, c->r, c->n, c->out, c->ldy);
}

static void test_linear(int n, int in, int out, int ldx, int ldy, int with_bias) {
    char op[64];
    snprintf(op, sizeof op, "linear n=%d in=%d out=%d%s", n, in, out, with_bias ? "" : " nobias");
    const float GARBAGE = 1000.0f;
    float *x = alloc_rand((size_t)n * ldx, -1, 1), *w = alloc_rand((size_t)out * in, -1, 1);
    float *bias = with_bias ? alloc_rand((size_t)out, -1, 1) : NULL;
    float *r = alloc_rand((size_t)n * ldy, -1, 1); // R, also dy (row stride ldy)
    float *y = alloc_floats((size_t)n * ldy);
    LinearCtx ctx = {x, w, bias, r, y, n, in, out, ldx, ldy};

    // Analytic: dx overwritten (accumulate = 0, prefilled with garbage, padding included), dW, db +=.
    float *dx = alloc_fill((size_t)n * ldx, GARBAGE), *dw = alloc_floats((size_t)out * in);
    float *db = with_bias ? alloc_floats((size_t)out) : NULL;
    linear_backward(dx, ldx, 0, dw, db, r, ldy, x, ldx, w, n, in, out);

    int pad_ok = 1;
    for (int i = 0; i < n; i++)
        for (int c = in; c < ldx; c++) pad_ok &= dx[(size_t)i * ldx + c] == GARBAGE;
    CHECK(pad_ok, "%s: dx row padding written", op);

    // accumulate = 1: dx, dW, db must be added to existing content.
    size_t nx = (size_t)n * ldx, nw = (size_t)out * in;
    float *dx0 = alloc_rand(nx, -1, 1), *dw0 = alloc_rand(nw, -1, 1), *db0 = alloc_rand((size_t)out, -1, 1);
    float *dx1 = alloc_copy(dx0, nx), *dw1 = alloc_copy(dw0, nw), *db1 = alloc_copy(db0, (size_t)out);
    linear_backward(dx1, ldx, 1, dw1, with_bias ? db1 : NULL, r, ldy, x, ldx, w, n, in, out);
    float *added = alloc_floats((size_t)n * in), *fresh = alloc_floats((size_t)n * in);
    for (int i = 0; i < n; i++) // logical elements only: the padding of dx0 is not a gradient
        for (int c = 0; c < in; c++) {
            size_t e = (size_t)i * ldx + c;
            added[(size_t)i * in + c] = dx1[e] - dx0[e];
            fresh[(size_t)i * in + c] = dx[e];
        }
    same_check(op, "accumulate: dx += (vs fresh dx)", added, fresh, (size_t)n * in);
    subtract(dw1, dw1, dw0, nw);
    same_check(op, "accumulate: dW += (vs fresh dW)", dw1, dw, nw);
    if (with_bias) {
        subtract(db1, db1, db0, (size_t)out);
        same_check(op, "accumulate: db += (vs fresh db)", db1, db, (size_t)out);
    }

    // linear_forward_acc: y0 + x·Wᵀ in place of y0 (beta 1), against a fresh forward; y's padding untouched.
    float *y0 = alloc_rand((size_t)n * ldy, -4, 1), *y_acc = alloc_copy(y0, (size_t)n * ldy);
    float *y_new = alloc_floats((size_t)n * ldy), *sum = alloc_floats((size_t)n * out), *acc = alloc_floats((size_t)n * out);
    linear_forward(y_new, ldy, x, ldx, w, NULL, n, in, out);
    linear_forward_acc(y_acc, ldy, x, ldx, w, n, in, out);
    int ypad_ok = 1;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < ldy; c++) {
            size_t e = (size_t)i * ldy + c;
            if (c >= out) ypad_ok &= y_acc[e] == y0[e];
            else sum[(size_t)i * out + c] = y0[e] + y_new[e], acc[(size_t)i * out + c] = y_acc[e];
        }
    CHECK(ypad_ok, "%s: linear_forward_acc wrote y's row padding", op);
    same_check(op, "forward_acc: y += x Wᵀ (vs y0 + fresh y)", acc, sum, (size_t)n * out);
    free(y0), free(y_acc), free(y_new), free(sum), free(acc);

    // dx = NULL (no input gradient): dW still right.
    float *dw2 = alloc_floats(nw);
    linear_backward(NULL, 0, 0, dw2, NULL, r, ldy, x, ldx, w, n, in, out);
    same_check(op, "dx = NULL, db = NULL: dW", dw2, dw, nw);

    fd_check(op, "x", linear_objective, &ctx, x, n, in, ldx, dx, ldx, EPS_AFFINE, TOL_AFFINE);
    fd_check(op, "W", linear_objective, &ctx, w, out, in, in, dw, in, EPS_AFFINE, TOL_AFFINE);
    if (with_bias) fd_check_vec(op, "b", linear_objective, &ctx, bias, (size_t)out, db, EPS_AFFINE, TOL_AFFINE);

    free(x), free(w), free(bias), free(r), free(y), free(dx), free(dw), free(db);
    free(dx0), free(dw0), free(db0), free(dx1), free(dw1), free(db1), free(added), free(fresh), free(dw2);
}

// ---------------------------------------------------------------------------------------------------
// layernorm
// ---------------------------------------------------------------------------------------------------

typedef struct {
    const float *x, *w, *b, *r;
    float *y, *stats;
    int n, h;
} LayerNormCtx;

static double layernorm_objective(void *p) {
    LayerNormCtx *c = p;
    layernorm_forward(c->y, c->stats, c->x, c->w, c->b, c->n, c->h);
    return dot_rows(c->y, c->r, c->n, c->h, c->h);
}

static void test_layernorm(int n, int h) {
    char op[64];
    snprintf(op, sizeof op, "layernorm n=%d h=%d", n, h);
    size_t nh = (size_t)n * h;
    float *x = alloc_rand(nh, -2, 2);
    for (int i = 0; i < n; i++) // rows with different means and scales
        for (int c = 0; c < h; c++) x[(size_t)i * h + c] = x[(size_t)i * h + c] * (0.5f + 0.3f * i) + 0.7f * i;
    float *w = alloc_rand((size_t)h, 0.5f, 1.5f), *b = alloc_rand((size_t)h, -0.5f, 0.5f);
    float *r = alloc_rand(nh, -1, 1);
    float *y = alloc_floats(nh), *stats = alloc_floats((size_t)n * 2);
    LayerNormCtx ctx = {x, w, b, r, alloc_floats(nh), alloc_floats((size_t)n * 2), n, h};

    layernorm_forward(y, stats, x, w, b, n, h);
    float *dx = alloc_fill(nh, 1000.0f), *dw = alloc_floats((size_t)h), *db = alloc_floats((size_t)h);
    layernorm_backward(dx, 0, dw, db, r, x, stats, w, n, h);

    // accumulate = 1 for dx; dw, db are always +=.
    float *dx0 = alloc_rand(nh, -1, 1), *dw0 = alloc_rand((size_t)h, -1, 1), *db0 = alloc_rand((size_t)h, -1, 1);
    float *dx1 = alloc_copy(dx0, nh), *dw1 = alloc_copy(dw0, (size_t)h), *db1 = alloc_copy(db0, (size_t)h);
    layernorm_backward(dx1, 1, dw1, db1, r, x, stats, w, n, h);
    subtract(dx1, dx1, dx0, nh);
    subtract(dw1, dw1, dw0, (size_t)h);
    subtract(db1, db1, db0, (size_t)h);
    same_check(op, "accumulate: dx += (vs fresh dx)", dx1, dx, nh);
    same_check(op, "dw += (vs fresh dw)", dw1, dw, (size_t)h);
    same_check(op, "db += (vs fresh db)", db1, db, (size_t)h);

    fd_check_vec(op, "x", layernorm_objective, &ctx, x, nh, dx, EPS_NONLINEAR, TOL_NONLINEAR);
    fd_check_vec(op, "w", layernorm_objective, &ctx, w, (size_t)h, dw, EPS_NONLINEAR, TOL_NONLINEAR);
    fd_check_vec(op, "b", layernorm_objective, &ctx, b, (size_t)h, db, EPS_NONLINEAR, TOL_NONLINEAR);

    free(x), free(w), free(b), free(r), free(y), free(stats), free(ctx.y), free(ctx.stats);
    free(dx), free(dw), free(db), free(dx0), free(dw0), free(db0), free(dx1), free(dw1), free(db1);
}

// ---------------------------------------------------------------------------------------------------
// bias + GeLU: gelu_in = x + bias (in place), y = gelu(gelu_in); backward gelu_backward, db = Σ_rows dx
// ---------------------------------------------------------------------------------------------------

typedef struct {
    const float *x, *bias, *r;
    float *xs, *y; // xs: scratch copy of x, which bias_gelu_forward overwrites
    int n, cols;
} GeluCtx;

static double gelu_objective(void *p) {
    GeluCtx *c = p;
    memcpy(c->xs, c->x, (size_t)c->n * c->cols * sizeof(float));
    bias_gelu_forward(c->y, c->xs, c->bias, c->n, c->cols, 0);
    return dot_rows(c->y, c->r, c->n, c->cols, c->cols);
}

static void test_gelu(int n, int cols) {
    char op[64];
    snprintf(op, sizeof op, "bias_gelu n=%d cols=%d", n, cols);
    size_t count = (size_t)n * cols;
    float *x = alloc_rand(count, -3, 3), *bias = alloc_rand((size_t)cols, -0.5f, 0.5f);
    float *r = alloc_rand(count, -1, 1);
    GeluCtx ctx = {x, bias, r, alloc_floats(count), alloc_floats(count), n, cols};

    float *gelu_in = alloc_copy(x, count), *y = alloc_floats(count);
    bias_gelu_forward(y, gelu_in, bias, n, cols, 0);
    int in_ok = 1;
    for (size_t e = 0; e < count; e++) in_ok &= gelu_in[e] == x[e] + bias[e % cols];
    CHECK(in_ok, "%s: x is not x + bias after bias_gelu_forward", op);

    float *dx = alloc_floats(count), *db = alloc_floats((size_t)cols);
    gelu_backward(dx, r, gelu_in, count);
    bias_backward(db, dx, cols, n, cols);

    float *inplace = alloc_copy(r, count); // dx may alias dy
    gelu_backward(inplace, inplace, gelu_in, count);
    CHECK(memcmp(inplace, dx, count * sizeof(float)) == 0, "%s: gelu_backward in place differs", op);

    fd_check_vec(op, "x", gelu_objective, &ctx, x, count, dx, EPS_NONLINEAR, TOL_NONLINEAR);
    fd_check_vec(op, "bias", gelu_objective, &ctx, bias, (size_t)cols, db, EPS_NONLINEAR, TOL_NONLINEAR);

    free(x), free(bias), free(r), free(ctx.xs), free(ctx.y), free(gelu_in), free(y), free(dx), free(db);
    free(inplace);
}

// ---------------------------------------------------------------------------------------------------
// dropout: out = res + keep·(y + bias)/(1 − p); and dropout_apply
// ---------------------------------------------------------------------------------------------------

typedef struct {
    const float *res, *y, *bias, *r;
    const uint8_t *keep;
    float *out;
    float p;
    int n, w;
} DropResCtx;

static double dropres_objective(void *p) {
    DropResCtx *c = p;
    dropout_residual_forward(c->out, c->res, c->y, c->bias, c->keep, c->p, c->n, c->w);
    return dot_rows(c->out, c->r, c->n, c->w, c->w);
}

typedef struct {
    const float *x, *r;
    const uint8_t *keep;
    float *xs;
    float p;
    size_t count;
} DropApplyCtx;

static double dropapply_objective(void *p) {
    DropApplyCtx *c = p;
    memcpy(c->xs, c->x, c->count * sizeof(float));
    dropout_apply(c->xs, c->keep, c->p, c->count);
    return dot_rows(c->xs, c->r, 1, (int)c->count, (int)c->count);
}

static void test_dropout(int s, int b, int w, float p) {
    char op[64];
    int n = s * b;
    size_t count = (size_t)n * w;
    DropoutSite site = {philox_key_from_seed(20240607u), 3, 1, SITE_DROP1, p};
    uint8_t *keep = malloc(count);
    dropout_mask_sbw(keep, site, 0, s, b, w, 5);
    size_t kept = 0;
    for (size_t e = 0; e < count; e++) kept += keep[e];
    CHECK(kept > 0 && kept < count, "dropout p=%.2f: mask of %zu elements keeps %zu (not a real test)", p, count, kept);

    float *res = alloc_rand(count, -1, 1), *y = alloc_rand(count, -1, 1), *bias = alloc_rand((size_t)w, -1, 1);
    float *r = alloc_rand(count, -1, 1);
    float *dy = alloc_floats(count), *db = alloc_floats((size_t)w);
    dropout_backward(dy, r, keep, p, count); // dres = R, dy = keep·R/(1−p), dbias = Σ_rows dy
    bias_backward(db, dy, w, n, w);

    snprintf(op, sizeof op, "dropout_residual p=%.2f n=%d w=%d", p, n, w);
    DropResCtx ctx = {res, y, bias, r, keep, alloc_floats(count), p, n, w};
    fd_check_vec(op, "res", dropres_objective, &ctx, res, count, r, EPS_AFFINE, TOL_AFFINE);
    fd_check_vec(op, "y", dropres_objective, &ctx, y, count, dy, EPS_AFFINE, TOL_AFFINE);
    fd_check_vec(op, "bias", dropres_objective, &ctx, bias, (size_t)w, db, EPS_AFFINE, TOL_AFFINE);

    // keep = NULL (p = 0), no bias: out = res + y.
    snprintf(op, sizeof op, "dropout_residual keep=NULL n=%d w=%d", n, w);
    DropResCtx ctx0 = {res, y, NULL, r, NULL, ctx.out, 0.0f, n, w};
    fd_check_vec(op, "y", dropres_objective, &ctx0, y, count, r, EPS_AFFINE, TOL_AFFINE);

    // dropout_apply: forward and backward are the same map.
    snprintf(op, sizeof op, "dropout_apply p=%.2f n=%zu", p, count);
    DropApplyCtx actx = {y, r, keep, alloc_floats(count), p, count};
    fd_check_vec(op, "x", dropapply_objective, &actx, y, count, dy, EPS_AFFINE, TOL_AFFINE);

    free(keep), free(res), free(y), free(bias), free(r), free(dy), free(db), free(ctx.out), free(actx.xs);
}

// ---------------------------------------------------------------------------------------------------
// attention core: softmax(q kᵀ/√d + causal, within a sliding window when given) → dropout → · v
// ---------------------------------------------------------------------------------------------------

typedef struct {
    const float *q, *k, *v, *r;
    float *ctx, *prob, *drop;
    uint8_t *keep; // NULL when p = 0
    DropoutSite site;
    uint32_t sample0;
    int s, b, a, kv, h, window;
} AttnCtx;

static double attention_objective(void *p) {
    AttnCtx *c = p;
    attention_forward(c->ctx, c->prob, c->keep, c->drop, c->q, c->k, c->v, c->s, c->b, c->a, c->kv, c->h, c->window, 0,
                      c->site, c->sample0, 0);
    return dot_rows(c->ctx, c->r, c->s * c->b, c->h, c->h);
}

// kv < a: grouped-query attention, k and v [s, b, kv·d]; their gradients sum the query heads'.
static void test_attention(int s, int b, int a, int kv, int h, int window, float p) {
    char op[80];
    snprintf(op, sizeof op, "attention s=%d b=%d a=%d kv=%d h=%d window=%d p=%.2f", s, b, a, kv, h, window, p);
    size_t nx = (size_t)s * b * h, nk = nx / (size_t)a * (size_t)kv, np = (size_t)b * a * s * s;
    uint32_t sample0 = 7;
    DropoutSite site = {philox_key_from_seed(0xC0FFEEu), 11, 2, SITE_ATTN, p};
    float *q = alloc_rand(nx, -1.5f, 1.5f), *k = alloc_rand(nk, -1.5f, 1.5f), *v = alloc_rand(nk, -1, 1);
    float *r = alloc_rand(nx, -1, 1);

    // Saved activations for the analytic backward (the objective uses its own buffers).
    float *ctx_out = alloc_floats(nx), *prob = alloc_floats(np), *drop = p > 0 ? alloc_floats(np) : NULL;
    uint8_t *keep = p > 0 ? malloc(np) : NULL;
    attention_forward(ctx_out, prob, keep, drop, q, k, v, s, b, a, kv, h, window, 0, site, sample0, 0);
    if (keep) {
        size_t dropped = 0; // among causal entries only
        for (int bj = 0; bj < b * a; bj++)
            for (int i = 0; i < s; i++)
                for (int c = 0; c <= i; c++) dropped += !keep[(size_t)bj * s * s + (size_t)i * s + c];
        CHECK(dropped > 0, "%s: dropout mask drops no causal entry (not a real test)", op);
    }

    float *dq = alloc_fill(nx, 1000.0f), *dk = alloc_fill(nk, 1000.0f), *dv = alloc_fill(nk, 1000.0f);
    float *scratch = alloc_floats(
        (size_t)omp_get_max_threads() * ((size_t)s * s + (kv < a ? ATTENTION_GQA_SCRATCH(s, h / a) : 0)));
    attention_backward(dq, dk, dv, r, prob, keep, drop, q, k, v, scratch, s, b, a, kv, h, p, 0);

    AttnCtx ctx = {q, k, v, r, alloc_floats(nx), alloc_floats(np), p > 0 ? alloc_floats(np) : NULL,
                   p > 0 ? malloc(np) : NULL, site, sample0, s, b, a, kv, h, window};
    fd_check_vec(op, "q", attention_objective, &ctx, q, nx, dq, EPS_NONLINEAR, TOL_NONLINEAR);
    fd_check_vec(op, "k", attention_objective, &ctx, k, nk, dk, EPS_NONLINEAR, TOL_NONLINEAR);
    fd_check_vec(op, "v", attention_objective, &ctx, v, nk, dv, EPS_AFFINE, TOL_AFFINE);

    free(q), free(k), free(v), free(r), free(ctx_out), free(prob), free(drop), free(keep);
    free(dq), free(dk), free(dv), free(scratch), free(ctx.ctx), free(ctx.prob), free(ctx.drop), free(ctx.keep);
}

// ---------------------------------------------------------------------------------------------------
// embedding: x = wte[token] + wpe[position]
// ---------------------------------------------------------------------------------------------------

typedef struct {
    const int32_t *tokens;
    const float *wte, *wpe, *r;
    float *x;
    int s, b, h;
} EmbCtx;

static double embedding_objective(void *p) {
    EmbCtx *c = p;
    embedding_forward(c->x, c->tokens, c->wte, c->wpe, c->s, c->b, c->h);
    return dot_rows(c->x, c->r, c->s * c->b, c->h, c->h);
}

static void test_embedding(int s, int b, int h, int vocab) {
    char op[64];
    snprintf(op, sizeof op, "embedding s=%d b=%d h=%d v=%d", s, b, h, vocab);
    int n = s * b;
    int32_t *tokens = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) tokens[i] = (int32_t)(xorshift64() % (uint64_t)(vocab - 1)); // token vocab-1 unused
    tokens[b] = tokens[0];         // same token, same sequence, next position
    tokens[2 * b + 1] = tokens[0]; // and in another sequence
    size_t nte = (size_t)vocab * h, npe = (size_t)s * h, nx = (size_t)n * h;
    float *wte = alloc_rand(nte, -1, 1), *wpe = alloc_rand(npe, -1, 1), *r = alloc_rand(nx, -1, 1);

    float *dwte = alloc_floats(nte), *dwpe = alloc_floats(npe);
    embedding_backward(dwte, dwpe, r, tokens, s, b, h);

    // Gradients are +=: the result is added to existing content.
    float *dwte0 = alloc_rand(nte, -1, 1), *dwpe0 = alloc_rand(npe, -1, 1);
    float *dwte1 = alloc_copy(dwte0, nte), *dwpe1 = alloc_copy(dwpe0, npe);
    embedding_backward(dwte1, dwpe1, r, tokens, s, b, h);
    subtract(dwte1, dwte1, dwte0, nte);
    subtract(dwpe1, dwpe1, dwpe0, npe);
    same_check(op, "dwte += (vs fresh dwte)", dwte1, dwte, nte);
    same_check(op, "dwpe += (vs fresh dwpe)", dwpe1, dwpe, npe);

    EmbCtx ctx = {tokens, wte, wpe, r, alloc_floats(nx), s, b, h};
    fd_check(op, "wte", embedding_objective, &ctx, wte, vocab, h, h, dwte, h, EPS_AFFINE, TOL_AFFINE);
    fd_check(op, "wpe", embedding_objective, &ctx, wpe, s, h, h, dwpe, h, EPS_AFFINE, TOL_AFFINE);

    free(tokens), free(wte), free(wpe), free(r), free(dwte), free(dwpe);
    free(dwte0), free(dwpe0), free(dwte1), free(dwpe1), free(ctx.x);
}

// ---------------------------------------------------------------------------------------------------
// cross-entropy: L = Σ_rows loss, gradient in place over the logits
// ---------------------------------------------------------------------------------------------------

typedef struct {
    const float *logits;
    const int32_t *targets;
    float *row_loss;
    int n, v;
} CeCtx;

static double ce_objective(void *p) {
    CeCtx *c = p;
    return crossentropy_loss(c->logits, c->targets, c->row_loss, c->n, c->v);
}

static void test_crossentropy(int n, int v) {
    char op[64];
    snprintf(op, sizeof op, "crossentropy n=%d v=%d", n, v);
    size_t count = (size_t)n * v;
    float *logits = alloc_rand(count, -3, 3), *row_loss = alloc_floats((size_t)n);
    int32_t *targets = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) targets[i] = (int32_t)(xorshift64() % (uint64_t)v);
    targets[0] = 0, targets[1] = v - 1; // both ends of the row

    float *grad = alloc_copy(logits, count);
    double loss_fb = crossentropy_forward_backward(grad, targets, row_loss, n, v, 1.0f);
    double loss = crossentropy_loss(logits, targets, row_loss, n, v);
    CHECK(fabs(loss_fb - loss) <= 1e-6 * fabs(loss), "%s: forward_backward loss %.9g != loss %.9g", op, loss_fb,
          loss);

    float *grad_scaled = alloc_copy(logits, count), *expect = alloc_floats(count);
    crossentropy_forward_backward(grad_scaled, targets, row_loss, n, v, 0.25f);
    for (size_t e = 0; e < count; e++) expect[e] = 0.25f * grad[e];
    same_check(op, "grad_scale 0.25 (vs 0.25 x grad_scale 1)", grad_scaled, expect, count);

    CeCtx ctx = {logits, targets, row_loss, n, v};
    fd_check_vec(op, "logits", ce_objective, &ctx, logits, count, grad, EPS_NONLINEAR, TOL_NONLINEAR);

    free(logits), free(row_loss), free(targets), free(grad), free(grad_scaled), free(expect);
}

int main(void) {
    test_linear(5, 13, 7, 16, 9, 1);  // strided x / dx (ldx 16 > 13) and y / dy (ldy 9 > 7)
    test_linear(6, 16, 11, 16, 11, 0); // dense, no bias
    test_layernorm(6, 19);
    test_layernorm(3, 16);
    test_gelu(5, 22);
    test_dropout(4, 3, 13, 0.3f);
    test_attention(8, 2, 2, 2, 8, 0, 0.0f);
    test_attention(8, 2, 2, 2, 8, 0, 0.2f);
    test_attention(6, 3, 3, 3, 15, 0, 0.1f); // odd head dim 5
    test_attention(8, 2, 4, 2, 16, 0, 0.2f); // grouped-query: two query heads per kv head
    test_attention(7, 2, 3, 1, 12, 0, 0.0f); // multi-query: one kv head
    test_attention(9, 2, 4, 2, 16, 3, 0.0f); // sliding window: each query sees its last 3 positions
    test_attention(9, 2, 2, 1, 8, 4, 0.2f);  // sliding window, dropout, multi-query
    test_embedding(5, 3, 11, 9);
    test_crossentropy(6, 23);
    return check_summary();
}
