// fp32 <-> bf16 over arrays and strided 2-D views (GEMM operands), OpenMP-parallel and vectorised.
// Bitwise identical to the scalar bf16_from_f32 / bf16_to_f32 of backend/cpu/bf16.h on every input: round to
// nearest even, NaN stays NaN (quietened), denormals kept (not flushed), on every CPU.
// Called from outside OpenMP regions; inside one it runs on the calling thread.
#ifndef CTRON_BF16_CONVERT_H
#define CTRON_BF16_CONVERT_H
#include <stddef.h>
#include <stdint.h>

void cvt_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void cvt_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
// rows x cols elements; row r of src starts at src + r*ld_src, of dst at dst + r*ld_dst (elements).
void cvt_f32_to_bf16_2d(uint16_t *dst, size_t ld_dst, const float *src, size_t ld_src, size_t rows, size_t cols);
void cvt_bf16_to_f32_2d(float *dst, size_t ld_dst, const uint16_t *src, size_t ld_src, size_t rows, size_t cols);
// x[i] = bf16_to_f32(bf16_from_f32(x[i])) on the calling thread (for kernels already in a parallel region).
void bf16_round_row(float *x, size_t n);
#endif
