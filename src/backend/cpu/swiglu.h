// SwiGLU, the Llama MLP's activation: y = silu(gate) ⊙ up, silu(g) = g·σ(g) = g / (1 + e^−g).
// gate and up are the two column-parallel GEMM outputs (separate tensors or the two halves of one
// [n, 2f] buffer: both take the row stride ld). The backward reads dy, gate and up only: σ and silu
// are recomputed from gate, and nothing else is saved (not silu(gate), not y).
#ifndef CTRON_SWIGLU_H
#define CTRON_SWIGLU_H
#include <stdint.h>
#include "backend/cpu/fastmath.h"
#include "util/hd.h"

// One CT_HD source for every backend, so the recomputed y (swiglu_backward's y) is the forward's
// to the bit on each: σ(g) = 1 / (1 + e^−g), silu(g) = g / (1 + e^−g) (ctron_expf, clamped: finite
// for every finite g).
CT_HD float swiglu_silu(float g) { return g / (1.0f + ctron_expf(-g)); }
// One element's backward: *dg, *du as in swiglu_backward; returns silu(g) (the bits swiglu_silu gives).
CT_HD float swiglu_backward_elem(float dy, float g, float u, float *dg, float *du) {
    float e = 1.0f + ctron_expf(-g), s = 1.0f / e, si = g / e;
    *du = dy * si;
    *dg = dy * u * (s * (1.0f + ct_fmul(g, 1.0f - s)));   // ct_fmul: nvcc would fuse it into an FMA
    return si;
}

// gate[n,f], up[n,f] (row stride ld) -> y[n,f] (contiguous). round_bf16: gate and up are rounded to
// bf16 in place first (the values the backward reads back from bf16 storage) and y is rounded too.
void swiglu_forward(float *y, float *gate, float *up, int ld, int n, int f, int round_bf16);
// dy[n,f], gate[n,f], up[n,f] -> dgate, dup [n,f] (row stride ldd):
//     dup = dy ⊙ silu(gate),  dgate = dy ⊙ up ⊙ σ(gate)·(1 + gate·(1 − σ(gate))).
// y (may be NULL) also receives silu(gate) ⊙ up (bf16-rounded when round_bf16), the same bits as
// swiglu_forward's y: the down projection's weight gradient can then take its input from here, so
// the forward need not keep y. dgate may alias gate and dup may alias up; y aliases nothing.
void swiglu_backward(float *dgate, float *dup, int ldd, float *y, const float *dy, const float *gate,
                     const float *up, int ld, int n, int f, int round_bf16);

// On the arena's bf16 copies (backend.h's ops of the same names; bitwise the fp32 ops on the copies' values):
// y16[n,f] = bf16(silu(gate)·up) from the copies gate16, up16 (row stride ld);
void swiglu_forward16(uint16_t *y16, const uint16_t *gate16, const uint16_t *up16, int ld, int n, int f);
// the same from fp32 gate, up (row stride ld), writing their copies gate16, up16 [n,f] as it goes;
void swiglu_forward_pack16(uint16_t *y16, uint16_t *gate16, uint16_t *up16, const float *gate, const float *up, int ld,
                           int n, int f);
// swiglu_backward (y NULL) from the copies: dgate, dup fp32 (float *), or with grad16 rounded to bf16 (uint16_t *),
// row stride ldd elements.
void swiglu_backward16(void *dgate, void *dup, int ldd, int grad16, const float *dy, const uint16_t *gate16,
                       const uint16_t *up16, int ld, int n, int f);
#endif
