// Sliding-window attention in the CPU kernels (backend/cpu/attention.h, flash_attention.h,
// infer_kernels.h): query i sees keys i − W + 1 .. i (transformers' sliding_window: kv_idx > q_idx − W).
// For windows 1, 5, 64, 65, 200 and s − 1 on shapes that cross the flash tiles (64) and the stored
// path's causal blocks (256), with grouped-query heads and with dropout:
//   - every path (stored, Tempo, selective recompute, flash) against a double-precision reference
//     written from the definition: ctx, and dq, dk, dv (with dropout, the reference applies the stored
//     path's mask, which flash draws at the same indices);
//   - the stored probabilities: exact zeros outside the window, each row summing to 1;
//   - selective recompute bitwise equal to the stored backward (recompute is exact);
//   - MEMO's token ranges (flash_attention_forward_rows at a tile boundary) bitwise the whole call's rows;
//   - a window of s or more bitwise equal to no window (0), on every path;
//   - the KV cache's rows past the window equal the training forward's rows.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "philox_fill.h"
#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/flash_attention.h"
#include "backend/cpu/infer_kernels.h"
#include "util/common.h"
#include "util/philox.h"

static float *filled(size_t n, uint32_t stream) { return philox_filled(n, 0x57Du, stream); }

typedef struct { int s, b, a, kv, d; } Shape;
enum { PATH_STORED, PATH_TEMPO, PATH_RECOMPUTE, PATH_FLASH, PATHS };
static const char *const path_name[PATHS] = {"stored", "tempo", "recompute", "flash"};
static const DropoutSite NO_DROP = {{{0, 0}}, 0, 0, SITE_ATTN, 0.0f};

// The reference from the definition, in double: ctx and the gradients of <ctx, g>. keep (NULL: no
// dropout) is the stored path's mask [b, a, s, s], applied with scale 1/(1−p).
typedef struct { double *ctx, *dq, *dk, *dv; } Ref;
static Ref reference(const float *q, const float *k, const float *v, const float *g, const uint8_t *keep, float p,
                     Shape sh, int window) {
    int s = sh.s, b = sh.b, a = sh.a, kv = sh.kv, d = sh.d, h = a * d, hk = kv * d;
    size_t nq = (size_t)s * b * h, nk = (size_t)s * b * hk;
    Ref r = {xcalloc(nq * sizeof(double)), xcalloc(nq * sizeof(double)), xcalloc(nk * sizeof(double)),
             xcalloc(nk * sizeof(double))};
    double scale = 1.0 / sqrt((double)d), ks = 1.0 / (1.0 - p);
    double *P = xmalloc((size_t)s * sizeof(double)), *dP = xmalloc((size_t)s * sizeof(double));
    for (int bi = 0; bi < b; bi++)
        for (int j = 0; j < a; j++) {
            int u = j / (a / kv);
            for (int i = 0; i < s; i++) {
                int lo = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
                const float *qi = q + ((size_t)i * b + bi) * h + (size_t)j * d;
                const float *gi = g + ((size_t)i * b + bi) * h + (size_t)j * d;
                const uint8_t *kr = keep ? keep + (((size_t)bi * a + j) * s + i) * s : NULL;
                double m = -INFINITY, sum = 0.0;
                for (int c = lo; c <= i; c++) {
                    const float *kc = k + ((size_t)c * b + bi) * hk + (size_t)u * d;
                    double x = 0.0;
                    for (int e = 0; e < d; e++) x += (double)qi[e] * kc[e];
                    P[c] = x * scale;
                    m = fmax(m, P[c]);
                }
                for (int c = lo; c <= i; c++) sum += (P[c] = exp(P[c] - m));
                double dot = 0.0;
                for (int c = lo; c <= i; c++) {
                    P[c] /= sum;
                    double mk = kr ? (kr[c] ? ks : 0.0) : 1.0;   // dropped P = P·mk
                    const float *vc = v + ((size_t)c * b + bi) * hk + (size_t)u * d;
                    double gv = 0.0;
                    for (int e = 0; e < d; e++) {
                        r.ctx[((size_t)i * b + bi) * h + (size_t)j * d + e] += P[c] * mk * vc[e];
                        r.dv[((size_t)c * b + bi) * hk + (size_t)u * d + e] += P[c] * mk * gi[e];
                        gv += (double)gi[e] * vc[e];
                    }
                    dP[c] = gv * mk;
                    dot += dP[c] * P[c];
                }
                for (int c = lo; c <= i; c++) {
                    double dS = P[c] * (dP[c] - dot) * scale;
                    const float *kc = k + ((size_t)c * b + bi) * hk + (size_t)u * d;
                    for (int e = 0; e < d; e++) {
                        r.dq[((size_t)i * b + bi) * h + (size_t)j * d + e] += dS * kc[e];
                        r.dk[((size_t)c * b + bi) * hk + (size_t)u * d + e] += dS * qi[e];
                    }
                }
            }
        }
    free(P), free(dP);
    return r;
}

static double rel_err(const float *x, const double *ref, size_t n) {
    double err = 0.0, mag = 0.0;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs((double)x[i] - ref[i]));
        mag = fmax(mag, fabs(ref[i]));
    }
    return err / (mag > 0.0 ? mag : 1.0);
}

static float *scratch_for(AttnScratchKind kind, Shape sh) {
    return xmalloc(backend_cpu_attention_scratch_floats(kind, sh.s, sh.b, sh.a, sh.kv, sh.a * sh.d,
                                                        omp_get_max_threads()) * sizeof(float));
}

// One path's forward and backward at `window`: ctx, its stored tensors (stored paths) and dq, dk, dv.
typedef struct { float *ctx, *prob, *drop, *lse, *dq, *dk, *dv; uint8_t *keep; } Run;
static Run run_path(int path, const float *q, const float *k, const float *v, const float *g, Shape sh, int window,
                    DropoutSite site) {
    int s = sh.s, b = sh.b, a = sh.a, kv = sh.kv, h = a * sh.d, drops = site.p > 0.0f;
    size_t nq = (size_t)s * b * h, nk = (size_t)s * b * kv * sh.d, np = (size_t)b * a * s * s;
    Run r = {xmalloc(nq * 4), xmalloc(np * 4), xmalloc(np * 4), xmalloc((size_t)b * a * s * 4), xmalloc(nq * 4),
             xmalloc(nk * 4), xmalloc(nk * 4), xcalloc(np)};
    if (path == PATH_FLASH) {
        float *scr = scratch_for(ATTN_SCRATCH_FLASH, sh);
        flash_attention_forward(r.ctx, r.lse, q, k, v, scr, s, b, a, kv, h, window, 0, site, 9);
        flash_attention_backward(r.dq, r.dk, r.dv, g, q, k, v, r.ctx, r.lse, scr, s, b, a, kv, h, window, 0, site, 9);
        free(scr);
        return r;
    }
    attention_forward(r.ctx, r.prob, drops ? r.keep : NULL, drops ? r.drop : NULL, q, k, v, s, b, a, kv, h, window, 0,
                      site, 9, 0);
    if (path == PATH_RECOMPUTE) {
        float *scr = scratch_for(ATTN_SCRATCH_RECOMPUTE, sh);
        attention_backward_recompute(r.dq, r.dk, r.dv, g, q, k, v, scr, s, b, a, kv, h, window, 0, site, 9, 0);
        free(scr);
    } else {
        float *scr = scratch_for(path == PATH_TEMPO ? ATTN_SCRATCH_BACKWARD_TEMPO : ATTN_SCRATCH_BACKWARD, sh);
        attention_backward(r.dq, r.dk, r.dv, g, r.prob, drops ? r.keep : NULL,
                           drops && path == PATH_STORED ? r.drop : NULL, q, k, v, scr, s, b, a, kv, h, site.p, 0);
        free(scr);
    }
    return r;
}
static void run_free(Run *r) {
    free(r->ctx), free(r->prob), free(r->drop), free(r->lse), free(r->dq), free(r->dk), free(r->dv), free(r->keep);
}

// The stored probabilities: zero left of each row's window and past the diagonal, rows summing to 1.
static void check_rows(const float *prob, Shape sh, int window, const char *what) {
    int s = sh.s, bad_zero = 0;
    double worst_sum = 0.0;
    for (size_t bj = 0; bj < (size_t)sh.b * sh.a; bj++)
        for (int i = 0; i < s; i++) {
            const float *row = prob + (bj * s + i) * s;
            int lo = attention_first_key(i, window);
            double sum = 0.0;
            for (int c = 0; c < s; c++) {
                if ((c < lo || c > i) && row[c] != 0.0f) bad_zero++;
                sum += row[c];
            }
            worst_sum = fmax(worst_sum, fabs(sum - 1.0));
        }
    CHECK(bad_zero == 0, "%s: %d probabilities outside the window are not 0", what, bad_zero);
    CHECK(worst_sum < 1e-5, "%s: a probability row sums to 1 ± %.3g (want < 1e-5)", what, worst_sum);
}

static void check_case(Shape sh, int window, int dropout) {
    int s = sh.s, b = sh.b, a = sh.a, kv = sh.kv, d = sh.d, h = a * d;
    size_t nq = (size_t)s * b * h, nk = (size_t)s * b * kv * d;
    DropoutSite site = {philox_key_from_seed(5), 4, 1, SITE_ATTN, dropout ? 0.2f : 0.0f};
    float *q = filled(nq, 1), *k = filled(nk, 2), *v = filled(nk, 3), *g = filled(nq, 4);
    Run runs[PATHS];
    for (int p = 0; p < PATHS; p++) runs[p] = run_path(p, q, k, v, g, sh, window, site);
    Ref ref = reference(q, k, v, g, dropout ? runs[PATH_STORED].keep : NULL, site.p, sh, window);
    double worst = 0.0;
    for (int p = 0; p < PATHS; p++) {
        if (p == PATH_TEMPO && !dropout) continue;
        char what[160];
        snprintf(what, sizeof what, "s %d b %d a %d kv %d d %d window %d %s, %s", s, b, a, kv, d, window,
                 dropout ? "dropout" : "no dropout", path_name[p]);
        Run *r = &runs[p];
        double e[4] = {rel_err(r->ctx, ref.ctx, nq), rel_err(r->dq, ref.dq, nq), rel_err(r->dk, ref.dk, nk),
                       rel_err(r->dv, ref.dv, nk)};
        static const char *const names[4] = {"ctx", "dq", "dk", "dv"};
        // fp32 sums of up to s terms against double: measured ≤ 6.9e-7 over every case
        for (int x = 0; x < 4; x++) {
            CHECK(e[x] < (x ? 1e-5 : 2e-6), "%s: %s %.3g from the reference (want < %g)", what, names[x], e[x],
                  x ? 1e-5 : 2e-6);
            worst = fmax(worst, e[x]);
        }
        if (p == PATH_STORED) check_rows(r->prob, sh, window, what);
    }
    Run *st = &runs[PATH_STORED], *rc = &runs[PATH_RECOMPUTE];
    CHECK(!memcmp(st->dq, rc->dq, nq * 4) && !memcmp(st->dk, rc->dk, nk * 4) && !memcmp(st->dv, rc->dv, nk * 4),
          "s %d window %d: selective recompute's gradients differ in bits from the stored backward's", s, window);
    printf("  s %d b %d a %d kv %d d %d window %3d %-10s worst rel error %.2g\n", s, b, a, kv, d, window,
           dropout ? "dropout" : "", worst);
    for (int p = 0; p < PATHS; p++) run_free(&runs[p]);
    free(ref.ctx), free(ref.dq), free(ref.dk), free(ref.dv), free(q), free(k), free(v), free(g);
}

// A window of s or more is no window: every path's bits equal window 0's.
static void check_wide_window(Shape sh) {
    size_t nq = (size_t)sh.s * sh.b * sh.a * sh.d, nk = (size_t)sh.s * sh.b * sh.kv * sh.d;
    DropoutSite site = {philox_key_from_seed(6), 2, 0, SITE_ATTN, 0.1f};
    float *q = filled(nq, 11), *k = filled(nk, 12), *v = filled(nk, 13), *g = filled(nq, 14);
    for (int p = 0; p < PATHS; p++) {
        const int wide[] = {sh.s, sh.s + 7};
        Run r0 = run_path(p, q, k, v, g, sh, 0, site);
        for (int x = 0; x < 2; x++) {
            Run r = run_path(p, q, k, v, g, sh, wide[x], site);
            CHECK(!memcmp(r.ctx, r0.ctx, nq * 4) && !memcmp(r.dq, r0.dq, nq * 4) && !memcmp(r.dk, r0.dk, nk * 4) &&
                      !memcmp(r.dv, r0.dv, nk * 4),
                  "s %d %s: window %d differs in bits from no window", sh.s, path_name[p], wide[x]);
            run_free(&r);
        }
        run_free(&r0);
    }
    free(q), free(k), free(v), free(g);
}

// MEMO's token ranges: rows [64, 64 + 128) computed alone are bitwise the whole call's.
static void check_rows_range(Shape sh, int window) {
    int s = sh.s, b = sh.b, a = sh.a, kv = sh.kv, h = a * sh.d, q0 = 64, nr = s - q0 < 128 ? s - q0 : 128;
    size_t nq = (size_t)s * b * h, nk = (size_t)s * b * kv * sh.d, nl = (size_t)b * a * s;
    DropoutSite site = {philox_key_from_seed(7), 1, 2, SITE_ATTN, 0.1f};
    float *q = filled(nq, 21), *k = filled(nk, 22), *v = filled(nk, 23), *scr = scratch_for(ATTN_SCRATCH_FLASH, sh);
    float *ctx = xmalloc(nq * 4), *lse = xmalloc(nl * 4), *ctx_r = xcalloc(nq * 4), *lse_r = xcalloc(nl * 4);
    flash_attention_forward(ctx, lse, q, k, v, scr, s, b, a, kv, h, window, 0, site, 9);
    flash_attention_forward_rows(ctx_r, lse_r, q, k, v, scr, s, q0, nr, b, a, kv, h, window, 0, site, 9);
    size_t row = (size_t)b * h;
    int same_rows = !memcmp(ctx + (size_t)q0 * row, ctx_r + (size_t)q0 * row, (size_t)nr * row * 4);
    for (size_t bj = 0; bj < (size_t)b * a; bj++)
        same_rows &= !memcmp(lse + bj * s + q0, lse_r + bj * s + q0, (size_t)nr * 4);
    CHECK(same_rows, "s %d window %d: flash rows %d..%d alone differ in bits from the whole call's", s, window, q0,
          q0 + nr);
    free(q), free(k), free(v), free(scr), free(ctx), free(lse), free(ctx_r), free(lse_r);
}

// The KV cache: n new tokens at p0 > window attend to the cache's last `window` positions, as the training
// forward's rows do.
static void check_kv_cache(int s, int a, int kv, int d, int window) {
    int h = a * d, hk = kv * d, n = 4, p0 = s - n;
    float *q = filled((size_t)s * h, 31), *k = filled((size_t)s * hk, 32), *v = filled((size_t)s * hk, 33);
    float *ctx = xmalloc((size_t)s * h * 4), *prob = xmalloc((size_t)a * s * s * 4);
    attention_forward(ctx, prob, NULL, NULL, q, k, v, s, 1, a, kv, h, window, 0, NO_DROP, 0, 0);
    float *kvctx = xmalloc((size_t)n * h * 4), *scores = xmalloc((size_t)omp_get_max_threads() * s * 4);
    kv_attention_forward(kvctx, q + (size_t)p0 * h, h, k, v, scores, s, p0, n, a, kv, h, window);
    double err = 0.0;
    for (size_t i = 0; i < (size_t)n * h; i++) err = fmax(err, fabs((double)kvctx[i] - ctx[(size_t)p0 * h + i]));
    // sgemv against the per-head GEMMs: the same sums in another order
    CHECK(err < 2e-6, "KV cache s %d window %d: rows %.3g from the training forward's (want < 2e-6)", s, window, err);
    printf("  kv cache s %d window %d: max |diff| %.2g from the training forward\n", s, window, err);
    free(q), free(k), free(v), free(ctx), free(prob), free(kvctx), free(scores);
}

int main(void) {
    // 70 = 64 + 6 (flash tiles); 300 = 256 + 44 (the stored path's causal blocks)
    const Shape shapes[] = {{70, 2, 4, 2, 8}, {300, 1, 2, 1, 16}};
    const int windows[] = {1, 5, 64, 65, 200, -1};   // -1: s − 1
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        Shape sh = shapes[i];
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
            int window = windows[w] < 0 ? sh.s - 1 : windows[w];
            if (window >= sh.s) continue;
            for (int dropout = 0; dropout < 2; dropout++) check_case(sh, window, dropout);
            check_rows_range(sh, window);
        }
        check_wide_window(sh);
    }
    check_kv_cache(50, 4, 2, 8, 5);
    check_kv_cache(50, 4, 1, 8, 17);
    return check_summary();
}
