#include "backend/cpu/flash_attention.h"
#include "util/common.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>
#include "backend/cpu/fastmath.h"
#include "backend/cpu/attention.h"

enum { T = FLASH_TILE };

// One thread's flash_scratch_floats: the score tile (P in the backward), the dP tile, the tile's
// dropout mask (bytes), the output accumulator O, the running row max and sum, the backward's row
// terms D (one per query position); with kv < a the grouped-query backward's dK and dV tiles of one
// query head, [64, d] each.
typedef struct { float *S, *dP; uint8_t *keep; float *O, *mrow, *lrow, *D, *dKt, *dVt; } FlashScratch;

size_t flash_scratch_floats(int s, int d, int a, int kv) {
    return FLASH_SCRATCH(s, d) + (kv < a ? 2 * (size_t)T * (size_t)d : 0);
}

static FlashScratch scratch_of(float *scratch, int s, int d, int a, int kv) {
    FlashScratch f;
    f.S = scratch + (size_t)omp_get_thread_num() * flash_scratch_floats(s, d, a, kv);
    f.dP = f.S + T * T;
    f.keep = (uint8_t *)(f.S + 2 * T * T);
    f.O = f.S + 2 * T * T + T * T / 4;
    f.mrow = f.O + (size_t)T * d;
    f.lrow = f.mrow + T;
    f.D = f.lrow + 2 * T;
    f.dKt = f.S + FLASH_SCRATCH(s, d);
    f.dVt = f.dKt + (size_t)T * d;
    return f;
}

// One (sequence, head) of the tensors: head width d; q, ctx (dq, dctx) [s, b, a·d] at column off, row
// stride ld; k, v (dk, dv) [s, b, kv·d] at column koff (its kv head's), row stride ldk.
typedef struct { int d, ld, ldk, drop, bi, j; size_t off, koff; float scale, keep_scale; } FlashHead;

static FlashHead head_of(int bi, int j, int b, int a, int kv, int h, DropoutSite site) {
    if (kv <= 0 || a % kv)
        ctron_fatal("flash attention: %d kv heads for %d query heads (kv must divide the query heads)", kv, a);
    FlashHead x;
    x.d = h / a;
    x.ld = b * h;
    x.ldk = b * kv * x.d;
    x.drop = site.p > 0.0f;
    x.bi = bi;
    x.j = j;
    x.off = (size_t)bi * h + (size_t)j * x.d;
    x.koff = (size_t)bi * kv * x.d + (size_t)attention_kv_head(j, a, kv) * x.d;
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
                             int s, int b, int a, int kv, int h, int window, int head0, DropoutSite site,
                             uint32_t sample0) {
    flash_attention_forward_rows(ctx, lse, q, k, v, scratch, s, 0, s, b, a, kv, h, window, head0, site, sample0);
}

void flash_attention_forward_rows(float *ctx, float *lse, const float *q, const float *k, const float *v,
                                  float *scratch, int s, int q0, int nq, int b, int a, int kv, int h, int window,
                                  int head0, DropoutSite site, uint32_t sample0) {
    if (q0 < 0 || nq < 0 || q0 + nq > s) ctron_fatal("flash attention: query positions %d .. %d of %d", q0, q0 + nq, s);
#pragma omp parallel for schedule(dynamic, 1)
    for (int bj = 0; bj < b * a; bj++) {
        FlashHead hd = head_of(bj / a, bj % a, b, a, kv, h, site);
        int d = hd.d, ld = hd.ld, ldk = hd.ldk;
        FlashScratch f = scratch_of(scratch, s, d, a, kv);
        float *S = f.S, *O = f.O, *mrow = f.mrow, *lrow = f.lrow;
        uint8_t *K = f.keep;
        for (int i0 = q0; i0 < q0 + nq; i0 += T) {
            int ni = q0 + nq - i0 < T ? q0 + nq - i0 : T;
            for (int r = 0; r < ni; r++) { mrow[r] = -INFINITY; lrow[r] = 0.0f; }
            memset(O, 0, sizeof(float) * (size_t)ni * d);
            // key tiles from the first one the tile's first query sees (its window) to the causal limit
            for (int j0 = attention_first_key(i0, window) / T * T; j0 <= i0 + ni - 1; j0 += T) {
                int nj = s - j0 < T ? s - j0 : T;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, nj, d, hd.scale, q + hd.off + (size_t)i0 * ld, ld,
                            k + hd.koff + (size_t)j0 * ldk, ldk, 0.0f, S, T);
                if (hd.drop) tile_mask(K, site, sample0 + (uint32_t)hd.bi, head0 + hd.j, s, i0, ni, j0, nj);
                for (int r = 0; r < ni; r++) {
                    float *row = S + (size_t)r * T;
                    int cmax = i0 + r - j0;   // last causal column of this row in the tile
                    if (cmax >= nj) cmax = nj - 1;
                    int cmin = attention_first_key(i0 + r, window) - j0;   // first column in its window
                    if (cmin < 0) cmin = 0;
                    if (cmin > cmax) {   // no key of the tile for this query (before it, or left of its window)
                        for (int c = 0; c < nj; c++) row[c] = 0.0f;
                        continue;
                    }
                    float mnew = mrow[r];
                    for (int c = cmin; c <= cmax; c++) mnew = row[c] > mnew ? row[c] : mnew;
                    float corr = ctron_expf(mrow[r] - mnew), sum = 0.0f;
                    for (int c = 0; c < cmin; c++) row[c] = 0.0f;
                    for (int c = cmin; c <= cmax; c++) { row[c] = ctron_expf(row[c] - mnew); sum += row[c]; }
                    for (int c = cmax + 1; c < nj; c++) row[c] = 0.0f;
                    lrow[r] = lrow[r] * corr + sum;
                    mrow[r] = mnew;
                    float *orow = O + (size_t)r * d;
                    for (int c = 0; c < d; c++) orow[c] *= corr;
                    if (hd.drop)
                        for (int c = cmin; c <= cmax; c++) row[c] = K[(size_t)r * T + c] ? row[c] * hd.keep_scale : 0.0f;
                }
                // O += P̃ · V_tile
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, d, nj, 1.0f, S, T, v + hd.koff + (size_t)j0 * ldk,
                            ldk, 1.0f, O, d);
            }
            for (int r = 0; r < ni; r++) {
                float inv = 1.0f / lrow[r], *dst = ctx + hd.off + (size_t)(i0 + r) * ld;
                for (int c = 0; c < d; c++) dst[c] = O[(size_t)r * d + c] * inv;
                lse[(size_t)bj * s + i0 + r] = mrow[r] + logf(lrow[r]);
            }
        }
    }
}

// The backward of one (sequence, head). add 0: its dK, dV are written (the first query head of a kv
// head, or every head with kv = a); add 1: each key tile's dK, dV are summed in the thread's dKt, dVt
// first, over the query tiles in the same order, and then added, so a kv head's gradient is the sum of
// its query heads' in ascending order, each term the bits that head alone would have written.
static void head_backward(float *dq, float *dk, float *dv, const float *dctx, const float *q, const float *k,
                          const float *v, const float *ctx, const float *lse, FlashHead hd, FlashScratch f, int s,
                          int window, int bj, int head0, DropoutSite site, uint32_t sample0, int add) {
    int d = hd.d, ld = hd.ld, ldk = hd.ldk;
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
        if (add) continue;
        memset(dk + hd.koff + (size_t)i * ldk, 0, sizeof(float) * (size_t)d);
        memset(dv + hd.koff + (size_t)i * ldk, 0, sizeof(float) * (size_t)d);
    }
    for (int j0 = 0; j0 < s; j0 += T) {
        int nj = s - j0 < T ? s - j0 : T;
        // This key tile's dK, dV: in place, or (add) in the thread's tiles
        float *dKj = add ? f.dKt : dk + hd.koff + (size_t)j0 * ldk, *dVj = add ? f.dVt : dv + hd.koff + (size_t)j0 * ldk;
        int ldt = add ? d : ldk;
        if (add) {
            memset(f.dKt, 0, sizeof(float) * (size_t)nj * d);
            memset(f.dVt, 0, sizeof(float) * (size_t)nj * d);
        }
        // query tiles at or below the key tile, up to the last query whose window reaches it
        int i_end = window > 0 && j0 + nj - 1 + window < s ? j0 + nj - 1 + window : s;
        for (int i0 = j0 / T * T; i0 < i_end; i0 += T) {
            int ni = s - i0 < T ? s - i0 : T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, nj, d, hd.scale, q + hd.off + (size_t)i0 * ld, ld,
                        k + hd.koff + (size_t)j0 * ldk, ldk, 0.0f, P, T);
            if (hd.drop) tile_mask(K, site, sample0 + (uint32_t)hd.bi, head0 + hd.j, s, i0, ni, j0, nj);
            // dP̃ = dO · V_tileᵀ
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, nj, d, 1.0f, dctx + hd.off + (size_t)i0 * ld, ld,
                        v + hd.koff + (size_t)j0 * ldk, ldk, 0.0f, dP, T);
            for (int r = 0; r < ni; r++) {
                float *pr = P + (size_t)r * T, *dr = dP + (size_t)r * T;
                int cmax = i0 + r - j0, cmin = attention_first_key(i0 + r, window) - j0;
                if (cmax >= nj) cmax = nj - 1;
                float li = L[i0 + r], Di = D[i0 + r];
                for (int c = 0; c < nj; c++) {
                    float p = c >= cmin && c <= cmax ? ctron_expf(pr[c] - li) : 0.0f;
                    float m = hd.drop ? (K[(size_t)r * T + c] ? hd.keep_scale : 0.0f) : 1.0f;
                    dr[c] = p * (dr[c] * m - Di);   // dS = P ⊙ (dP − D), dP = dP̃ ⊙ mask/(1−p)
                    pr[c] = p * m;                  // P̃, for dV
                }
            }
            // dV_tile += P̃ᵀ dO ; dQ += hd.scale·dS K_tile ; dK_tile += hd.scale·dSᵀ Q
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nj, d, ni, 1.0f, P, T, dctx + hd.off + (size_t)i0 * ld,
                        ld, 1.0f, dVj, ldt);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, d, nj, hd.scale, dP, T, k + hd.koff + (size_t)j0 * ldk,
                        ldk, 1.0f, dq + hd.off + (size_t)i0 * ld, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nj, d, ni, hd.scale, dP, T, q + hd.off + (size_t)i0 * ld,
                        ld, 1.0f, dKj, ldt);
        }
        if (add)
            for (int r = 0; r < nj; r++) {
                float *kr = dk + hd.koff + (size_t)(j0 + r) * ldk, *vr = dv + hd.koff + (size_t)(j0 + r) * ldk;
                for (int c = 0; c < d; c++) {
                    kr[c] += f.dKt[(size_t)r * d + c];
                    vr[c] += f.dVt[(size_t)r * d + c];
                }
            }
    }
}

// One (sequence, kv head) per iteration, its a/kv query heads in ascending order (head_backward).
void flash_attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *q, const float *k,
                              const float *v, const float *ctx, const float *lse, float *scratch, int s, int b, int a,
                              int kv, int h, int window, int head0, DropoutSite site, uint32_t sample0) {
    if (kv <= 0 || a % kv)
        ctron_fatal("flash attention: %d kv heads for %d query heads (kv must divide the query heads)", kv, a);
    int group = a / kv;
#pragma omp parallel for schedule(dynamic, 1)
    for (int bk = 0; bk < b * kv; bk++)
        for (int t = 0; t < group; t++) {
            int bi = bk / kv, j = bk % kv * group + t;
            FlashHead hd = head_of(bi, j, b, a, kv, h, site);
            head_backward(dq, dk, dv, dctx, q, k, v, ctx, lse, hd, scratch_of(scratch, s, hd.d, a, kv), s, window,
                          bi * a + j, head0, site, sample0, t > 0);
        }
}
