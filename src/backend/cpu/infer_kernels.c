#include "backend/cpu/infer_kernels.h"
#include "util/common.h"
#include "backend/cpu/attention.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include "backend/cpu/gelu.h"

void linear_forward_row(float *y, const float *x, const float *w, const float *bias, int in, int out) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, w, in, x, 1, 0.0f, y, 1);
    if (bias) for (int c = 0; c < out; c++) y[c] += bias[c];
}

void kv_attention_forward(float *ctx, const float *q_all, int ldq, const float *kc, const float *vc, float *scores,
                          int seq, int p0, int n, int a, int kv, int h, int window) {
    if (kv <= 0 || a % kv)
        ctron_fatal("kv attention: %d kv heads for %d query heads (kv must divide the query heads)", kv, a);
    int d = h / a, hk = kv * d;
    float scale = 1.0f / sqrtf((float)d);
    long work = (long)n * a * (p0 + n) * d;
#pragma omp parallel for schedule(static) if (work > 32768)
    for (int ij = 0; ij < n * a; ij++) {
        // keys lo .. p0+i: the causal prefix, or the window's last positions
        int i = ij / a, j = ij % a, lo = attention_first_key(p0 + i, window), len = p0 + i + 1 - lo;
        const float *q = q_all + (size_t)i * ldq + (size_t)j * d;
        float *sc = scores + (size_t)omp_get_thread_num() * seq;
        size_t kcol = (size_t)lo * hk + (size_t)attention_kv_head(j, a, kv) * d;   // the cache is [positions, kv·d]
        cblas_sgemv(CblasRowMajor, CblasNoTrans, len, d, scale, kc + kcol, hk, q, 1, 0.0f, sc, 1);
        float mx = sc[0];
        for (int u = 1; u < len; u++) mx = sc[u] > mx ? sc[u] : mx;
        float sum = 0.0f;
        for (int u = 0; u < len; u++) { sc[u] = expf(sc[u] - mx); sum += sc[u]; }
        float inv = 1.0f / sum;
        for (int u = 0; u < len; u++) sc[u] *= inv;
        cblas_sgemv(CblasRowMajor, CblasTrans, len, d, 1.0f, vc + kcol, hk, sc, 1, 0.0f,
                    ctx + (size_t)i * h + (size_t)j * d, 1);
    }
}

void gelu_forward(float *y, const float *x, size_t count) {
#pragma omp parallel for schedule(static) if (count > 65536)
    for (size_t i = 0; i < count; i++) y[i] = gelu_scalar(x[i]);
}
