// AdamW, Σ x² and the non-finite count on the GPU, the CPU's semantics (backend/cpu/optim.h).
//
// AdamW is elementwise and written op for op in the CPU's order with __fmul_rn / __fadd_rn /
// __fdiv_rn / __fsqrt_rn: no FMA contraction (the CPU is built -std=c11, which does not contract),
// IEEE division and square root on both sides, so p, m, v and the bf16 copy are the CPU's bits.
//
// The two reductions split [0, n) into groups of four elements (group g = [4g, 4g+4)) and the groups
// into at most RED_BLOCKS consecutive chunks, one block each, whose thread t takes the chunk's groups
// t, t+T, ... in order; the chunk sums land in fixed slots of the scratch and one block adds them in a
// fixed tree. Group, chunk and order depend on n only (float4 loads where x is 16-byte aligned, scalar
// loads where it is not, the same arithmetic), so a call gives the same bits every time, and the same
// bits for the same values at any address. Σ x² is in double as on the CPU (each x² is exact in
// double; only the order of the additions differs from the CPU's 256 chunks, well below 1e-12).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cuda/cuda_common.cuh"

#define ADAMW_THREADS 256
#define RED_THREADS 256
#define RED_BLOCKS 1024      // chunks at most; also the final pass's block size
#define RED_BATCH 4          // groups a thread has in flight

// ---- AdamW
struct AdamWArgs {
    float lr, beta1, beta2, eps, wd, bc1, bc2, gs;
};

// One element, as adamw_step in optim.c; returns the new weight.
static __device__ __forceinline__ float adamw_elem(float &p, float g, float &m, float &v, const AdamWArgs &a) {
    float ge = __fmul_rn(g, a.gs);
    m = __fadd_rn(__fmul_rn(a.beta1, m), __fmul_rn(__fsub_rn(1.0f, a.beta1), ge));
    v = __fadd_rn(__fmul_rn(a.beta2, v), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, a.beta2), ge), ge));
    float mhat = __fdiv_rn(m, a.bc1), vhat = __fdiv_rn(v, a.bc2);
    float step = __fadd_rn(__fdiv_rn(mhat, __fadd_rn(__fsqrt_rn(vhat), a.eps)), __fmul_rn(a.wd, p));
    p = __fsub_rn(p, __fmul_rn(a.lr, step));
    return p;
}
static __device__ __forceinline__ void adamw_one(float *p, uint16_t *w16, const float *g, float *m, float *v,
                                                 size_t e, const AdamWArgs &a) {
    float pe = p[e], me = m[e], ve = v[e];
    float out = adamw_elem(pe, g[e], me, ve, a);
    p[e] = pe;
    m[e] = me;
    v[e] = ve;
    if (w16) w16[e] = bf16_from_f32(out);
}

// Elements e .. e+3, 16-byte aligned in p, g, m, v and 8-byte aligned in w16 (when given).
static __device__ __forceinline__ void adamw_four(float *p, uint16_t *w16, const float *g, float *m, float *v,
                                                  size_t e, const AdamWArgs &a) {
    float4 pp = *reinterpret_cast<float4 *>(p + e);
    float4 gg = *reinterpret_cast<const float4 *>(g + e);
    float4 mm = *reinterpret_cast<float4 *>(m + e);
    float4 vv = *reinterpret_cast<float4 *>(v + e);
    adamw_elem(pp.x, gg.x, mm.x, vv.x, a);
    adamw_elem(pp.y, gg.y, mm.y, vv.y, a);
    adamw_elem(pp.z, gg.z, mm.z, vv.z, a);
    adamw_elem(pp.w, gg.w, mm.w, vv.w, a);
    *reinterpret_cast<float4 *>(p + e) = pp;
    *reinterpret_cast<float4 *>(m + e) = mm;
    *reinterpret_cast<float4 *>(v + e) = vv;
    if (w16) {
        uint2 b;
        b.x = (uint32_t)bf16_from_f32(pp.x) | ((uint32_t)bf16_from_f32(pp.y) << 16);
        b.y = (uint32_t)bf16_from_f32(pp.z) | ((uint32_t)bf16_from_f32(pp.w) << 16);
        *reinterpret_cast<uint2 *>(w16 + e) = b;
    }
}

// p, g, m, v [n] with p+head, g+head, m+head, v+head 16-byte aligned and w16+head (when given) 8-byte
// aligned (grid-stride, ADAMW_THREADS): elements head + 4i .. head + 4i + 3 as float4 for i < n4;
// block 0's threads 0..3 take the head elements and 4..7 the tail after the last float4.
static __global__ void __launch_bounds__(ADAMW_THREADS)
    adamw_vec_kernel(float *p, uint16_t *w16, const float *g, float *m, float *v, size_t n, size_t head, size_t n4,
                     AdamWArgs a) {
    CT_GRID_LOOP(i, n4) adamw_four(p, w16, g, m, v, head + 4 * i, a);
    if (blockIdx.x == 0 && threadIdx.x < 8) {
        size_t j = threadIdx.x;
        size_t e = j < 4 ? j : head + 4 * n4 + (j - 4);
        bool mine = j < 4 ? j < head : e < n;
        if (mine) adamw_one(p, w16, g, m, v, e, a);
    }
}

// p, g, m, v [n] at any alignment (grid-stride, ADAMW_THREADS): one element a thread.
static __global__ void __launch_bounds__(ADAMW_THREADS)
    adamw_scalar_kernel(float *p, uint16_t *w16, const float *g, float *m, float *v, size_t n, AdamWArgs a) {
    CT_GRID_LOOP(e, n) adamw_one(p, w16, g, m, v, e, a);
}

extern "C" void cuda_adamw_update(Backend *be, float *p, uint16_t *w16, const float *g, float *m, float *v, size_t n,
                                  float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                                  float grad_scale) {
    if (!n) return;
    AdamWArgs a = {lr, beta1, beta2, eps, wd, bc1, bc2, grad_scale};
    cudaStream_t st = cuda_stream(be);
    // elements before p's first 16-byte boundary; the float4 path when g, m, v (and w16) line up with p
    size_t head = (size_t)((16u - ((uintptr_t)p & 15u)) & 15u) / sizeof(float);
    if (head > n) head = n;
    bool vec = ((uintptr_t)p & 3u) == 0 && (((uintptr_t)(g + head) | (uintptr_t)(m + head) | (uintptr_t)(v + head)) & 15u) == 0 &&
               (!w16 || ((uintptr_t)(w16 + head) & 7u) == 0);
    if (vec) {
        size_t n4 = (n - head) / 4;
        adamw_vec_kernel<<<ct_elementwise_blocks(n4, ADAMW_THREADS), ADAMW_THREADS, 0, st>>>(p, w16, g, m, v, n, head,
                                                                                             n4, a);
    } else {
        adamw_scalar_kernel<<<ct_elementwise_blocks(n, ADAMW_THREADS), ADAMW_THREADS, 0, st>>>(p, w16, g, m, v, n, a);
    }
    CUDA_LAUNCHED();
}

// ---- the reductions
// Elements [4g, 4g+4) ∩ [0, n) of x; lanes at or past n read as `fill`.
static __device__ __forceinline__ float4 red_load4(const float *x, size_t grp, size_t n, bool vec, float fill) {
    size_t c = 4 * grp;
    if (vec && c + 4 <= n) return *reinterpret_cast<const float4 *>(x + c);
    float4 q;
    q.x = x[c];
    q.y = c + 1 < n ? x[c + 1] : fill;
    q.z = c + 2 < n ? x[c + 2] : fill;
    q.w = c + 3 < n ? x[c + 3] : fill;
    return q;
}

// How [0, n) is cut: groups per chunk (at least RED_THREADS, so that a block's threads all have
// work) and the number of chunks (≤ RED_BLOCKS). A function of n alone.
static void red_plan(size_t n, size_t *per_chunk, unsigned *chunks) {
    size_t groups = (n + 3) / 4;
    size_t per = (groups + RED_BLOCKS - 1) / RED_BLOCKS;
    if (per < RED_THREADS) per = RED_THREADS;
    *per_chunk = per;
    *chunks = (unsigned)((groups + per - 1) / per);
}

static __device__ __forceinline__ double sq_d(float x) { return (double)x * (double)x; }

// x [n] (grid chunks, block RED_THREADS) -> partial[chunk] = Σ x² over the chunk's groups, in double.
static __global__ void __launch_bounds__(RED_THREADS)
    sumsq_chunks_kernel(double *partial, const float *x, size_t n, size_t per) {
    __shared__ double red[32];
    const bool vec = ((uintptr_t)x & 15u) == 0;
    const size_t groups = (n + 3) / 4, g_lo = (size_t)blockIdx.x * per;
    const size_t g_hi = g_lo + per < groups ? g_lo + per : groups;
    const size_t T = blockDim.x;
    double acc = 0.0;
    for (size_t g0 = g_lo + threadIdx.x; g0 < g_hi; g0 += RED_BATCH * T) {
        float4 q[RED_BATCH];
#pragma unroll
        for (int u = 0; u < RED_BATCH; u++)
            if (g0 + u * T < g_hi) q[u] = red_load4(x, g0 + u * T, n, vec, 0.0f);
#pragma unroll
        for (int u = 0; u < RED_BATCH; u++) {
            if (g0 + u * T >= g_hi) continue;
            // lanes past n are 0: adding +0.0 to a sum of squares changes no bit
            acc += sq_d(q[u].x);
            acc += sq_d(q[u].y);
            acc += sq_d(q[u].z);
            acc += sq_d(q[u].w);
        }
    }
    double total = block_sum_d(acc, red);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

static __device__ __forceinline__ unsigned nonfinite(float x) {
    return (__float_as_uint(x) & 0x7F800000u) == 0x7F800000u;   // exponent all ones: ±inf or NaN
}
static __device__ __forceinline__ unsigned long long block_sum_u64(unsigned long long v, unsigned long long *red) {
    int lane = threadIdx.x % CT_WARP, warp = threadIdx.x / CT_WARP, warps = blockDim.x / CT_WARP;
#pragma unroll
    for (int o = CT_WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    unsigned long long t = lane < warps ? red[lane] : 0ull;
#pragma unroll
    for (int o = CT_WARP / 2; o > 0; o /= 2) t += __shfl_xor_sync(0xFFFFFFFFu, t, o);
    __syncthreads();
    return t;
}

// x [n] (grid chunks, block RED_THREADS) -> partial[chunk] = how many of the chunk's elements are ±inf
// or NaN.
static __global__ void __launch_bounds__(RED_THREADS)
    nonfinite_chunks_kernel(unsigned long long *partial, const float *x, size_t n, size_t per) {
    __shared__ unsigned long long red[32];
    const bool vec = ((uintptr_t)x & 15u) == 0;
    const size_t groups = (n + 3) / 4, g_lo = (size_t)blockIdx.x * per;
    const size_t g_hi = g_lo + per < groups ? g_lo + per : groups;
    const size_t T = blockDim.x;
    unsigned long long bad = 0;
    for (size_t g0 = g_lo + threadIdx.x; g0 < g_hi; g0 += RED_BATCH * T) {
        float4 q[RED_BATCH];
#pragma unroll
        for (int u = 0; u < RED_BATCH; u++)
            if (g0 + u * T < g_hi) q[u] = red_load4(x, g0 + u * T, n, vec, 0.0f);
#pragma unroll
        for (int u = 0; u < RED_BATCH; u++) {
            if (g0 + u * T >= g_hi) continue;
            bad += nonfinite(q[u].x) + nonfinite(q[u].y) + nonfinite(q[u].z) + nonfinite(q[u].w);
        }
    }
    unsigned long long total = block_sum_u64(bad, red);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// partial [chunks] (grid 1, block RED_BLOCKS) -> out[0] = Σ: thread t holds chunk t, then a fixed tree.
static __global__ void __launch_bounds__(RED_BLOCKS) sumsq_final_kernel(double *out, const double *partial, unsigned chunks) {
    __shared__ double red[32];
    double v = threadIdx.x < chunks ? partial[threadIdx.x] : 0.0;
    double total = block_sum_d(v, red);
    if (threadIdx.x == 0) out[0] = total;
}
static __global__ void __launch_bounds__(RED_BLOCKS)
    nonfinite_final_kernel(unsigned long long *out, const unsigned long long *partial, unsigned chunks) {
    __shared__ unsigned long long red[32];
    unsigned long long v = threadIdx.x < chunks ? partial[threadIdx.x] : 0ull;
    unsigned long long total = block_sum_u64(v, red);
    if (threadIdx.x == 0) out[0] = total;
}

// scratch: [0] the result, [1 .. chunks] the chunk partials (8 bytes each)
extern "C" double cuda_sum_squares(Backend *be, const float *x, size_t n) {
    if (!n) return 0.0;
    size_t per;
    unsigned chunks;
    red_plan(n, &per, &chunks);
    cudaStream_t st = cuda_stream(be);
    double *d = (double *)cuda_scratch(be, CUDA_SCRATCH_REDUCE, (1 + (size_t)RED_BLOCKS) * sizeof(double));
    sumsq_chunks_kernel<<<chunks, RED_THREADS, 0, st>>>(d + 1, x, n, per);
    CUDA_LAUNCHED();
    sumsq_final_kernel<<<1, RED_BLOCKS, 0, st>>>(d, d + 1, chunks);
    CUDA_LAUNCHED();
    double *h = (double *)cuda_host_result(be, sizeof(double));
    CUDA_CHECK(cudaMemcpyAsync(h, d, sizeof(double), cudaMemcpyDeviceToHost, st));
    CUDA_QUEUED("memcpy D2H");
    cuda_stream_wait(st);
    return *h;
}

// ---- the step's guard (backend.h's step_guard): Σ g² as cuda_sum_squares sums it, then one thread
// derives the clipping factor and the verdict from it and the step's loss sum, so that AdamW reads them
// on the device and the host reads them back once, at the step's end.
// guard [1] (grid 1, block 1): backend_clip_scale's expression in double, the same IEEE operations.
static __global__ void step_guard_kernel(CudaStepGuard *guard, const double *loss_step, float max_norm) {
    const double norm = sqrt(guard->sumsq);
    guard->scale = max_norm <= 0.0f || !(norm > max_norm) ? 1.0f : (float)(max_norm / (norm + 1e-6));
    guard->skip = !isfinite(*loss_step) || !isfinite(norm);
}

extern "C" void cuda_step_guard(Backend *be, const float *g, size_t n, float max_norm) {
    cudaStream_t st = cuda_stream(be);
    CudaImpl *c = cuda_impl(be);
    if (n) {
        size_t per;
        unsigned chunks;
        red_plan(n, &per, &chunks);
        double *d = (double *)cuda_scratch(be, CUDA_SCRATCH_REDUCE, (1 + (size_t)RED_BLOCKS) * sizeof(double));
        sumsq_chunks_kernel<<<chunks, RED_THREADS, 0, st>>>(d + 1, g, n, per);
        CUDA_LAUNCHED();
        sumsq_final_kernel<<<1, RED_BLOCKS, 0, st>>>(&c->guard->sumsq, d + 1, chunks);
        CUDA_LAUNCHED();
    } else {
        CUDA_CHECK(cudaMemsetAsync(&c->guard->sumsq, 0, sizeof(double), st));
        CUDA_QUEUED("memset");
    }
    step_guard_kernel<<<1, 1, 0, st>>>(c->guard, c->loss_sums + 1, max_norm);
    CUDA_LAUNCHED();
}

// The step's one wait: the loss sum (then 0, as cuda_loss_take) and Σ g², into pinned memory.
extern "C" void cuda_step_take(Backend *be, double *loss_sum, double *sumsq) {
    cudaStream_t st = cuda_stream(be);
    CudaImpl *c = cuda_impl(be);
    double *h = (double *)cuda_host_result(be, 2 * sizeof(double));
    CUDA_CHECK(cudaMemcpyAsync(h, c->loss_sums + 1, sizeof(double), cudaMemcpyDeviceToHost, st));
    CUDA_QUEUED("memcpy D2H");
    CUDA_CHECK(cudaMemcpyAsync(h + 1, &c->guard->sumsq, sizeof(double), cudaMemcpyDeviceToHost, st));
    CUDA_QUEUED("memcpy D2H");
    CUDA_CHECK(cudaMemsetAsync(c->loss_sums + 1, 0, sizeof(double), st));
    CUDA_QUEUED("memset");
    cuda_stream_wait(st);
    *loss_sum = h[0];
    *sumsq = h[1];
}

extern "C" size_t cuda_count_nonfinite(Backend *be, const float *x, size_t n) {
    if (!n) return 0;
    size_t per;
    unsigned chunks;
    red_plan(n, &per, &chunks);
    cudaStream_t st = cuda_stream(be);
    unsigned long long *d =
        (unsigned long long *)cuda_scratch(be, CUDA_SCRATCH_REDUCE, (1 + (size_t)RED_BLOCKS) * sizeof(unsigned long long));
    nonfinite_chunks_kernel<<<chunks, RED_THREADS, 0, st>>>(d + 1, x, n, per);
    CUDA_LAUNCHED();
    nonfinite_final_kernel<<<1, RED_BLOCKS, 0, st>>>(d, d + 1, chunks);
    CUDA_LAUNCHED();
    unsigned long long *h = (unsigned long long *)cuda_host_result(be, sizeof(unsigned long long));
    CUDA_CHECK(cudaMemcpyAsync(h, d, sizeof(unsigned long long), cudaMemcpyDeviceToHost, st));
    CUDA_QUEUED("memcpy D2H");
    cuda_stream_wait(st);
    return (size_t)*h;
}

// ---- many tensors at once (apex's multi_tensor_apply, in a fixed layout)
// A list of tensors is cut into chunks of MT_CHUNK elements (a tensor's last chunk shorter), one block
// each, listed in a table on the device: [the tensors][the chunks]. The table of a training step is
// the same every step, so cuda_upload_table uploads it once; a step then costs one launch for AdamW and two
// launches and one read-back for the statistics, whatever the number of tensors.
#define MT_CHUNK ((size_t)1 << 16)   // a multiple of 4: a chunk starts at the tensor's own alignment
#define MT_THREADS 256

// Table entries have no padding: cuda_upload_table compares their bytes.
struct MtChunk {
    size_t tensor, off, len;
};
struct MtSlice {   // AdamWSlice, padded explicitly
    float *p;
    uint16_t *w16;
    const float *g;
    float *m, *v;
    size_t n;
    float wd, zero;
};

// Chunks of the tensors n[0..count) into `chunks` (NULL: count them only); first[i] (when given) the
// index of tensor i's first chunk, first[count] the total.
static size_t mt_cut(const size_t *n, size_t stride, int count, MtChunk *chunks, unsigned *first) {
    size_t k = 0;
    for (int i = 0; i < count; i++) {
        size_t len = *(const size_t *)((const char *)n + (size_t)i * stride);
        if (first) first[i] = (unsigned)k;
        for (size_t off = 0; off < len; off += MT_CHUNK, k++)
            if (chunks) chunks[k] = MtChunk{(size_t)i, off, len - off < MT_CHUNK ? len - off : MT_CHUNK};
    }
    if (first) first[count] = (unsigned)k;
    return k;
}

// The chunk `blockIdx.x` of the table (slices, then chunks) with the shared arguments; each element as
// adamw_update's kernels do it (adamw_elem), float4 where p, g, m, v line up, so the bits are theirs.
static __device__ __forceinline__ void adamw_multi_chunk(const MtSlice *slices, const MtChunk *chunks, AdamWArgs a) {
    const MtChunk c = chunks[blockIdx.x];
    const MtSlice t = slices[c.tensor];
    a.wd = t.wd;
    float *p = t.p + c.off, *m = t.m + c.off, *v = t.v + c.off;
    const float *g = t.g + c.off;
    uint16_t *w16 = t.w16 ? t.w16 + c.off : NULL;
    const size_t n = c.len;
    size_t head = (size_t)((16u - ((uintptr_t)p & 15u)) & 15u) / sizeof(float);
    if (head > n) head = n;
    const bool vec = ((uintptr_t)p & 3u) == 0 &&
                     (((uintptr_t)(g + head) | (uintptr_t)(m + head) | (uintptr_t)(v + head)) & 15u) == 0 &&
                     (!w16 || ((uintptr_t)(w16 + head) & 7u) == 0);
    if (!vec) {
        for (size_t e = threadIdx.x; e < n; e += blockDim.x) adamw_one(p, w16, g, m, v, e, a);
        return;
    }
    const size_t n4 = (n - head) / 4;
    for (size_t i = threadIdx.x; i < n4; i += blockDim.x) adamw_four(p, w16, g, m, v, head + 4 * i, a);
    if (threadIdx.x < head) adamw_one(p, w16, g, m, v, threadIdx.x, a);
    for (size_t e = head + 4 * n4 + threadIdx.x; e < n; e += blockDim.x) adamw_one(p, w16, g, m, v, e, a);
}
static __global__ void __launch_bounds__(MT_THREADS)
    adamw_multi_kernel(const MtSlice *slices, const MtChunk *chunks, AdamWArgs a) {
    adamw_multi_chunk(slices, chunks, a);
}
// The same with the step guard's factor, or nothing where it skips the step.
static __global__ void __launch_bounds__(MT_THREADS)
    adamw_guarded_kernel(const MtSlice *slices, const MtChunk *chunks, AdamWArgs a, const CudaStepGuard *guard) {
    if (guard->skip) return;
    a.gs = guard->scale;
    adamw_multi_chunk(slices, chunks, a);
}

// The device table of the slices and their chunks (uploaded when it changes); *chunks: how many.
static const char *adamw_table(Backend *be, const AdamWSlice *slices, int count, size_t *chunks, size_t *tab) {
    *chunks = mt_cut(&slices[0].n, sizeof(AdamWSlice), count, NULL, NULL);
    *tab = (size_t)count * sizeof(MtSlice);
    if (!*chunks) return NULL;
    size_t bytes = *tab + *chunks * sizeof(MtChunk);
    char *host = (char *)malloc(bytes);
    if (!host) cuda_fail("adamw_update_multi", "cannot allocate the host table", __FILE__, __LINE__);
    for (int i = 0; i < count; i++) {
        const AdamWSlice *s = &slices[i];
        ((MtSlice *)host)[i] = MtSlice{s->p, s->w16, s->g, s->m, s->v, s->n, s->wd, 0.0f};
    }
    mt_cut(&slices[0].n, sizeof(AdamWSlice), count, (MtChunk *)(host + *tab), NULL);
    const char *dev = (const char *)cuda_upload_table(be, CUDA_TABLE_ADAMW, host, bytes);
    free(host);
    return dev;
}

extern "C" void cuda_adamw_update_guarded(Backend *be, const AdamWSlice *slices, int count, float lr, float beta1,
                                          float beta2, float eps, float bc1, float bc2) {
    if (count <= 0) return;
    size_t chunks, tab;
    const char *dev = adamw_table(be, slices, count, &chunks, &tab);
    if (!dev) return;
    AdamWArgs a = {lr, beta1, beta2, eps, 0.0f, bc1, bc2, 1.0f};
    adamw_guarded_kernel<<<(unsigned)chunks, MT_THREADS, 0, cuda_stream(be)>>>(
        (const MtSlice *)dev, (const MtChunk *)(dev + tab), a, cuda_impl(be)->guard);
    CUDA_LAUNCHED();
}

extern "C" void cuda_adamw_update_multi(Backend *be, const AdamWSlice *slices, int count, float lr, float beta1,
                                        float beta2, float eps, float bc1, float bc2, float grad_scale) {
    if (count <= 0) return;
    size_t chunks, tab;
    const char *dev = adamw_table(be, slices, count, &chunks, &tab);
    if (!dev) return;
    AdamWArgs a = {lr, beta1, beta2, eps, 0.0f, bc1, bc2, grad_scale};
    adamw_multi_kernel<<<(unsigned)chunks, MT_THREADS, 0, cuda_stream(be)>>>((const MtSlice *)dev,
                                                                            (const MtChunk *)(dev + tab), a);
    CUDA_LAUNCHED();
}

// A range of the statistics' table: its data and its chunks [first, first + chunks).
struct MtRange {
    const float *x;
    size_t n;
    unsigned first, chunks;
};

// Chunk blockIdx.x (block MT_THREADS) -> sq[chunk] = Σ x² in double, bad[chunk] = its non-finite count.
// Groups of four as sumsq_chunks_kernel, thread t taking groups t, t+T, ... of its chunk in order.
static __global__ void __launch_bounds__(MT_THREADS)
    stats_chunks_kernel(double *sq, unsigned long long *bad, const MtRange *ranges, const MtChunk *chunks) {
    __shared__ double red_d[32];
    __shared__ unsigned long long red_u[32];
    const MtChunk c = chunks[blockIdx.x];
    const float *x = ranges[c.tensor].x + c.off;
    const size_t n = c.len, groups = (n + 3) / 4;
    const bool vec = ((uintptr_t)x & 15u) == 0;
    double acc = 0.0;
    unsigned long long nb = 0;
    for (size_t grp = threadIdx.x; grp < groups; grp += blockDim.x) {
        float4 q = red_load4(x, grp, n, vec, 0.0f);   // lanes past n are +0: they change neither result
        acc += sq_d(q.x);
        acc += sq_d(q.y);
        acc += sq_d(q.z);
        acc += sq_d(q.w);
        nb += nonfinite(q.x) + nonfinite(q.y) + nonfinite(q.z) + nonfinite(q.w);
    }
    double s = block_sum_d(acc, red_d);
    unsigned long long b = block_sum_u64(nb, red_u);
    if (threadIdx.x == 0) {
        sq[blockIdx.x] = s;
        bad[blockIdx.x] = b;
    }
}

// Range blockIdx.x (block MT_THREADS) -> out_sq / out_bad [range]: its chunks' partials, thread t
// taking chunks t, t+T, ... in order, then a fixed tree.
static __global__ void __launch_bounds__(MT_THREADS)
    stats_ranges_kernel(double *out_sq, unsigned long long *out_bad, const double *sq, const unsigned long long *bad,
                        const MtRange *ranges) {
    __shared__ double red_d[32];
    __shared__ unsigned long long red_u[32];
    const MtRange r = ranges[blockIdx.x];
    double acc = 0.0;
    unsigned long long nb = 0;
    for (unsigned k = threadIdx.x; k < r.chunks; k += blockDim.x) {
        acc += sq[r.first + k];
        nb += bad[r.first + k];
    }
    double s = block_sum_d(acc, red_d);
    unsigned long long b = block_sum_u64(nb, red_u);
    if (threadIdx.x == 0) {
        out_sq[blockIdx.x] = s;
        out_bad[blockIdx.x] = b;
    }
}

// scratch: [count] sums, [count] counts, then [chunks] partial sums and [chunks] partial counts (8
// bytes each); one copy back of the first 16·count bytes.
extern "C" void cuda_tensor_stats_multi(Backend *be, const float *const *x, const size_t *n, int count,
                                        double *sumsq, size_t *nonfinite) {
    if (count <= 0) return;
    size_t chunks = mt_cut(n, sizeof(size_t), count, NULL, NULL);
    size_t tab = (size_t)count * sizeof(MtRange), bytes = tab + (chunks ? chunks : 1) * sizeof(MtChunk);
    char *host = (char *)calloc(1, bytes);
    unsigned *first = (unsigned *)malloc(((size_t)count + 1) * sizeof(unsigned));
    if (!host || !first) cuda_fail("tensor_stats_multi", "cannot allocate the host table", __FILE__, __LINE__);
    mt_cut(n, sizeof(size_t), count, (MtChunk *)(host + tab), first);
    MtRange *ranges = (MtRange *)host;
    for (int i = 0; i < count; i++) ranges[i] = MtRange{x[i], n[i], first[i], first[i + 1] - first[i]};
    free(first);
    cudaStream_t st = cuda_stream(be);
    const char *dev = (const char *)cuda_upload_table(be, CUDA_TABLE_STATS, host, bytes);
    free(host);
    size_t out_bytes = 2 * (size_t)count * 8;
    char *d = (char *)cuda_scratch(be, CUDA_SCRATCH_REDUCE, out_bytes + 2 * (chunks ? chunks : 1) * 8);
    double *out_sq = (double *)d, *part_sq = (double *)(d + out_bytes);
    unsigned long long *out_bad = (unsigned long long *)(d + (size_t)count * 8);
    unsigned long long *part_bad = (unsigned long long *)(d + out_bytes + chunks * 8);
    if (chunks) {
        stats_chunks_kernel<<<(unsigned)chunks, MT_THREADS, 0, st>>>(part_sq, part_bad, (const MtRange *)dev,
                                                                     (const MtChunk *)(dev + tab));
        CUDA_LAUNCHED();
    }
    stats_ranges_kernel<<<(unsigned)count, MT_THREADS, 0, st>>>(out_sq, out_bad, part_sq, part_bad,
                                                                (const MtRange *)dev);
    CUDA_LAUNCHED();
    char *h = (char *)cuda_host_result(be, out_bytes);
    CUDA_CHECK(cudaMemcpyAsync(h, d, out_bytes, cudaMemcpyDeviceToHost, st));
    CUDA_QUEUED("memcpy D2H");
    cuda_stream_wait(st);
    for (int i = 0; i < count; i++) {
        if (sumsq) sumsq[i] = ((const double *)h)[i];
        if (nonfinite) nonfinite[i] = (size_t)((const unsigned long long *)(h + (size_t)count * 8))[i];
    }
}
