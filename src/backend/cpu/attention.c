#include "backend/cpu/attention.h"
#include "backend/cpu/bf16.h"
#include <cblas.h>
#include <math.h>
#include "backend/cpu/fastmath.h"
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

// D = dropped P = K ? P/(1−p) : 0, rounded to bf16 when asked: the forward forms it from the fresh
// P, Tempo's backward (attention_backward without D) from the stored P — the same arithmetic on
// the same values, so the same bits.
static void form_dropped(float *D, const float *P, const uint8_t *K, int s, float keep_scale, int round_bf16) {
    for (int i = 0; i < s; i++) {
        size_t r = (size_t)i * s;
#pragma omp simd
        for (int c = 0; c <= i; c++) D[r + c] = K[r + c] ? P[r + c] * keep_scale : 0.0f;
        if (round_bf16)
            for (int c = 0; c <= i; c++) D[r + c] = bf16_to_f32(bf16_from_f32(D[r + c]));
        for (int c = i + 1; c < s; c++) D[r + c] = 0.0f;
    }
}

// One (sequence, head) of the core: P = causal softmax(q kᵀ/√d), its dropout mask K and D = dropped
// P (K, D NULL without dropout), rounded to bf16 when asked. The forward and selective recompute
// both run exactly this, so a recomputed head equals the stored one bit for bit.
static void head_core(float *P, uint8_t *K, float *D, const float *q, const float *k, int s, int d, int ld,
                      DropoutSite site, uint32_t sample, int head, int round_bf16) {
    size_t ss = (size_t)s * s;
    float scale = 1.0f / sqrtf((float)d), keep_scale = 1.0f / (1.0f - site.p);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, d, scale, q, ld, k, ld, 0.0f, P, s);
    causal_softmax_rows(P, s);
    if (round_bf16)
        for (size_t e = 0; e < ss; e++) P[e] = bf16_to_f32(bf16_from_f32(P[e]));
    if (!K) return;
    causal_mask_rows(K, site, sample, head, s);
    form_dropped(D, P, K, s, keep_scale, round_bf16);
}

void attention_forward(float *ctx, float *prob, uint8_t *keep, float *drop, const float *q, const float *k,
                       const float *v, int s, int b, int a, int h, int head0, DropoutSite site, uint32_t sample0,
                       int round_bf16) {
    int d = h / a, ld = b * h;
    size_t ss = (size_t)s * s;
    // One (sequence, head) per iteration; GEMMs inside a parallel region run single-threaded.
#pragma omp parallel for schedule(static)
    for (int bj = 0; bj < b * a; bj++) {
        int bi = bj / a, j = bj % a;
        size_t off = (size_t)bi * h + (size_t)j * d;
        float *P = prob + (size_t)bj * ss, *D = keep ? drop + (size_t)bj * ss : P;
        head_core(P, keep ? keep + (size_t)bj * ss : NULL, D, q + off, k + off, s, d, ld, site, sample0 + (uint32_t)bi,
                  head0 + j, round_bf16);
        if (ctx) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, d, s, 1.0f, D, s, v + off, ld, 0.0f, ctx + off, ld);
    }
}

void attention_mask(uint8_t *keep, int s, int b, int a, int head0, DropoutSite site, uint32_t sample0) {
    size_t ss = (size_t)s * s;
#pragma omp parallel for schedule(static)
    for (int bj = 0; bj < b * a; bj++)
        causal_mask_rows(keep + (size_t)bj * ss, site, sample0 + (uint32_t)(bj / a), head0 + bj % a, s);
}

// Backward of one (sequence, head) from its P, K, D; dP is s·s scratch.
static void head_backward(float *dq, float *dk, float *dv, const float *dctx, const float *P, const uint8_t *K,
                          const float *D, const float *q, const float *k, const float *v, float *dP, int s, int d,
                          int ld, float p) {
    float scale = 1.0f / sqrtf((float)d), keep_scale = 1.0f / (1.0f - p);
    // d(attn_drop) = dctx · vᵀ ;  dv = attn_dropᵀ · dctx
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, d, 1.0f, dctx, ld, v, ld, 0.0f, dP, s);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, d, s, 1.0f, D, s, dctx, ld, 0.0f, dv, ld);
    // softmax backward: dS = P ⊙ (dP − rowsum(dP ⊙ P)); above the diagonal P = 0, so dS = 0 there.
    for (int i = 0; i < s; i++) {
        float *dr = dP + (size_t)i * s;
        const float *pr = P + (size_t)i * s;
        if (K) {
            const uint8_t *kr = K + (size_t)i * s;
#pragma omp simd
            for (int c = 0; c <= i; c++) dr[c] = kr[c] ? dr[c] * keep_scale : 0.0f;
        }
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int c = 0; c <= i; c++) dot += dr[c] * pr[c];
#pragma omp simd
        for (int c = 0; c <= i; c++) dr[c] = pr[c] * (dr[c] - dot);
        for (int c = i + 1; c < s; c++) dr[c] = 0.0f;
    }
    // dq = scale · dS · k ;  dk = scale · dSᵀ · q
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, d, s, scale, dP, s, k, ld, 0.0f, dq, ld);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, d, s, scale, dP, s, q, ld, 0.0f, dk, ld);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                        const uint8_t *keep, const float *drop, const float *q, const float *k, const float *v,
                        float *scratch, int s, int b, int a, int h, float p, int round_bf16) {
    int d = h / a, ld = b * h;
    size_t ss = (size_t)s * s;
    float keep_scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (int bj = 0; bj < b * a; bj++) {
        size_t off = (size_t)(bj / a) * h + (size_t)(bj % a) * d, o = (size_t)bj * ss;
        const float *P = prob + o, *D = keep ? drop + o : P;
        float *dP = scratch + (size_t)omp_get_thread_num() * (keep && !drop ? 2 : 1) * ss;
        if (keep && !drop) {   // Tempo: D again from P and the mask, in this thread's scratch
            form_dropped(dP + ss, P, keep + o, s, keep_scale, round_bf16);
            D = dP + ss;
        }
        head_backward(dq + off, dk + off, dv + off, dctx + off, P, keep ? keep + o : NULL, D, q + off, k + off,
                      v + off, dP, s, d, ld, p);
    }
}

void attention_backward_recompute(float *dq, float *dk, float *dv, const float *dctx, const float *q,
                                  const float *k, const float *v, float *scratch, int s, int b, int a, int h,
                                  int head0, DropoutSite site, uint32_t sample0, int round_bf16) {
    int d = h / a, ld = b * h, drop = site.p > 0.0f;
    size_t ss = (size_t)s * s;
#pragma omp parallel for schedule(static)
    for (int bj = 0; bj < b * a; bj++) {
        int bi = bj / a, j = bj % a;
        size_t off = (size_t)bi * h + (size_t)j * d;
        // This thread's scratch: P, D, dP (s·s floats each), then the mask (s·s bytes).
        float *P = scratch + (size_t)omp_get_thread_num() * ATTENTION_RECOMPUTE_SCRATCH(s);
        float *D = drop ? P + ss : P, *dP = P + 2 * ss;
        uint8_t *K = drop ? (uint8_t *)(P + 3 * ss) : NULL;
        head_core(P, K, D, q + off, k + off, s, d, ld, site, sample0 + (uint32_t)bi, head0 + j, round_bf16);
        head_backward(dq + off, dk + off, dv + off, dctx + off, P, K, D, q + off, k + off, v + off, dP, s, d, ld,
                      site.p);
    }
}
