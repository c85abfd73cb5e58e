// SwiGLU, y = silu(gate) ⊙ up, forward and backward (which recomputes σ and silu from gate and may
// write y again). Semantics: backend/cpu/swiglu.c (docs/LLAMA-OPS.md). Every element goes through the
// shared CT_HD swiglu_silu / swiglu_backward_elem (ctron_expf inside), so every output is the CPU's
// bit for bit; the one product outside them is __fmul_rn.
#include <stdint.h>
#include "backend/cpu/swiglu.h"
#include "backend/cuda/cuda_common.cuh"

enum { SWIGLU_THREADS = 256 };

// gate, up [n, f] (row stride ld) -> y [n, f]; round_bf16: gate and up rounded first, into gr, ur (row stride
// ldr: in place over fp32 gate and up, or their bf16 copies), y too. Thread: V consecutive columns
// (blockIdx.x); rows over blockIdx.y, grid-strided. TI, TY: fp32, or bf16 (the kept copies of gate and up,
// read exactly; y rounded as the GEMMs' packing rounds it).
template <int V, typename TI, typename TY, typename TR = float>
static __global__ void swiglu_forward_kernel(TY *y, const TI *gate, const TI *up, int ld, int n, int f, int round_bf16,
                                             TR *gr, TR *ur, int ldr) {
    int c = (int)(blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (c >= f) return;
    for (int r = (int)blockIdx.y; r < n; r += (int)gridDim.y) {
        size_t o = (size_t)r * ld + c;
        float g[V], u[V], out[V];
        load_v<V>(g, gate + o);
        load_v<V>(u, up + o);
        bool rounded = false;
        if constexpr (sizeof(TI) == sizeof(float)) {   // fp32 gate and up: rounded when asked
            if (round_bf16) {
#pragma unroll
                for (int k = 0; k < V; k++) {
                    g[k] = bf16_round_f(g[k]);
                    u[k] = bf16_round_f(u[k]);
                    out[k] = bf16_round_f(fmul(swiglu_silu(g[k]), u[k]));
                }
                store_v<V>(gr + (size_t)r * ldr + c, g);   // exact into bf16: already rounded
                store_v<V>(ur + (size_t)r * ldr + c, u);
                rounded = true;
            }
        }
        if (!rounded) {
#pragma unroll
            for (int k = 0; k < V; k++) out[k] = fmul(swiglu_silu(g[k]), u[k]);
        }
        store_v<V>(y + (size_t)r * f + c, out);
    }
}

// dy [n, f], gate, up (stride ld) -> dgate, dup (stride ldd; may alias gate, up: each element is read
// before it is written, by the same thread) and, when y is not NULL, y = silu(gate)·up again. TI: fp32, or
// bf16 (the kept copies, read exactly).
template <int V, typename TI, typename TG = float>
static __global__ void swiglu_backward_kernel(TG *dgate, TG *dup, int ldd, float *y, const float *dy,
                                              const TI *gate, const TI *up, int ld, int n, int f, int round_bf16) {
    int c = (int)(blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (c >= f) return;
    for (int r = (int)blockIdx.y; r < n; r += (int)gridDim.y) {
        size_t o = (size_t)r * ld + c, od = (size_t)r * ldd + c, oy = (size_t)r * f + c;
        float d[V], g[V], u[V], dg[V], du[V], out[V];
        load_v<V>(d, dy + oy);
        load_v<V>(g, gate + o);
        load_v<V>(u, up + o);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float si = swiglu_backward_elem(d[k], g[k], u[k], &dg[k], &du[k]);
            float t = fmul(si, u[k]);
            out[k] = round_bf16 ? bf16_round_f(t) : t;
        }
        store_v<V>(dgate + od, dg);
        store_v<V>(dup + od, du);
        if (y) store_v<V>(y + oy, out);
    }
}

// Blocks over the columns (V at a time) by rows, at most 65535 rows a grid (the rest grid-strided).
static dim3 swiglu_grid(int n, int f, int V, unsigned *threads) {
    int items = (f + V - 1) / V;
    *threads = items >= SWIGLU_THREADS ? (unsigned)SWIGLU_THREADS : (unsigned)((items + 31) / 32 * 32);
    return dim3(cuda_blocks((size_t)items, *threads), (unsigned)(n < 65535 ? n : 65535));
}

// One launch of each kernel over [n, f], V = 4 where vec (every row and pointer aligned for it), else 1.
template <typename TI, typename TY, typename TR = float>
static void forward_launch(Backend *be, bool vec, TY *y, const TI *gate, const TI *up, int ld, int n, int f,
                           int round_bf16, TR *gr = NULL, TR *ur = NULL, int ldr = 0) {
    unsigned threads;
    dim3 grid = swiglu_grid(n, f, vec ? 4 : 1, &threads);
    cudaStream_t st = cuda_stream(be);
    if (vec)
        swiglu_forward_kernel<4, TI, TY, TR><<<grid, threads, 0, st>>>(y, gate, up, ld, n, f, round_bf16, gr, ur, ldr);
    else
        swiglu_forward_kernel<1, TI, TY, TR><<<grid, threads, 0, st>>>(y, gate, up, ld, n, f, round_bf16, gr, ur, ldr);
    CUDA_LAUNCHED();
}
template <typename TI, typename TG>
static void backward_launch(Backend *be, bool vec, TG *dgate, TG *dup, int ldd, float *y, const float *dy,
                            const TI *gate, const TI *up, int ld, int n, int f, int round_bf16) {
    unsigned threads;
    dim3 grid = swiglu_grid(n, f, vec ? 4 : 1, &threads);
    cudaStream_t st = cuda_stream(be);
    if (vec)
        swiglu_backward_kernel<4, TI, TG><<<grid, threads, 0, st>>>(dgate, dup, ldd, y, dy, gate, up, ld, n, f,
                                                                    round_bf16);
    else
        swiglu_backward_kernel<1, TI, TG><<<grid, threads, 0, st>>>(dgate, dup, ldd, y, dy, gate, up, ld, n, f,
                                                                    round_bf16);
    CUDA_LAUNCHED();
}

// ---- entries

extern "C" void cuda_swiglu_forward(Backend *be, float *y, float *gate, float *up, int ld, int n, int f,
                                    int round_bf16) {
    if (n <= 0 || f <= 0) return;
    bool vec = f % 4 == 0 && ld % 4 == 0 && aligned16(y) && aligned16(gate) && aligned16(up);
    forward_launch(be, vec, y, (const float *)gate, (const float *)up, ld, n, f, round_bf16, gate, up, ld);
}

extern "C" void cuda_swiglu_backward(Backend *be, float *dgate, float *dup, int ldd, float *y, const float *dy,
                                     const float *gate, const float *up, int ld, int n, int f, int round_bf16) {
    if (n <= 0 || f <= 0) return;
    bool vec = f % 4 == 0 && ld % 4 == 0 && ldd % 4 == 0 && aligned16(dgate) && aligned16(dup) && aligned16(dy) &&
               aligned16(gate) && aligned16(up) && (!y || aligned16(y));
    backward_launch(be, vec, dgate, dup, ldd, y, dy, gate, up, ld, n, f, round_bf16);
}

// On the kept bf16 copies of gate and up (backend.h's swiglu_forward16 / _backward16): y into y16 [n, f] as the
// GEMMs' packing would round swiglu_forward's fp32 y; the gradients as swiglu_backward's on the unpacked values.
extern "C" void cuda_swiglu_forward16(Backend *be, uint16_t *y16, const uint16_t *gate, const uint16_t *up, int ld,
                                      int n, int f) {
    if (n <= 0 || f <= 0) return;
    bool vec = f % 4 == 0 && ld % 4 == 0 && aligned8(y16) && aligned8(gate) && aligned8(up);
    forward_launch(be, vec, y16, gate, up, ld, n, f, 0);
}

// The same from the fp32 gate and up, writing their copies too (backend.h's swiglu_forward_pack16).
extern "C" void cuda_swiglu_forward_pack16(Backend *be, uint16_t *y16, uint16_t *gate16, uint16_t *up16,
                                           const float *gate, const float *up, int ld, int n, int f) {
    if (n <= 0 || f <= 0) return;
    bool vec = f % 4 == 0 && ld % 4 == 0 && aligned8(y16) && aligned8(gate16) && aligned8(up16) && aligned16(gate) &&
               aligned16(up);
    forward_launch(be, vec, y16, gate, up, ld, n, f, 1, gate16, up16, f);
}

// grad16: dgate and dup written as bf16 (uint16_t, row stride ldd elements), rounded as a GEMM's packing rounds
// the fp32 gradients; else fp32.
extern "C" void cuda_swiglu_backward16(Backend *be, void *dgate, void *dup, int ldd, int grad16, const float *dy,
                                       const uint16_t *gate, const uint16_t *up, int ld, int n, int f) {
    if (n <= 0 || f <= 0) return;
    bool vec = f % 4 == 0 && ld % 4 == 0 && ldd % 4 == 0 && aligned16(dgate) && aligned16(dup) && aligned16(dy) &&
               aligned8(gate) && aligned8(up);
    if (grad16)
        backward_launch(be, vec, (uint16_t *)dgate, (uint16_t *)dup, ldd, NULL, dy, gate, up, ld, n, f, 0);
    else
        backward_launch(be, vec, (float *)dgate, (float *)dup, ldd, NULL, dy, gate, up, ld, n, f, 0);
}
