// bf16 GEMMs with fp32 accumulation on the CPU (mixed precision, DESIGN.md §8): oneDNN matmul.
// Row-major, like cblas: op(A) is [m,k], op(B) is [k,n], C is [m,n]; lda/ldb/ldc are row strides of
// the matrices as stored (A stored [k,m] when trans_a). Deterministic for a fixed thread count: the
// same shapes and strides always run the same kernel with the same partitioning.
// Calls come from one thread at a time (a mutex guards the primitive cache), never from inside an
// OpenMP parallel region; the GEMM itself runs on omp_get_max_threads() threads.
#ifndef CTRON_GEMM_BF16_H
#define CTRON_GEMM_BF16_H
#include <stddef.h>
#include <stdint.h>

// C (= when beta is 0, += when beta is 1) op(A) · op(B); A and B bf16 (uint16_t bit patterns), C fp32.
void gemm_bf16(int trans_a, int trans_b, int m, int n, int k, const uint16_t *a, int lda, const uint16_t *b,
               int ldb, float beta, float *c, int ldc);
// C = op(A) · op(B) rounded once to bf16 (round to nearest even) from the fp32 accumulator.
void gemm_bf16_out_bf16(int trans_a, int trans_b, int m, int n, int k, const uint16_t *a, int lda,
                        const uint16_t *b, int ldb, uint16_t *c, int ldc);
// 1 when this CPU runs bf16 dot products natively (AVX512-BF16 or AMX) and oneDNN may use them;
// else 0 and why in `why` (e.g. "AVX512-BF16 (cpuid leaf 7.1 EAX bit 5)").
int gemm_bf16_native(char *why, size_t len);
// What runs here: GEMM_BF16_NATIVE; GEMM_BF16_EMULATED (oneDNN 2.6 on AVX-512 without BF16 runs its
// gemm:jit kernels, bf16 converted to fp32 inside: correct, several times slower than fp32 sgemm);
// GEMM_BF16_WIDENED (below AVX-512, or ONEDNN_MAX_CPU_ISA below avx512_core: oneDNN has no bf16 matmul,
// so gemm_bf16 widens the operands to fp32 and runs OpenBLAS's sgemm: the same products and fp32
// accumulation, slower than plain fp32). `why` names what the CPU lacks when not native.
enum { GEMM_BF16_WIDENED = 0, GEMM_BF16_EMULATED = 1, GEMM_BF16_NATIVE = 2 };
int gemm_bf16_support(char *why, size_t len);
// Frees the cached primitives (also done at exit); the next call rebuilds what it needs.
void gemm_bf16_release(void);
// Primitives created and calls made since start, for tests and benchmarks.
void gemm_bf16_stats(long *primitives, long *calls);
#endif
