// Rotary position embeddings, Hugging Face's convention (LlamaRotaryEmbedding + rotate_half): within
// each head of d dimensions, dimension j pairs with j + d/2 ("half-split", GPT-NeoX style), NOT with
// j + 1 (Meta's interleaved original). With a_j = p·θ^(−2j/d) at position p, for j < d/2:
//     y[j]       = x[j]·cos a_j − x[j + d/2]·sin a_j
//     y[j + d/2] = x[j + d/2]·cos a_j + x[j]·sin a_j
// Checkpoints depend on this pairing (HF hub q/k weights are permuted for it). Partial rotary
// (transformers' partial_rotary_factor, Phi-4-mini's 0.75): only the first rot dims of a head rotate, as a
// head of rot dims would (θ^(−2j/rot), pairs j, j + rot/2), and dims rot .. d−1 pass through.
//
// Bitwise reproducibility: cos and sin come from a table built once on the host by rope_table (the
// CUDA backend gets a copy of the same bytes), and the rotation is rope_rotate below, one CT_HD
// source with explicit fmaf, so no compiler may contract it differently: every backend gives the
// same bits.
#ifndef CTRON_ROPE_H
#define CTRON_ROPE_H
#include <math.h>
#include <stddef.h>
#include "arch/rope_scaling.h"
#include "util/hd.h"

// One pair: (y0, y1) = (x0·c − x1·s, x1·c + x0·s), each a product rounded, then one fma. The
// backward is the same with −s (the transpose of a rotation is the rotation by −a).
CT_HD void rope_rotate(float x0, float x1, float c, float s, float *y0, float *y1) {
    *y0 = fmaf(x0, c, -(x1 * s));
    *y1 = fmaf(x1, c, x0 * s);
}

#ifdef __cplusplus
extern "C" {   // the CUDA backend's rope.cu checks positions with rope_check_positions
#endif
// Floats of a table for positions 0 .. positions−1 and d rotated dims (the head's, or partial rotary's):
// [positions, d].
static inline size_t rope_table_floats(int positions, int d) { return (size_t)positions * (size_t)d; }
// inv_j = 1 / fl(θ^fl(2j/d)), then scaled (sc NULL: plain) with transformers' float32 operations in
// their order, so the frequencies are its bits up to its pow. positions: the length of the sequence
// rotated (longrope's short or long factors; the others ignore it).
float rope_inv_freq(int j, int d, float theta, const RopeScaling *sc, int positions);
// cs[p, j] = cos a_j and cs[p, d/2 + j] = sin a_j for j < d/2 (d even). The angle is HF's, in fp32:
// a_j = fl(p · inv_j) with rope_inv_freq's inv_j (what HF computes in float32; a double angle would
// differ by ~5e-4 rad at p ≈ 8k); cos and sin of that fp32 angle are evaluated in double and rounded
// once; longrope's and yarn's are then × their attention_factor (so the rotation scales q and k, as
// transformers' cos and sin do). d is the rotated dims (rope_forward's rot; longrope's n_factors must be d/2).
// A host function: the table is data, copied to the device that runs the kernels.
void rope_table(float *cs, int positions, int d, float theta, const RopeScaling *sc);

// x[rows, heads·d] (row stride ld floats) -> y[rows, heads·d] (stride ld); y may equal x (in place).
// The first rot dims of each head rotate (cs: a table of rot dims), the rest are copied.
// Row r is at position pos0 + r / b (sequence-major [s, b] rows; pos0: a sequence shard's or a KV
// cache's offset). cs: rope_table of `positions` rows; every position must be < positions (checked).
// round_bf16: y rounded to bf16 (the value the forward goes on with when q/k are stored in bf16).
void rope_forward(float *y, const float *x, int ld, const float *cs, int positions, int rows, int b, int heads,
                  int d, int rot, int pos0, int round_bf16);
// dy -> dx, the inverse rotation (the transpose): reads only dy and the table, no saved tensor;
// dx may equal dy. Shapes and positions as rope_forward.
void rope_backward(float *dx, const float *dy, int ld, const float *cs, int positions, int rows, int b, int heads,
                   int d, int rot, int pos0);
// rot even, 2 .. d, b positive, and every row's position pos0 + r / b (r < rows) inside the table,
// or a fatal error (exit 1) naming the numbers and `op`: a caller's bug. Every backend calls it
// before touching memory (the CUDA backend on the host, before the launch).
void rope_check_positions(const char *op, int positions, int rows, int b, int d, int rot, int pos0);
#ifdef __cplusplus
}
#endif
#endif
