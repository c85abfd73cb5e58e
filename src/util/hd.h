// CT_HD: a small inline function that compiles as C for the CPU and as a __host__ __device__ function
// under nvcc, so the CPU and CUDA backends run the same source for what must agree bit for bit
// (Philox, the dropout decision, bf16 rounding) or to the last ulp (exp, tanh, GeLU).
#ifndef CTRON_HD_H
#define CTRON_HD_H
#ifdef __CUDACC__
#define CT_HD static __host__ __device__ __forceinline__
#else
#define CT_HD static inline
#endif

// a·b rounded on its own. nvcc fuses a product into a following add (an FMA, --fmad=true by default),
// even across inlined CT_HD functions; the CPU, compiled as ISO C11, never does. A CT_HD expression
// whose bits must agree on both writes a product that feeds a sum as ct_fmul(a, b).
CT_HD float ct_fmul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
#endif
