#include "ops/attention.h"
#include "ops/bf16.h"
#include <cblas.h>
#include <math.h>
#include "ops/fastmath.h"
#include <omp.h>
#include <stddef.h>

// Row i of a causal score matrix: softmax over keys 0..i, zeros after.
static void causal_softmax_rows(float *p, int s) {
    for (int i = 0; i < s; i++) {
        float *row = p + (size_t)i * s;
        float m = row[0];
#pragma omp simd reduction(max : m)
        for (int c = 1; c <= i; c++) m = row[c] > m ? row[c] : m;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int c = 0; c <= i; c++) { row[c] = ctron_expf(row[c] - m); sum += row[c]; }
        float inv = 1.0f / sum;
#pragma omp simd
        for (int c = 0; c <= i; c++) row[c] *= inv;
        for (int c = i + 1; c < s; c++) row[c] = 0.0f;
    }
}

// The dropout mask of one head's [s, s] probabilities. Only keys 0..i of query i can be nonzero,
// so only they are drawn; the rest is 0 (dropped), which keeps the mask bytes deterministic.
static void causal_mask_rows(uint8_t *keep, DropoutSite site, uint32_t sample, int head, int s) {
    for (int i = 0; i < s; i++) {
        uint8_t *row = keep + (size_t)i * s;
        dropout_mask_run(row, site, sample, ((uint64_t)head * s + (uint64_t)i) * (uint64_t)s, (size_t)i + 1);
        for (int c = i + 1; c < s; c++) row[c] = 0;
    }
}

void attention_forward(float *ctx, float *prob, uint8_t *keep, float *drop, const float *q, const float *k,
                       const float *v, int s, int b, int a, int h, DropoutSite site, uint32_t sample0,
                       int round_bf16) {
    int d = h / a, ld = b * h;
    float scale = 1.0f / sqrtf((float)d);
    size_t ss = (size_t)s * s;
    float keep_scale = 1.0f / (1.0f - site.p);
    // One (sequence, head) per iteration; GEMMs inside a parallel region run single-threaded.
#pragma omp parallel for schedule(static)
    for (int bj = 0; bj < b * a; bj++) {
        int bi = bj / a, j = bj % a;
        size_t off = (size_t)bi * h + (size_t)j * d;
        float *P = prob + (size_t)bj * ss;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, d, scale, q + off, ld, k + off, ld, 0.0f, P, s);
        causal_softmax_rows(P, s);
        if (round_bf16)
            for (size_t e = 0; e < ss; e++) P[e] = bf16_to_f32(bf16_from_f32(P[e]));
        const float *D = P;
        if (keep) {
            uint8_t *K = keep + (size_t)bj * ss;
            float *Dw = drop + (size_t)bj * ss;
            causal_mask_rows(K, site, sample0 + (uint32_t)bi, j, s);
            for (int i = 0; i < s; i++) {
                size_t r = (size_t)i * s;
                for (int c = 0; c <= i; c++) Dw[r + c] = K[r + c] ? P[r + c] * keep_scale : 0.0f;
                if (round_bf16)
                    for (int c = 0; c <= i; c++) Dw[r + c] = bf16_to_f32(bf16_from_f32(Dw[r + c]));
                for (int c = i + 1; c < s; c++) Dw[r + c] = 0.0f;
            }
            D = Dw;
        }
        if (ctx) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, d, s, 1.0f, D, s, v + off, ld, 0.0f, ctx + off, ld);
    }
}

void attention_mask(uint8_t *keep, int s, int b, int a, DropoutSite site, uint32_t sample0) {
    size_t ss = (size_t)s * s;
#pragma omp parallel for schedule(static)
    for (int bj = 0; bj < b * a; bj++) causal_mask_rows(keep + (size_t)bj * ss, site, sample0 + (uint32_t)(bj / a), bj % a, s);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                        const uint8_t *keep, const float *drop, const float *q, const float *k, const float *v,
                        float *scratch, int s, int b, int a, int h, float p) {
    int d = h / a, ld = b * h;
    float scale = 1.0f / sqrtf((float)d);
    size_t ss = (size_t)s * s;
    float keep_scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (int bj = 0; bj < b * a; bj++) {
        int bi = bj / a, j = bj % a;
        size_t off = (size_t)bi * h + (size_t)j * d;
        const float *P = prob + (size_t)bj * ss;
        const float *D = keep ? drop + (size_t)bj * ss : P;
        float *dP = scratch + (size_t)omp_get_thread_num() * ss;
        // d(attn_drop) = dctx · vᵀ ;  dv = attn_dropᵀ · dctx
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, d, 1.0f, dctx + off, ld, v + off, ld, 0.0f, dP, s);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, d, s, 1.0f, D, s, dctx + off, ld, 0.0f, dv + off, ld);
        if (keep) {
            const uint8_t *K = keep + (size_t)bj * ss;
            for (int i = 0; i < s; i++)   // above the diagonal P = 0, so dS = 0 whatever dP is
                for (size_t e = (size_t)i * s; e <= (size_t)i * s + (size_t)i; e++) dP[e] = K[e] ? dP[e] * keep_scale : 0.0f;
        }
        // softmax backward: dS = P ⊙ (dP − rowsum(dP ⊙ P)); masked entries have P = 0.
        for (int i = 0; i < s; i++) {
            float *dr = dP + (size_t)i * s;
            const float *pr = P + (size_t)i * s;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int c = 0; c <= i; c++) dot += dr[c] * pr[c];
#pragma omp simd
            for (int c = 0; c <= i; c++) dr[c] = pr[c] * (dr[c] - dot);
            for (int c = i + 1; c < s; c++) dr[c] = 0.0f;
        }
        // dq = scale · dS · k ;  dk = scale · dSᵀ · q
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, d, s, scale, dP, s, k + off, ld, 0.0f, dq + off, ld);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, d, s, scale, dP, s, q + off, ld, 0.0f, dk + off, ld);
    }
}
