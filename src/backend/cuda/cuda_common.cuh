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

// The first key query i sees: backend/cpu/attention.h's attention_first_key, which the device cannot
// call. A sliding window of W positions sees keys i − W + 1 .. i; window 0 (or W > i) from key 0.
CT_HD int attn_first_key(int i, int window) { return window > 0 && i >= window ? i - window + 1 : 0; }

// The value a tensor stored in bf16 goes on with (round to nearest even, as the CPU).
__device__ __forceinline__ float bf16_round_f(float x) { return bf16_to_f32(bf16_from_f32(x)); }

// IEEE single-rounded operations that nvcc never contracts into an FMA: the CPU is compiled as ISO
// C11 (no contraction), so elementwise results that must match its bits use these.
__device__ __forceinline__ float fmul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float fadd(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float fsub(float a, float b) { return __fsub_rn(a, b); }

static inline int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
static inline int aligned8(const void *p) { return ((uintptr_t)p & 7u) == 0; }
// Whether 4 elements at p load as one vector (load_v<4>: a float4, or 8 bytes of a bf16 copy).
static inline int aligned_v4(const float *p) { return aligned16(p); }
static inline int aligned_v4(const uint16_t *p) { return aligned8(p); }
// A stored element's value: itself, or a bf16 copy's (exact in fp32).
__device__ __forceinline__ float ct_f32(float x) { return x; }
__device__ __forceinline__ float ct_f32(uint16_t x) { return bf16_to_f32(x); }
// bytes rounded up to 256: the start of the next part of a scratch slot carved in pieces (cudaMalloc's alignment)
static inline size_t ct_round256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Threads for one block per row of h floats read V at a time: a multiple of 32, 32 .. 256.
static inline unsigned row_threads_v(int h, int V) {
    unsigned per = (unsigned)((h / V + 31) / 32 * 32);
    return per < 32 ? 32 : per > 256 ? 256 : per;
}

// V consecutive floats at p (V = 4: one aligned float4 access).
template <int V>
__device__ __forceinline__ void load_v(float (&out)[V], const float *p) {
    if constexpr (V == 4) {
        float4 t = *reinterpret_cast<const float4 *>(p);
        out[0] = t.x; out[1] = t.y; out[2] = t.z; out[3] = t.w;
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) out[j] = p[j];
    }
}
template <int V>
__device__ __forceinline__ void store_v(float *p, const float (&in)[V]) {
    if constexpr (V == 4) {
        *reinterpret_cast<float4 *>(p) = make_float4(in[0], in[1], in[2], in[3]);
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) p[j] = in[j];
    }
}

// V consecutive bf16 values at p, exactly as fp32 (V = 4: one aligned 8-byte access).
template <int V>
__device__ __forceinline__ void load_v(float (&out)[V], const uint16_t *p) {
    if constexpr (V == 4) {
        uint2 t = *reinterpret_cast<const uint2 *>(p);
        out[0] = bf16_to_f32((uint16_t)(t.x & 0xFFFFu)); out[1] = bf16_to_f32((uint16_t)(t.x >> 16));
        out[2] = bf16_to_f32((uint16_t)(t.y & 0xFFFFu)); out[3] = bf16_to_f32((uint16_t)(t.y >> 16));
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) out[j] = bf16_to_f32(p[j]);
    }
}

// V values rounded to bf16 (bf16_from_f32, as the GEMMs' packing) at p (V = 4: one aligned 8-byte access).
template <int V>
__device__ __forceinline__ void store_v(uint16_t *p, const float (&in)[V]) {
    if constexpr (V == 4) {
        uint2 t;
        t.x = (uint32_t)bf16_from_f32(in[0]) | ((uint32_t)bf16_from_f32(in[1]) << 16);
        t.y = (uint32_t)bf16_from_f32(in[2]) | ((uint32_t)bf16_from_f32(in[3]) << 16);
        *reinterpret_cast<uint2 *>(p) = t;
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) p[j] = bf16_from_f32(in[j]);
    }
}

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
