// Rotary position embeddings, Hugging Face's half-split pairing (dimension j with j + d/2), forward
// and backward (the rotation by −a). Semantics: backend/cpu/rope.c (docs/LLAMA-OPS.md). cos and sin
// come from the rope_table the caller copied to the device and the rotation is the shared CT_HD
// rope_rotate (explicit fmaf), so every output is the CPU's bit for bit; nothing here evaluates a
// cosine. Positions are checked on the host before the launch (pos0 + (rows − 1)/b is known there).
#include <stdint.h>
#include "backend/cpu/rope.h"
#include "backend/cuda/cuda_common.cuh"

enum { ROPE_THREADS = 256 };

// x[rows, heads·d] (row stride ld) -> y (may be x). Thread: V consecutive pairs j .. j+V−1 of one head
// (blockIdx.x, threadIdx.x over heads·(rot/2)/V items); rows over blockIdx.y, grid-strided. sign +1:
// the forward; −1: the backward (the CPU passes sign·sin too). The first rot dims of a head rotate (the
// table's rows are rot wide); rope_pass_kernel copies the rest.
template <int V>
static __global__ void rope_kernel(float *y, const float *x, int ld, const float *cs, int rows, int b, int heads,
                                   int d, int rot, int pos0, float sign, int round_bf16) {
    int half = rot / 2, per_head = half / V;
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= heads * per_head) return;
    int hd = i / per_head, j = (i - hd * per_head) * V;
    for (int r = (int)blockIdx.y; r < rows; r += (int)gridDim.y) {
        const float *cr = cs + (size_t)(pos0 + r / b) * rot + j;
        size_t o = (size_t)r * ld + (size_t)hd * d + j;
        float c[V], s[V], x0[V], x1[V], y0[V], y1[V];
        load_v<V>(c, cr);
        load_v<V>(s, cr + half);
        load_v<V>(x0, x + o);
        load_v<V>(x1, x + o + half);
#pragma unroll
        for (int k = 0; k < V; k++) {
            rope_rotate(x0[k], x1[k], c[k], fmul(sign, s[k]), &y0[k], &y1[k]);
            if (round_bf16) {
                y0[k] = bf16_round_f(y0[k]);
                y1[k] = bf16_round_f(y1[k]);
            }
        }
        store_v<V>(y + o, y0);
        store_v<V>(y + o + half, y1);
    }
}

// Partial rotary's dims rot .. d−1 of each head: copied (rounded to bf16 when asked), as the CPU's pass_through.
static __global__ void rope_pass_kernel(float *y, const float *x, int ld, int rows, int heads, int d, int rot,
                                        int round_bf16) {
    int n = d - rot, i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= heads * n) return;
    size_t c = (size_t)(i / n) * d + rot + i % n;
    for (int r = (int)blockIdx.y; r < rows; r += (int)gridDim.y) {
        float v = x[(size_t)r * ld + c];
        y[(size_t)r * ld + c] = round_bf16 ? bf16_round_f(v) : v;
    }
}

static void rope_launch(Backend *be, const char *op, float *y, const float *x, int ld, const float *cs,
                        int positions, int rows, int b, int heads, int d, int rot, int pos0, float sign,
                        int round_bf16) {
    rope_check_positions(op, positions, rows, b, d, rot, pos0);
    if (rows <= 0 || heads <= 0) return;
    int half = rot / 2;
    // V = 4: float4 loads of x, y and the table (rot/2, d, ld multiples of 4 and the bases aligned)
    bool vec = half % 4 == 0 && d % 4 == 0 && ld % 4 == 0 && aligned16(y) && aligned16(x) && aligned16(cs);
    int items = heads * (vec ? half / 4 : half);
    unsigned threads = items >= ROPE_THREADS ? (unsigned)ROPE_THREADS : (unsigned)((items + 31) / 32 * 32);
    dim3 grid(cuda_blocks((size_t)items, threads), (unsigned)(rows < 65535 ? rows : 65535));
    cudaStream_t st = cuda_stream(be);
    if (vec)
        rope_kernel<4><<<grid, threads, 0, st>>>(y, x, ld, cs, rows, b, heads, d, rot, pos0, sign, round_bf16);
    else
        rope_kernel<1><<<grid, threads, 0, st>>>(y, x, ld, cs, rows, b, heads, d, rot, pos0, sign, round_bf16);
    CUDA_LAUNCHED();
    if (rot < d && (y != x || round_bf16)) {
        int pass = heads * (d - rot);
        unsigned pt = pass >= ROPE_THREADS ? (unsigned)ROPE_THREADS : (unsigned)((pass + 31) / 32 * 32);
        dim3 pgrid(cuda_blocks((size_t)pass, pt), (unsigned)(rows < 65535 ? rows : 65535));
        rope_pass_kernel<<<pgrid, pt, 0, st>>>(y, x, ld, rows, heads, d, rot, round_bf16);
        CUDA_LAUNCHED();
    }
}

// ---- entries

extern "C" void cuda_rope_forward(Backend *be, float *y, const float *x, int ld, const float *cs, int positions,
                                  int rows, int b, int heads, int d, int rot, int pos0, int round_bf16) {
    rope_launch(be, "rope_forward (cuda)", y, x, ld, cs, positions, rows, b, heads, d, rot, pos0, 1.0f, round_bf16);
}

extern "C" void cuda_rope_backward(Backend *be, float *dx, const float *dy, int ld, const float *cs, int positions,
                                   int rows, int b, int heads, int d, int rot, int pos0) {
    rope_launch(be, "rope_backward (cuda)", dx, dy, ld, cs, positions, rows, b, heads, d, rot, pos0, -1.0f, 0);
}
