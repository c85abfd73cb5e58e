#define _GNU_SOURCE   // RTLD_DEFAULT, RTLD_DEEPBIND
// The bf16 GEMM choice, measured: oneDNN matmul (gemm_bf16) against OpenBLAS cblas_sbgemm and fp32
// cblas_sgemm on the GEMMs of config S (n = 1024 rows) and L (n = 2048), forward (NT), dx (NN) and the
// accumulating dW (TN). The three run in turn per repeat, so machine noise hits them alike; best of R.
// usage: gemm_bf16_bench [repeats] [rows...]   (defaults: 5, 1024 2048)
// Debian's OpenBLAS 0.3.21 is built without BUILD_BFLOAT16: cblas.h declares cblas_sbgemm but the
// library does not export it. So sbgemm is looked up at run time, in $SBGEMM_LIB when set (an
// OpenBLAS built with BUILD_BFLOAT16=1), and its column reads n/a when there is none.
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/bf16_convert.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/bf16.h"
#include "util/common.h"

typedef struct {
    const char *name;
    int ta, tb, m, n, k, beta;
} Shape;

static void fill(float *x, uint16_t *xb, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f;
        xb[i] = bf16_from_f32(x[i]);
    }
}

typedef void (*SbgemmFn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                         float, const uint16_t *, blasint, const uint16_t *, blasint, float, float *, blasint);

static SbgemmFn find_sbgemm(void) {
    const char *lib = getenv("SBGEMM_LIB");
    if (!lib || !*lib) return (SbgemmFn)(uintptr_t)dlsym(RTLD_DEFAULT, "cblas_sbgemm");
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) fprintf(stderr, "SBGEMM_LIB: %s\n", dlerror());
    return h ? (SbgemmFn)(uintptr_t)dlsym(h, "cblas_sbgemm") : NULL;
}

static double gflops(const Shape *s, double sec) { return 2.0 * s->m * s->n * (double)s->k / sec * 1e-9; }

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 5;
    int rows[8] = {1024, 2048}, n_rows = 2;
    if (argc > 2) {
        n_rows = 0;
        for (int i = 2; i < argc && n_rows < 8; i++) rows[n_rows++] = atoi(argv[i]);
    }
    const int io[5][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 8192}};
    const char *names[5] = {"qkv", "proj", "fc1", "fc2", "lmhead"};
    SbgemmFn sbgemm = find_sbgemm();
    printf("threads %d, best of %d, sbgemm %s\n\n", omp_get_max_threads(), repeats, sbgemm ? "found" : "n/a");
    printf("| shape | op | m | n | k | oneDNN | sbgemm | sgemm fp32 |\n|---|---|---|---|---|---|---|---|\n");
    double sum[3] = {0}, flops = 0;
    for (int r = 0; r < n_rows; r++) {
        int N = rows[r];
        for (int l = 0; l < 5; l++) {
            int in = io[l][0], out = io[l][1];
            Shape sh[3] = {{"fwd NT", 0, 1, N, out, in, 0}, {"dx NN", 0, 0, N, in, out, 0}, {"dW TN +=", 1, 0, out, in, N, 1}};
            for (int v = 0; v < 3; v++) {
                Shape *s = &sh[v];
                // A stored [m,k] or [k,m], B stored [k,n] or [n,k]: the leading dimension is the stored row.
                int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n, ldc = s->n;
                size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
                float *a = xmalloc(na * 4), *b = xmalloc(nb * 4), *c = xcalloc(nc * 4);
                uint16_t *ab = xmalloc(na * 2), *bb = xmalloc(nb * 2);
                fill(a, ab, na, 1);
                fill(b, bb, nb, 7);
                double best[3] = {1e30, 1e30, 1e30};
                float beta = (float)s->beta;
                for (int it = -1; it < repeats; it++) {   // it = -1: warm-up (and the primitive's creation)
                    for (int lib = 0; lib < 3; lib++) {
                        double t0 = now_seconds();
                        if (lib == 0) gemm_bf16(s->ta, s->tb, s->m, s->n, s->k, ab, lda, bb, ldb, beta, c, ldc);
                        else if (lib == 1 && !sbgemm) continue;
                        else if (lib == 1)
                            sbgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
                                         s->m, s->n, s->k, 1.0f, ab, lda, bb, ldb, beta, c, ldc);
                        else
                            cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
                                        s->m, s->n, s->k, 1.0f, a, lda, b, ldb, beta, c, ldc);
                        double dt = now_seconds() - t0;
                        if (it >= 0 && dt < best[lib]) best[lib] = dt;
                    }
                }
                printf("| %s n=%d | %s | %d | %d | %d | %.0f | %.0f | %.0f |\n", names[l], N, s->name, s->m, s->n, s->k,
                       gflops(s, best[0]), sbgemm ? gflops(s, best[1]) : 0.0, gflops(s, best[2]));
                fflush(stdout);
                for (int lib = 0; lib < 3; lib++) sum[lib] += lib == 1 && !sbgemm ? 0.0 : best[lib];
                flops += 2.0 * s->m * s->n * (double)s->k;
                free(a), free(b), free(c), free(ab), free(bb);
            }
        }
    }
    printf("| **all shapes** (total FLOPs / total time) | | | | | %.0f | %.0f | %.0f |\n", flops / sum[0] * 1e-9,
           sbgemm ? flops / sum[1] * 1e-9 : 0.0, flops / sum[2] * 1e-9);
    // What the primitive cache saves: a call that creates its primitive (our cache freed before it; run
    // with ONEDNN_PRIMITIVE_CACHE_CAPACITY=0 to defeat oneDNN's own cache too) against a cached call, proj shape at 1024 rows.
    {
        int m = 1024, n = 768, k = 768;
        uint16_t *a = xcalloc((size_t)m * k * 2), *b = xcalloc((size_t)k * n * 2);
        float *c = xcalloc((size_t)m * n * 4);
        double fresh = 1e30, cached = 1e30;
        for (int it = 0; it < repeats; it++) {
            gemm_bf16_release();
            double t0 = now_seconds();
            gemm_bf16(0, 1, m, n, k, a, k, b, k, 0.0f, c, n);
            double t1 = now_seconds();
            gemm_bf16(0, 1, m, n, k, a, k, b, k, 0.0f, c, n);
            double t2 = now_seconds();
            if (t1 - t0 < fresh) fresh = t1 - t0;
            if (t2 - t1 < cached) cached = t2 - t1;
        }
        printf("\nprimitive creation: a %dx%dx%d call takes %.3f ms with a new primitive, %.3f ms cached\n", m, n, k,
               fresh * 1e3, cached * 1e3);
        free(a), free(b), free(c);
    }
    // The conversions (backend/cpu/bf16_convert.h), GB/s counting bytes read + written: 16 Mi elements
    // (far past the caches), and a strided 2-D view of 4096 x 768 out of rows of 1024.
    {
        size_t n = (size_t)1 << 24;
        float *f = xmalloc(n * 4), *g = xmalloc(n * 4);
        uint16_t *h = xmalloc(n * 2);
        for (size_t i = 0; i < n; i++) f[i] = (float)(i % 1000) * 0.01f - 5.0f;
        cvt_f32_to_bf16(h, f, n);   // first touch
        cvt_bf16_to_f32(g, h, n);
        double t[4] = {1e30, 1e30, 1e30, 1e30};
        for (int it = 0; it < repeats; it++) {
            double t0 = now_seconds();
            cvt_f32_to_bf16(h, f, n);
            double t1 = now_seconds();
            cvt_bf16_to_f32(g, h, n);
            double t2 = now_seconds();
            cvt_f32_to_bf16_2d(h, 768, f, 1024, 4096, 768);
            double t3 = now_seconds();
            cvt_bf16_to_f32_2d(g, 1024, h, 768, 4096, 768);
            double t4 = now_seconds();
            double d[4] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3};
            for (int j = 0; j < 4; j++) if (d[j] < t[j]) t[j] = d[j];
        }
        double e2 = 4096.0 * 768;
        printf("conversions: fp32->bf16 %.1f GB/s, bf16->fp32 %.1f GB/s (16 Mi elements); 2-D 4096x768: %.1f, %.1f GB/s\n",
               n * 6.0 / t[0] * 1e-9, n * 6.0 / t[1] * 1e-9, e2 * 6 / t[2] * 1e-9, e2 * 6 / t[3] * 1e-9);
        free(f), free(g), free(h);
    }
    return 0;
}
