#include "backend/cpu/flash_attention.h"
#include "util/common.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>
#include "backend/cpu/fastmath.h"

enum { T = FLASH_TILE };

// One thread's FLASH_SCRATCH floats: the score tile (P in the backward), the dP tile, the tile's
// dropout mask (bytes), the output accumulator O, the running row max and sum, the backward's row
// terms D (one per query position).
typedef struct { float *S, *dP; uint8_t *keep; float *O, *mrow, *lrow, *D; } FlashScratch;

static FlashScratch scratch_of(float *scratch, int s, int d) {
    FlashScratch f;
    f.S = scratch + (size_t)omp_get_thread_num() * FLASH_SCRATCH(s, d);
    f.dP = f.S + T * T;
    f.keep = (uint8_t *)(f.S + 2 * T * T);
    f.O = f.S + 2 * T * T + T * T / 4;
    f.mrow = f.O + (size_t)T * d;
    f.lrow = f.mrow + T;
    f.D = f.lrow + 2 * T;
    return f;
}

// One (sequence, head) of the [s, b, h] tensors: head width d, row stride ld, first column off.
typedef struct { int d, ld, drop, bi, j; size_t off; float scale, keep_scale; } FlashHead;

static FlashHead head_of(int bj, int b, int a, int h, DropoutSite site) {
    FlashHead x;
    x.d = h / a;
    x.ld = b * h;
    x.drop = site.p > 0.0f;
    x.bi = bj / a;
    x.j = bj % a;
    x.off = (size_t)x.bi * h + (size_t)x.j * x.d;
    x.scale = 1.0f / sqrtf((float)x.d);
    x.keep_scale = x.drop ? 1.0f / (1.0f - site.p) : 1.0f;
    return x;
}

// The dropout mask of tile rows [i0, i0+ni) × keys [j0, j0+nj) of one head: the entries of
// attention_forward's causal mask rows (index (head·s + i)·s + j in the sample).
static void tile_mask(uint8_t *keep, DropoutSite site, uint32_t sample, int head, int s, int i0, int ni, int j0,
                      int nj) {
    for (int r = 0; r < ni; r++) {
        int i = i0 + r, last = i < j0 + nj - 1 ? i : j0 + nj - 1;   // keys j0..last are causal for query i
        int count = last - j0 + 1;
        if (count > 0)
            dropout_mask_run(keep + (size_t)r * T, site, sample, ((uint64_t)head * s + (uint64_t)i) * (uint64_t)s + (uint64_t)j0,
                             (size_t)count);
        for (int c = count > 0 ? count : 0; c < nj; c++) keep[(size_t)r * T + c] = 0;
    }
}

void flash_attention_forward(float *ctx, float *lse, const float *q, const float *k, const float *v, float *scratch,
                             int s, int b, int a, int kv, int h, int head0, DropoutSite site, uint32_t sample0) {
    if (kv != a) ctron_fatal("attention: %d kv heads for %d query heads: grouped-query attention is not implemented yet", kv, a);
#pragma omp parallel for schedule(dynamic, 1)
    for (int bj = 0; bj < b * a; bj++) {
        FlashHead hd = head_of(bj, b, a, h, site);
        int d = hd.d, ld = hd.ld;
        FlashScratch f = scratch_of(scratch, s, d);
        float *S = f.S, *O = f.O, *mrow = f.mrow, *lrow = f.lrow;
        uint8_t *K = f.keep;
        for (int i0 = 0; i0 < s; i0 += T) {
            int ni = s - i0 < T ? s - i0 : T;
            for (int r = 0; r < ni; r++) { mrow[r] = -INFINITY; lrow[r] = 0.0f; }
            memset(O, 0, sizeof(float) * (size_t)ni * d);
            for (int j0 = 0; j0 <= i0 + ni - 1; j0 += T) {   // key tiles up to the causal limit
                int nj = s - j0 < T ? s - j0 : T;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, nj, d, hd.scale, q + hd.off + (size_t)i0 * ld, ld,
                            k + hd.off + (size_t)j0 * ld, ld, 0.0f, S, T);
                if (hd.drop) tile_mask(K, site, sample0 + (uint32_t)hd.bi, head0 + hd.j, s, i0, ni, j0, nj);
                for (int r = 0; r < ni; r++) {
                    float *row = S + (size_t)r * T;
                    int cmax = i0 + r - j0;   // last causal column of this row in the tile
                    if (cmax >= nj) cmax = nj - 1;
                    float mnew = mrow[r];
                    for (int c = 0; c <= cmax; c++) mnew = row[c] > mnew ? row[c] : mnew;
                    float corr = ctron_expf(mrow[r] - mnew), sum = 0.0f;
                    for (int c = 0; c <= cmax; c++) { row[c] = ctron_expf(row[c] - mnew); sum += row[c]; }
                    for (int c = cmax + 1; c < nj; c++) row[c] = 0.0f;
                    lrow[r] = lrow[r] * corr + sum;
                    mrow[r] = mnew;
                    float *orow = O + (size_t)r * d;
                    for (int c = 0; c < d; c++) orow[c] *= corr;
                    if (hd.drop)
                        for (int c = 0; c <= cmax; c++) row[c] = K[(size_t)r * T + c] ? row[c] * hd.keep_scale : 0.0f;
                }
                // O += P̃ · V_tile
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, d, nj, 1.0f, S, T, v + hd.off + (size_t)j0 * ld,
                            ld, 1.0f, O, d);
            }
            for (int r = 0; r < ni; r++) {
                float inv = 1.0f / lrow[r], *dst = ctx + hd.off + (size_t)(i0 + r) * ld;
                for (int c = 0; c < d; c++) dst[c] = O[(size_t)r * d + c] * inv;
                lse[(size_t)bj * s + i0 + r] = mrow[r] + logf(lrow[r]);
            }
        }
    }
}

void flash_attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *q, const float *k,
                              const float *v, const float *ctx, const float *lse, float *scratch, int s, int b, int a, int kv,
                              int h, int head0, DropoutSite site, uint32_t sample0) {
    if (kv != a) ctron_fatal("attention: %d kv heads for %d query heads: grouped-query attention is not implemented yet", kv, a);
#pragma omp parallel for schedule(dynamic, 1)
    for (int bj = 0; bj < b * a; bj++) {
        FlashHead hd = head_of(bj, b, a, h, site);
        int d = hd.d, ld = hd.ld;
        FlashScratch f = scratch_of(scratch, s, d);
        float *P = f.S, *dP = f.dP, *D = f.D;
        uint8_t *K = f.keep;
        const float *L = lse + (size_t)bj * s;
        // D_i = Σ_c dO[i,c]·O[i,c] = Σ_j P̃_ij dP̃_ij: the softmax backward's row term
        for (int i = 0; i < s; i++) {
            const float *o = ctx + hd.off + (size_t)i * ld, *g = dctx + hd.off + (size_t)i * ld;
            float acc = 0.0f;
            for (int c = 0; c < d; c++) acc += o[c] * g[c];
            D[i] = acc;
        }
        for (int i = 0; i < s; i++) {
            memset(dq + hd.off + (size_t)i * ld, 0, sizeof(float) * (size_t)d);
            memset(dk + hd.off + (size_t)i * ld, 0, sizeof(float) * (size_t)d);
            memset(dv + hd.off + (size_t)i * ld, 0, sizeof(float) * (size_t)d);
        }
        for (int j0 = 0; j0 < s; j0 += T) {
            int nj = s - j0 < T ? s - j0 : T;
            for (int i0 = j0 / T * T; i0 < s; i0 += T) {   // query tiles at or below the key tile
                int ni = s - i0 < T ? s - i0 : T;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, nj, d, hd.scale, q + hd.off + (size_t)i0 * ld, ld,
                            k + hd.off + (size_t)j0 * ld, ld, 0.0f, P, T);
                if (hd.drop) tile_mask(K, site, sample0 + (uint32_t)hd.bi, head0 + hd.j, s, i0, ni, j0, nj);
                // dP̃ = dO · V_tileᵀ
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, nj, d, 1.0f, dctx + hd.off + (size_t)i0 * ld, ld,
                            v + hd.off + (size_t)j0 * ld, ld, 0.0f, dP, T);
                for (int r = 0; r < ni; r++) {
                    float *pr = P + (size_t)r * T, *dr = dP + (size_t)r * T;
                    int cmax = i0 + r - j0;
                    if (cmax >= nj) cmax = nj - 1;
                    float li = L[i0 + r], Di = D[i0 + r];
                    for (int c = 0; c < nj; c++) {
                        float p = c <= cmax ? ctron_expf(pr[c] - li) : 0.0f;
                        float m = hd.drop ? (K[(size_t)r * T + c] ? hd.keep_scale : 0.0f) : 1.0f;
                        dr[c] = p * (dr[c] * m - Di);   // dS = P ⊙ (dP − D), dP = dP̃ ⊙ mask/(1−p)
                        pr[c] = p * m;                  // P̃, for dV
                    }
                }
                // dV_tile += P̃ᵀ dO ; dQ += hd.scale·dS K_tile ; dK_tile += hd.scale·dSᵀ Q
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nj, d, ni, 1.0f, P, T, dctx + hd.off + (size_t)i0 * ld,
                            ld, 1.0f, dv + hd.off + (size_t)j0 * ld, ld);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, d, nj, hd.scale, dP, T, k + hd.off + (size_t)j0 * ld,
                            ld, 1.0f, dq + hd.off + (size_t)i0 * ld, ld);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nj, d, ni, hd.scale, dP, T, q + hd.off + (size_t)i0 * ld,
                            ld, 1.0f, dk + hd.off + (size_t)j0 * ld, ld);
            }
        }
    }
}
