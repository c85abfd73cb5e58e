// A simple, correct GEMM for when cuBLASLt offers no algorithm for a shape (gemm.cu, attention.cu): slow,
// but the run goes on instead of aborting. Column-major, cuBLASLt's semantics, `batch` strided matrices:
//   D[i, j] = alpha · Σ_q op(A)[i, q] · op(B)[q, j] + beta · D[i, j] (+ bias[i])
// op(A) m×k, op(B) k×n; A and B fp32, or bf16 (both, uint16_t bits) widened exactly; D fp32, not read when
// beta is 0; bias NULL or m floats. Stream-ordered on `stream`. Defined in gemm_simple.cu.
#ifndef CTRON_CUDA_GEMM_SIMPLE_CUH
#define CTRON_CUDA_GEMM_SIMPLE_CUH
#include <cuda_runtime.h>

void gemm_simple(cudaStream_t stream, int transa, int transb, int m, int n, int k, float alpha, const void *A,
                 long long lda, long long sa, const void *B, long long ldb, long long sb, float beta, float *D,
                 long long ldd, long long sd, int batch, int bf16, const float *bias);
#endif
