// Standard (non-flash) causal attention on the GPU: the semantics of backend/cpu/attention.c (and of
// kv_attention_forward in backend/cpu/infer_kernels.c), the arithmetic on the device. A sliding window
// (query i sees keys attn_first_key(i, window) .. i) is the softmax rows' and the KV-cache rows' alone;
// window 0 (or one of s or more) runs exactly the arithmetic of no window.
//
// Heads are processed in groups of G = attn_group(s, b, a) (sequence, head) pairs, bj = bi·a + j:
// since h = a·d, head bj of q, k, v, ctx [s, b, h] starts at column bj·d with row stride b·h, so a
// group is one strided-batched GEMM (batch stride d) with no copies. Grouped-query attention (k, v
// [s, b, kv·d], query pair bj reading kv pair bj / (a/kv)): k and v are expanded per query head (the
// bf16 copies are made that way; in fp32 each group's into CUDA_SCRATCH_ATTN), the group's dk, dv are
// computed per query head there and summed into the kv heads' in ascending head order
// (attn_kv_grad_sum): deterministic, and for kv = a nothing of this runs. Each group holds at most
// ATTN_GROUP_FLOATS floats per s×s buffer (or one head when s·s is larger), which bounds the
// backward's scratch; the forward writes straight into the model's [b, a, s, s] probabilities.
//
// GEMMs are cuBLASLt strided-batched, fp32 inputs with fp32 compute (CUBLAS_COMPUTE_32F: no TF32),
// or under mixed precision (be->precision == PRECISION_BF16) bf16 copies of both operands with fp32
// accumulation, as the CPU's per-head GEMMs. Each GEMM's algorithm is chosen once per shape by the
// heuristic with the minimal alignments the callers can guarantee (4 bytes for fp32 operands, 16 for
// our own packed bf16 copies), never from the pointers: the same shape runs the same kernel wherever
// its buffers sit, so the forward and selective recompute (and a stored backward and Tempo's or
// recompute's backward) give the same bits, and so does a run whose tensors are placed elsewhere.
// As in gemm.cu the heuristic is asked for no split-K reduction (REDUCTION_SCHEME_MASK = NONE: one
// summation order per algorithm, run to run). Should it have no algorithm for a shape, that shape runs
// gemm_simple (gemm_simple.cuh: slow, correct, fixed order) with a note on stderr, instead of aborting.
// The forward and selective recompute run the same group code (core_group) over the same groups.
//
// Row kernels (softmax, mask and dropout, softmax backward) are one block per row with fixed-order
// block reductions. Nothing uses atomics; every result is the same bits on every run.
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <mutex>
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm_simple.cuh"

// Floats per s×s buffer of one group of heads (32 MiB): the group is min(b·a, this / s²) heads, at
// least one. Large enough that a group's GEMMs fill the GPU, small enough that the backward's scratch
// (dP; Tempo's D; recompute's P, D, dP and mask) stays bounded whatever b·a is.
// (A build may set it smaller to exercise many groups on small shapes.)
#ifndef ATTN_GROUP_FLOATS
#define ATTN_GROUP_FLOATS ((size_t)1 << 23)
#endif

static int attn_group(int s, int b, int a) {
    size_t ss = (size_t)s * (size_t)s, heads = (size_t)b * (size_t)a;
    size_t g = ATTN_GROUP_FLOATS / ss;
    if (g < 1) g = 1;
    if (g > heads) g = heads;
    return (int)g;
}

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// ---------------------------------------------------------------------------------------------
// cuBLASLt strided-batched GEMMs, one plan (descriptors + algorithm) per shape, kept in a small
// cache shared by every backend of the process (keyed by the device: an algorithm is chosen for one).

// Row-major semantics, as cblas_sgemm: C[m, n] = alpha · op(A) · op(B) for `batch` matrices.
typedef struct {
    long long dev, ta, tb, m, n, k, lda, ldb, ldc, sa, sb, sc, batch, bf16;
} GemmKey;

typedef struct {
    GemmKey key;
    int used;
    int simple;                          // no algorithm: gemm_simple runs the shape (no descriptors)
    uint32_t align_ab;                   // the A, B alignment the algorithm was chosen for
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;   // cuBLASLt's A (our B), B (our A), C = D
    cublasLtMatmulAlgo_t algo;
} GemmPlan;

enum { GEMM_PLANS = 128 };
static std::mutex gemm_plan_lock;
static GemmPlan gemm_plans[GEMM_PLANS];
static int gemm_plan_next;

static cublasLtMatrixLayout_t gemm_layout(cudaDataType_t type, long long rows, long long cols, long long ld,
                                          long long batch, long long stride) {
    cublasLtMatrixLayout_t l;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, (uint64_t)rows, (uint64_t)cols, (int64_t)ld));
    int32_t count = (int32_t)batch;
    int64_t offset = (int64_t)stride;
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset,
                                                  sizeof offset));
    return l;
}

static void gemm_plan_release(GemmPlan *p) {
    if (!p->used) return;
    p->used = 0;
    if (p->simple) return;
    cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb);
    cublasLtMatrixLayoutDestroy(p->lc);
    cublasLtMatmulDescDestroy(p->op);
}

// The heuristic's first algorithm for plan p's descriptors, for operands A and B aligned to align_ab
// bytes and C, D to 4 (what any fp32 tensor is), with no split-K reduction and a workspace within ours:
// 1 when there is one. Pointers play no part.
static int gemm_heuristic(CudaImpl *ci, const GemmPlan *p, uint32_t align_ab, cublasLtMatmulAlgo_t *algo) {
    return cuda_lt_heuristic(ci->lt, p->op, p->la, p->lb, p->lc, ci->lt_workspace_bytes, align_ab, 4u, algo);
}

static void gemm_key_text(const GemmKey *key, char *what, size_t len) {
    snprintf(what, len, "%s attention GEMM ta=%lld tb=%lld m=%lld n=%lld k=%lld lda=%lld ldb=%lld ldc=%lld batch=%lld",
             key->bf16 ? "bf16" : "fp32", key->ta, key->tb, key->m, key->n, key->k, key->lda, key->ldb, key->ldc,
             key->batch);
}

// The plan of `key` (caller holds gemm_plan_lock). Row-major C = op(A)·op(B) is column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt's A is our B with our tb, its B our A with our ta, M = n, N = m.
static const GemmPlan *gemm_plan(CudaImpl *ci, const GemmKey *key) {
    for (int i = 0; i < GEMM_PLANS; i++)
        if (gemm_plans[i].used && !memcmp(&gemm_plans[i].key, key, sizeof *key)) return &gemm_plans[i];
    GemmPlan *p = &gemm_plans[gemm_plan_next];
    gemm_plan_next = (gemm_plan_next + 1) % GEMM_PLANS;
    gemm_plan_release(p);
    p->key = *key;
    cudaDataType_t ab = key->bf16 ? CUDA_R_16BF : CUDA_R_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t ta = key->tb ? CUBLAS_OP_T : CUBLAS_OP_N, tb = key->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    // our B: [k, n] row-major (tb = 0) is column-major n×k; [n, k] (tb = 1) is k×n
    p->la = key->tb ? gemm_layout(ab, key->k, key->n, key->ldb, key->batch, key->sb)
                    : gemm_layout(ab, key->n, key->k, key->ldb, key->batch, key->sb);
    // our A: [m, k] row-major (ta = 0) is column-major k×m; [k, m] (ta = 1) is m×k
    p->lb = key->ta ? gemm_layout(ab, key->m, key->k, key->lda, key->batch, key->sa)
                    : gemm_layout(ab, key->k, key->m, key->lda, key->batch, key->sa);
    p->lc = gemm_layout(CUDA_R_32F, key->n, key->m, key->ldc, key->batch, key->sc);
    p->used = 1;
    p->simple = 0;

    // Our bf16 copies are 16-byte aligned; should no algorithm take that with fp32 C at 4 bytes, any
    // that takes 2 (still a function of the shape alone); should none take that, gemm_simple.
    p->align_ab = key->bf16 ? 16u : 4u;
    int found = gemm_heuristic(ci, p, p->align_ab, &p->algo);
    if (!found && key->bf16) found = gemm_heuristic(ci, p, p->align_ab = 2u, &p->algo);
    if (!found) {
        char what[256];
        gemm_key_text(key, what, sizeof what);
        fprintf(stderr, "ctron: cuBLASLt offers no usable algorithm for the %s on cuda:%d; a simple kernel runs it (slow)\n",
                what, ci->device);
        gemm_plan_release(p);
        p->key = *key;
        p->used = 1;
        p->simple = 1;
    }
    return p;
}

// C[m, n] (ldc, batch stride sc) = alpha · op(A) · op(B), row-major, `batch` matrices; A and B fp32,
// or bf16 (both) when bf16. Stream-ordered on the backend's stream.
static void bgemm(Backend *be, int ta, int tb, int m, int n, int k, float alpha, const void *A, int lda, long long sa,
                  const void *B, int ldb, long long sb, float *C, int ldc, long long sc, int batch, int bf16) {
    CudaImpl *ci = cuda_impl(be);
    GemmKey key = {ci->device, ta, tb, m, n, k, lda, ldb, ldc, sa, sb, sc, batch, bf16};
    float beta = 0.0f;
    std::lock_guard<std::mutex> guard(gemm_plan_lock);
    const GemmPlan *p = gemm_plan(ci, &key);
    if (p->simple) {   // column-major, as the plan: cuBLASLt's A is our B
        gemm_simple(ci->stream, tb, ta, n, m, k, alpha, B, ldb, sb, A, lda, sa, beta, C, ldc, sc, batch, bf16, NULL);
        return;
    }
    char what[320];
    // Every operand is as aligned as the plan assumed (fp32 tensors 4 bytes, our bf16 copies 16 by their
    // layout); a broken invariant is named, never run into the library.
    if ((uintptr_t)A % p->align_ab || (uintptr_t)B % p->align_ab || (uintptr_t)C % 4u) {
        gemm_key_text(&key, what, sizeof what);
        cuda_fail("attention GEMM operand below the plan's alignment", what, __FILE__, __LINE__);
    }
    cublasStatus_t st = cublasLtMatmul(ci->lt, p->op, &alpha, B, p->la, A, p->lb, &beta, C, p->lc, C, p->lc, &p->algo,
                                       ci->lt_workspace, ci->lt_workspace_bytes, ci->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        gemm_key_text(&key, what, sizeof what);
        snprintf(what + strlen(what), sizeof what - strlen(what), ": %s", cublasLtGetStatusString(st));
        cuda_fail("cublasLtMatmul", what, __FILE__, __LINE__);
    }
    if (cuda_profile_on) {
        snprintf(what, sizeof what, "attention gemm %s %c%c m=%d n=%d k=%d batch=%d", bf16 ? "bf16" : "fp32",
                 ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, batch);
        cuda_profile_note(cuda_profile_name(what), NULL, 2.0 * m * n * (double)k * batch);
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels

// Threads of a row kernel: a multiple of 32 (block_sum), enough for a row of s (or s/4 Philox blocks).
static unsigned row_threads(int s) { return s <= 128 ? 64u : s <= 1024 ? 128u : 256u; }

// The four Philox words of block gq (elements 4·gq .. 4·gq+3) of a sample: dropout_keep_at's draw.
static __device__ __forceinline__ philox_ctr attn_draw(const DropoutSite &site, uint32_t word3, uint32_t sample,
                                                       uint64_t gq) {
    philox_ctr ctr = {{(uint32_t)gq, sample, site.step, word3}};
    return philox4x32_10_inline(ctr, site.key);
}

// One block per row of a group of heads: grid g·s (head hg = blockIdx.x / s of the group, global
// pair bj0 + hg; query i = blockIdx.x % s), block row_threads(s). P [g, s, s] holds the scores
// scale·q kᵀ and becomes in place the causal softmax (ctron_expf, keys lo..i with lo =
// attn_first_key(i, window): 0 without a window; zeros elsewhere), rounded to bf16 when round_bf16.
// K NULL: no dropout. Else K [g, s, s] = the mask of head head0 + j of sample sample0 + bi (element
// (i, c) has index ((head0+j)·s + i)·s + c, drawn for c ≤ i only, 0 after: the window plays no part,
// as on the CPU) and D = K ? P·keep_scale : 0 (rounded when round_bf16). D16 [g, s, sp], when given:
// bf16 of what · v reads (D, or P without dropout).
static __global__ void attn_softmax_rows(float *P, uint8_t *K, float *D, uint16_t *D16, int s, int sp, int window,
                                         int bj0, int a, int head0, uint32_t sample0, DropoutSite site,
                                         uint32_t thresh, float keep_scale, int round_bf16) {
    __shared__ float red[CT_WARP];
    const size_t row = blockIdx.x;
    const int i = (int)(row % (size_t)s), hg = (int)(row / (size_t)s), lo = attn_first_key(i, window);
    float *pr = P + row * (size_t)s;
    float m = -INFINITY;
    for (int c = lo + (int)threadIdx.x; c <= i; c += blockDim.x) m = fmaxf(m, pr[c]);
    m = block_max(m, red);
    float sum = 0.0f;
    for (int c = lo + (int)threadIdx.x; c <= i; c += blockDim.x) {
        float e = ctron_expf(pr[c] - m);
        pr[c] = e;
        sum += e;
    }
    sum = block_sum(sum, red);   // its barriers also make every e visible to the whole block
    const float inv = 1.0f / sum;
    uint16_t *d16 = D16 ? D16 + row * (size_t)sp : NULL;
    if (d16)   // the row's padding: no GEMM reads it, but no garbage either
        for (int c = s + (int)threadIdx.x; c < sp; c += blockDim.x) d16[c] = 0;
    if (!K) {
        for (int c = threadIdx.x; c < s; c += blockDim.x) {
            float x = c >= lo && c <= i ? pr[c] * inv : 0.0f;
            if (round_bf16) x = bf16_round_f(x);
            pr[c] = x;
            if (d16) d16[c] = bf16_from_f32(x);
        }
        return;
    }
    // With dropout a thread takes whole Philox blocks (4 consecutive element indices, one draw).
    const int bj = bj0 + hg, bi = bj / a, j = bj % a;
    const uint32_t sample = sample0 + (uint32_t)bi, word3 = dropout_counter_word3(site);
    const uint64_t base = ((uint64_t)(head0 + j) * (uint64_t)s + (uint64_t)i) * (uint64_t)s;
    const uint64_t g_first = base / 4, g_last = (base + (uint64_t)s - 1) / 4;
    uint8_t *kr = K + row * (size_t)s;
    float *dr = D + row * (size_t)s;
    for (uint64_t gq = g_first + threadIdx.x; gq <= g_last; gq += blockDim.x) {
        const long long c0 = (long long)(gq * 4) - (long long)base;   // column of word 0 (may be < 0)
        philox_ctr r = {{0u, 0u, 0u, 0u}};
        if (c0 <= (long long)i) r = attn_draw(site, word3, sample, gq);
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const long long cl = c0 + l;
            if (cl < 0 || cl >= (long long)s) continue;
            const int c = (int)cl;
            float x = c >= lo && c <= i ? pr[c] * inv : 0.0f;
            if (round_bf16) x = bf16_round_f(x);
            pr[c] = x;
            const int keep = c <= i && r.v[l] >= thresh;
            float y = keep ? x * keep_scale : 0.0f;
            if (round_bf16) y = bf16_round_f(y);
            kr[c] = (uint8_t)keep;
            dr[c] = y;
            if (d16) d16[c] = bf16_from_f32(y);
        }
    }
}

// The mask alone, exactly as attn_softmax_rows draws it: grid b·a·s blocks (pair bj = blockIdx.x / s,
// query i = blockIdx.x % s), block row_threads(s); K [b·a, s, s].
static __global__ void attn_mask_rows(uint8_t *K, int s, int a, int head0, uint32_t sample0, DropoutSite site,
                                      uint32_t thresh) {
    const size_t row = blockIdx.x;
    const int i = (int)(row % (size_t)s), bj = (int)(row / (size_t)s), bi = bj / a, j = bj % a;
    const uint32_t sample = sample0 + (uint32_t)bi, word3 = dropout_counter_word3(site);
    const uint64_t base = ((uint64_t)(head0 + j) * (uint64_t)s + (uint64_t)i) * (uint64_t)s;
    const uint64_t g_first = base / 4, g_last = (base + (uint64_t)s - 1) / 4;
    uint8_t *kr = K + row * (size_t)s;
    for (uint64_t gq = g_first + threadIdx.x; gq <= g_last; gq += blockDim.x) {
        const long long c0 = (long long)(gq * 4) - (long long)base;
        philox_ctr r = {{0u, 0u, 0u, 0u}};
        if (c0 <= (long long)i) r = attn_draw(site, word3, sample, gq);
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const long long cl = c0 + l;
            if (cl < 0 || cl >= (long long)s) continue;
            kr[cl] = (uint8_t)(cl <= (long long)i && r.v[l] >= thresh);
        }
    }
}

// One block per row of a group: grid g·s (query i = blockIdx.x % s), block row_threads(s); src, K,
// D [g, s, s], D16 [g, s, sp]. K given (Tempo's backward): D = K ? src·keep_scale : 0 for keys 0..i,
// 0 after, rounded when round_bf16 — the forward's arithmetic on the stored P, so the same bits. K
// NULL: the row of src (a stored D or P) as it is. Writes D and/or D16 (either may be NULL).
static __global__ void attn_dropped_rows(const float *src, const uint8_t *K, float *D, uint16_t *D16, int s, int sp,
                                         float keep_scale, int round_bf16) {
    const size_t row = blockIdx.x;
    const int i = (int)(row % (size_t)s);
    const float *sr = src + row * (size_t)s;
    const uint8_t *kr = K ? K + row * (size_t)s : NULL;
    float *dr = D ? D + row * (size_t)s : NULL;
    uint16_t *d16 = D16 ? D16 + row * (size_t)sp : NULL;
    if (d16)
        for (int c = s + (int)threadIdx.x; c < sp; c += blockDim.x) d16[c] = 0;
    for (int c = threadIdx.x; c < s; c += blockDim.x) {
        float y;
        if (kr) {
            y = c <= i && kr[c] ? sr[c] * keep_scale : 0.0f;
            if (round_bf16) y = bf16_round_f(y);
        } else {
            y = sr[c];
        }
        if (dr) dr[c] = y;
        if (d16) d16[c] = bf16_from_f32(y);
    }
}

// Softmax backward of one row: grid g·s (query i = blockIdx.x % s), block row_threads(s); dP, P, K
// [g, s, s], dS16 [g, s, sp]. dP' = dP (K given: K ? dP·keep_scale : 0), dS = P ⊙ (dP' − Σ dP'⊙P)
// on keys 0..i, 0 after: in place in dP, or (dS16 given) as bf16 into dS16 with dP left as it was.
static __global__ void attn_softmax_backward_rows(float *dP, const float *P, const uint8_t *K, uint16_t *dS16, int s,
                                                  int sp, float keep_scale) {
    __shared__ float red[CT_WARP];
    const size_t row = blockIdx.x;
    const int i = (int)(row % (size_t)s);
    float *dr = dP + row * (size_t)s;
    const float *pr = P + row * (size_t)s;
    const uint8_t *kr = K ? K + row * (size_t)s : NULL;
    float dot = 0.0f;
    for (int c = threadIdx.x; c <= i; c += blockDim.x) {
        float x = dr[c];
        if (kr) x = kr[c] ? x * keep_scale : 0.0f;
        dot += x * pr[c];
    }
    dot = block_sum(dot, red);
    uint16_t *d16 = dS16 ? dS16 + row * (size_t)sp : NULL;
    if (d16)
        for (int c = s + (int)threadIdx.x; c < sp; c += blockDim.x) d16[c] = 0;
    for (int c = threadIdx.x; c < s; c += blockDim.x) {
        float y = 0.0f;
        if (c <= i) {
            float x = dr[c];
            if (kr) x = kr[c] ? x * keep_scale : 0.0f;
            y = pr[c] * (x - dot);
        }
        if (d16) d16[c] = bf16_from_f32(y);
        else dr[c] = y;
    }
}

// bf16 copies of a tensor's heads for the mixed-precision GEMMs: dst [b·a, s, dp] (pair bj's rows of dp
// elements, 16-byte aligned; columns d..dp−1 zero) from src, whose head bj / grp starts at column
// (bj / grp)·d with row stride ld: q and dctx with grp 1 (ld b·a·d), k and v with grp = a/kv (ld b·kv·d),
// which also expands grouped-query k, v to one copy per query head. Grid-stride over the ba·s·dp outputs.
static __global__ void attn_pack_heads(uint16_t *dst, const float *src, int s, int ba, int d, int dp, int grp,
                                       size_t ld) {
    const size_t total = (size_t)ba * (size_t)s * (size_t)dp;
    CT_GRID_LOOP(o, total) {
        const int c = (int)(o % (size_t)dp);
        const size_t t = o / (size_t)dp;
        const size_t r = t % (size_t)s, bj = t / (size_t)s;
        dst[o] = c < d ? bf16_from_f32(src[r * ld + bj / (size_t)grp * (size_t)d + (size_t)c]) : (uint16_t)0;
    }
}

// Grouped-query attention, fp32: one group's k (or v) per query head, dst [g, s, d] (pair bj0 + hg at
// hg·s·d, row stride d) from src [s, b, kv·d] (row stride ld), pair bj reading kv pair bj / grp.
static __global__ void attn_expand_heads(float *dst, const float *src, int s, int d, int bj0, int g, int grp,
                                         size_t ld) {
    const size_t total = (size_t)g * (size_t)s * (size_t)d;
    CT_GRID_LOOP(o, total) {
        const size_t c = o % (size_t)d, t = o / (size_t)d;
        const size_t r = t % (size_t)s, bj = (size_t)bj0 + t / (size_t)s;
        dst[o] = src[r * ld + bj / (size_t)grp * (size_t)d + c];
    }
}

// Grouped-query attention: a group's per-query-head dk (or dv) e [g, s, d] (pairs bj0 .. bj0+g−1) into
// dst [s, b, kv·d] (row stride ld), kv pair bk = bj / grp summing its query heads in ascending order,
// left to right: the first head of a kv head writes, a later one adds to what an earlier group left,
// so the sum is e0 + e1 + … whatever the grouping. One thread per (kv pair, row, column).
static __global__ void attn_kv_grad_sum(float *dst, const float *e, int s, int d, int bj0, int g, int grp, size_t ld) {
    const int bk0 = bj0 / grp, bk1 = (bj0 + g - 1) / grp;
    const size_t total = (size_t)(bk1 - bk0 + 1) * (size_t)s * (size_t)d;
    CT_GRID_LOOP(o, total) {
        const size_t c = o % (size_t)d, t = o / (size_t)d;
        const size_t r = t % (size_t)s;
        const int bk = bk0 + (int)(t / (size_t)s);
        const int first = bk * grp > bj0 ? bk * grp : bj0, end = (bk + 1) * grp < bj0 + g ? (bk + 1) * grp : bj0 + g;
        float *out = dst + r * ld + (size_t)bk * (size_t)d + c;
        const size_t at = r * (size_t)d + c, step = (size_t)s * (size_t)d;
        float acc = e[(size_t)(first - bj0) * step + at];
        if (first > bk * grp) acc = *out + acc;
        for (int bj = first + 1; bj < end; bj++) acc += e[(size_t)(bj - bj0) * step + at];
        *out = acc;
    }
}

// KV-cache attention: one block per (new token i, head j) = blockIdx.x (i = / a, j = % a), 128
// threads. Query row i (stride ldq, head at column j·d) against cache rows lo..p0+i of kc, vc
// [positions, hk = kv·d] at kv head j / grp's columns (lo = attn_first_key(p0 + i, window): 0 without a
// window): scores of the len = p0+i+1−lo keys (a warp per key) into sc [n·a, sc_ld], softmax with expf
// as the CPU, then ctx [n, h] = Σ p_u v_u by ng column groups of keys u ≡ g (mod ng), u counted from lo,
// added in the order g = 0..ng−1.
static __global__ void attn_kv_rows(float *ctx, const float *q, int ldq, const float *kc, const float *vc, float *sc_all,
                                    int sc_ld, int p0, int window, int a, int h, int d, int hk, int grp, float scale) {
    extern __shared__ float kv_shared[];   // q (d floats), then the ng·d partial sums
    __shared__ float red[CT_WARP];
    const int i = (int)blockIdx.x / a, j = (int)blockIdx.x % a, lo = attn_first_key(p0 + i, window);
    const int len = p0 + i + 1 - lo;
    const int ng = (int)blockDim.x >= d ? (int)blockDim.x / d : 1;
    float *qs = kv_shared, *part = kv_shared + d;
    const float *qrow = q + (size_t)i * (size_t)ldq + (size_t)j * (size_t)d;
    for (int c = threadIdx.x; c < d; c += blockDim.x) qs[c] = qrow[c];
    kc += (size_t)lo * (size_t)hk;   // the window's first row: key u of the row below is position lo + u
    vc += (size_t)lo * (size_t)hk;
    __syncthreads();
    float *sc = sc_all + (size_t)blockIdx.x * (size_t)sc_ld;
    const int lane = (int)threadIdx.x % CT_WARP, warp = (int)threadIdx.x / CT_WARP, warps = (int)blockDim.x / CT_WARP;
    for (int u = warp; u < len; u += warps) {
        const float *kr = kc + (size_t)u * (size_t)hk + (size_t)(j / grp) * (size_t)d;
        float acc = 0.0f;
        for (int c = lane; c < d; c += CT_WARP) acc += qs[c] * kr[c];
        acc = warp_sum(acc);
        if (lane == 0) sc[u] = scale * acc;
    }
    __syncthreads();
    float m = -INFINITY;
    for (int u = threadIdx.x; u < len; u += blockDim.x) m = fmaxf(m, sc[u]);
    m = block_max(m, red);
    float sum = 0.0f;
    for (int u = threadIdx.x; u < len; u += blockDim.x) {
        float e = expf(sc[u] - m);
        sc[u] = e;
        sum += e;
    }
    sum = block_sum(sum, red);
    const float inv = 1.0f / sum;
    for (int u = threadIdx.x; u < len; u += blockDim.x) sc[u] *= inv;
    __syncthreads();
    for (int cc = threadIdx.x; cc < ng * d; cc += blockDim.x) {
        const int g = cc / d, c = cc % d;
        const float *vcol = vc + (size_t)(j / grp) * (size_t)d + (size_t)c;
        float acc = 0.0f;
        for (int u = g; u < len; u += ng) acc += sc[u] * vcol[(size_t)u * (size_t)hk];
        part[cc] = acc;
    }
    __syncthreads();
    float *out = ctx + (size_t)i * (size_t)h + (size_t)j * (size_t)d;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float t = 0.0f;
        for (int g = 0; g < ng; g++) t += part[g * d + c];
        out[c] = t;
    }
}

// ---------------------------------------------------------------------------------------------
// Host side

// kv: key/value heads (grp = a/kv query heads share one, kv pair bj / grp for query pair bj); k, v, dk,
// dv are [s, b, kv·d] with row stride ldk. gqa: kv < a.
typedef struct {
    int s, b, a, h, d, ba, ld, group, dp, sp, bf16, kv, grp, ldk, gqa;
    size_t ss;
    float scale;
} AttnShape;

static AttnShape attn_shape(const Backend *be, int s, int b, int a, int kv, int h) {
    if (kv <= 0 || a % kv) cuda_fail("attention", "the kv heads must divide the query heads", __FILE__, __LINE__);
    AttnShape t;
    t.s = s; t.b = b; t.a = a; t.h = h;
    t.d = h / a;
    t.ba = b * a;
    t.ld = b * h;
    t.kv = kv;
    t.grp = a / kv;
    t.ldk = b * kv * t.d;
    t.gqa = kv < a;
    t.group = attn_group(s, b, a);
    t.dp = (int)round_up((size_t)t.d, 8);
    t.sp = (int)round_up((size_t)s, 8);
    t.bf16 = be->precision == PRECISION_BF16;
    t.ss = (size_t)s * (size_t)s;
    t.scale = 1.0f / sqrtf((float)t.d);
    return t;
}

// A tensor's heads as GEMM operands: fp32 in place (pair bj at bj·d, ld b·h), its bf16 copy
// [b·a, s, dp] (pair bj at bj·s·dp, ld dp), or (grouped-query k, v in fp32) one group's expansion
// [g, s, d] whose first pair is `first`. base NULL: expanded per group (group_kv).
typedef struct {
    const void *base;
    int ld, bf16;
    long long stride;
    int first;
} Heads;

static const void *heads_at(const Heads &v, int bj0) {
    size_t at = (size_t)(bj0 - v.first) * (size_t)v.stride;
    return v.bf16 ? (const void *)((const uint16_t *)v.base + at) : (const void *)((const float *)v.base + at);
}

static Heads heads_f32(const AttnShape &t, const float *x) {
    Heads v = {x, t.ld, 0, (long long)t.d, 0};
    return v;
}
// k or v in place: as q with kv = a; with kv < a in fp32 each group gets its expansion (group_kv).
static Heads heads_kv(const AttnShape &t, const float *x) {
    Heads v = {t.gqa ? NULL : x, t.ld, 0, (long long)t.d, 0};
    return v;
}

// The CUDA_SCRATCH_ATTN slot, each part 256-byte aligned. Mixed precision's bf16 operands: q, k, v,
// dctx [b·a, s, dp] (k, v one copy per query head) and one group's D or dS [G, s, sp]. Grouped-query
// attention's fp32 parts, [G, s, d] each: the group's k and v per query head (fp32 only: the bf16
// copies are already per query head) and, for a backward, its per-query-head dk and dv before they are
// summed into the kv heads' (attn_kv_grad_sum). Nothing for fp32 multi-head attention.
typedef struct {
    uint16_t *q, *k, *v, *g, *p;
    float *ke, *ve, *dke, *dve;
} AttnWork;

static AttnWork attn_work(Backend *be, const AttnShape &t, int backward) {
    AttnWork r = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t heads = t.bf16 ? round_up((size_t)t.ba * (size_t)t.s * (size_t)t.dp, 128) : 0;
    size_t grp = t.bf16 ? round_up((size_t)t.group * (size_t)t.s * (size_t)t.sp, 128) : 0;
    size_t part = t.gqa ? round_up((size_t)t.group * (size_t)t.s * (size_t)t.d, 64) : 0;   // floats
    size_t nexp = t.gqa && !t.bf16 ? 2 : 0, ngrad = t.gqa && backward ? 2 : 0;
    size_t bytes = (4 * heads + grp) * sizeof(uint16_t) + (nexp + ngrad) * part * sizeof(float);
    if (!bytes) return r;
    char *w = (char *)cuda_scratch(be, CUDA_SCRATCH_ATTN, bytes);
    if (t.bf16) {
        uint16_t *u = (uint16_t *)w;
        r.q = u, r.k = u + heads, r.v = u + 2 * heads, r.g = u + 3 * heads, r.p = u + 4 * heads;
    }
    float *f = (float *)(w + (4 * heads + grp) * sizeof(uint16_t));
    if (nexp) r.ke = f, r.ve = f + part, f += 2 * part;
    if (ngrad) r.dke = f, r.dve = f + part;
    return r;
}

// bf16 copies [b·a, s, dp] of q or dctx (kv 0: grp 1, row stride b·a·d) or of k or v (one per query head).
static Heads pack_heads(Backend *be, const AttnShape &t, uint16_t *dst, const float *src, int is_kv) {
    size_t total = (size_t)t.ba * (size_t)t.s * (size_t)t.dp;
    attn_pack_heads<<<ct_elementwise_blocks(total, 256), 256, 0, cuda_stream(be)>>>(
        dst, src, t.s, t.ba, t.d, t.dp, is_kv ? t.grp : 1, (size_t)(is_kv ? t.ldk : t.ld));
    CUDA_LAUNCHED();
    Heads v = {dst, t.dp, 1, (long long)t.s * t.dp, 0};
    return v;
}

// The group's k or v operand: `whole` (in place or packed), or for fp32 grouped-query attention the
// group's pairs expanded into buf [g, s, d].
static Heads group_kv(Backend *be, const AttnShape &t, const Heads &whole, const float *src, float *buf, int bj0,
                      int g) {
    if (whole.base) return whole;
    size_t total = (size_t)g * (size_t)t.s * (size_t)t.d;
    attn_expand_heads<<<ct_elementwise_blocks(total, 256), 256, 0, cuda_stream(be)>>>(buf, src, t.s, t.d, bj0, g,
                                                                                       t.grp, (size_t)t.ldk);
    CUDA_LAUNCHED();
    Heads v = {buf, t.d, 0, (long long)t.s * t.d, bj0};
    return v;
}

// Where a group's backward writes dk and dv: the [s, b, h] tensors (multi-head: pair bj at bj·d, row
// stride b·h), or with grouped-query attention the per-query-head parts [g, s, d] that
// attn_kv_grad_sum then adds into the kv heads'.
typedef struct {
    float *dk, *dv;
    int ld;
    long long stride;
    int first;
} GradOut;

static GradOut grad_out(const AttnShape &t, float *dk, float *dv, const AttnWork &w, int bj0) {
    GradOut o = {dk, dv, t.ld, (long long)t.d, 0};
    if (t.gqa) o = GradOut{w.dke, w.dve, t.d, (long long)t.s * t.d, bj0};
    return o;
}

// After a grouped-query group's backward: its dk, dv parts into the kv heads', in ascending head order.
static void group_grad_sum(Backend *be, const AttnShape &t, float *dk, float *dv, const AttnWork &w, int bj0, int g) {
    if (!t.gqa) return;
    int kvs = (bj0 + g - 1) / t.grp - bj0 / t.grp + 1;
    size_t total = (size_t)kvs * (size_t)t.s * (size_t)t.d;
    unsigned blocks = ct_elementwise_blocks(total, 256);
    attn_kv_grad_sum<<<blocks, 256, 0, cuda_stream(be)>>>(dk, w.dke, t.s, t.d, bj0, g, t.grp, (size_t)t.ldk);
    CUDA_LAUNCHED();
    attn_kv_grad_sum<<<blocks, 256, 0, cuda_stream(be)>>>(dv, w.dve, t.s, t.d, bj0, g, t.grp, (size_t)t.ldk);
    CUDA_LAUNCHED();
}

// One group's P (and K, D, D16): scale · q kᵀ, then the softmax/mask/dropout rows. The forward and
// selective recompute both run exactly this on the same groups, so a recomputed head is bitwise the
// stored one. With a sliding window the GEMM still forms every score of the s×s rows (one strided
// batch; the rows' windows start at different keys) and the softmax rows zero those left of each
// row's window, so D · v and the backward from P need no window: their extra terms are exact zeros.
static void core_group(Backend *be, const AttnShape &t, int bj0, int g, float *P, uint8_t *K, float *D, uint16_t *D16,
                       const Heads &q, const Heads &k, int window, int head0, DropoutSite site, uint32_t sample0,
                       int round_bf16) {
    bgemm(be, 0, 1, t.s, t.s, t.d, t.scale, heads_at(q, bj0), q.ld, q.stride, heads_at(k, bj0), k.ld, k.stride, P, t.s,
          (long long)t.ss, g, t.bf16);
    uint32_t thresh = dropout_keep_threshold(site.p);
    float keep_scale = 1.0f / (1.0f - site.p);
    attn_softmax_rows<<<(unsigned)((size_t)g * (size_t)t.s), row_threads(t.s), 0, cuda_stream(be)>>>(
        P, K, D, D16, t.s, t.sp, window, bj0, t.a, head0, sample0, site, thresh, keep_scale, round_bf16);
    CUDA_LAUNCHED();
}

// One group's backward from its P, K (NULL: no dropout), D (fp32 path) or D16 (bf16 path: the
// dropped probabilities in bf16, overwritten by dS): dP = dctx vᵀ, dv = Dᵀ dctx, dS, dq = scale·dS k,
// dk = scale·dSᵀ q. dP is the group's [g, s, s] scratch; dk, dv go where o says.
static void backward_group(Backend *be, const AttnShape &t, int bj0, int g, float *dq, const GradOut &o,
                           const Heads &dctx, const Heads &q, const Heads &k, const Heads &v, const float *P,
                           const uint8_t *K, const float *D, uint16_t *D16, float *dP, float keep_scale) {
    const int s = t.s, d = t.d, bf = t.bf16;
    const long long ss = (long long)t.ss, ssp = (long long)t.s * t.sp;
    const size_t out = (size_t)bj0 * (size_t)d, oat = (size_t)(bj0 - o.first) * (size_t)o.stride;
    bgemm(be, 0, 1, s, s, d, 1.0f, heads_at(dctx, bj0), dctx.ld, dctx.stride, heads_at(v, bj0), v.ld, v.stride, dP, s,
          ss, g, bf);
    if (bf)
        bgemm(be, 1, 0, s, d, s, 1.0f, D16, t.sp, ssp, heads_at(dctx, bj0), dctx.ld, dctx.stride, o.dv + oat, o.ld,
              o.stride, g, 1);
    else
        bgemm(be, 1, 0, s, d, s, 1.0f, D, s, ss, heads_at(dctx, bj0), dctx.ld, dctx.stride, o.dv + oat, o.ld, o.stride,
              g, 0);
    attn_softmax_backward_rows<<<(unsigned)((size_t)g * (size_t)s), row_threads(s), 0, cuda_stream(be)>>>(
        dP, P, K, bf ? D16 : NULL, s, t.sp, keep_scale);
    CUDA_LAUNCHED();
    const void *dS = bf ? (const void *)D16 : (const void *)dP;
    const int ldS = bf ? t.sp : s;
    const long long sS = bf ? ssp : ss;
    bgemm(be, 0, 0, s, d, s, t.scale, dS, ldS, sS, heads_at(k, bj0), k.ld, k.stride, dq + out, t.ld, (long long)d, g, bf);
    bgemm(be, 1, 0, s, d, s, t.scale, dS, ldS, sS, heads_at(q, bj0), q.ld, q.stride, o.dk + oat, o.ld, o.stride, g, bf);
}

// q, dctx and k, v as GEMM operands: in place (fp32), or packed to bf16 in w (k, v per query head);
// v and dctx only where wanted.
static void operands(Backend *be, const AttnShape &t, const AttnWork &w, const float *q, const float *k,
                     const float *v, const float *dctx, Heads *qh, Heads *kh, Heads *vh, Heads *gh) {
    *qh = heads_f32(t, q);
    *kh = heads_kv(t, k);
    *vh = heads_kv(t, v);
    if (gh) *gh = heads_f32(t, dctx);
    if (!t.bf16) return;
    *qh = pack_heads(be, t, w.q, q, 0);
    *kh = pack_heads(be, t, w.k, k, 1);
    if (v) *vh = pack_heads(be, t, w.v, v, 1);
    if (gh) *gh = pack_heads(be, t, w.g, dctx, 0);
}

extern "C" void cuda_attention_forward(Backend *be, float *ctx, float *prob, uint8_t *keep, float *drop,
                                       const float *q, const float *k, const float *v, int s, int b, int a, int kv,
                                       int h, int window,
                                       int head0, DropoutSite site, uint32_t sample0, int round_bf16) {
    if (s <= 0 || b <= 0 || a <= 0) return;
    const AttnShape t = attn_shape(be, s, b, a, kv, h);
    const AttnWork w = attn_work(be, t, 0);
    Heads qh, kh, vh;
    operands(be, t, w, q, k, ctx ? v : NULL, NULL, &qh, &kh, &vh, NULL);
    for (int bj0 = 0; bj0 < t.ba; bj0 += t.group) {
        const int g = t.ba - bj0 < t.group ? t.ba - bj0 : t.group;
        const size_t o = (size_t)bj0 * t.ss;
        float *P = prob + o, *D = keep ? drop + o : NULL;
        uint8_t *K = keep ? keep + o : NULL;
        Heads kg = group_kv(be, t, kh, k, w.ke, bj0, g);
        core_group(be, t, bj0, g, P, K, D, t.bf16 && ctx ? w.p : NULL, qh, kg, window, head0, site, sample0,
                   round_bf16);
        if (!ctx) continue;
        // ctx = D · v (P · v without dropout)
        Heads vg = group_kv(be, t, vh, v, w.ve, bj0, g);
        float *C = ctx + (size_t)bj0 * (size_t)t.d;
        if (t.bf16)
            bgemm(be, 0, 0, s, t.d, s, 1.0f, w.p, t.sp, (long long)s * t.sp, heads_at(vg, bj0), vg.ld, vg.stride, C, t.ld,
                  (long long)t.d, g, 1);
        else
            bgemm(be, 0, 0, s, t.d, s, 1.0f, K ? D : P, s, (long long)t.ss, heads_at(vg, bj0), vg.ld, vg.stride, C, t.ld,
                  (long long)t.d, g, 0);
    }
}

extern "C" void cuda_attention_mask(Backend *be, uint8_t *keep, int s, int b, int a, int head0, DropoutSite site,
                                    uint32_t sample0) {
    if (s <= 0 || b <= 0 || a <= 0) return;
    size_t rows = (size_t)b * (size_t)a * (size_t)s;
    attn_mask_rows<<<(unsigned)rows, row_threads(s), 0, cuda_stream(be)>>>(keep, s, a, head0, sample0, site,
                                                                             dropout_keep_threshold(site.p));
    CUDA_LAUNCHED();
}

// Scratch (model-allocated, `scratch`): dP [G, s, s], then with Tempo's softmax (keep without drop)
// D [G, s, s] formed again from P and the mask.
extern "C" void cuda_attention_backward(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                        const float *prob, const uint8_t *keep, const float *drop, const float *q,
                                        const float *k, const float *v, float *scratch, int s, int b, int a, int kv,
                                        int h, float p, int round_bf16) {
    if (s <= 0 || b <= 0 || a <= 0) return;
    const AttnShape t = attn_shape(be, s, b, a, kv, h);
    const float keep_scale = 1.0f / (1.0f - p);
    const int tempo = keep && !drop;
    const size_t gs = (size_t)t.group * t.ss;
    float *dP = scratch, *Dt = scratch + gs;
    const AttnWork w = attn_work(be, t, 1);
    Heads qh, kh, vh, gh;
    operands(be, t, w, q, k, v, dctx, &qh, &kh, &vh, &gh);
    for (int bj0 = 0; bj0 < t.ba; bj0 += t.group) {
        const int g = t.ba - bj0 < t.group ? t.ba - bj0 : t.group;
        const size_t o = (size_t)bj0 * t.ss;
        const float *P = prob + o, *D = keep ? (tempo ? Dt : drop + o) : P;
        const uint8_t *K = keep ? keep + o : NULL;
        const unsigned rows = (unsigned)((size_t)g * (size_t)s);
        if (tempo)   // D again from P and the mask (fp32 for the fp32 GEMM, else only its bf16 copy)
            attn_dropped_rows<<<rows, row_threads(s), 0, cuda_stream(be)>>>(P, K, t.bf16 ? NULL : Dt, w.p, s, t.sp,
                                                                             keep_scale, round_bf16);
        else if (t.bf16)
            attn_dropped_rows<<<rows, row_threads(s), 0, cuda_stream(be)>>>(D, NULL, NULL, w.p, s, t.sp, keep_scale,
                                                                             round_bf16);
        if (tempo || t.bf16) CUDA_LAUNCHED();
        Heads kg = group_kv(be, t, kh, k, w.ke, bj0, g), vg = group_kv(be, t, vh, v, w.ve, bj0, g);
        backward_group(be, t, bj0, g, dq, grad_out(t, dk, dv, w, bj0), gh, qh, kg, vg, P, K, D, w.p, dP, keep_scale);
        group_grad_sum(be, t, dk, dv, w, bj0, g);
    }
}

// Scratch: P, D, dP [G, s, s] floats each, then the mask [G, s, s] bytes: nothing of the layer is
// held, one group of heads at a time.
extern "C" void cuda_attention_backward_recompute(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                                  const float *q, const float *k, const float *v, float *scratch,
                                                  int s, int b, int a, int kv, int h, int window, int head0,
                                                  DropoutSite site, uint32_t sample0, int round_bf16) {
    if (s <= 0 || b <= 0 || a <= 0) return;
    const AttnShape t = attn_shape(be, s, b, a, kv, h);
    const int dropout = site.p > 0.0f;
    const float keep_scale = 1.0f / (1.0f - site.p);
    const size_t gs = (size_t)t.group * t.ss;
    float *P = scratch, *D = dropout ? scratch + gs : scratch, *dP = scratch + 2 * gs;
    uint8_t *K = dropout ? (uint8_t *)(scratch + 3 * gs) : NULL;
    const AttnWork w = attn_work(be, t, 1);
    Heads qh, kh, vh, gh;
    operands(be, t, w, q, k, v, dctx, &qh, &kh, &vh, &gh);
    for (int bj0 = 0; bj0 < t.ba; bj0 += t.group) {
        const int g = t.ba - bj0 < t.group ? t.ba - bj0 : t.group;
        Heads kg = group_kv(be, t, kh, k, w.ke, bj0, g), vg = group_kv(be, t, vh, v, w.ve, bj0, g);
        core_group(be, t, bj0, g, P, K, dropout ? D : NULL, w.p, qh, kg, window, head0, site, sample0, round_bf16);
        backward_group(be, t, bj0, g, dq, grad_out(t, dk, dv, w, bj0), gh, qh, kg, vg, P, K, D, w.p, dP, keep_scale);
        group_grad_sum(be, t, dk, dv, w, bj0, g);
    }
}

// Floats of the model's attention scratch: a group's s×s buffers (at most ATTN_GROUP_FLOATS each, or
// one head's when s² is larger, never more than b·a heads'), the bound holding for every s' ≤ s and
// b' ≤ b the model may call with. Mixed precision's bf16 copies live in CUDA_SCRATCH_ATTN instead.
extern "C" size_t cuda_attention_scratch_floats(Backend *be, AttnScratchKind kind, int s, int b, int a, int kv, int h) {
    (void)kv;   // grouped-query attention's expansions live in CUDA_SCRATCH_ATTN (attn_work)
    (void)be;
    if (kind == ATTN_SCRATCH_FLASH) return cuda_flash_scratch_floats(s, b, a, h);
    if (s <= 0 || b <= 0 || a <= 0) return 0;
    size_t ss = (size_t)s * (size_t)s, all = (size_t)b * (size_t)a * ss;
    size_t cap = ss > ATTN_GROUP_FLOATS ? ss : ATTN_GROUP_FLOATS;
    size_t grp = all < cap ? all : cap;
    switch (kind) {
    case ATTN_SCRATCH_BACKWARD: return grp;
    case ATTN_SCRATCH_BACKWARD_TEMPO: return 2 * grp;
    case ATTN_SCRATCH_RECOMPUTE: return 3 * grp + (grp + 3) / 4;
    default: return 0;
    }
}

// The scores argument (the CPU's per-thread rows) is not used: each (token, head) block keeps its
// row in CUDA_SCRATCH_ATTN, [n·a, p0+n] floats.
extern "C" void cuda_kv_attention_forward(Backend *be, float *ctx, const float *q, int ldq, const float *kc,
                                          const float *vc, float *scores, int seq, int p0, int n, int a, int kv,
                                          int h, int window) {
    (void)scores;
    (void)seq;
    if (n <= 0 || a <= 0) return;
    if (kv <= 0 || a % kv) cuda_fail("kv attention", "the kv heads must divide the query heads", __FILE__, __LINE__);
    const int d = h / a, len = p0 + n;
    const unsigned threads = 128;
    const int ng = (int)threads >= d ? (int)threads / d : 1;
    float *sc = (float *)cuda_scratch(be, CUDA_SCRATCH_ATTN, (size_t)n * (size_t)a * (size_t)len * sizeof(float));
    size_t shared = ((size_t)d + (size_t)ng * (size_t)d) * sizeof(float);
    attn_kv_rows<<<(unsigned)((size_t)n * (size_t)a), threads, shared, cuda_stream(be)>>>(
        ctx, q, ldq, kc, vc, sc, len, p0, window, a, h, d, kv * d, a / kv, 1.0f / sqrtf((float)d));
    CUDA_LAUNCHED();
}
