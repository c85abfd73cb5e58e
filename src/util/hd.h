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
#endif
