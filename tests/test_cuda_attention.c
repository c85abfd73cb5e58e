// Standard attention on the GPU (src/backend/cuda/attention.cu) against the CPU backend on the same
// inputs: the forward (ctx, probabilities, mask, dropped probabilities), the backward from stored
// tensors, Tempo's backward (dropped probabilities formed again from P and the mask), selective
// recompute's fused backward, the mask alone and the KV-cache attention of inference.
//
// Shapes: odd (s = 37, d = 12; s = 5 and 9, d = 7), one larger (s = 256, d = 64) and one whose b·a heads
// take more than one group of the GPU's head batching (s = 1030: 7 then 5 heads). Global head and
// sample offsets (tensor parallelism, micro-batches) are nonzero, so the mask's indexing is checked.
//
// Tolerances (relative L2 against the CPU):
//  - fp32, round_bf16 = 0: 1e-5. Only the summation order of the GEMMs (k ≤ 1030 fp32 terms,
//    ~sqrt(k)·6e-8 ≈ 2e-6) and of the row sums differs.
//  - fp32, round_bf16 = 1: 1e-4. P and D are rounded to bf16 after the softmax: where the CPU's and
//    the GPU's fp32 values (a few ulp apart) straddle a bf16 rounding boundary the stored value
//    differs by one bf16 ulp (2^-8 relative). About 2.6e-5 of the elements do, which gives
//    2^-8·sqrt(2.6e-5) ≈ 2e-5; 1e-4 leaves room for the small shapes' few-flip statistics.
//  - bf16 precision (bf16 GEMM operands, fp32 accumulation, on both sides): 5e-4. The same bf16
//    rounding flips hit the GEMM operands D and dS (dS = P ⊙ (dP − dot) has cancellation, so its
//    fp32 values differ more: ~2.6e-4 flip rate, 2^-8·sqrt(2.6e-4) ≈ 6e-5 in dq and dk), plus the
//    tensor cores' fp32 accumulation order.
// Grouped-query cases (kv < a: k, v, dk, dv [s, b, kv·d], query head j reading kv head j / (a/kv)) run
// every comparison with the same tolerances (the CPU kernels are checked bitwise against multi-head
// attention on repeat_kv(k, v) by test_attention_gqa); the s = 1030 one has a kv head whose query heads
// fall in two of the GPU's head groups (its dk, dv sum is carried from one group to the next).
// Masks are compared byte for byte. Everything the GPU computes twice, or by another path that must
// give the same bits (Tempo, recompute, buffers at other alignments), is compared bitwise.
// Sliding-window cases (query i sees keys i−W+1..i, backend/cpu/attention.h's attention_first_key) run
// every comparison with the same tolerances, at s = 70 (64 threads a row) and 130 (128), windows 1, 5,
// 64, 65 and s−1, with and without dropout, bf16 rounding and precision, grouped-query: prob and the
// dropped prob are exactly 0 outside each row's window (the mask is not windowed: the CPU draws keys
// 0..i), and window s gives the bits of window 0 (forward and recompute). Each case prints its worst
// relative L2 error against the CPU. The KV-cache cases with a window start past it (p0 > window), the
// cache rows left of every new token's window NaN (never read).
#include <omp.h>
#include "backend/cpu/attention.h"
#include "cuda_check.h"
#include "util/philox.h"

typedef struct {
    int s, b, a, d, head0;
    uint32_t sample0;
    float p;
    int round_bf16;
    Precision prec;
    int kv;       // key/value heads (0: a, multi-head)
    int window;   // sliding window (0: the whole causal prefix)
} Case;

enum { GUARD = 4096 };

// A device buffer of `bytes` poisoned with 0xFF, and GUARD more 0xFF bytes after it that no kernel may touch.
static void *dev_guarded(Backend *gpu, size_t bytes) { return dev_poisoned(gpu, bytes + GUARD); }
static int guard_intact(Backend *gpu, const void *dev, size_t bytes) {
    uint8_t *g = host_download(gpu, (const uint8_t *)dev + bytes, GUARD);
    int ok = 1;
    for (size_t i = 0; i < GUARD; i++) ok &= g[i] == 0xFF;
    free(g);
    return ok;
}
// Two device buffers with the same bytes.
static int dev_same(Backend *gpu, const void *x, const void *y, size_t bytes) {
    uint8_t *hx = host_download(gpu, x, bytes), *hy = host_download(gpu, y, bytes);
    int same = memcmp(hx, hy, bytes) == 0;
    free(hx);
    free(hy);
    return same;
}
// A copy of n floats (or bytes) of a device buffer, one element past an allocation's start: the same
// values at another alignment.
static void *dev_shifted_copy(Backend *gpu, const void *src, size_t bytes, size_t elem) {
    uint8_t *d = dev_guarded(gpu, bytes + elem);
    gpu->copy(gpu, d + elem, src, bytes, COPY_D2D);
    return d;
}
// Every float of a device buffer is bf16-exact (its low 16 bits are zero).
static int dev_bf16_exact(Backend *gpu, const float *dev, size_t n) {
    uint32_t *h = host_download(gpu, dev, n * sizeof(float));
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= (h[i] & 0xFFFFu) == 0;
    free(h);
    return ok;
}
// The causal structure of a [b·a, s, s] tensor: every entry above the diagonal, and left of row i's
// window (window 0: none), is exactly zero.
static int dev_causal_zeros(Backend *gpu, const void *dev, int s, int heads, int bytes_per, int window) {
    size_t ss = (size_t)s * s;
    uint8_t *h = host_download(gpu, dev, (size_t)heads * ss * bytes_per);
    int ok = 1;
    for (int bj = 0; bj < heads; bj++)
        for (int i = 0; i < s; i++)
            for (int c = 0; c < s; c++) {
                if (c <= i && c >= attention_first_key(i, window)) continue;
                const uint8_t *e = h + ((size_t)bj * ss + (size_t)i * s + c) * bytes_per;
                for (int t = 0; t < bytes_per; t++) ok &= e[t] == 0;
            }
    free(h);
    return ok;
}

// CHECK_CLOSE that also keeps the worst error of the case (printed at its end).
static void close_to_cpu(Backend *gpu, const float *dev, const float *ref, size_t n, double tol, const char *what,
                         double *worst) {
    float *got = host_download(gpu, dev, n * sizeof(float));
    double e = rel_l2(got, ref, n);
    CHECK(e <= tol, "%s: relative L2 error %.3g, tolerance %.1g", what, e, tol);
    if (e > *worst) *worst = e;
    free(got);
}

static void attention_case(Backend *cpu, Backend *gpu, const Case *c) {
    const int s = c->s, b = c->b, a = c->a, d = c->d, h = a * d, dropout = c->p > 0.0f, heads = b * a;
    const int kv = c->kv ? c->kv : a;
    const size_t n = (size_t)s * b * h, nss = (size_t)heads * s * s, nb = n * sizeof(float), sb = nss * sizeof(float);
    const size_t nk = (size_t)s * b * kv * d, kb = nk * sizeof(float);   // k, v, dk, dv
    const DropoutSite site = {philox_key_from_seed(0x5EEDu + (uint64_t)s), 11, 4, SITE_ATTN, c->p};
    const double tol = c->prec == PRECISION_BF16 ? 5e-4 : c->round_bf16 ? 1e-4 : 1e-5;
    const int w = c->window;
    double worst = 0.0;
    char tag[160], what[240];
    snprintf(tag, sizeof tag, "s=%d b=%d a=%d kv=%d d=%d p=%.1f round_bf16=%d %s window=%d", s, b, a, kv, d,
             (double)c->p, c->round_bf16, c->prec == PRECISION_BF16 ? "bf16" : "fp32", w);
    float *q = host_random(n, -2.0f, 2.0f), *k = host_random(nk, -2.0f, 2.0f), *v = host_random(nk, -1.0f, 1.0f);
    float *g = host_random(n, -1.0f, 1.0f);

    // ---- the CPU's
    float *r_ctx = malloc(nb), *r_prob = malloc(sb), *r_drop = dropout ? malloc(sb) : NULL;
    uint8_t *r_keep = dropout ? malloc(nss) : NULL;
    cpu->attention_forward(cpu, r_ctx, r_prob, r_keep, r_drop, q, k, v, s, b, a, kv, h, w, c->head0, site, c->sample0,
                           c->round_bf16);
    float *r_dq = malloc(nb), *r_dk = malloc(kb), *r_dv = malloc(kb);
    float *r_scr = malloc(cpu->attention_scratch_floats(cpu, ATTN_SCRATCH_BACKWARD, s, b, a, kv, h) * sizeof(float));
    cpu->attention_backward(cpu, r_dq, r_dk, r_dv, g, r_prob, r_keep, r_drop, q, k, v, r_scr, s, b, a, kv, h, c->p,
                            c->round_bf16);

    // ---- the GPU's forward
    float *dq_in = dev_upload(gpu, q, nb), *dk_in = dev_upload(gpu, k, kb), *dv_in = dev_upload(gpu, v, kb);
    float *dg_in = dev_upload(gpu, g, nb);
    float *ctx = dev_guarded(gpu, nb), *prob = dev_guarded(gpu, sb), *drop = dropout ? dev_guarded(gpu, sb) : NULL;
    uint8_t *keep = dropout ? dev_guarded(gpu, nss) : NULL;
    gpu->attention_forward(gpu, ctx, prob, keep, drop, dq_in, dk_in, dv_in, s, b, a, kv, h, w, c->head0, site, c->sample0,
                           c->round_bf16);
    snprintf(what, sizeof what, "%s: forward ctx", tag);
    close_to_cpu(gpu, ctx, r_ctx, n, tol, what, &worst);
    snprintf(what, sizeof what, "%s: forward prob", tag);
    close_to_cpu(gpu, prob, r_prob, nss, tol, what, &worst);
    CHECK(dev_causal_zeros(gpu, prob, s, heads, 4, w), "%s: prob is not exactly 0 outside the causal window", tag);
    if (dropout) {
        snprintf(what, sizeof what, "%s: forward dropped prob", tag);
        close_to_cpu(gpu, drop, r_drop, nss, tol, what, &worst);
        snprintf(what, sizeof what, "%s: forward mask", tag);
        CHECK_BYTES_EQUAL(gpu, keep, r_keep, nss, what);
        CHECK(dev_causal_zeros(gpu, keep, s, heads, 1, 0), "%s: mask is not 0 above the diagonal", tag);
        CHECK(dev_causal_zeros(gpu, drop, s, heads, 4, w), "%s: dropped prob is not 0 outside the causal window", tag);
    }
    if (c->round_bf16) {
        CHECK(dev_bf16_exact(gpu, prob, nss), "%s: round_bf16 left prob with bits below bf16", tag);
        if (dropout) CHECK(dev_bf16_exact(gpu, drop, nss), "%s: round_bf16 left drop with bits below bf16", tag);
    }
    CHECK(guard_intact(gpu, ctx, nb) && guard_intact(gpu, prob, sb), "%s: forward wrote past ctx or prob", tag);
    if (dropout)
        CHECK(guard_intact(gpu, drop, sb) && guard_intact(gpu, keep, nss), "%s: forward wrote past drop or keep", tag);

    // Twice: the same bits. Without ctx (selective recompute's forward): the same P, K, D.
    float *ctx2 = dev_guarded(gpu, nb), *prob2 = dev_guarded(gpu, sb), *drop2 = dropout ? dev_guarded(gpu, sb) : NULL;
    uint8_t *keep2 = dropout ? dev_guarded(gpu, nss) : NULL;
    gpu->attention_forward(gpu, ctx2, prob2, keep2, drop2, dq_in, dk_in, dv_in, s, b, a, kv, h, w, c->head0, site, c->sample0,
                           c->round_bf16);
    CHECK(dev_same(gpu, ctx, ctx2, nb) && dev_same(gpu, prob, prob2, sb), "%s: forward twice: ctx or prob differ", tag);
    if (dropout)
        CHECK(dev_same(gpu, keep, keep2, nss) && dev_same(gpu, drop, drop2, sb), "%s: forward twice: masks differ", tag);
    gpu->memset(gpu, prob2, 0xFF, sb);
    if (dropout) {
        gpu->memset(gpu, drop2, 0xFF, sb);
        gpu->memset(gpu, keep2, 0xFF, nss);
    }
    gpu->attention_forward(gpu, NULL, prob2, keep2, drop2, dq_in, dk_in, dv_in, s, b, a, kv, h, w, c->head0, site,
                           c->sample0, c->round_bf16);
    CHECK(dev_same(gpu, prob, prob2, sb), "%s: forward without ctx: prob differs", tag);
    if (dropout)
        CHECK(dev_same(gpu, keep, keep2, nss) && dev_same(gpu, drop, drop2, sb),
              "%s: forward without ctx: mask or dropped prob differs", tag);

    // The mask alone (MASKS_REGEN): the CPU's bytes.
    if (dropout) {
        uint8_t *mask = dev_guarded(gpu, nss);
        gpu->attention_mask(gpu, mask, s, b, a, c->head0, site, c->sample0);
        snprintf(what, sizeof what, "%s: attention_mask", tag);
        CHECK_BYTES_EQUAL(gpu, mask, r_keep, nss, what);
        CHECK(guard_intact(gpu, mask, nss), "%s: attention_mask wrote past the mask", tag);
        gpu->free(gpu, mask);
    }

    // ---- backward from the stored P, K, D
    const size_t scr_b = gpu->attention_scratch_floats(gpu, ATTN_SCRATCH_BACKWARD, s, b, a, kv, h) * sizeof(float);
    float *scr = dev_guarded(gpu, scr_b);
    float *gdq = dev_guarded(gpu, nb), *gdk = dev_guarded(gpu, kb), *gdv = dev_guarded(gpu, kb);
    gpu->attention_backward(gpu, gdq, gdk, gdv, dg_in, prob, keep, drop, dq_in, dk_in, dv_in, scr, s, b, a, kv, h, c->p,
                            c->round_bf16);
    snprintf(what, sizeof what, "%s: backward dq", tag);
    close_to_cpu(gpu, gdq, r_dq, n, tol, what, &worst);
    snprintf(what, sizeof what, "%s: backward dk", tag);
    close_to_cpu(gpu, gdk, r_dk, nk, tol, what, &worst);
    snprintf(what, sizeof what, "%s: backward dv", tag);
    close_to_cpu(gpu, gdv, r_dv, nk, tol, what, &worst);
    CHECK(guard_intact(gpu, scr, scr_b) && guard_intact(gpu, gdq, nb) && guard_intact(gpu, gdk, kb) &&
              guard_intact(gpu, gdv, kb),
          "%s: backward wrote past its scratch (%zu bytes) or an output", tag, scr_b);

    // Twice: the same bits.
    float *odq = dev_guarded(gpu, nb), *odk = dev_guarded(gpu, kb), *odv = dev_guarded(gpu, kb);
    gpu->memset(gpu, scr, 0xFF, scr_b);
    gpu->attention_backward(gpu, odq, odk, odv, dg_in, prob, keep, drop, dq_in, dk_in, dv_in, scr, s, b, a, kv, h, c->p,
                            c->round_bf16);
    CHECK(dev_same(gpu, gdq, odq, nb) && dev_same(gpu, gdk, odk, kb) && dev_same(gpu, gdv, odv, kb),
          "%s: backward twice: gradients differ", tag);

    // Every operand one element off its allocation's alignment: the same bits (no kernel choice may
    // depend on where a tensor sits: static memory plans and offload move them).
    {
        float *sq = dev_shifted_copy(gpu, dq_in, nb, 4), *sk = dev_shifted_copy(gpu, dk_in, kb, 4);
        float *sv = dev_shifted_copy(gpu, dv_in, kb, 4), *sg = dev_shifted_copy(gpu, dg_in, nb, 4);
        float *sp = dev_shifted_copy(gpu, prob, sb, 4);
        float *sd = dropout ? dev_shifted_copy(gpu, drop, sb, 4) : NULL;
        uint8_t *sk8 = dropout ? dev_shifted_copy(gpu, keep, nss, 1) : NULL;
        float *xq = dev_guarded(gpu, nb + 4), *xk = dev_guarded(gpu, kb + 4), *xv = dev_guarded(gpu, kb + 4);
        float *sscr = dev_guarded(gpu, scr_b + 4);
        gpu->attention_backward(gpu, xq + 1, xk + 1, xv + 1, sg + 1, sp + 1, dropout ? sk8 + 1 : NULL,
                                dropout ? sd + 1 : NULL, sq + 1, sk + 1, sv + 1, sscr + 1, s, b, a, kv, h, c->p,
                                c->round_bf16);
        CHECK(dev_same(gpu, gdq, xq + 1, nb) && dev_same(gpu, gdk, xk + 1, kb) && dev_same(gpu, gdv, xv + 1, kb),
              "%s: backward with every buffer 4 bytes off: gradients differ", tag);
        float *xctx = dev_guarded(gpu, nb + 4), *xprob = dev_guarded(gpu, sb + 4);
        float *xdrop = dropout ? dev_guarded(gpu, sb + 4) : NULL;
        uint8_t *xkeep = dropout ? dev_guarded(gpu, nss + 1) : NULL;
        gpu->attention_forward(gpu, xctx + 1, xprob + 1, dropout ? xkeep + 1 : NULL, dropout ? xdrop + 1 : NULL,
                               sq + 1, sk + 1, sv + 1, s, b, a, kv, h, w, c->head0, site, c->sample0, c->round_bf16);
        CHECK(dev_same(gpu, ctx, xctx + 1, nb) && dev_same(gpu, prob, xprob + 1, sb),
              "%s: forward with every buffer 4 bytes off: ctx or prob differ", tag);
        if (dropout)
            CHECK(dev_same(gpu, keep, xkeep + 1, nss) && dev_same(gpu, drop, xdrop + 1, sb),
                  "%s: forward with every buffer off: mask or dropped prob differ", tag);
        void *bufs[] = {sq, sk, sv, sg, sp, sd, sk8, xq, xk, xv, sscr, xctx, xprob, xdrop, xkeep};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) gpu->free(gpu, bufs[i]);
    }

    // Tempo's backward (drop NULL: D formed again from P and the mask): the stored backward's bits.
    if (dropout) {
        const size_t scr_t = gpu->attention_scratch_floats(gpu, ATTN_SCRATCH_BACKWARD_TEMPO, s, b, a, kv, h) * sizeof(float);
        float *tscr = dev_guarded(gpu, scr_t);
        float *tdq = dev_guarded(gpu, nb), *tdk = dev_guarded(gpu, kb), *tdv = dev_guarded(gpu, kb);
        gpu->attention_backward(gpu, tdq, tdk, tdv, dg_in, prob, keep, NULL, dq_in, dk_in, dv_in, tscr, s, b, a, kv, h, c->p,
                                c->round_bf16);
        CHECK(dev_same(gpu, gdq, tdq, nb) && dev_same(gpu, gdk, tdk, kb) && dev_same(gpu, gdv, tdv, kb),
              "%s: Tempo's backward differs from the stored backward", tag);
        CHECK(guard_intact(gpu, tscr, scr_t), "%s: Tempo's backward wrote past its scratch (%zu bytes)", tag, scr_t);
        gpu->free(gpu, tscr);
        gpu->free(gpu, tdq);
        gpu->free(gpu, tdk);
        gpu->free(gpu, tdv);
    }

    // Selective recompute: P, K, D again inside the backward: the stored backward's bits.
    {
        const size_t scr_r = gpu->attention_scratch_floats(gpu, ATTN_SCRATCH_RECOMPUTE, s, b, a, kv, h) * sizeof(float);
        float *rscr = dev_guarded(gpu, scr_r);
        float *rdq = dev_guarded(gpu, nb), *rdk = dev_guarded(gpu, kb), *rdv = dev_guarded(gpu, kb);
        gpu->attention_backward_recompute(gpu, rdq, rdk, rdv, dg_in, dq_in, dk_in, dv_in, rscr, s, b, a, kv, h, w, c->head0,
                                          site, c->sample0, c->round_bf16);
        CHECK(dev_same(gpu, gdq, rdq, nb) && dev_same(gpu, gdk, rdk, kb) && dev_same(gpu, gdv, rdv, kb),
              "%s: selective recompute's backward differs from the stored backward", tag);
        CHECK(guard_intact(gpu, rscr, scr_r), "%s: recompute wrote past its scratch (%zu bytes)", tag, scr_r);
        if (w >= s) {   // a window of every key: no window's bits
            gpu->attention_backward_recompute(gpu, rdq, rdk, rdv, dg_in, dq_in, dk_in, dv_in, rscr, s, b, a, kv, h, 0,
                                              c->head0, site, c->sample0, c->round_bf16);
            CHECK(dev_same(gpu, gdq, rdq, nb) && dev_same(gpu, gdk, rdk, kb) && dev_same(gpu, gdv, rdv, kb),
                  "%s: recompute with window %d differs from window 0", tag, w);
        }
        gpu->free(gpu, rscr);
        gpu->free(gpu, rdq);
        gpu->free(gpu, rdk);
        gpu->free(gpu, rdv);
    }

    if (w >= s) {   // a window of every key: the forward of window 0, bit for bit
        gpu->attention_forward(gpu, ctx2, prob2, keep2, drop2, dq_in, dk_in, dv_in, s, b, a, kv, h, 0, c->head0, site,
                               c->sample0, c->round_bf16);
        CHECK(dev_same(gpu, ctx, ctx2, nb) && dev_same(gpu, prob, prob2, sb), "%s: forward: ctx or prob differ from window 0",
              tag);
        if (dropout)
            CHECK(dev_same(gpu, keep, keep2, nss) && dev_same(gpu, drop, drop2, sb),
                  "%s: forward: mask or dropped prob differ from window 0", tag);
    }
    printf("  %-72s worst rel L2 %.3g (tolerance %.1g)\n", tag, worst, tol);

    void *dev[] = {dq_in, dk_in, dv_in, dg_in, ctx, prob, drop, keep, ctx2, prob2, drop2, keep2, scr, gdq, gdk, gdv,
                   odq, odk, odv};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) gpu->free(gpu, dev[i]);
    void *host[] = {q, k, v, g, r_ctx, r_prob, r_drop, r_keep, r_dq, r_dk, r_dv, r_scr};
    for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
}

// Inference: n new tokens at positions p0.. against the cache [seq, kv·d]; q rows of stride 3h (inside qkv);
// each token sees its last `window` positions (0: all).
static void kv_case(Backend *cpu, Backend *gpu, int a, int kv, int d, int p0, int n, int seq, int window) {
    const int h = a * d, hk = kv * d, ldq = 3 * h, len = p0 + n;
    float *q = host_random((size_t)n * ldq, -1.0f, 1.0f);
    float *kc = host_random((size_t)seq * hk, -1.0f, 1.0f), *vc = host_random((size_t)seq * hk, -1.0f, 1.0f);
    // What the kernel must not read is NaN: cache rows past the last token, rows left of the first new
    // token's window, the k and v parts of qkv.
    for (size_t i = (size_t)len * hk; i < (size_t)seq * hk; i++) kc[i] = vc[i] = NAN;
    for (size_t i = 0; i < (size_t)attention_first_key(p0, window) * hk; i++) kc[i] = vc[i] = NAN;
    for (int i = 0; i < n; i++)
        for (int c = h; c < ldq; c++) q[(size_t)i * ldq + c] = NAN;
    float *r_ctx = malloc((size_t)n * h * sizeof(float));
    float *scores = malloc((size_t)omp_get_max_threads() * seq * sizeof(float));
    cpu->kv_attention_forward(cpu, r_ctx, q, ldq, kc, vc, scores, seq, p0, n, a, kv, h, window);

    float *dq = dev_upload(gpu, q, (size_t)n * ldq * sizeof(float));
    float *dk = dev_upload(gpu, kc, (size_t)seq * hk * sizeof(float)), *dv = dev_upload(gpu, vc, (size_t)seq * hk * sizeof(float));
    float *dsc = dev_poisoned(gpu, (size_t)seq * sizeof(float));
    float *ctx = dev_guarded(gpu, (size_t)n * h * sizeof(float)), *ctx2 = dev_guarded(gpu, (size_t)n * h * sizeof(float));
    gpu->kv_attention_forward(gpu, ctx, dq, ldq, dk, dv, dsc, seq, p0, n, a, kv, h, window);
    char what[160];
    snprintf(what, sizeof what, "kv_attention a=%d kv=%d d=%d p0=%d n=%d window=%d", a, kv, d, p0, n, window);
    double worst = 0.0;
    close_to_cpu(gpu, ctx, r_ctx, (size_t)n * h, 1e-5, what, &worst);
    printf("  %-72s rel L2 %.3g (tolerance 1e-5)\n", what, worst);
    CHECK(guard_intact(gpu, ctx, (size_t)n * h * sizeof(float)), "%s: wrote past ctx", what);
    gpu->kv_attention_forward(gpu, ctx2, dq, ldq, dk, dv, dsc, seq, p0, n, a, kv, h, window);
    CHECK(dev_same(gpu, ctx, ctx2, (size_t)n * h * sizeof(float)), "%s: twice: ctx differs", what);
    if (window >= len) {   // a window of every cached key: no window's bits
        gpu->kv_attention_forward(gpu, ctx2, dq, ldq, dk, dv, dsc, seq, p0, n, a, kv, h, 0);
        CHECK(dev_same(gpu, ctx, ctx2, (size_t)n * h * sizeof(float)), "%s: differs from window 0", what);
    }
    void *dev[] = {dq, dk, dv, dsc, ctx, ctx2};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) gpu->free(gpu, dev[i]);
    free(q); free(kc); free(vc); free(r_ctx); free(scores);
}

int main(void) {
    Backend *gpu32 = cuda_or_skip(PRECISION_FP32), *gpu16 = cuda_or_skip(PRECISION_BF16);
    char err[256] = "";
    Backend *cpu32 = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    Backend *cpu16 = backend_open("cpu", PRECISION_BF16, err, sizeof err);
    CHECK(cpu32 && cpu16, "cpu backend: %s", err);
    if (!cpu32 || !cpu16) return check_summary();

    static const Case cases[] = {
        {37, 3, 4, 12, 5, 9, 0.1f, 0, PRECISION_FP32, 0, 0},
        {37, 3, 4, 12, 5, 9, 0.0f, 0, PRECISION_FP32, 0, 0},
        {37, 3, 4, 12, 5, 9, 0.1f, 1, PRECISION_FP32, 0, 0},
        {37, 3, 4, 12, 5, 9, 0.1f, 0, PRECISION_BF16, 0, 0},
        {37, 3, 4, 12, 5, 9, 0.1f, 1, PRECISION_BF16, 0, 0},
        {37, 3, 4, 12, 5, 9, 0.0f, 1, PRECISION_BF16, 0, 0},
        {5, 1, 3, 7, 1, 3, 0.5f, 0, PRECISION_FP32, 0, 0},
        // (not s = 5 here: the CPU's bf16 path packs q, s×d, into the s·s room of its per-thread
        // scratch, ATTENTION_BF16_SCRATCH, which holds it only when d <= s)
        {9, 1, 3, 7, 1, 3, 0.5f, 0, PRECISION_BF16, 0, 0},
        {256, 2, 8, 64, 3, 17, 0.1f, 0, PRECISION_FP32, 0, 0},
        {256, 2, 8, 64, 3, 17, 0.0f, 0, PRECISION_FP32, 0, 0},
        {256, 2, 8, 64, 3, 17, 0.1f, 1, PRECISION_BF16, 0, 0},
        {1030, 2, 6, 16, 2, 5, 0.1f, 0, PRECISION_FP32, 0, 0},
        {1030, 2, 6, 16, 2, 5, 0.1f, 1, PRECISION_BF16, 0, 0},
        // grouped-query attention: 2 query heads per kv head, multi-query, and 3 per kv head with the
        // 12 heads of s = 1030 in groups of 7 and 5 (kv head 2's heads 6, 7, 8 straddle them)
        {37, 3, 4, 12, 5, 9, 0.1f, 0, PRECISION_FP32, 2, 0},
        {37, 3, 4, 12, 5, 9, 0.0f, 0, PRECISION_FP32, 1, 0},
        {37, 3, 4, 12, 5, 9, 0.1f, 1, PRECISION_BF16, 2, 0},
        {9, 1, 3, 7, 1, 3, 0.5f, 0, PRECISION_BF16, 1, 0},
        {1030, 2, 6, 16, 2, 5, 0.1f, 0, PRECISION_FP32, 2, 0},
        // sliding windows: s = 70 (64 threads a row) and 130 (128), windows 1 (the diagonal alone), 5,
        // 64, 65, s − 1 and s (window 0's bits), dropout, bf16 rounding and precision, grouped-query
        {70, 2, 4, 12, 5, 9, 0.1f, 0, PRECISION_FP32, 0, 1},
        {70, 2, 4, 12, 5, 9, 0.0f, 0, PRECISION_FP32, 0, 5},
        {70, 2, 4, 12, 5, 9, 0.1f, 1, PRECISION_FP32, 2, 64},
        {70, 2, 4, 12, 5, 9, 0.1f, 0, PRECISION_BF16, 0, 65},
        {70, 2, 4, 12, 5, 9, 0.1f, 1, PRECISION_BF16, 2, 69},
        {70, 2, 4, 12, 5, 9, 0.1f, 0, PRECISION_FP32, 1, 70},
        {130, 2, 3, 32, 3, 17, 0.1f, 0, PRECISION_FP32, 0, 65},
        {130, 2, 3, 32, 3, 17, 0.0f, 0, PRECISION_BF16, 0, 5},
        {130, 2, 6, 16, 3, 17, 0.1f, 0, PRECISION_FP32, 2, 129},
        {130, 2, 6, 16, 3, 17, 0.0f, 1, PRECISION_BF16, 3, 130},
    };
    // The CPU's bf16 reference runs on every CPU (below AVX-512 its GEMMs widen to fp32 sgemm).
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const Case *c = &cases[i];
        if (cuda_test_small_only(c->s)) continue;
        int bf = c->prec == PRECISION_BF16;
        attention_case(bf ? cpu16 : cpu32, bf ? gpu16 : gpu32, c);
    }

    // The model sizes the scratch once for its longest sequence and largest micro-batch and calls with
    // any s' <= s, b' <= b: the size may never grow as the call shrinks.
    {
        static const AttnScratchKind kinds[] = {ATTN_SCRATCH_BACKWARD, ATTN_SCRATCH_BACKWARD_TEMPO,
                                                ATTN_SCRATCH_RECOMPUTE};
        static const int seqs[] = {1, 7, 37, 256, 1030, 2048, 2049, 2897, 4096, 5000};
        int monotone = 1;
        for (size_t kd = 0; kd < 3; kd++)
            for (size_t i = 0; i < sizeof seqs / sizeof *seqs; i++)
                for (size_t j = 0; j <= i; j++)
                    for (int bb = 1; bb <= 8; bb++)
                        for (int b2 = 1; b2 <= bb; b2++) {
                            size_t big = gpu32->attention_scratch_floats(gpu32, kinds[kd], seqs[i], bb, 12, 12, 768);
                            size_t small = gpu32->attention_scratch_floats(gpu32, kinds[kd], seqs[j], b2, 12, 12, 768);
                            monotone &= small <= big;
                        }
        CHECK(monotone, "attention_scratch_floats grows for a smaller sequence or batch");
    }

    // KV-cache attention is fp32 at every precision: both GPU backends against the CPU.
    kv_case(cpu32, gpu32, 4, 4, 12, 17, 5, 40, 0);     // a prompt continued
    kv_case(cpu32, gpu32, 8, 8, 64, 300, 1, 512, 0);   // one decoding step
    kv_case(cpu32, gpu16, 6, 6, 20, 3, 60, 64, 0);     // a prompt (p0 small, many new rows)
    kv_case(cpu32, gpu32, 2, 2, 160, 33, 3, 40, 0);    // d above the block's 128 threads
    kv_case(cpu32, gpu32, 8, 2, 64, 300, 1, 512, 0);   // grouped-query cache: 4 query heads per kv head
    kv_case(cpu32, gpu16, 6, 1, 20, 3, 60, 64, 0);     // multi-query cache
    // sliding windows, the cache past them (p0 > window)
    kv_case(cpu32, gpu32, 4, 4, 12, 17, 5, 40, 6);     // a prompt continued, each token its last 6
    kv_case(cpu32, gpu32, 8, 2, 64, 300, 1, 512, 64);  // a decoding step, grouped-query
    kv_case(cpu32, gpu16, 6, 1, 20, 30, 60, 128, 5);   // many new rows, multi-query
    kv_case(cpu32, gpu32, 2, 2, 160, 33, 3, 40, 1);    // each token itself alone; d above 128 threads
    kv_case(cpu32, gpu32, 4, 2, 12, 17, 5, 40, 22);    // window = p0 + n: window 0's bits

    backend_close(cpu32);
    backend_close(cpu16);
    backend_close(gpu32);
    backend_close(gpu16);
    return check_summary();
}
