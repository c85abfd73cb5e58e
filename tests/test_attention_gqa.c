// Grouped-query attention in the CPU kernels (backend/cpu/attention.h, flash_attention.h,
// infer_kernels.h): kv key/value heads for a query heads, query head j reading kv head j / (a/kv)
// (HF's repeat_kv). For kv = a, a/2 and 1, every path is compared with the multi-head kernel run on k
// and v expanded by repeat_kv:
//   forward ctx, prob, mask, dropped P (stored path) and ctx, lse (flash): bitwise;
//   backward dq: bitwise; dk, dv: bitwise the expanded dk, dv summed over each group of query heads in
//   ascending head order (e0 + e1 + …, left to right: the kernels' order);
// for the stored backward (with and without Tempo's re-formed dropout), selective recompute and flash,
// fp32 and bf16 (round_bf16 with bf16 per-head GEMMs; flash has no bf16 form on the CPU), with and
// without dropout. The backward is also run on 1 thread and compared bitwise (the group's sum does
// not depend on the thread count), and the KV-cache kernel's rows equal the multi-head training
// forward's on the expanded cache.
// Scratch is allocated at exactly backend_cpu_attention_scratch_floats (ASan sees any overrun).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "philox_fill.h"
#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/flash_attention.h"
#include "backend/cpu/infer_kernels.h"
#include "util/common.h"
#include "util/philox.h"

static float *filled(size_t n, uint32_t stream) { return philox_filled(n, 0x6A5u, stream); }

// k [s, b, kv·d] → [s, b, a·d]: query head j gets kv head j / (a/kv) (HF repeat_kv).
static float *repeat_kv(const float *k, int s, int b, int a, int kv, int d) {
    float *e = xmalloc((size_t)s * b * a * d * sizeof(float));
    for (int r = 0; r < s * b; r++)
        for (int j = 0; j < a; j++)
            memcpy(e + ((size_t)r * a + j) * d, k + ((size_t)r * kv + j / (a / kv)) * d, (size_t)d * sizeof(float));
    return e;
}

// The expanded gradient [s, b, a·d] summed over each kv head's query heads in ascending order.
static float *group_sum(const float *e, int s, int b, int a, int kv, int d) {
    int group = a / kv;
    float *g = xmalloc((size_t)s * b * kv * d * sizeof(float));
    for (int r = 0; r < s * b; r++)
        for (int u = 0; u < kv; u++)
            for (int c = 0; c < d; c++) {
                float acc = e[((size_t)r * a + (size_t)u * group) * d + c];
                for (int t = 1; t < group; t++) acc += e[((size_t)r * a + (size_t)u * group + t) * d + c];
                g[((size_t)r * kv + u) * d + c] = acc;
            }
    return g;
}

static int same(const void *x, const void *y, size_t bytes) { return memcmp(x, y, bytes) == 0; }

typedef struct { int s, b, a, d; } Shape;
enum { PATH_STORED, PATH_TEMPO, PATH_RECOMPUTE, PATH_FLASH, PATHS };
static const char *const path_name[PATHS] = {"stored", "tempo", "recompute", "flash"};

// One backward of `path` with kv kv heads (dk, dv [s, b, kv·d]). Scratch sized by the backend's formula.
static void backward(int path, int bf16, float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                     const uint8_t *keep, const float *drop, const float *ctx, const float *lse, const float *q,
                     const float *k, const float *v, Shape sh, int kv, DropoutSite site, uint16_t *s16) {
    static const AttnScratchKind kinds[PATHS] = {ATTN_SCRATCH_BACKWARD, ATTN_SCRATCH_BACKWARD_TEMPO,
                                                 ATTN_SCRATCH_RECOMPUTE, ATTN_SCRATCH_FLASH};
    int h = sh.a * sh.d, threads = omp_get_max_threads();
    float *scr = xmalloc(backend_cpu_attention_scratch_floats(kinds[path], sh.s, sh.b, sh.a, kv, h, threads) *
                         sizeof(float));
    if (path == PATH_STORED || path == PATH_TEMPO)
        attention_backward_bf16(dq, dk, dv, dctx, prob, keep, path == PATH_TEMPO ? NULL : drop, q, k, v, scr, sh.s,
                                sh.b, sh.a, kv, h, site.p, bf16, bf16 ? s16 : NULL);
    else if (path == PATH_RECOMPUTE)
        attention_backward_recompute_bf16(dq, dk, dv, dctx, q, k, v, scr, sh.s, sh.b, sh.a, kv, h, 0, 3, site, 9, bf16,
                                          bf16 ? s16 : NULL);
    else
        flash_attention_backward(dq, dk, dv, dctx, q, k, v, ctx, lse, scr, sh.s, sh.b, sh.a, kv, h, 0, 3, site, 9);
    free(scr);
}

// The forward of the stored path (prob, keep, drop, ctx) or flash (ctx, lse).
static void forward(int flash, int bf16, float *ctx, float *prob, uint8_t *keep, float *drop, float *lse,
                    const float *q, const float *k, const float *v, Shape sh, int kv, DropoutSite site,
                    uint16_t *s16) {
    int h = sh.a * sh.d, drops = site.p > 0.0f;
    if (!flash) {
        attention_forward_bf16(ctx, prob, drops ? keep : NULL, drops ? drop : NULL, q, k, v, sh.s, sh.b, sh.a, kv, h, 0,
                               3, site, 9, bf16, bf16 ? s16 : NULL);
        return;
    }
    float *scr = xmalloc(backend_cpu_attention_scratch_floats(ATTN_SCRATCH_FLASH, sh.s, sh.b, sh.a, kv, h,
                                                              omp_get_max_threads()) * sizeof(float));
    flash_attention_forward(ctx, lse, q, k, v, scr, sh.s, sh.b, sh.a, kv, h, 0, 3, site, 9);
    free(scr);
}

static void check_case(Shape sh, int kv, int dropout, int bf16, int path) {
    int s = sh.s, b = sh.b, a = sh.a, d = sh.d, h = a * d, flash = path == PATH_FLASH;
    size_t nq = (size_t)s * b * h, nk = (size_t)s * b * kv * d, np = (size_t)b * a * s * s;
    DropoutSite site = {philox_key_from_seed(5), 4, 1, SITE_ATTN, dropout ? 0.25f : 0.0f};
    char what[160];
    snprintf(what, sizeof what, "s %d b %d a %d kv %d d %d, %s, %s, %s", s, b, a, kv, d, path_name[path],
             bf16 ? "bf16" : "fp32", dropout ? "dropout" : "no dropout");
    float *q = filled(nq, 1), *k = filled(nk, 2), *v = filled(nk, 3), *g = filled(nq, 4);
    float *ke = repeat_kv(k, s, b, a, kv, d), *ve = repeat_kv(v, s, b, a, kv, d);
    uint16_t *s16 = xmalloc((size_t)omp_get_max_threads() * ATTENTION_BF16_SCRATCH(s, d) * sizeof(uint16_t));

    // the reference: multi-head attention on the expanded k, v
    float *r_ctx = xmalloc(nq * 4), *r_prob = xmalloc(np * 4), *r_drop = xmalloc(np * 4), *r_lse = xmalloc(np / s * 4);
    uint8_t *r_keep = xcalloc(np);
    forward(flash, bf16, r_ctx, r_prob, r_keep, r_drop, r_lse, q, ke, ve, sh, a, site, s16);
    float *r_dq = xmalloc(nq * 4), *r_dk = xmalloc(nq * 4), *r_dv = xmalloc(nq * 4);
    backward(path, bf16, r_dq, r_dk, r_dv, g, r_prob, dropout ? r_keep : NULL, dropout ? r_drop : NULL, r_ctx, r_lse,
             q, ke, ve, sh, a, site, s16);
    float *r_dkg = group_sum(r_dk, s, b, a, kv, d), *r_dvg = group_sum(r_dv, s, b, a, kv, d);

    // grouped-query attention on k, v as they are
    float *ctx = xmalloc(nq * 4), *prob = xmalloc(np * 4), *drop = xmalloc(np * 4), *lse = xmalloc(np / s * 4);
    uint8_t *keep = xcalloc(np);
    forward(flash, bf16, ctx, prob, keep, drop, lse, q, k, v, sh, kv, site, s16);
    CHECK(same(ctx, r_ctx, nq * 4), "%s: ctx differs from MHA on repeat_kv(k, v)", what);
    if (flash) {
        CHECK(same(lse, r_lse, np / s * 4), "%s: lse differs", what);
    } else if (path == PATH_STORED) {
        CHECK(same(prob, r_prob, np * 4), "%s: prob differs", what);
        if (dropout)
            CHECK(same(keep, r_keep, np) && same(drop, r_drop, np * 4), "%s: mask or dropped P differs", what);
    }
    float *dq = xmalloc(nq * 4), *dk = filled(nk, 5), *dv = filled(nk, 6);   // overwritten, never read
    backward(path, bf16, dq, dk, dv, g, prob, dropout ? keep : NULL, dropout ? drop : NULL, ctx, lse, q, k, v, sh, kv,
             site, s16);
    CHECK(same(dq, r_dq, nq * 4), "%s: dq differs", what);
    CHECK(same(dk, r_dkg, nk * 4), "%s: dk differs from the expanded dk summed over each group", what);
    CHECK(same(dv, r_dvg, nk * 4), "%s: dv differs from the expanded dv summed over each group", what);

    // the same backward on one thread: the group's sum does not depend on the thread count
    int threads = omp_get_max_threads();
    float *dq1 = xmalloc(nq * 4), *dk1 = xmalloc(nk * 4), *dv1 = xmalloc(nk * 4);
    omp_set_num_threads(1);
    backward(path, bf16, dq1, dk1, dv1, g, prob, dropout ? keep : NULL, dropout ? drop : NULL, ctx, lse, q, k, v, sh,
             kv, site, s16);
    omp_set_num_threads(threads);
    CHECK(same(dq1, dq, nq * 4) && same(dk1, dk, nk * 4) && same(dv1, dv, nk * 4),
          "%s: the backward on 1 thread differs from %d threads", what, threads);

    free(q), free(k), free(v), free(g), free(ke), free(ve), free(s16);
    free(r_ctx), free(r_prob), free(r_drop), free(r_lse), free(r_keep), free(r_dq), free(r_dk), free(r_dv);
    free(r_dkg), free(r_dvg), free(ctx), free(prob), free(drop), free(lse), free(keep), free(dq), free(dk), free(dv);
    free(dq1), free(dk1), free(dv1);
}

// The KV cache [positions, kv·d]: p0 cached positions, n new tokens; each new row equals the row of the
// training forward (multi-head, on repeat_kv of the cache).
static void check_kv_cache(Shape sh, int kv) {
    int s = sh.s, a = sh.a, d = sh.d, h = a * d, p0 = s - 3, n = 3;
    size_t nq = (size_t)s * h, nk = (size_t)s * kv * d;
    float *q = filled(nq, 7), *k = filled(nk, 8), *v = filled(nk, 9);
    float *ctx = xmalloc(nq * 4), *prob = xmalloc((size_t)a * s * s * 4);
    float *ke = repeat_kv(k, s, 1, a, kv, d), *ve = repeat_kv(v, s, 1, a, kv, d);
    DropoutSite off = {philox_key_from_seed(1), 0, 0, SITE_ATTN, 0.0f};
    attention_forward(ctx, prob, NULL, NULL, q, ke, ve, s, 1, a, a, h, 0, 0, off, 0, 0);
    float *kvctx = xmalloc((size_t)n * h * 4), *scores = xmalloc((size_t)omp_get_max_threads() * s * 4);
    kv_attention_forward(kvctx, q + (size_t)p0 * h, h, k, v, scores, s, p0, n, a, kv, h, 0);
    double err = 0.0;
    for (size_t i = 0; i < (size_t)n * h; i++) err = fmax(err, fabs((double)kvctx[i] - ctx[(size_t)p0 * h + i]));
    // sgemv against the per-head GEMMs: the same sums in another order (measured ≤ 1.2e-7)
    CHECK(err < 2e-6, "s %d a %d kv %d: KV-cache rows %.3g from the training forward's (want < 2e-6)", s, a, kv, err);
    printf("  kv cache a %d kv %d: max |diff| %.2g from the training forward\n", a, kv, err);
    free(q), free(k), free(v), free(ke), free(ve), free(ctx), free(prob), free(kvctx), free(scores);
}

int main(void) {
    // 70 = 64 + 6 (flash tiles); 260 = 256 + 4 (the causal blocks of the stored GEMMs)
    const Shape shapes[] = {{70, 2, 4, 8}, {260, 1, 6, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        Shape sh = shapes[i];
        const int kvs[] = {sh.a, sh.a / 2, 1};
        for (int x = 0; x < 3; x++)
            for (int path = 0; path < PATHS; path++)
                for (int bf16 = 0; bf16 < 2; bf16++)
                    for (int dropout = 0; dropout < 2; dropout++) {
                        if ((path == PATH_FLASH && bf16) || (path == PATH_TEMPO && !dropout)) continue;
                        check_case(sh, kvs[x], dropout, bf16, path);
                    }
        check_kv_cache(sh, sh.a / 2);
        check_kv_cache(sh, 1);
    }
    return check_summary();
}
