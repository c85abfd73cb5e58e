// bf16 GEMMs with fp32 accumulation on the CPU (mixed precision, DESIGN.md §8): oneDNN matmul.
// Row-major, like cblas: op(A) is [m,k], op(B) is [k,n], C is [m,n]; lda/ldb/ldc are row strides of
// the matrices as stored (A stored [k,m] when trans_a). Deterministic for a fixed thread count: the
// same shapes and strides always run the same kernel with the same partitioning.
#ifndef CTRON_GEMM_BF16_H
#define CTRON_GEMM_BF16_H
#include <stddef.h>
#include <stdint.h>

// C (= when beta is 0, += when beta is 1) op(A) · op(B); A and B bf16 (uint16_t bit patterns), C fp32.
void gemm_bf16(int trans_a, int trans_b, int m, int n, int k, const uint16_t *a, int lda, const uint16_t *b,
               int ldb, float beta, float *c, int ldc);
// 1 when this CPU runs bf16 dot products natively (AVX512-BF16 or AMX); else 0 and why in `why`.
int gemm_bf16_native(char *why, size_t len);
#endif
