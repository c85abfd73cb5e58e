// bf16 storage of fp32 activations: round-to-nearest-even, packing and unpacking.
#ifndef CTRON_BF16_H
#define CTRON_BF16_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "util/hd.h"

// Round to nearest even; a NaN stays a NaN, quietened. Written without a branch so that the loops
// using it vectorise.
CT_HD uint16_t bf16_from_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)(nan ? (u >> 16) | 0x40u : rounded);
}
CT_HD float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
#ifndef __CUDACC__
// dst[0, n) = src[0, n) widened (exact); returns dst. A row of a bf16 copy for an fp32 kernel's loop.
static inline const float *bf16_widen_row(float *dst, const uint16_t *src, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) dst[i] = bf16_to_f32(src[i]);
    return dst;
}
#endif
// x[i] = bf16(x[i]) as fp32: the value the forward goes on with when the tensor is stored in bf16.
void bf16_round(float *x, size_t n);
void bf16_pack(uint16_t *dst, const float *src, size_t n);
void bf16_unpack(float *dst, const uint16_t *src, size_t n);
// bf16_pack, then x = the packed values, in one pass.
void bf16_pack_round(uint16_t *dst, float *x, size_t n);
// dst[r, c] = bf16(src[r, c]) for a [rows, cols] view with row strides ld_src / ld_dst.
void bf16_pack_rows(uint16_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols);

// Dropout masks as bits: bit i of byte i/8 = keep[i].
void mask_pack_bits(uint8_t *bits, const uint8_t *keep, size_t n);
void mask_unpack_bits(uint8_t *keep, const uint8_t *bits, size_t n);
static inline size_t mask_bits_bytes(size_t n) { return (n + 7) / 8; }
#endif
