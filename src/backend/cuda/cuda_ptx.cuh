// The inline PTX of the tensor-core flash attention (flash_attention.cu), in one place: cp.async (global →
// shared without registers), ldmatrix (8×8 b16 matrices from shared memory into mma fragments),
// mma.sync m16n8k16 (bf16 operands, fp32 accumulation) and ex2.approx. Under the CUDA emulation
// (CT_EMU: tests/cuda_emu/) each has a host twin written from the PTX ISA's own definitions (the
// fragment tables of "Matrix Fragments for mma.m16n8k16" and of ldmatrix), independently of the kernel:
// ldmatrix and mma are warp collectives there, cp.async lands only at the issuing thread's wait_all.
#ifndef CTRON_CUDA_PTX_CUH
#define CTRON_CUDA_PTX_CUH
#include <stdint.h>
#include <cuda_bf16.h>

// Two fp32 → one register of bf16 (lo in the low half), round to nearest even.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

#ifndef CT_EMU
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const uint16_t *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p))
                 : "memory");
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const uint16_t *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p))
                 : "memory");
}
// c += a · b (m16n8k16, bf16 in, fp32 accumulate)
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// e^x through the SFU (ex2.approx, flush to zero): e^−∞ = 0.
__device__ __forceinline__ float exp_fast(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x * 1.44269504088896341f));
    return y;
}
#else
#include <math.h>
#include <string.h>
#include "backend/cpu/bf16.h"

// ---- host twins (CT_EMU)
// cp.async.{cg,ca}.shared.global: queued by the issuing thread, copied at its cp.async.wait_all, so a
// read of the staging buffer before the wait (or by another thread before a barrier) sees stale data.
__device__ __forceinline__ void cp_async16(void *dst, const void *src) { ct_emu::cp_async(dst, src, 16, "cp.async.cg 16"); }
__device__ __forceinline__ void cp_async4(void *dst, const void *src) { ct_emu::cp_async(dst, src, 4, "cp.async.ca 4"); }
__device__ __forceinline__ void cp_async_commit() {}
__device__ __forceinline__ void cp_async_wait_all() { ct_emu::cp_async_wait_all(); }

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8i .. 8i+7 give the addresses of rows 0..7 of
// matrix i (16-byte aligned, in shared memory). Register r[i] of lane l (g = l/4, c = l%4) receives
// row g, columns 2c and 2c+1 of matrix i (low half first); with .trans, rows 2c and 2c+1 of column g.
struct CtEmuLdsm {
    const uint16_t *row;
    int trans;
};
static inline void ct_emu_ldsm_op(ct_emu::WarpIO &io, unsigned) {
    CtEmuLdsm in[32];
    for (int l = 0; l < 32; l++) memcpy(&in[l], io.in[l], sizeof in[l]);
    for (int l = 0; l < 32; l++) {
        int g = l / 4, c = l % 4;
        uint32_t r[4];
        for (int i = 0; i < 4; i++) {
            uint16_t lo, hi;
            if (in[l].trans) lo = in[8 * i + 2 * c].row[g], hi = in[8 * i + 2 * c + 1].row[g];
            else lo = in[8 * i + g].row[2 * c], hi = in[8 * i + g].row[2 * c + 1];
            r[i] = (uint32_t)lo | (uint32_t)hi << 16;
        }
        memcpy(io.out[l], r, sizeof r);
    }
}
static inline void ct_emu_ldsm(uint32_t (&r)[4], const uint16_t *p, int trans) {
    if ((uintptr_t)p % 16 || !ct_emu::in_shared(p, 16))
        ct_emu::fatal("ldmatrix: row address %p is not 16-byte aligned shared memory", (const void *)p);
    CtEmuLdsm in = {p, trans};
    ct_emu::warp_collective(0xFFFFFFFFu, trans ? "ldmatrix.x4.trans" : "ldmatrix.x4", __FILE__, __LINE__, &in,
                            sizeof in, r, sizeof r, ct_emu_ldsm_op);
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const uint16_t *p) { ct_emu_ldsm(r, p, 0); }
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const uint16_t *p) { ct_emu_ldsm(r, p, 1); }

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, D = A·B + C, g = lane/4, c = lane%4:
//   A 16×16: a[0] = (row g, cols 2c, 2c+1), a[1] = (g+8, 2c..), a[2] = (g, 2c+8..), a[3] = (g+8, 2c+8..);
//   B 16×8:  b0 = (k 2c, 2c+1; n g), b1 = (k 2c+8, 2c+9; n g);
//   C, D 16×8: c[0], c[1] = (g; 2c, 2c+1), c[2], c[3] = (g+8; 2c, 2c+1).
// Products of bf16 are exact in fp32; they are added to C in k order (the tensor core's order and
// internal precision are unspecified: agreement is within rounding, not bitwise).
struct CtEmuMma {
    uint32_t a[4], b[2];
    float c[4];
};
static inline float ct_emu_bf16_half(uint32_t reg, int hi) { return bf16_to_f32((uint16_t)(hi ? reg >> 16 : reg & 0xFFFFu)); }
static inline void ct_emu_mma_op(ct_emu::WarpIO &io, unsigned) {
    CtEmuMma in[32];
    for (int l = 0; l < 32; l++) memcpy(&in[l], io.in[l], sizeof in[l]);
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        int g = l / 4, c = l % 4;
        for (int h = 0; h < 2; h++) {
            A[g][2 * c + h] = ct_emu_bf16_half(in[l].a[0], h);
            A[g + 8][2 * c + h] = ct_emu_bf16_half(in[l].a[1], h);
            A[g][2 * c + 8 + h] = ct_emu_bf16_half(in[l].a[2], h);
            A[g + 8][2 * c + 8 + h] = ct_emu_bf16_half(in[l].a[3], h);
            B[2 * c + h][g] = ct_emu_bf16_half(in[l].b[0], h);
            B[2 * c + 8 + h][g] = ct_emu_bf16_half(in[l].b[1], h);
        }
    }
    for (int l = 0; l < 32; l++) {
        int g = l / 4, c = l % 4;
        float d[4];
        for (int e = 0; e < 4; e++) {
            int row = g + (e >= 2 ? 8 : 0), col = 2 * c + (e & 1);
            float acc = in[l].c[e];
            for (int k = 0; k < 16; k++) acc += A[row][k] * B[k][col];
            d[e] = acc;
        }
        memcpy(io.out[l], d, sizeof d);
    }
}
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    CtEmuMma in = {{a[0], a[1], a[2], a[3]}, {b0, b1}, {c[0], c[1], c[2], c[3]}};
    ct_emu::warp_collective(0xFFFFFFFFu, "mma.sync.m16n8k16", __FILE__, __LINE__, &in, sizeof in, c, sizeof c,
                            ct_emu_mma_op);
}
// ex2.approx.ftz.f32: 2^x with subnormal inputs and results flushed to zero (≤ 2 ulp on the GPU).
static inline float ct_emu_ftz(float x) { return fabsf(x) < 1.17549435e-38f ? 0.0f * x : x; }
__device__ __forceinline__ float exp_fast(float x) { return ct_emu_ftz(exp2f(ct_emu_ftz(x * 1.44269504088896341f))); }
#endif
#endif
