// Dropout (Philox masks of [s, b, w] activations, the residual forward, apply, backward) and the
// storage formats (bf16 round/pack/unpack, masks as bits). Semantics: backend/cpu/dropout.c, bf16.c,
// bf16_convert.c. Masks come from the Philox source the CPU compiles too (util/philox.h), bf16 from
// bf16_from_f32: the same bits. Products and sums are __fmul_rn / __fadd_rn, never fused into FMAs
// (the CPU does not contract), so the float outputs are the CPU's bit for bit too.
#include <stdint.h>
#include "backend/cuda/cuda_common.cuh"

enum { DROP_THREADS = 256, MASK_THREADS = 128 };

static inline int aligned4(const void *p) { return ((uintptr_t)p & 3u) == 0; }

// keep[rows, w] for rows (si, bi) = ((r0 + row) / b, (r0 + row) % b) (r0 = s0·b: a shard from position s0;
// mini-seq's chunks start anywhere): one block per row, one thread per Philox block of 4 consecutive
// per-sample indices (first = si·w); the ragged ends write only their own bytes. Row (si, bi) covers
// indices si·W + c0 .. + w−1 of its sample (W = w, c0 = 0: the whole row).
static __global__ void dropout_mask_sbw_kernel(uint8_t *keep, DropoutSite site, uint32_t thresh, int r0, int b,
                                               int w, int W, int c0, uint32_t sample0) {
    int row = blockIdx.x;
    int si = (r0 + row) / b, bi = (r0 + row) % b;
    uint32_t sample = sample0 + (uint32_t)bi, c3 = dropout_counter_word3(site);
    uint64_t first = (uint64_t)si * (uint64_t)W + (uint64_t)c0, end = first + (uint64_t)w;
    uint64_t g0 = first / 4, g1 = (end + 3) / 4;
    uint8_t *kr = keep + (size_t)row * (size_t)w;
    for (uint64_t g = g0 + threadIdx.x; g < g1; g += blockDim.x) {
        philox_ctr ctr = {{(uint32_t)g, sample, site.step, c3}};
        philox_ctr r = philox4x32_10_inline(ctr, site.key);
#pragma unroll
        for (int lane = 0; lane < 4; lane++) {
            uint64_t idx = g * 4 + (uint64_t)lane;
            if (idx >= first && idx < end) kr[idx - first] = r.v[lane] >= thresh;
        }
    }
}

// out[n,w] = res + keep·(y + bias)·scale (keep NULL: no mask, no scale; bias NULL: none). out may
// alias res. Grid-stride; VEC: float4 over w/4 groups (w % 4 == 0, every pointer aligned).
template <bool KEEP, bool BIAS, bool VEC>
static __global__ void dropout_residual_kernel(float *out, const float *res, const float *y, const float *bias,
                                               const uint8_t *keep, float scale, size_t total, int w) {
    if (VEC) {
        size_t w4 = (size_t)(w / 4);
        float4 *o4 = reinterpret_cast<float4 *>(out);
        const float4 *r4 = reinterpret_cast<const float4 *>(res), *y4 = reinterpret_cast<const float4 *>(y);
        const float4 *b4 = reinterpret_cast<const float4 *>(bias);
        const uchar4 *k4 = reinterpret_cast<const uchar4 *>(keep);
        CT_GRID_LOOP(i, total / 4) {
            float4 r = r4[i], v = y4[i], o;
            if (BIAS) {
                float4 bb = b4[i % w4];
                v.x = __fadd_rn(v.x, bb.x); v.y = __fadd_rn(v.y, bb.y);
                v.z = __fadd_rn(v.z, bb.z); v.w = __fadd_rn(v.w, bb.w);
            }
            if (KEEP) {
                uchar4 k = k4[i];
                v.x = k.x ? __fmul_rn(v.x, scale) : 0.0f; v.y = k.y ? __fmul_rn(v.y, scale) : 0.0f;
                v.z = k.z ? __fmul_rn(v.z, scale) : 0.0f; v.w = k.w ? __fmul_rn(v.w, scale) : 0.0f;
            }
            o.x = __fadd_rn(r.x, v.x); o.y = __fadd_rn(r.y, v.y); o.z = __fadd_rn(r.z, v.z); o.w = __fadd_rn(r.w, v.w);
            o4[i] = o;
        }
    } else {
        CT_GRID_LOOP(i, total) {
            float v = y[i];
            if (BIAS) v = __fadd_rn(v, bias[i % (size_t)w]);
            if (KEEP) v = keep[i] ? __fmul_rn(v, scale) : 0.0f;
            out[i] = __fadd_rn(res[i], v);
        }
    }
}

// dst[count] = keep ? src·scale : 0 (dst may alias src: dropout_apply in place, dropout_backward);
// grid-stride, float4 / uchar4 over the aligned part when VEC.
template <bool VEC>
static __global__ void dropout_scale_kernel(float *dst, const float *src, const uint8_t *keep, float scale,
                                            size_t count) {
    size_t done = 0;
    if (VEC) {
        float4 *d4 = reinterpret_cast<float4 *>(dst);
        const float4 *s4 = reinterpret_cast<const float4 *>(src);
        const uchar4 *k4 = reinterpret_cast<const uchar4 *>(keep);
        CT_GRID_LOOP(i, count / 4) {
            float4 v = s4[i];
            uchar4 k = k4[i];
            v.x = k.x ? __fmul_rn(v.x, scale) : 0.0f; v.y = k.y ? __fmul_rn(v.y, scale) : 0.0f;
            v.z = k.z ? __fmul_rn(v.z, scale) : 0.0f; v.w = k.w ? __fmul_rn(v.w, scale) : 0.0f;
            d4[i] = v;
        }
        done = count / 4 * 4;
    }
    CT_GRID_LOOP(j, count - done) {
        size_t i = done + j;
        dst[i] = keep[i] ? __fmul_rn(src[i], scale) : 0.0f;
    }
}

// x[n] = bf16(x[n]) as fp32, in place; float4 over the aligned part when VEC.
template <bool VEC>
static __global__ void bf16_round_kernel(float *x, size_t n) {
    size_t done = 0;
    if (VEC) {
        float4 *x4 = reinterpret_cast<float4 *>(x);
        CT_GRID_LOOP(i, n / 4) {
            float4 v = x4[i];
            v.x = bf16_round_f(v.x); v.y = bf16_round_f(v.y); v.z = bf16_round_f(v.z); v.w = bf16_round_f(v.w);
            x4[i] = v;
        }
        done = n / 4 * 4;
    }
    CT_GRID_LOOP(j, n - done) { size_t i = done + j; x[i] = bf16_round_f(x[i]); }
}

// dst[n] = bf16 bits of src[n]; VEC: a float4 in, 4 halves out as one 8-byte store.
template <bool VEC>
static __global__ void bf16_pack_kernel(uint16_t *dst, const float *src, size_t n) {
    size_t done = 0;
    if (VEC) {
        const float4 *s4 = reinterpret_cast<const float4 *>(src);
        uint2 *d2 = reinterpret_cast<uint2 *>(dst);
        CT_GRID_LOOP(i, n / 4) {
            float4 v = s4[i];
            uint2 o;
            o.x = (uint32_t)bf16_from_f32(v.x) | ((uint32_t)bf16_from_f32(v.y) << 16);
            o.y = (uint32_t)bf16_from_f32(v.z) | ((uint32_t)bf16_from_f32(v.w) << 16);
            d2[i] = o;
        }
        done = n / 4 * 4;
    }
    CT_GRID_LOOP(j, n - done) { size_t i = done + j; dst[i] = bf16_from_f32(src[i]); }
}

// dst[n] = bf16 bits of x[n], and x[n] = their value: bf16_pack then bf16_unpack in one pass (a kept tensor
// the forward goes on with).
template <bool VEC>
static __global__ void bf16_pack_round_kernel(uint16_t *dst, float *x, size_t n) {
    size_t done = 0;
    if (VEC) {
        float4 *x4 = reinterpret_cast<float4 *>(x);
        uint2 *d2 = reinterpret_cast<uint2 *>(dst);
        CT_GRID_LOOP(i, n / 4) {
            float4 v = x4[i];
            uint16_t a = bf16_from_f32(v.x), b = bf16_from_f32(v.y), c = bf16_from_f32(v.z), d = bf16_from_f32(v.w);
            uint2 o;
            o.x = (uint32_t)a | ((uint32_t)b << 16);
            o.y = (uint32_t)c | ((uint32_t)d << 16);
            d2[i] = o;
            x4[i] = make_float4(bf16_to_f32(a), bf16_to_f32(b), bf16_to_f32(c), bf16_to_f32(d));
        }
        done = n / 4 * 4;
    }
    CT_GRID_LOOP(j, n - done) {
        size_t i = done + j;
        uint16_t c = bf16_from_f32(x[i]);
        dst[i] = c;
        x[i] = bf16_to_f32(c);
    }
}

// dst[n] = fp32 of the bf16 bits src[n]; VEC: 4 halves in as one 8-byte load, a float4 out.
template <bool VEC>
static __global__ void bf16_unpack_kernel(float *dst, const uint16_t *src, size_t n) {
    size_t done = 0;
    if (VEC) {
        const uint2 *s2 = reinterpret_cast<const uint2 *>(src);
        float4 *d4 = reinterpret_cast<float4 *>(dst);
        CT_GRID_LOOP(i, n / 4) {
            uint2 v = s2[i];
            float4 o;
            o.x = bf16_to_f32((uint16_t)(v.x & 0xFFFFu)); o.y = bf16_to_f32((uint16_t)(v.x >> 16));
            o.z = bf16_to_f32((uint16_t)(v.y & 0xFFFFu)); o.w = bf16_to_f32((uint16_t)(v.y >> 16));
            d4[i] = o;
        }
        done = n / 4 * 4;
    }
    CT_GRID_LOOP(j, n - done) { size_t i = done + j; dst[i] = bf16_to_f32(src[i]); }
}

// dropout_residual_forward undone (reversible blocks): out = res − keep·(y + bias)/(1−p), the CPU's
// operations in its order (y + 0 where there is no bias, then the scale, then the difference), unfused.
template <bool KEEP>
static __global__ void dropout_residual_inverse_kernel(float *out, const float *res, const float *y, const float *bias,
                                                       const uint8_t *keep, float scale, size_t total, int w) {
    CT_GRID_LOOP(i, total) {
        float v = __fadd_rn(y[i], bias ? bias[i % (size_t)w] : 0.0f);
        float d = KEEP ? (keep[i] ? __fmul_rn(v, scale) : 0.0f) : v;
        out[i] = __fsub_rn(res[i], d);
    }
}

// keep[n] (bytes, bit 0 read) -> bits[⌈n/8⌉], bit i%8 of byte i/8 = keep[i]: a warp packs 32 elements
// (4 bytes) with one ballot; grid-stride by whole warps (blockDim a multiple of 32).
static __global__ void mask_pack_bits_kernel(uint8_t *bits, const uint8_t *keep, size_t n) {
    size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / CT_WARP;
    size_t warps = (size_t)gridDim.x * blockDim.x / CT_WARP;
    unsigned lane = threadIdx.x % CT_WARP;
    size_t nbytes = (n + 7) / 8;
    for (size_t base = warp * CT_WARP; base < n; base += warps * CT_WARP) {
        size_t i = base + lane;
        unsigned m = __ballot_sync(0xFFFFFFFFu, i < n && (keep[i] & 1u));
        size_t byte = base / 8 + lane;
        if (lane < 4 && byte < nbytes) bits[byte] = (uint8_t)(m >> (8 * lane));
    }
}

// bits[⌈n/8⌉] -> keep[n] = bit i%8 of byte i/8: one thread per element.
static __global__ void mask_unpack_bits_kernel(uint8_t *keep, const uint8_t *bits, size_t n) {
    CT_GRID_LOOP(i, n) keep[i] = (uint8_t)((bits[i / 8] >> (i % 8)) & 1u);
}

// ---- entries

extern "C" void cuda_dropout_mask_sbw(Backend *be, uint8_t *keep, DropoutSite site, int s0, int s, int b, int w,
                                      uint32_t sample0) {
    if (s <= 0 || b <= 0 || w <= 0) return;
    dropout_mask_sbw_kernel<<<(unsigned)(s * b), MASK_THREADS, 0, cuda_stream(be)>>>(
        keep, site, dropout_keep_threshold(site.p), s0 * b, b, w, w, 0, sample0);
    CUDA_LAUNCHED();
}

extern "C" void cuda_dropout_mask_cols(Backend *be, uint8_t *keep, DropoutSite site, int r0, int rows, int b, int w,
                                       int W, int c0, uint32_t sample0) {
    if (rows <= 0 || b <= 0 || w <= 0) return;
    dropout_mask_sbw_kernel<<<(unsigned)rows, MASK_THREADS, 0, cuda_stream(be)>>>(
        keep, site, dropout_keep_threshold(site.p), r0, b, w, W, c0, sample0);
    CUDA_LAUNCHED();
}

extern "C" void cuda_dropout_residual_forward(Backend *be, float *out, const float *res, const float *y,
                                              const float *bias, const uint8_t *keep, float p, int n, int w) {
    if (n <= 0 || w <= 0) return;
    size_t total = (size_t)n * (size_t)w;
    float scale = 1.0f / (1.0f - p);
    bool vec = w % 4 == 0 && aligned16(out) && aligned16(res) && aligned16(y) && (!bias || aligned16(bias)) &&
               (!keep || aligned4(keep));
    unsigned blocks = ct_elementwise_blocks(vec ? total / 4 : total, DROP_THREADS);
    cudaStream_t st = cuda_stream(be);
#define DROP_RES(K, B)                                                                                     \
    do {                                                                                                   \
        if (vec) dropout_residual_kernel<K, B, true><<<blocks, DROP_THREADS, 0, st>>>(out, res, y, bias, keep, scale, total, w); \
        else dropout_residual_kernel<K, B, false><<<blocks, DROP_THREADS, 0, st>>>(out, res, y, bias, keep, scale, total, w); \
    } while (0)
    if (keep && bias) DROP_RES(true, true);
    else if (keep) DROP_RES(true, false);
    else if (bias) DROP_RES(false, true);
    else DROP_RES(false, false);
#undef DROP_RES
    CUDA_LAUNCHED();
}

extern "C" void cuda_dropout_residual_inverse(Backend *be, float *out, const float *res, const float *y,
                                              const float *bias, const uint8_t *keep, float p, int n, int w) {
    if (n <= 0 || w <= 0) return;
    size_t total = (size_t)n * (size_t)w;
    float scale = 1.0f / (1.0f - p);
    unsigned blocks = ct_elementwise_blocks(total, DROP_THREADS);
    if (keep)
        dropout_residual_inverse_kernel<true><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(out, res, y, bias, keep,
                                                                                            scale, total, w);
    else
        dropout_residual_inverse_kernel<false><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(out, res, y, bias, keep,
                                                                                             scale, total, w);
    CUDA_LAUNCHED();
}

static void dropout_scale(Backend *be, float *dst, const float *src, const uint8_t *keep, float p, size_t count) {
    if (!count) return;
    float scale = 1.0f / (1.0f - p);
    bool vec = aligned16(dst) && aligned16(src) && aligned4(keep);
    unsigned blocks = ct_elementwise_blocks(vec ? (count + 3) / 4 : count, DROP_THREADS);
    if (vec) dropout_scale_kernel<true><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(dst, src, keep, scale, count);
    else dropout_scale_kernel<false><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(dst, src, keep, scale, count);
    CUDA_LAUNCHED();
}

extern "C" void cuda_dropout_apply(Backend *be, float *x, const uint8_t *keep, float p, size_t count) {
    dropout_scale(be, x, x, keep, p, count);
}

// y = alpha·x + beta·y (x NULL: beta·y), separate roundings as the CPU's loop does.
static __global__ void axpby_kernel(float *y, float alpha, const float *x, float beta, size_t count) {
    CT_GRID_LOOP(i, count) y[i] = x ? __fadd_rn(__fmul_rn(alpha, x[i]), __fmul_rn(beta, y[i])) : __fmul_rn(beta, y[i]);
}

extern "C" void cuda_axpby(Backend *be, float *y, float alpha, const float *x, float beta, size_t count) {
    if (!count) return;
    axpby_kernel<<<ct_elementwise_blocks(count, DROP_THREADS), DROP_THREADS, 0, cuda_stream(be)>>>(y, alpha, x, beta, count);
    CUDA_LAUNCHED();
}

extern "C" void cuda_dropout_backward(Backend *be, float *dy, const float *dout, const uint8_t *keep, float p,
                                      size_t count) {
    dropout_scale(be, dy, dout, keep, p, count);
}

extern "C" void cuda_bf16_round(Backend *be, float *x, size_t n) {
    if (!n) return;
    bool vec = aligned16(x);
    unsigned blocks = ct_elementwise_blocks(vec ? (n + 3) / 4 : n, DROP_THREADS);
    if (vec) bf16_round_kernel<true><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(x, n);
    else bf16_round_kernel<false><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(x, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_bf16_pack(Backend *be, uint16_t *dst, const float *src, size_t n) {
    if (!n) return;
    bool vec = aligned16(src) && ((uintptr_t)dst & 7u) == 0;
    unsigned blocks = ct_elementwise_blocks(vec ? (n + 3) / 4 : n, DROP_THREADS);
    if (vec) bf16_pack_kernel<true><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(dst, src, n);
    else bf16_pack_kernel<false><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(dst, src, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_bf16_pack_round(Backend *be, uint16_t *dst, float *x, size_t n) {
    if (!n) return;
    bool vec = aligned16(x) && aligned8(dst);
    unsigned blocks = ct_elementwise_blocks(vec ? (n + 3) / 4 : n, DROP_THREADS);
    if (vec) bf16_pack_round_kernel<true><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(dst, x, n);
    else bf16_pack_round_kernel<false><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(dst, x, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_bf16_unpack(Backend *be, float *dst, const uint16_t *src, size_t n) {
    if (!n) return;
    bool vec = aligned16(dst) && ((uintptr_t)src & 7u) == 0;
    unsigned blocks = ct_elementwise_blocks(vec ? (n + 3) / 4 : n, DROP_THREADS);
    if (vec) bf16_unpack_kernel<true><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(dst, src, n);
    else bf16_unpack_kernel<false><<<blocks, DROP_THREADS, 0, cuda_stream(be)>>>(dst, src, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_mask_pack_bits(Backend *be, uint8_t *bits, const uint8_t *keep, size_t n) {
    if (!n) return;
    mask_pack_bits_kernel<<<ct_elementwise_blocks(n, DROP_THREADS), DROP_THREADS, 0, cuda_stream(be)>>>(bits, keep, n);
    CUDA_LAUNCHED();
}

extern "C" void cuda_mask_unpack_bits(Backend *be, uint8_t *keep, const uint8_t *bits, size_t n) {
    if (!n) return;
    mask_unpack_bits_kernel<<<ct_elementwise_blocks(n, DROP_THREADS), DROP_THREADS, 0, cuda_stream(be)>>>(keep, bits, n);
    CUDA_LAUNCHED();
}
