// gemm_simple (gemm_simple.cuh): one thread per element of D, q = 0..k-1 in order with fmaf: a fixed
// order, so the same shape gives the same bits on every call, wherever its buffers sit.
#include "backend/cuda/gemm_simple.cuh"
#include "backend/cuda/cuda_common.cuh"

template <typename T>
__device__ __forceinline__ float gemm_simple_load(const T *p, size_t i) {
    if constexpr (sizeof(T) == 2) return bf16_to_f32(p[i]);
    else return p[i];
}

// Block (16, 16): x over the rows of D, y over its columns; grid.z and a stride loop over the batch.
template <typename T>
__global__ static void __launch_bounds__(256) gemm_simple_kernel(int transa, int transb, int m, int n, int k,
                                                                 float alpha, const T *__restrict__ A, long long lda,
                                                                 long long sa, const T *__restrict__ B, long long ldb,
                                                                 long long sb, float beta, float *__restrict__ D,
                                                                 long long ldd, long long sd, int batch,
                                                                 const float *__restrict__ bias) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x), j = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (i >= m || j >= n) return;
    for (int b = (int)blockIdx.z; b < batch; b += (int)gridDim.z) {
        const T *a = A + (size_t)b * (size_t)sa, *bm = B + (size_t)b * (size_t)sb;
        float acc = 0.0f;
        for (int q = 0; q < k; q++) {
            float x = gemm_simple_load(a, transa ? (size_t)q + (size_t)i * (size_t)lda : (size_t)i + (size_t)q * (size_t)lda);
            float y = gemm_simple_load(bm, transb ? (size_t)j + (size_t)q * (size_t)ldb : (size_t)q + (size_t)j * (size_t)ldb);
            acc = fmaf(x, y, acc);
        }
        float *d = D + (size_t)b * (size_t)sd + (size_t)i + (size_t)j * (size_t)ldd;
        float v = alpha * acc;
        if (beta != 0.0f) v = fmaf(beta, *d, v);
        if (bias) v += bias[i];
        *d = v;
    }
}

void gemm_simple(cudaStream_t stream, int transa, int transb, int m, int n, int k, float alpha, const void *A,
                 long long lda, long long sa, const void *B, long long ldb, long long sb, float beta, float *D,
                 long long ldd, long long sd, int batch, int bf16, const float *bias) {
    if (m <= 0 || n <= 0 || batch <= 0) return;
    dim3 block(16, 16);
    dim3 grid((unsigned)((m + 15) / 16), (unsigned)((n + 15) / 16), (unsigned)(batch < 65535 ? batch : 65535));
    if (bf16)
        gemm_simple_kernel<uint16_t><<<grid, block, 0, stream>>>(transa, transb, m, n, k, alpha, (const uint16_t *)A, lda,
                                                                 sa, (const uint16_t *)B, ldb, sb, beta, D, ldd, sd,
                                                                 batch, bias);
    else
        gemm_simple_kernel<float><<<grid, block, 0, stream>>>(transa, transb, m, n, k, alpha, (const float *)A, lda, sa,
                                                              (const float *)B, ldb, sb, beta, D, ldd, sd, batch, bias);
    CUDA_LAUNCHED();
}
