// Flash-style attention (backend/cpu/flash_attention.h) against the standard kernel (backend/cpu/attention.h), with
// dropout, on a sequence that is not a multiple of the tile (70 = 64 + 6) and a head offset (TP):
// the same output and gradients within fp32 summation-order differences, and the same dropout
// masks (a tile's mask is the standard mask's entries). The query-range forward (flash_attention_forward_rows):
// [0, 64) + [64, s) bitwise the whole call; a range off the tile grid ([40, 65), whose first rows lie before
// the second key tile) within 1e-6 of the whole call's rows, nothing outside its rows or its scratch written
// (a row before a key tile once zeroed 23 floats in front of the scratch).
#include <math.h>
#include <omp.h>
#include <string.h>
#include "check.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/flash_attention.h"
#include "util/common.h"
#include "util/philox.h"

static float val(uint32_t i) {
    philox_ctr c = {{i, 7, 0, 0}};
    return (float)philox4x32_10(c, philox_key_from_seed(11)).v[0] / 4294967296.0f * 2.0f - 1.0f;
}

static double rel(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]); den += (double)b[i] * b[i]; }
    return sqrt(num / den);
}

// The query-range forward against the whole call, with canaries around the scratch.
static void test_rows(void) {
    enum { S = 70, B = 2, A = 3, D = 8, H = A * D, GUARD = 256 };
    size_t n = (size_t)S * B * H, nl = (size_t)B * A * S, sf = flash_scratch_floats(S, D, A, A) * (size_t)omp_get_max_threads();
    DropoutSite site = {philox_key_from_seed(3), 2, 1, SITE_ATTN, 0.2f};
    float *q = xmalloc(n * 4), *k = xmalloc(n * 4), *v = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) q[i] = val((uint32_t)i), k[i] = val((uint32_t)(i + n)), v[i] = val((uint32_t)(i + 2 * n));
    float *block = xmalloc((sf + 2 * GUARD) * 4), *scr = block + GUARD;
    float *wc = xmalloc(n * 4), *wl = xmalloc(nl * 4), *rc = xmalloc(n * 4), *rl = xmalloc(nl * 4);
    for (size_t i = 0; i < sf + 2 * GUARD; i++) block[i] = 12345.0f;
    flash_attention_forward(wc, wl, q, k, v, scr, S, B, A, A, H, 0, 1, site, 4);
    memset(rc, 0xFF, n * 4), memset(rl, 0xFF, nl * 4);
    flash_attention_forward_rows(rc, rl, q, k, v, scr, S, 0, 64, B, A, A, H, 0, 1, site, 4);
    flash_attention_forward_rows(rc, rl, q, k, v, scr, S, 64, S - 64, B, A, A, H, 0, 1, site, 4);
    CHECK(memcmp(rc, wc, n * 4) == 0 && memcmp(rl, wl, nl * 4) == 0, "rows [0, 64) + [64, %d): not the whole call's bits", S);
    int p0 = 40, p1 = 65;
    memset(rc, 0xFF, n * 4), memset(rl, 0xFF, nl * 4);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);   // one thread's scratch: the canaries sit right against it
    flash_attention_forward_rows(rc, rl, q, k, v, scr, S, p0, p1 - p0, B, A, A, H, 0, 1, site, 4);
    omp_set_num_threads(threads);
    size_t row = (size_t)B * H, outside = 0;
    double num = 0.0, den = 0.0;
    for (int i = 0; i < S; i++)
        for (size_t x = 0; x < row; x++) {
            float got = rc[(size_t)i * row + x], want = wc[(size_t)i * row + x];
            uint32_t u;
            memcpy(&u, &got, 4);
            if (i < p0 || i >= p1) outside += u != 0xFFFFFFFFu;
            else num += ((double)got - want) * ((double)got - want), den += (double)want * want;
        }
    for (int bj = 0; bj < B * A; bj++)
        for (int i = 0; i < S; i++) {
            float got = rl[(size_t)bj * S + i], want = wl[(size_t)bj * S + i];
            uint32_t u;
            memcpy(&u, &got, 4);
            if (i < p0 || i >= p1) outside += u != 0xFFFFFFFFu;
            else if (fabsf(got - want) > 1e-5f * fabsf(want) + 1e-6f) outside++;
        }
    size_t guard = 0;
    for (int i = 0; i < GUARD; i++) guard += block[i] != 12345.0f || block[GUARD + sf + (size_t)i] != 12345.0f;
    CHECK(outside == 0 && sqrt(num / den) < 1e-6 && guard == 0, "rows [%d, %d): %zu elements wrong or outside, ctx rel %.3g, "
          "%zu canary floats around the scratch overwritten", p0, p1, outside, sqrt(num / den), guard);
    printf("flash rows: [0, 64) + [64, %d) bitwise the whole call; [%d, %d) within %.2g, scratch canaries intact\n", S, p0,
           p1, sqrt(num / den));
    free(q), free(k), free(v), free(block), free(wc), free(wl), free(rc), free(rl);
}

int main(void) {
    test_rows();
    enum { S = 70, B = 2, A = 3, D = 8, H = A * D };
    size_t n = (size_t)S * B * H, ss = (size_t)S * S;
    for (int dropout = 0; dropout < 2; dropout++) {
        DropoutSite site = {philox_key_from_seed(3), 2, 1, SITE_ATTN, dropout ? 0.2f : 0.0f};
        float *q = xmalloc(n * 4), *k = xmalloc(n * 4), *v = xmalloc(n * 4), *g = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) { q[i] = val((uint32_t)i); k[i] = val((uint32_t)(i + n)); v[i] = val((uint32_t)(i + 2 * n)); g[i] = val((uint32_t)(i + 3 * n)); }
        // standard: probabilities, mask, dropped, output; then its backward
        float *prob = xmalloc(B * A * ss * 4), *drop = xmalloc(B * A * ss * 4), *ctx = xmalloc(n * 4);
        uint8_t *keep = xmalloc(B * A * ss);
        attention_forward(ctx, prob, dropout ? keep : NULL, dropout ? drop : NULL, q, k, v, S, B, A, A, H, 0, 5, site, 9, 0);
        float *dq = xmalloc(n * 4), *dk = xmalloc(n * 4), *dv = xmalloc(n * 4), *scr = xmalloc(ss * 4 * (size_t)omp_get_max_threads());
        attention_backward(dq, dk, dv, g, prob, dropout ? keep : NULL, dropout ? drop : NULL, q, k, v, scr, S, B, A, A, H,
                           site.p, 0);
        // flash
        float *fctx = xmalloc(n * 4), *lse = xmalloc((size_t)B * A * S * 4), *fscr = xmalloc(FLASH_SCRATCH(S, D) * 4 * (size_t)omp_get_max_threads());
        float *fdq = xmalloc(n * 4), *fdk = xmalloc(n * 4), *fdv = xmalloc(n * 4);
        flash_attention_forward(fctx, lse, q, k, v, fscr, S, B, A, A, H, 0, 5, site, 9);
        flash_attention_backward(fdq, fdk, fdv, g, q, k, v, fctx, lse, fscr, S, B, A, A, H, 0, 5, site, 9);
        double e_ctx = rel(fctx, ctx, n), e_q = rel(fdq, dq, n), e_k = rel(fdk, dk, n), e_v = rel(fdv, dv, n);
        printf("dropout %.1f: rel L2 output %.1e, dq %.1e, dk %.1e, dv %.1e\n", (double)site.p, e_ctx, e_q, e_k, e_v);
        CHECK(e_ctx < 1e-6 && e_q < 1e-5 && e_k < 1e-5 && e_v < 1e-5, "flash differs from standard attention (dropout %g)",
              (double)site.p);
        // log-sum-exp: row i of head j is log Σ_c exp(score) — check through the stored probabilities
        int lse_ok = 1;
        for (int bj = 0; bj < B * A; bj++)
            for (int i = 0; i < S; i++) {
                // P[i][0] = exp(q_i·k_0·scale − lse_i)
                int bi = bj / A, j = bj % A;
                double dot = 0;
                for (int c = 0; c < D; c++) dot += (double)q[(size_t)i * B * H + bi * H + j * D + c] * k[(size_t)bi * H + j * D + c];
                double p0 = exp(dot / sqrt((double)D) - lse[(size_t)bj * S + i]);
                if (fabs(p0 - prob[(size_t)bj * ss + (size_t)i * S]) > 1e-5) lse_ok = 0;
            }
        CHECK(lse_ok, "flash log-sum-exp does not reproduce the softmax (dropout %g)", (double)site.p);
        free(q); free(k); free(v); free(g); free(prob); free(drop); free(ctx); free(keep); free(dq); free(dk); free(dv);
        free(scr); free(fctx); free(lse); free(fscr); free(fdq); free(fdk); free(fdv);
    }
    return check_summary();
}
