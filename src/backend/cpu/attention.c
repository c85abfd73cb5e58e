#include "backend/cpu/attention.h"
#include "util/common.h"
#include "backend/cpu/bf16.h"
#include "backend/cpu/bf16_convert.h"
#include <cblas.h>
#include "backend/cpu/gemm_bf16.h"
#include <math.h>
#include "backend/cpu/fastmath.h"
#include <omp.h>
#include <stddef.h>

// A GEMM operand: fp32 rows of stride ld, and on the bf16 path (HeadScratch) maybe its bf16 copy, d wide
// (a head's q, k, v or dctx, packed once per head: every causal block reads part of it).
typedef struct {
    const float *f;
    int ld;
    const uint16_t *h;
} Operand;
static Operand operand(const float *f, int ld) { return (Operand){f, ld, NULL}; }
// Rows r0.. of a head's [s, d] operand.
static Operand rows_from(Operand x, int r0, int d) {
    return (Operand){x.f + (size_t)r0 * x.ld, x.ld, x.h ? x.h + (size_t)r0 * d : NULL};
}

// This thread's bf16 scratch (attention.h's layout): the room where a GEMM's first operand is packed when it
// has no copy, then the bf16 copies of the head's k, v, q and dctx. NULL throughout the fp32 path.
typedef struct {
    uint16_t *a_room, *k, *v, *q, *dctx;
} HeadScratch;
static HeadScratch head_scratch(uint16_t *s16, int s, int d) {
    HeadScratch t = {NULL, NULL, NULL, NULL, NULL};
    if (!s16) return t;
    size_t sd = (size_t)s * d;
    t.a_room = s16 + (size_t)omp_get_thread_num() * ATTENTION_BF16_SCRATCH(s, d);
    t.k = t.a_room + ATTENTION_BF16_A_ROOM(s, d);
    t.v = t.k + sd;
    t.q = t.v + sd;
    t.dctx = t.q + sd;
    return t;
}
// x [s, d] (row stride ld) as an operand, its bf16 copy made in dst on the bf16 path (dst NULL: fp32).
static Operand packed_head(uint16_t *dst, const float *x, int ld, int s, int d) {
    if (dst) bf16_pack_rows(dst, d, x, ld, s, d);
    return (Operand){x, ld, dst};
}

// C[m,n] = alpha·op(A)·op(B) for one head: sgemm, or (t->a_room set) a bf16 GEMM with fp32 accumulation on
// the operands' bf16 copies (A packed into the room when it has none; d is their width), alpha applied to
// the fp32 result.
static void head_gemm(const HeadScratch *t, int d, int ta, int tb, int m, int n, int k, float alpha, Operand A,
                      Operand B, float *C, int ldc) {
    if (!t->a_room) {
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                    A.f, A.ld, B.f, B.ld, 0.0f, C, ldc);
        return;
    }
    if (!B.h) ctron_fatal("attention: a bf16 GEMM's second operand has no bf16 copy");
    int a_rows = ta ? k : m, a_cols = ta ? m : k;
    const uint16_t *a16 = A.h;
    if (!a16) {
        bf16_pack_rows(t->a_room, a_cols, A.f, A.ld, a_rows, a_cols);
        a16 = t->a_room;
    }
    gemm_bf16(ta, tb, m, n, k, a16, A.h ? d : a_cols, B.h, d, 0.0f, C, ldc);
    if (alpha != 1.0f)
        for (int r = 0; r < m; r++) {
            float *row = C + (size_t)r * ldc;
#pragma omp simd
            for (int c = 0; c < n; c++) row[c] *= alpha;
        }
}

// A head's s×s matrices are causal: row i reads keys 0..i only. The GEMMs run a block of
// CAUSAL_BLOCK rows (or, for the transposed products, columns) at a time over the keys that block
// can see, skipping the blocks above the diagonal: about half the attention FLOPs at long sequences
// (s = 2048: 36 of 64 blocks), the same result (the skipped products are exact zeros). The forward
// and selective recompute run the same blocks, so recomputation stays bitwise.
// The bf16 GEMMs (t16) run 64-row blocks: at s = 256 they compute 10 of 16 blocks instead of the whole
// square (S-llama LoRA-FA at bf16, one thread: -1.3 % a step). The fp32 ones keep 256 rows: a block's
// GEMM sums its keys in another order, and fp32's results are GPT-2's reference bits.
enum { CAUSAL_BLOCK = ATTENTION_CAUSAL_BLOCK, CAUSAL_BLOCK_BF16 = ATTENTION_CAUSAL_BLOCK_BF16 };
_Static_assert(CAUSAL_BLOCK_BF16 <= CAUSAL_BLOCK, "ATTENTION_GQA_SCRATCH is sized for the larger block");
static int causal_block(const HeadScratch *t) { return t->a_room ? CAUSAL_BLOCK_BF16 : CAUSAL_BLOCK; }
static int block_end(int r0, int blk, int s) { return r0 + blk < s ? r0 + blk : s; }

// Where head j of sequence bi sits: q, ctx (and dq, dctx) columns of [s, b, a·d], row stride ldq; k, v
// (and dk, dv) columns of its kv head in [s, b, kv·d], row stride ldk.
typedef struct { int d, ldq, ldk; } HeadLayout;
static HeadLayout head_layout(int b, int a, int kv, int h) {
    if (kv <= 0 || a % kv)
        ctron_fatal("attention: %d kv heads for %d query heads (kv must divide the query heads)", kv, a);
    HeadLayout L = {h / a, b * h, b * (h / a) * kv};
    return L;
}
static size_t q_offset(HeadLayout L, int a, int bi, int j) { return (size_t)bi * (size_t)(a * L.d) + (size_t)j * L.d; }
static size_t kv_offset(HeadLayout L, int a, int kv, int bi, int j) {
    return (size_t)bi * (size_t)(kv * L.d) + (size_t)attention_kv_head(j, a, kv) * L.d;
}

// Row i of a causal score matrix: softmax over keys lo..i (lo = attention_first_key: 0 without a
// window), zeros elsewhere.
static void causal_softmax_rows(float *p, int s, int window) {
    for (int i = 0; i < s; i++) {
        float *row = p + (size_t)i * s;
        int lo = attention_first_key(i, window);
        for (int c = 0; c < lo; c++) row[c] = 0.0f;
        float m = row[lo];
#pragma omp simd reduction(max : m)
        for (int c = lo + 1; c <= i; c++) m = row[c] > m ? row[c] : m;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int c = lo; c <= i; c++) { row[c] = ctron_expf(row[c] - m); sum += row[c]; }
        float inv = 1.0f / sum;
#pragma omp simd
        for (int c = lo; c <= i; c++) row[c] *= inv;
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
        if (round_bf16) bf16_round_row(D + r, (size_t)i + 1);
        for (int c = i + 1; c < s; c++) D[r + c] = 0.0f;
    }
}

// One (sequence, head) of the core: P = causal softmax(q kᵀ/√d) within the window, its dropout mask K
// and D = dropped P (K, D NULL without dropout), rounded to bf16 when asked. q rows of stride ldq, k of
// ldk. The forward and selective recompute both run exactly this, so a recomputed head equals the
// stored one bit for bit.
static void head_core(const HeadScratch *t, float *P, uint8_t *K, float *D, Operand q, Operand k, int s, int d,
                      int window, DropoutSite site, uint32_t sample, int head, int round_bf16) {
    size_t ss = (size_t)s * s;
    float scale = 1.0f / sqrtf((float)d), keep_scale = 1.0f / (1.0f - site.p);
    int blk = causal_block(t);
    for (int r0 = 0; r0 < s; r0 += blk) {   // S[r0:r1, c0:r1] = scale · q[r0:r1] · k[c0:r1]ᵀ
        int r1 = block_end(r0, blk, s), c0 = attention_first_key(r0, window);   // no row of the block sees a key before c0
        head_gemm(t, d, 0, 1, r1 - r0, r1 - c0, d, scale, rows_from(q, r0, d), rows_from(k, c0, d),
                  P + (size_t)r0 * s + c0, s);
    }
    causal_softmax_rows(P, s, window);
    if (round_bf16) bf16_round_row(P, ss);
    if (!K) return;
    causal_mask_rows(K, site, sample, head, s);
    form_dropped(D, P, K, s, keep_scale, round_bf16);
}

void attention_forward(float *ctx, float *prob, uint8_t *keep, float *drop, const float *q, const float *k,
                       const float *v, int s, int b, int a, int kv, int h, int window, int head0, DropoutSite site,
                       uint32_t sample0, int round_bf16) {
    attention_forward_bf16(ctx, prob, keep, drop, q, k, v, s, b, a, kv, h, window, head0, site, sample0, round_bf16,
                           NULL);
}

void attention_forward_bf16(float *ctx, float *prob, uint8_t *keep, float *drop, const float *q, const float *k,
                            const float *v, int s, int b, int a, int kv, int h, int window, int head0, DropoutSite site,
                            uint32_t sample0, int round_bf16, uint16_t *s16) {
    HeadLayout L = head_layout(b, a, kv, h);
    int d = L.d;
    size_t ss = (size_t)s * s;
    // One (sequence, head) per iteration; GEMMs inside a parallel region run single-threaded. A thread's
    // heads are consecutive, so a kv head's k and v are packed once for its query heads (GQA).
#pragma omp parallel
    {
        HeadScratch hs = head_scratch(s16, s, d);
        Operand kh = {NULL, 0, NULL}, vh = kh;
        size_t packed = (size_t)-1;
#pragma omp for schedule(static)
        for (int bj = 0; bj < b * a; bj++) {
            int bi = bj / a, j = bj % a;
            size_t off = q_offset(L, a, bi, j), koff = kv_offset(L, a, kv, bi, j);
            float *P = prob + (size_t)bj * ss, *D = keep ? drop + (size_t)bj * ss : P;
            if (koff != packed) {
                kh = packed_head(hs.k, k + koff, L.ldk, s, d);
                vh = packed_head(hs.v, v + koff, L.ldk, s, d);
                packed = koff;
            }
            head_core(&hs, P, keep ? keep + (size_t)bj * ss : NULL, D, packed_head(hs.q, q + off, L.ldq, s, d), kh, s, d,
                      window, site, sample0 + (uint32_t)bi, head0 + j, round_bf16);
            if (ctx)
                for (int r0 = 0, blk = causal_block(&hs); r0 < s; r0 += blk) {   // ctx[r0:r1] = D[r0:r1, c0:r1] · v[c0:r1]
                    int r1 = block_end(r0, blk, s), c0 = attention_first_key(r0, window);
                    head_gemm(&hs, d, 0, 0, r1 - r0, d, r1 - c0, 1.0f, operand(D + (size_t)r0 * s + c0, s),
                              rows_from(vh, c0, d), ctx + off + (size_t)r0 * L.ldq, L.ldq);
                }
        }
    }
}

void attention_mask(uint8_t *keep, int s, int b, int a, int head0, DropoutSite site, uint32_t sample0) {
    size_t ss = (size_t)s * s;
#pragma omp parallel for schedule(static)
    for (int bj = 0; bj < b * a; bj++)
        causal_mask_rows(keep + (size_t)bj * ss, site, sample0 + (uint32_t)(bj / a), head0 + bj % a, s);
}

// dst[r0:r1] = (or +=, when part is given) alpha · op(A) · op(B): a block of rows of one head's dk or
// dv (row stride ldd). With part (a query head after the first of its kv head) the product goes to
// part [(r1−r0) × d] first and is then added row by row: the kv head's sum runs over its query heads
// in ascending order, each term the bits the head alone would have written.
static void head_gemm_into(const HeadScratch *t, int d, float *part, int ta, int tb, int m, int n, int k, float alpha,
                           Operand A, Operand B, float *dst, int ldd) {
    if (!part) {
        head_gemm(t, d, ta, tb, m, n, k, alpha, A, B, dst, ldd);
        return;
    }
    head_gemm(t, d, ta, tb, m, n, k, alpha, A, B, part, n);
    for (int r = 0; r < m; r++) {
        float *row = dst + (size_t)r * ldd;
        const float *pr = part + (size_t)r * n;
#pragma omp simd
        for (int c = 0; c < n; c++) row[c] += pr[c];
    }
}

// Backward of one (sequence, head) from its P, K, D; dP is s·s scratch. q, dq, dctx rows of stride
// ldq; k, v, dk, dv of ldk. part NULL: dk, dv are written; else added (head_gemm_into).
static void head_backward(const HeadScratch *t, float *dq, float *dk, float *dv, Operand dctx, const float *P,
                          const uint8_t *K, const float *D, Operand q, Operand k, Operand v, float *dP, float *part,
                          int s, int d, int ldq, int ldk, float p) {
    float scale = 1.0f / sqrtf((float)d), keep_scale = 1.0f / (1.0f - p);
    // d(attn_drop) = dctx · vᵀ ;  dv = attn_dropᵀ · dctx
    int blk = causal_block(t);
    for (int r0 = 0; r0 < s; r0 += blk) {
        int r1 = block_end(r0, blk, s);
        // dP[r0:r1, 0:r1] = dctx[r0:r1] · v[0:r1]ᵀ ;  dv[r0:r1] = D[r0:s, r0:r1]ᵀ · dctx[r0:s]
        head_gemm(t, d, 0, 1, r1 - r0, r1, d, 1.0f, rows_from(dctx, r0, d), v, dP + (size_t)r0 * s, s);
        head_gemm_into(t, d, part, 1, 0, r1 - r0, d, s - r0, 1.0f, operand(D + (size_t)r0 * s + r0, s),
                       rows_from(dctx, r0, d), dv + (size_t)r0 * ldk, ldk);
    }
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
    for (int r0 = 0; r0 < s; r0 += blk) {
        int r1 = block_end(r0, blk, s);
        // dq[r0:r1] = scale · dS[r0:r1, 0:r1] · k[0:r1] ;  dk[r0:r1] = scale · dS[r0:s, r0:r1]ᵀ · q[r0:s]
        head_gemm(t, d, 0, 0, r1 - r0, d, r1, scale, operand(dP + (size_t)r0 * s, s), k, dq + (size_t)r0 * ldq, ldq);
        head_gemm_into(t, d, part, 1, 0, r1 - r0, d, s - r0, scale, operand(dP + (size_t)r0 * s + r0, s),
                       rows_from(q, r0, d), dk + (size_t)r0 * ldk, ldk);
    }
}

// The per-thread floats of a backward whose own part is `base` (s·s, 2·s·s or the recompute's):
// with kv < a one causal block of dk or dv (ATTENTION_GQA_SCRATCH) follows it.
static size_t thread_floats(size_t base, int s, int d, int a, int kv) {
    return base + (kv < a ? ATTENTION_GQA_SCRATCH(s, d) : 0);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                        const uint8_t *keep, const float *drop, const float *q, const float *k, const float *v,
                        float *scratch, int s, int b, int a, int kv, int h, float p, int round_bf16) {
    attention_backward_bf16(dq, dk, dv, dctx, prob, keep, drop, q, k, v, scratch, s, b, a, kv, h, p, round_bf16,
                            NULL);
}

// The backwards run one (sequence, kv head) per iteration, its a/kv query heads in ascending order:
// the first writes dk, dv, the others add theirs (head_backward's part). With kv = a that is one
// head per iteration, as plain multi-head attention.
void attention_backward_bf16(float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                             const uint8_t *keep, const float *drop, const float *q, const float *k, const float *v,
                             float *scratch, int s, int b, int a, int kv, int h, float p, int round_bf16,
                             uint16_t *s16) {
    HeadLayout L = head_layout(b, a, kv, h);
    int d = L.d, group = a / kv, tempo = keep && !drop;
    size_t ss = (size_t)s * s, own = (tempo ? 2 : 1) * ss, per_thread = thread_floats(own, s, d, a, kv);
    float keep_scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (int bk = 0; bk < b * kv; bk++) {
        int bi = bk / kv;
        float *dP = scratch + (size_t)omp_get_thread_num() * per_thread;
        HeadScratch hs = head_scratch(s16, s, d);
        size_t koff = kv_offset(L, a, kv, bi, bk % kv * group);   // the kv head's k, v packed once for its group
        Operand kh = packed_head(hs.k, k + koff, L.ldk, s, d), vh = packed_head(hs.v, v + koff, L.ldk, s, d);
        for (int t = 0; t < group; t++) {
            int j = bk % kv * group + t, bj = bi * a + j;
            size_t off = q_offset(L, a, bi, j), o = (size_t)bj * ss;
            const float *P = prob + o, *D = keep ? drop + o : P;
            if (tempo) {   // Tempo: D again from P and the mask, in this thread's scratch
                form_dropped(dP + ss, P, keep + o, s, keep_scale, round_bf16);
                D = dP + ss;
            }
            head_backward(&hs, dq + off, dk + koff, dv + koff, packed_head(hs.dctx, dctx + off, L.ldq, s, d), P,
                          keep ? keep + o : NULL, D, packed_head(hs.q, q + off, L.ldq, s, d), kh, vh, dP,
                          t ? dP + own : NULL, s, d, L.ldq, L.ldk, p);
        }
    }
}

void attention_backward_recompute(float *dq, float *dk, float *dv, const float *dctx, const float *q,
                                  const float *k, const float *v, float *scratch, int s, int b, int a, int kv, int h,
                                  int window, int head0, DropoutSite site, uint32_t sample0, int round_bf16) {
    attention_backward_recompute_bf16(dq, dk, dv, dctx, q, k, v, scratch, s, b, a, kv, h, window, head0, site, sample0,
                                      round_bf16, NULL);
}

void attention_backward_recompute_bf16(float *dq, float *dk, float *dv, const float *dctx, const float *q,
                                       const float *k, const float *v, float *scratch, int s, int b, int a, int kv,
                                       int h, int window, int head0, DropoutSite site, uint32_t sample0, int round_bf16,
                                       uint16_t *s16) {
    HeadLayout L = head_layout(b, a, kv, h);
    int d = L.d, group = a / kv, drop = site.p > 0.0f;
    size_t ss = (size_t)s * s, own = ATTENTION_RECOMPUTE_SCRATCH(s), per_thread = thread_floats(own, s, d, a, kv);
#pragma omp parallel for schedule(static)
    for (int bk = 0; bk < b * kv; bk++) {
        int bi = bk / kv;
        // This thread's scratch: P, D, dP (s·s floats each), then the mask (s·s bytes), then GQA's part.
        float *P = scratch + (size_t)omp_get_thread_num() * per_thread;
        float *D = drop ? P + ss : P, *dP = P + 2 * ss;
        uint8_t *K = drop ? (uint8_t *)(P + 3 * ss) : NULL;
        HeadScratch hs = head_scratch(s16, s, d);
        size_t koff = kv_offset(L, a, kv, bi, bk % kv * group);   // the kv head's k, v packed once for its group
        Operand kh = packed_head(hs.k, k + koff, L.ldk, s, d), vh = packed_head(hs.v, v + koff, L.ldk, s, d);
        for (int t = 0; t < group; t++) {
            int j = bk % kv * group + t;
            size_t off = q_offset(L, a, bi, j);
            Operand qh = packed_head(hs.q, q + off, L.ldq, s, d);
            head_core(&hs, P, K, D, qh, kh, s, d, window, site, sample0 + (uint32_t)bi, head0 + j, round_bf16);
            head_backward(&hs, dq + off, dk + koff, dv + koff, packed_head(hs.dctx, dctx + off, L.ldq, s, d), P, K, D,
                          qh, kh, vh, dP, t ? P + own : NULL, s, d, L.ldq, L.ldk, site.p);
        }
    }
}
