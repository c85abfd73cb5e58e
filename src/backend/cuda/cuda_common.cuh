// Device helpers shared by the CUDA kernels. What must match the CPU comes from the CT_HD headers
// the CPU backend compiles too: Philox and the dropout decision (backend/cpu/dropout.h), bf16
// rounding (backend/cpu/bf16.h), exp and tanh (backend/cpu/fastmath.h). Reductions here are
// shuffle trees over a fixed layout: the same inputs give the same bits on every run.
#ifndef CTRON_CUDA_COMMON_CUH
#define CTRON_CUDA_COMMON_CUH
#include <cuda_bf16.h>
#include <stdint.h>
#include "backend/cpu/bf16.h"
#include "backend/cpu/dropout.h"
#include "backend/cpu/fastmath.h"
#include "backend/cuda/cuda_kernels.h"

#define CT_WARP 32

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = CT_WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = CT_WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = CT_WARP / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024), returned to every thread.
// `shared` holds 32 floats. Ends with a barrier, so it may be called again at once.
__device__ __forceinline__ float block_sum(float v, float *shared) {
    int lane = threadIdx.x % CT_WARP, warp = threadIdx.x / CT_WARP, warps = blockDim.x / CT_WARP;
    v = warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float t = lane < warps ? shared[lane] : 0.0f;
    t = warp_sum(t);
    __syncthreads();
    return t;
}
__device__ __forceinline__ double block_sum_d(double v, double *shared) {
    int lane = threadIdx.x % CT_WARP, warp = threadIdx.x / CT_WARP, warps = blockDim.x / CT_WARP;
    v = warp_sum_d(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    double t = lane < warps ? shared[lane] : 0.0;
    t = warp_sum_d(t);
    __syncthreads();
    return t;
}
__device__ __forceinline__ float block_max(float v, float *shared) {
    int lane = threadIdx.x % CT_WARP, warp = threadIdx.x / CT_WARP, warps = blockDim.x / CT_WARP;
    v = warp_max(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float t = lane < warps ? shared[lane] : -INFINITY;
    t = warp_max(t);
    __syncthreads();
    return t;
}

// The value a tensor stored in bf16 goes on with (round to nearest even, as the CPU).
__device__ __forceinline__ float bf16_round_f(float x) { return bf16_to_f32(bf16_from_f32(x)); }

// Grid-stride loop over [0, n).
#define CT_GRID_LOOP(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); i += (size_t)gridDim.x * blockDim.x)

// Blocks for an elementwise launch: enough to fill the GPU, never more than the work needs.
static inline unsigned ct_elementwise_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    if (b > 65535u * 8u) b = 65535u * 8u;
    return (unsigned)(b ? b : 1);
}
#endif
