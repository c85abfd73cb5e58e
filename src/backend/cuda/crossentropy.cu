// Softmax cross-entropy on the GPU: the whole vocabulary (crossentropy.h) and its vocabulary-parallel
// form (vocab_parallel.h), the CPU's semantics. One block per row; a row is read as groups of four
// columns, group g = columns [4g, 4g+4), thread t taking groups t, t+T, t+2T, ... in that order. The
// group a column falls in and the order a thread meets its groups depend only on the column's index,
// never on the row's address: a float4 load where the row is 16-byte aligned, four scalar loads where
// it is not, the same arithmetic either way. T depends only on the row's width, so a row's loss and
// gradient are the same bits whatever n is (head_chunks' mini-sequence chunks give the bits of one
// call over all the rows).
//
// Arithmetic: ctron_expf as the CPU; max over the row exact; Σ exp(z − max) in fp32 by an online
// softmax (each thread keeps its running max and a sum relative to it, rescaled when the max grows;
// the threads' sums are combined relative to the row's max by a fixed shuffle tree), so it differs
// from the CPU's SIMD sum by a few ulp. The gradient ctron_expf(z − lse)·grad_scale (− grad_scale at
// the target) is written with __fmul_rn / __fsub_rn, so nvcc cannot fuse it into an FMA the CPU
// (-std=c11: no contraction) does not do: given the same lse it is the CPU's bits. Σ row losses in
// double, in a fixed order, copied back once.
#include <math.h>
#include <stdint.h>
#include "backend/cuda/cuda_common.cuh"

// Threads per row: a function of the row's width only (see above).
static inline unsigned ce_threads(int width) { return width >= 8192 ? 512u : 256u; }
#define CE_MAX_THREADS 512
#define CE_SUM_THREADS 1024
// Groups a thread has in flight at once (loads issued before the arithmetic); the order in which a
// thread accumulates its groups does not depend on it.
#define CE_BATCH 4

static __device__ __forceinline__ bool ce_aligned(const float *z) { return ((uintptr_t)z & 15u) == 0; }

// Columns [c, c+4) ∩ [0, k) of z (c a multiple of 4, c < k); lanes at or past k read as 0.
static __device__ __forceinline__ float4 ce_load4(const float *z, int c, int k, bool vec) {
    if (vec && c + 4 <= k) return *reinterpret_cast<const float4 *>(z + c);
    float4 q;
    q.x = z[c];
    q.y = c + 1 < k ? z[c + 1] : 0.0f;
    q.z = c + 2 < k ? z[c + 2] : 0.0f;
    q.w = c + 3 < k ? z[c + 3] : 0.0f;
    return q;
}
static __device__ __forceinline__ void ce_store4(float *z, int c, int k, bool vec, float4 q) {
    if (vec && c + 4 <= k) {
        *reinterpret_cast<float4 *>(z + c) = q;
        return;
    }
    z[c] = q.x;
    if (c + 1 < k) z[c + 1] = q.y;
    if (c + 2 < k) z[c + 2] = q.z;
    if (c + 3 < k) z[c + 3] = q.w;
}

// One group into a thread's running (max m, Σ exp(z − m) s); cnt (1..4) of its lanes are columns.
// The max is the CPU's `z > m ? z : m`.
static __device__ __forceinline__ void ce_online4(float4 q, int cnt, float &m, float &s) {
    float gm = q.x;
    if (cnt > 1 && q.y > gm) gm = q.y;
    if (cnt > 2 && q.z > gm) gm = q.z;
    if (cnt > 3 && q.w > gm) gm = q.w;
    if (gm > m) {
        s = s * ctron_expf(m - gm);   // m = −inf at the first group: s = 0 stays 0
        m = gm;
    }
    s += ctron_expf(q.x - m);
    if (cnt > 1) s += ctron_expf(q.y - m);
    if (cnt > 2) s += ctron_expf(q.z - m);
    if (cnt > 3) s += ctron_expf(q.w - m);
}

// Max and Σ exp(z − max) over columns [0, k) of the row z (k ≥ 1), returned to every thread of the
// block. `red` holds 32 floats. Only reads z.
static __device__ __forceinline__ void ce_row_stats(const float *z, int k, float *red, float *max_out,
                                                    float *sum_out) {
    const int T = (int)blockDim.x, ng = (k + 3) / 4;
    const bool vec = ce_aligned(z);
    float m = -INFINITY, s = 0.0f;
    for (int g0 = (int)threadIdx.x; g0 < ng; g0 += CE_BATCH * T) {
        float4 q[CE_BATCH];
#pragma unroll
        for (int u = 0; u < CE_BATCH; u++) {
            int g = g0 + u * T;
            if (g < ng) q[u] = ce_load4(z, 4 * g, k, vec);
        }
#pragma unroll
        for (int u = 0; u < CE_BATCH; u++) {
            int g = g0 + u * T;
            if (g < ng) ce_online4(q[u], min(4, k - 4 * g), m, s);
        }
    }
    float M = block_max(m, red);
    // a thread without columns (s = 0, m = −inf) adds nothing; a NaN sum (a NaN logit) is carried into
    // the row's loss, as on the CPU (`s > 0` would drop it and report a finite loss)
    float part = s != 0.0f ? s * ctron_expf(m - M) : 0.0f;
    float S = block_sum(part, red);
    *max_out = M;
    *sum_out = S;
}

// z[c] ← ctron_expf(z[c] − lse)·gs for c < k, 0 for k ≤ c < width; at column tgt (when in [0, k))
// minus gs, after the product (the CPU's order).
static __device__ __forceinline__ float ce_grad(float x, int c, int k, int tgt, float lse, float gs) {
    float y = c < k ? __fmul_rn(ctron_expf(x - lse), gs) : 0.0f;
    return c == tgt ? __fsub_rn(y, gs) : y;
}
static __device__ __forceinline__ void ce_row_grad(float *z, int width, int k, int tgt, float lse, float gs) {
    const int T = (int)blockDim.x, ng = (width + 3) / 4;
    const bool vec = ce_aligned(z);
    for (int g0 = (int)threadIdx.x; g0 < ng; g0 += CE_BATCH * T) {
        float4 q[CE_BATCH];
#pragma unroll
        for (int u = 0; u < CE_BATCH; u++) {
            int g = g0 + u * T;
            if (g < ng) q[u] = ce_load4(z, 4 * g, width, vec);
        }
#pragma unroll
        for (int u = 0; u < CE_BATCH; u++) {
            int g = g0 + u * T, c = 4 * g;
            if (g >= ng) continue;
            float4 r;
            r.x = ce_grad(q[u].x, c, k, tgt, lse, gs);
            r.y = ce_grad(q[u].y, c + 1, k, tgt, lse, gs);
            r.z = ce_grad(q[u].z, c + 2, k, tgt, lse, gs);
            r.w = ce_grad(q[u].w, c + 3, k, tgt, lse, gs);
            ce_store4(z, c, width, vec, r);
        }
    }
}

// ce_row_grad's values rounded to bf16 (bf16_from_f32, as a GEMM's packing would round them) and written in
// place: column c of the row to the c-th bf16 of the row's own storage, whose first half it overwrites. The
// row goes in windows of CE_BATCH·T groups, all threads through every window (a uniform trip count), loads,
// a barrier, stores: a window's stores land in fp32 columns below half its end, all loaded by then.
static __device__ __forceinline__ void ce_row_grad16(float *z, int width, int tgt, float lse, float gs) {
    const int T = (int)blockDim.x, ng = (width + 3) / 4;
    const bool vec = ce_aligned(z);
    uint16_t *z16 = reinterpret_cast<uint16_t *>(z);
    for (int base = 0; base < ng; base += CE_BATCH * T) {
        float4 q[CE_BATCH];
#pragma unroll
        for (int u = 0; u < CE_BATCH; u++) {
            int g = base + (int)threadIdx.x + u * T;
            if (g < ng) q[u] = ce_load4(z, 4 * g, width, vec);
        }
        __syncthreads();
#pragma unroll
        for (int u = 0; u < CE_BATCH; u++) {
            int g = base + (int)threadIdx.x + u * T, c = 4 * g;
            if (g >= ng) continue;
            float r[4] = {ce_grad(q[u].x, c, width, tgt, lse, gs), ce_grad(q[u].y, c + 1, width, tgt, lse, gs),
                          ce_grad(q[u].z, c + 2, width, tgt, lse, gs), ce_grad(q[u].w, c + 3, width, tgt, lse, gs)};
            if (vec && c + 4 <= width) {
                store_v<4>(z16 + c, r);
            } else {
                for (int e = 0; e < 4 && c + e < width; e++) z16[c + e] = bf16_from_f32(r[e]);
            }
        }
    }
}

// logits [n, v] (grid n, block ce_threads(v)) -> row_loss [n] = lse − z[target]; with train 1 the row
// becomes grad_scale·(softmax − onehot(target)), with train 2 that gradient in bf16 (ce_row_grad16). A
// target outside [0, v) (a bug upstream: the CPU would read out of bounds) gives a NaN loss, which the
// non-finite guards report, and no onehot.
static __global__ void __launch_bounds__(CE_MAX_THREADS)
    ce_rows_kernel(float *logits, const int32_t *targets, float *row_loss, int v, float gs, int train) {
    __shared__ float red[32];
    const int r = (int)blockIdx.x;
    float *z = logits + (size_t)r * v;
    const int tgt = targets[r];
    const bool ok = tgt >= 0 && tgt < v;
    float zt = 0.0f;
    if (threadIdx.x == 0 && ok) zt = z[tgt];   // read before any thread overwrites the row (barriers below)
    float M, S;
    ce_row_stats(z, v, red, &M, &S);
    const float lse = M + logf(S);
    if (threadIdx.x == 0) row_loss[r] = ok ? lse - zt : __int_as_float(0x7FC00000);
    if (train == 1) ce_row_grad(z, v, v, ok ? tgt : -1, lse, gs);
    if (train == 2) ce_row_grad16(z, v, ok ? tgt : -1, lse, gs);   // the gradient in bf16, in place
}

// logits [n, vl], columns v0 .. v0+vl−1 of the vocabulary, the first k of them in the model
// (grid n, block ce_threads(vl)) -> part [n, 3] = (max, Σ exp(z − max), z[target] or 0); (0, 0, target
// or 0) when k = 0, as the CPU.
static __global__ void __launch_bounds__(CE_MAX_THREADS)
    ce_vocab_partial_kernel(float *part, const float *logits, const int32_t *targets, int vl, int k, int v0) {
    __shared__ float red[32];
    const int r = (int)blockIdx.x;
    const float *z = logits + (size_t)r * vl;
    float M = 0.0f, S = 0.0f;
    if (k > 0) ce_row_stats(z, k, red, &M, &S);
    if (threadIdx.x == 0) {
        int local = targets[r] - v0;
        part[3 * (size_t)r] = M;
        part[3 * (size_t)r + 1] = S;
        part[3 * (size_t)r + 2] = local >= 0 && local < k ? z[local] : 0.0f;
    }
}

// parts [t][n][3] (grid ⌈n/128⌉, block 128, a thread per row, the ranks in order as the CPU) ->
// lse [n], row_loss [n]. Products and sums written unfused, so that given the same parts only
// logf's last ulp can differ from the CPU.
static __global__ void ce_vocab_combine_kernel(float *lse, float *row_loss, const float *parts, int t, int n) {
    const int r = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (r >= n) return;
    float m = -INFINITY, target = 0.0f;
    for (int q = 0; q < t; q++) {
        const float *p = parts + ((size_t)q * n + r) * 3;
        if (p[1] > 0.0f && p[0] > m) m = p[0];
        target = __fadd_rn(target, p[2]);
    }
    float sum = 0.0f;
    for (int q = 0; q < t; q++) {
        const float *p = parts + ((size_t)q * n + r) * 3;
        if (p[1] > 0.0f) sum = __fadd_rn(sum, __fmul_rn(p[1], ctron_expf(p[0] - m)));
    }
    const float l = m + logf(sum);
    lse[r] = l;
    row_loss[r] = l - target;
}

// logits [n, vl] (grid n, block ce_threads(vl)) -> grad_scale·(softmax − onehot) over the first k
// columns, 0 over the padded ones.
static __global__ void __launch_bounds__(CE_MAX_THREADS)
    ce_vocab_backward_kernel(float *logits, const float *lse, const int32_t *targets, int vl, int k, int v0,
                             float gs) {
    const int r = (int)blockIdx.x;
    const int local = targets[r] - v0;
    ce_row_grad(logits + (size_t)r * vl, vl, k, local >= 0 && local < k ? local : -1, lse[r], gs);
}

// row_loss [n] (grid 1, block 1024) -> out[0] = Σ in double (add: out[0] += Σ, the deferred loss):
// thread t sums rows t, t+1024, ... in order, then a fixed shuffle tree.
static __global__ void __launch_bounds__(CE_SUM_THREADS)
    ce_sum_rows_kernel(double *out, const float *row_loss, int n, int add) {
    __shared__ double red[32];
    double acc = 0.0;
    for (int i = (int)threadIdx.x; i < n; i += (int)blockDim.x) acc += (double)row_loss[i];
    double total = block_sum_d(acc, red);
    if (threadIdx.x == 0) out[0] = add ? out[0] + total : total;
}

// Σ row_loss[0..n) on the device, read back.
static double ce_sum_rows(Backend *be, const float *row_loss, int n) {
    if (n <= 0) return 0.0;
    cudaStream_t st = cuda_stream(be);
    double *d = (double *)cuda_scratch(be, CUDA_SCRATCH_REDUCE, sizeof(double));
    ce_sum_rows_kernel<<<1, CE_SUM_THREADS, 0, st>>>(d, row_loss, n, 0);
    CUDA_LAUNCHED();
    double *h = (double *)cuda_host_result(be, sizeof(double));
    CUDA_CHECK(cudaMemcpyAsync(h, d, sizeof(double), cudaMemcpyDeviceToHost, st));
    CUDA_QUEUED("memcpy D2H");
    cuda_stream_wait(st);
    return *h;
}

// Columns of the rank that belong to the model (vocab_parallel.c).
static int ce_valid_cols(int vl, int v0, int n_valid) {
    int k = n_valid - v0;
    return k < 0 ? 0 : k < vl ? k : vl;
}

extern "C" double cuda_crossentropy_forward_backward(Backend *be, float *logits, const int32_t *targets,
                                                     float *row_loss, int n, int v, float grad_scale) {
    if (n <= 0) return 0.0;
    ce_rows_kernel<<<(unsigned)n, ce_threads(v), 0, cuda_stream(be)>>>(logits, targets, row_loss, v, grad_scale, 1);
    CUDA_LAUNCHED();
    return ce_sum_rows(be, row_loss, n);
}

extern "C" double cuda_crossentropy_loss(Backend *be, const float *logits, const int32_t *targets, float *row_loss,
                                         int n, int v) {
    if (n <= 0) return 0.0;
    // train = 0: the kernel only reads the logits
    ce_rows_kernel<<<(unsigned)n, ce_threads(v), 0, cuda_stream(be)>>>((float *)logits, targets, row_loss, v, 1.0f, 0);
    CUDA_LAUNCHED();
    return ce_sum_rows(be, row_loss, n);
}

extern "C" void cuda_crossentropy_vocab_partial(Backend *be, float *part, const float *logits,
                                                const int32_t *targets, int n, int vl, int v0, int n_valid) {
    if (n <= 0) return;
    int k = ce_valid_cols(vl, v0, n_valid);
    ce_vocab_partial_kernel<<<(unsigned)n, ce_threads(vl), 0, cuda_stream(be)>>>(part, logits, targets, vl, k, v0);
    CUDA_LAUNCHED();
}

extern "C" double cuda_crossentropy_vocab_combine(Backend *be, float *lse, float *row_loss, const float *parts, int t,
                                                  int n) {
    if (n <= 0) return 0.0;
    ce_vocab_combine_kernel<<<cuda_blocks((size_t)n, 128), 128, 0, cuda_stream(be)>>>(lse, row_loss, parts, t, n);
    CUDA_LAUNCHED();
    return ce_sum_rows(be, row_loss, n);
}

extern "C" void cuda_crossentropy_vocab_backward(Backend *be, float *logits, const float *lse, const int32_t *targets,
                                                 int n, int vl, int v0, int n_valid, float grad_scale) {
    if (n <= 0 || vl <= 0) return;
    int k = ce_valid_cols(vl, v0, n_valid);
    ce_vocab_backward_kernel<<<(unsigned)n, ce_threads(vl), 0, cuda_stream(be)>>>(logits, lse, targets, vl, k, v0,
                                                                                 grad_scale);
    CUDA_LAUNCHED();
}

// ---- the deferred loss: sums kept on the device (CudaImpl.loss_sums), read back by loss_take only
extern "C" void cuda_crossentropy_deferred(Backend *be, float *logits, const int32_t *targets, float *row_loss, int n,
                                           int v, float grad_scale, int train) {
    if (n <= 0) return;
    cudaStream_t st = cuda_stream(be);
    ce_rows_kernel<<<(unsigned)n, ce_threads(v), 0, st>>>(logits, targets, row_loss, v, grad_scale, train ? 1 : 0);
    CUDA_LAUNCHED();
    // the micro-batch's sum += this call's: the tree of ce_sum_rows, the same bits as the returned sum
    ce_sum_rows_kernel<<<1, CE_SUM_THREADS, 0, st>>>(cuda_impl(be)->loss_sums, row_loss, n, 1);
    CUDA_LAUNCHED();
}

// crossentropy_deferred with train, the gradient left in bf16 (backend.h's crossentropy_deferred16): row r's
// at ((uint16_t *)logits)[2·v·r ...], the bits the GEMM's packing of the fp32 gradient would give.
extern "C" void cuda_crossentropy_deferred16(Backend *be, float *logits, const int32_t *targets, float *row_loss, int n,
                                             int v, float grad_scale) {
    if (n <= 0) return;
    cudaStream_t st = cuda_stream(be);
    ce_rows_kernel<<<(unsigned)n, ce_threads(v), 0, st>>>(logits, targets, row_loss, v, grad_scale, 2);
    CUDA_LAUNCHED();
    ce_sum_rows_kernel<<<1, CE_SUM_THREADS, 0, st>>>(cuda_impl(be)->loss_sums, row_loss, n, 1);
    CUDA_LAUNCHED();
}

// sums [2] (one thread): the step's += the micro-batch's, which becomes 0.
static __global__ void loss_end_microbatch_kernel(double *sums) {
    sums[1] += sums[0];
    sums[0] = 0.0;
}

extern "C" void cuda_loss_end_microbatch(Backend *be) {
    loss_end_microbatch_kernel<<<1, 1, 0, cuda_stream(be)>>>(cuda_impl(be)->loss_sums);
    CUDA_LAUNCHED();
}

extern "C" double cuda_loss_take(Backend *be) {
    cudaStream_t st = cuda_stream(be);
    double *sums = cuda_impl(be)->loss_sums, *h = (double *)cuda_host_result(be, sizeof(double));
    CUDA_CHECK(cudaMemcpyAsync(h, sums + 1, sizeof(double), cudaMemcpyDeviceToHost, st));
    CUDA_QUEUED("memcpy D2H");
    CUDA_CHECK(cudaMemsetAsync(sums + 1, 0, sizeof(double), st));
    CUDA_QUEUED("memset");
    cuda_stream_wait(st);
    return *h;
}
