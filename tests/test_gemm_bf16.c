// gemm_bf16 against a double-precision reference on the same bf16 inputs: all four transposes, odd
// sizes, padded strides, beta 1 accumulation, the bf16-output variant, bitwise repeatability, the
// primitive cache. Skipped (exit 77, reason printed) where oneDNN has no bf16 matmul on this CPU.
//
// Tolerance. The inputs are bf16, so every product a_i·b_i (8+8 significant bits) is exact in fp32;
// the only error is the fp32 summation of k products (in whatever order and blocking oneDNN picks),
// bounded by gamma_k·Σ|a_i·b_i| with gamma_k = k·u/(1 − k·u), u = 2^-24 (Higham, Accuracy and
// Stability, §3.1). beta 1 adds one more rounding, u·|C_old + AB|, and a bf16 output one rounding to
// bf16, 2^-8 relative. So |C − C_ref| ≤ (k+2)·u·(Σ|a·b| + |C_old|) (·1.01 for gamma's denominator),
// rigorous, and still far below what a wrong index, transpose or stride gives (errors of order |C|).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/gemm_bf16.h"
#include "check.h"
#include "backend/cpu/bf16.h"

static uint32_t rng = 12345;
static float rnd(void) {   // uniform in [-2, 2), never a denormal
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1 << 24) * 4.0f - 2.0f;
}

typedef struct {
    int ta, tb, m, n, k, pad;   // pad: extra elements at the end of every stored row (A, B and C)
    float beta;
    int out_bf16;
} Case;

// Runs one case; returns 1 when within the bound. C's padding must be left alone.
static int run_case(const Case *t, int verbose) {
    int ar = t->ta ? t->k : t->m, ac = t->ta ? t->m : t->k;   // A as stored: ar rows of ac
    int br = t->tb ? t->n : t->k, bc = t->tb ? t->k : t->n;
    int lda = ac + t->pad, ldb = bc + t->pad, ldc = t->n + t->pad;
    uint16_t *a = malloc((size_t)ar * lda * 2), *b = malloc((size_t)br * ldb * 2);
    float *c = malloc((size_t)t->m * ldc * 4), *c0 = malloc((size_t)t->m * ldc * 4);
    uint16_t *cb = malloc((size_t)t->m * ldc * 2);
    for (size_t i = 0; i < (size_t)ar * lda; i++) a[i] = bf16_from_f32(rnd());
    for (size_t i = 0; i < (size_t)br * ldb; i++) b[i] = bf16_from_f32(rnd());
    for (size_t i = 0; i < (size_t)t->m * ldc; i++) c0[i] = c[i] = rnd() * 8.0f;
    for (size_t i = 0; i < (size_t)t->m * ldc; i++) cb[i] = 0xBEEF;
    if (t->out_bf16) gemm_bf16_out_bf16(t->ta, t->tb, t->m, t->n, t->k, a, lda, b, ldb, cb, ldc);
    else gemm_bf16(t->ta, t->tb, t->m, t->n, t->k, a, lda, b, ldb, t->beta, c, ldc);
    const double u = ldexp(1.0, -24);
    int ok = 1;
    double worst = 0;
    for (int i = 0; i < t->m; i++) {
        for (int j = 0; j < ldc; j++) {
            size_t at = (size_t)i * ldc + j;
            if (j >= t->n) {   // padding: untouched
                ok &= t->out_bf16 ? cb[at] == 0xBEEF : memcmp(&c[at], &c0[at], 4) == 0;
                continue;
            }
            double s = 0, sabs = 0;
            for (int p = 0; p < t->k; p++) {
                double x = bf16_to_f32(t->ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]);
                double y = bf16_to_f32(t->tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
                s += x * y;
                sabs += fabs(x * y);
            }
            double old = t->beta == 1.0f && !t->out_bf16 ? c0[at] : 0.0;
            double ref = s + old;
            double tol = 1.01 * (t->k + 2) * u * (sabs + fabs(old));
            double got = t->out_bf16 ? bf16_to_f32(cb[at]) : c[at];
            if (t->out_bf16) tol += ldexp(fabs(ref) + tol, -8);
            double err = fabs(got - ref);
            if (!(err <= tol)) ok = 0;
            if (tol > 0 && err / tol > worst) worst = err / tol;
        }
    }
    if (!ok || verbose)
        fprintf(stderr, "%c%c m=%d n=%d k=%d pad=%d beta=%g out=%s: worst error %.3g of the bound%s\n", t->ta ? 'T' : 'N',
                t->tb ? 'T' : 'N', t->m, t->n, t->k, t->pad, (double)t->beta, t->out_bf16 ? "bf16" : "fp32", worst,
                ok ? "" : " (FAIL or padding touched)");
    free(a), free(b), free(c), free(c0), free(cb);
    return ok;
}

// The same call twice (and again after the cache is freed and the primitive rebuilt): same bits.
static int repeatable(int ta, int tb, int m, int n, int k, float beta) {
    uint16_t *a = malloc((size_t)m * k * 2), *b = malloc((size_t)k * n * 2);
    float *c[3];
    for (size_t i = 0; i < (size_t)m * k; i++) a[i] = bf16_from_f32(rnd());
    for (size_t i = 0; i < (size_t)k * n; i++) b[i] = bf16_from_f32(rnd());
    float *init = malloc((size_t)m * n * 4);
    for (size_t i = 0; i < (size_t)m * n; i++) init[i] = rnd();
    for (int r = 0; r < 3; r++) {
        c[r] = malloc((size_t)m * n * 4);
        memcpy(c[r], init, (size_t)m * n * 4);
        if (r == 2) gemm_bf16_release();
        gemm_bf16(ta, tb, m, n, k, a, ta ? m : k, b, tb ? k : n, beta, c[r], n);
    }
    int same = memcmp(c[0], c[1], (size_t)m * n * 4) == 0 && memcmp(c[0], c[2], (size_t)m * n * 4) == 0;
    for (int r = 0; r < 3; r++) free(c[r]);
    free(a), free(b), free(init);
    return same;
}

int main(void) {
    char why[256];
    // oneDNN 2.6 emulates bf16 on plain AVX-512 (gemm:jit); below it gemm_bf16 widens to fp32 sgemm.
    // The same checks hold for all three.
    int support = gemm_bf16_support(why, sizeof why);
    if (support == GEMM_BF16_EMULATED) printf("note: bf16 GEMM emulated by oneDNN: %s\n", why);
    if (support == GEMM_BF16_WIDENED) printf("note: bf16 GEMM widened to fp32 sgemm: %s\n", why);
    printf("threads %d\n", omp_get_max_threads());
    const int sizes[][3] = {{1, 1, 1},    {7, 1, 33},  {1, 7, 129},  {33, 7, 1},   {7, 33, 129}, {129, 33, 7},
                            {33, 129, 33}, {129, 129, 129}, {1, 129, 7}, {129, 1, 33}, {64, 48, 200}, {130, 70, 1000}};
    int ns = (int)(sizeof sizes / sizeof *sizes), bad = 0, total = 0;
    for (int tr = 0; tr < 4; tr++)
        for (int s = 0; s < ns; s++)
            for (int variant = 0; variant < 4; variant++) {   // plain, padded, beta 1 padded, bf16 out padded
                Case t = {tr >> 1, tr & 1, sizes[s][0], sizes[s][1], sizes[s][2], variant ? 3 + s % 5 : 0,
                          variant == 2 ? 1.0f : 0.0f, variant == 3};
                total++;
                bad += !run_case(&t, 0);
            }
    CHECK(bad == 0, "%d of %d cases outside the bound", bad, total);
    // One larger case of each kind printed, to show how close to the bound the errors come.
    for (int tr = 0; tr < 4; tr++) {
        Case t = {tr >> 1, tr & 1, 96, 80, 2048, 5, 1.0f, 0};
        CHECK(run_case(&t, 1), "large k, %d", tr);
    }
    // k = 0: beta 0 writes zeros, beta 1 leaves C.
    float c2[2] = {5, 5};
    uint16_t dummy = 0;
    gemm_bf16(0, 0, 1, 2, 0, &dummy, 1, &dummy, 2, 1.0f, c2, 2);
    CHECK(c2[0] == 5 && c2[1] == 5, "k=0, beta 1 keeps C");
    gemm_bf16(0, 0, 1, 2, 0, &dummy, 1, &dummy, 2, 0.0f, c2, 2);
    CHECK(c2[0] == 0 && c2[1] == 0, "k=0, beta 0 zeroes C");
    // Bitwise repeatability on shapes big enough to be split across the threads.
    CHECK(repeatable(0, 1, 512, 768, 768, 0.0f), "NT repeatable");
    CHECK(repeatable(0, 0, 512, 768, 2304, 0.0f), "NN repeatable");
    CHECK(repeatable(1, 0, 768, 768, 1024, 1.0f), "TN beta 1 repeatable");
    CHECK(repeatable(1, 1, 300, 200, 4000, 0.0f), "TT repeatable");
    // The cache: a second call of a shape creates nothing; another thread count is another primitive.
    long p0, c0, p1, c1;
    gemm_bf16_stats(&p0, &c0);
    CHECK(repeatable(0, 1, 64, 64, 64, 0.0f), "small repeatable");
    gemm_bf16_stats(&p1, &c1);
    CHECK(c1 - c0 == 3 && p1 - p0 == 2, "3 calls, 2 primitives (one per cache life): %ld, %ld", c1 - c0, p1 - p0);
    if (omp_get_max_threads() > 1) {
        int saved = omp_get_max_threads();
        omp_set_num_threads(1);
        CHECK(repeatable(0, 1, 256, 256, 512, 0.0f), "1 thread repeatable");
        omp_set_num_threads(saved);
    }
    return check_summary();
}
