// RMSNorm over the last dimension, forward and backward, the backward also from the output.
// Semantics: backend/cpu/rmsnorm.c (docs/LLAMA-OPS.md): rstd[n] one fp32 per row; the backward
// writes or adds dx (accumulate) and adds this call's column sums into dw.
// - Rows: one block per row, a block reduction over a fixed layout (the CPU sums in SIMD lanes, so
//   y, rstd and dx agree with it to rounding: tests/test_cuda_llama_ops.c states the tolerance).
// - dw: the CPU's bits. Each column is summed over the rows in order from 0, as the CPU does, then
//   added to dw. The products dy·x̂ of a tile of rows are formed by all the block's warps at once;
//   one warp adds them up in row order while the others fetch the next tile. No atomics.
// Products and sums are __fmul_rn / __fadd_rn: the CPU (ISO C) never contracts them into FMAs.
#include <stdint.h>
#include "backend/cuda/cuda_common.cuh"

enum {
    RMS_DW_COLS = CT_WARP,   // columns per block of the dw pass: one warp's lanes
    RMS_DW_WARPS = 8,        // warps forming the products of a tile
    RMS_DW_TILE = 128        // rows per tile (RMS_DW_TILE / RMS_DW_WARPS products per thread)
};

// x[n,h] -> y[n,h] = w·(x·rstd), rstd[n] = 1/sqrt(mean(x²) + eps): one block per row, threads over
// the columns V at a time (V = 4 needs h % 4 == 0 and aligned rows).
template <int V>
static __global__ void rms_forward_kernel(float *y, float *rstd, const float *x, const float *w, float eps, int h,
                                          int round_bf16) {
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const float *xr = x + r * (size_t)h;
    float *yr = y + r * (size_t)h;
    int step = (int)blockDim.x * V;
    float ss = 0.0f;
    for (int c = (int)threadIdx.x * V; c < h; c += step) {
        float v[V];
        load_v<V>(v, xr + c);
#pragma unroll
        for (int j = 0; j < V; j++) ss = fadd(ss, fmul(v[j], v[j]));
    }
    ss = block_sum(ss, red);
    float rs = __fdiv_rn(1.0f, __fsqrt_rn(fadd(__fdiv_rn(ss, (float)h), eps)));
    for (int c = (int)threadIdx.x * V; c < h; c += step) {
        float v[V], wv[V], o[V];
        load_v<V>(v, xr + c);
        load_v<V>(wv, w + c);
#pragma unroll
        for (int j = 0; j < V; j++) {
            float t = fmul(wv[j], fmul(v[j], rs));   // HF's order: x̂ = x·rstd first, then w·x̂
            o[j] = round_bf16 ? bf16_round_f(t) : t;
        }
        store_v<V>(yr + c, o);
    }
    if (threadIdx.x == 0) rstd[r] = rs;
}

// x̂ from the input, x·rstd, or (FROM_OUT) from the output, y / w.
template <bool FROM_OUT>
static __device__ __forceinline__ float rms_xhat(float src, float rs, float wv) {
    return FROM_OUT ? __fdiv_rn(src, wv) : fmul(src, rs);
}

// dy, x (or y) [n,h], rstd -> dx[n,h] = (or +=) rstd·(dy·w − x̂·mean(dy·w·x̂)); from the output the
// mean is taken as mean(dy·y) (no division, as the CPU). One block per row, V columns at a time. XT: the
// source's type, fp32 or the arena's bf16 copy (its values exactly, so the same bits).
template <int V, bool FROM_OUT, typename XT>
static __global__ void rms_backward_rows_kernel(float *dx, int accumulate, const float *dy, const XT *src,
                                                const float *rstd, const float *w, int h) {
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const float *dyr = dy + r * (size_t)h;
    const XT *sr = src + r * (size_t)h;
    float *dxr = dx + r * (size_t)h;
    float rs = rstd[r];
    int step = (int)blockDim.x * V;
    float dot = 0.0f;
    for (int c = (int)threadIdx.x * V; c < h; c += step) {
        float d[V], sv[V], wv[V];
        load_v<V>(d, dyr + c);
        load_v<V>(sv, sr + c);
        if (!FROM_OUT) load_v<V>(wv, w + c);
#pragma unroll
        for (int j = 0; j < V; j++)
            dot = fadd(dot, FROM_OUT ? fmul(d[j], sv[j]) : fmul(fmul(d[j], wv[j]), fmul(sv[j], rs)));
    }
    float m = __fdiv_rn(block_sum(dot, red), (float)h);
    for (int c = (int)threadIdx.x * V; c < h; c += step) {
        float d[V], sv[V], wv[V], o[V] = {};
        load_v<V>(d, dyr + c);
        load_v<V>(sv, sr + c);
        load_v<V>(wv, w + c);
        if (accumulate) load_v<V>(o, dxr + c);
#pragma unroll
        for (int j = 0; j < V; j++) {
            float g = fmul(rs, fsub(fmul(d[j], wv[j]), fmul(rms_xhat<FROM_OUT>(sv[j], rs, wv[j]), m)));
            o[j] = accumulate ? fadd(o[j], g) : g;
        }
        store_v<V>(dxr + c, o);
    }
}

// dw[c] += Σ_r dy[r,c]·x̂[r,c], the rows in order (the CPU's sum, bit for bit). Block: RMS_DW_COLS
// columns (blockIdx.x), RMS_DW_WARPS warps. Per tile of RMS_DW_TILE rows every warp forms the
// products of its rows (warp k: rows k, k + 8, ...) into registers; warp 0 adds up the previous tile
// from shared memory meanwhile; then the registers go to shared memory and one barrier. Two tile
// buffers: a buffer written in iteration t was last read by warp 0 in iteration t − 1.
template <bool FROM_OUT, typename XT>
static __global__ void __launch_bounds__(RMS_DW_WARPS * CT_WARP)
rms_dw_kernel(float *dw, const float *dy, const XT *src, const float *rstd, const float *w, int n, int h) {
    constexpr int PER = RMS_DW_TILE / RMS_DW_WARPS;
    __shared__ float tile[2][RMS_DW_TILE][RMS_DW_COLS];
    int lane = (int)threadIdx.x % CT_WARP, warp = (int)threadIdx.x / CT_WARP;
    int c = (int)blockIdx.x * RMS_DW_COLS + lane;
    bool col = c < h;
    float wc = FROM_OUT && col ? w[c] : 1.0f;
    float acc = 0.0f;   // warp 0's column sums
    int tiles = (n + RMS_DW_TILE - 1) / RMS_DW_TILE;
    for (int t = 0; t <= tiles; t++) {
        float p[PER];
        if (t < tiles) {   // every load of the tile issued before the first product needs one
            float dv[PER], sv[PER], rv[PER];
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int r = t * RMS_DW_TILE + warp + k * RMS_DW_WARPS;
                bool in = col && r < n;
                size_t o = (size_t)r * h + c;
                dv[k] = in ? dy[o] : 0.0f;
                sv[k] = in ? ct_f32(src[o]) : 0.0f;
                rv[k] = !FROM_OUT && in ? rstd[r] : 1.0f;
            }
#pragma unroll
            for (int k = 0; k < PER; k++) p[k] = fmul(dv[k], rms_xhat<FROM_OUT>(sv[k], rv[k], wc));
        }
        if (warp == 0 && t > 0) {
            int r0 = (t - 1) * RMS_DW_TILE, rows = n - r0 < RMS_DW_TILE ? n - r0 : RMS_DW_TILE;
            const float(*b)[RMS_DW_COLS] = tile[(t - 1) & 1];
#pragma unroll 8
            for (int r = 0; r < rows; r++) acc = fadd(acc, b[r][lane]);
        }
        if (t < tiles) {
#pragma unroll
            for (int k = 0; k < PER; k++) tile[t & 1][warp + k * RMS_DW_WARPS][lane] = p[k];
        }
        __syncthreads();
    }
    if (warp == 0 && col) dw[c] = fadd(dw[c], acc);
}

// ---- entries

extern "C" void cuda_rmsnorm_forward(Backend *be, float *y, float *rstd, const float *x, const float *w, float eps,
                                     int n, int h, int round_bf16) {
    if (n <= 0 || h <= 0) return;
    cudaStream_t st = cuda_stream(be);
    if (h % 4 == 0 && aligned16(y) && aligned16(x) && aligned16(w))
        rms_forward_kernel<4><<<(unsigned)n, row_threads_v(h, 4), 0, st>>>(y, rstd, x, w, eps, h, round_bf16);
    else
        rms_forward_kernel<1><<<(unsigned)n, row_threads_v(h, 1), 0, st>>>(y, rstd, x, w, eps, h, round_bf16);
    CUDA_LAUNCHED();
}

// dx by rows, then dw by columns (the CPU's order: dx may alias dy only as the CPU allows it).
template <bool FROM_OUT, typename XT>
static void rms_backward(Backend *be, float *dx, int accumulate, float *dw, const float *dy, const XT *src,
                         const float *rstd, const float *w, int n, int h) {
    if (n <= 0 || h <= 0) return;
    cudaStream_t st = cuda_stream(be);
    if (h % 4 == 0 && aligned16(dx) && aligned16(dy) && aligned_v4(src) && aligned16(w))
        rms_backward_rows_kernel<4, FROM_OUT, XT><<<(unsigned)n, row_threads_v(h, 4), 0, st>>>(dx, accumulate, dy,
                                                                                               src, rstd, w, h);
    else
        rms_backward_rows_kernel<1, FROM_OUT, XT><<<(unsigned)n, row_threads_v(h, 1), 0, st>>>(dx, accumulate, dy,
                                                                                               src, rstd, w, h);
    CUDA_LAUNCHED();
    if (!dw) return;   // a frozen norm (LoRA): no weight gradient
    unsigned blocks = (unsigned)((h + RMS_DW_COLS - 1) / RMS_DW_COLS);
    rms_dw_kernel<FROM_OUT, XT><<<blocks, RMS_DW_WARPS * CT_WARP, 0, st>>>(dw, dy, src, rstd, w, n, h);
    CUDA_LAUNCHED();
}

extern "C" void cuda_rmsnorm_backward(Backend *be, float *dx, int accumulate, float *dw, const float *dy,
                                      const float *x, const float *rstd, const float *w, int n, int h) {
    rms_backward<false>(be, dx, accumulate, dw, dy, x, rstd, w, n, h);
}

// The same from the input's bf16 copy in the arena (backend.h's rmsnorm_backward16).
extern "C" void cuda_rmsnorm_backward16(Backend *be, float *dx, int accumulate, float *dw, const float *dy,
                                        const uint16_t *x, const float *rstd, const float *w, int n, int h) {
    rms_backward<false>(be, dx, accumulate, dw, dy, x, rstd, w, n, h);
}

extern "C" void cuda_rmsnorm_backward_from_output(Backend *be, float *dx, int accumulate, float *dw, const float *dy,
                                                  const float *y, const float *rstd, const float *w, int n, int h) {
    rms_backward<true>(be, dx, accumulate, dw, dy, y, rstd, w, n, h);
}
