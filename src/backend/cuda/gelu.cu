// GeLU (tanh form) and its backward forms: from the input, from the output and one branch bit per
// element (Tempo), and from a k-bit code of the input (Few-Bit). Semantics: backend/cpu/gelu.c and
// gelu_fewbit.c. The arithmetic is the CPU's expression for expression, with the products and sums
// written as __fmul_rn / __fadd_rn / __fsub_rn so that nvcc does not fuse them into FMAs (the CPU,
// compiled as ISO C, never contracts): with ctron_tanhf shared, every result is the CPU's bit for bit
// (gelu_backward_from_output up to the libm logf of its rare fallback path).
#include <stdint.h>
#include "backend/cuda/cuda_common.cuh"

#define GELU_K 0.7978845608028654f   // sqrt(2/pi)
#define GELU_C 0.044715f
#define GELU_XMIN (-0.75246141f)     // argmin of the tanh-form GeLU

enum { GELU_THREADS = 256 };



// tanh(GELU_K·(x + GELU_C·x·x·x)), with the CPU's association ((C·x)·x)·x
static __device__ __forceinline__ float gelu_tanh(float x) {
    return ctron_tanhf(fmul(GELU_K, fadd(x, fmul(fmul(fmul(GELU_C, x), x), x))));
}

// gelu_scalar: 0.5f * x * (1.0f + tanh(...))
static __device__ __forceinline__ float gelu_d(float x) {
    return fmul(fmul(0.5f, x), fadd(1.0f, gelu_tanh(x)));
}

// gelu_backward's and gelu_slope's GeLU′: 0.5f·(1+t) + 0.5f·v·dt, dt = K·(1 + 3C·v·v)·(1 − t·t)
static __device__ __forceinline__ float gelu_slope_d(float v) {
    float t = gelu_tanh(v);
    float dt = fmul(fmul(GELU_K, fadd(1.0f, fmul(fmul(fmul(3.0f, GELU_C), v), v))), fsub(1.0f, fmul(t, t)));
    return fadd(fmul(0.5f, fadd(1.0f, t)), fmul(fmul(0.5f, v), dt));
}

// The Newton derivative of gelu_invert / newton_step, whose association differs from gelu_slope:
// 0.5f·(1+t) + 0.5f·x·K·(1 + 3C·x·x)·(1 − t·t), left to right
static __device__ __forceinline__ float newton_deriv(float x, float t) {
    float a = fmul(fmul(fmul(fmul(0.5f, x), GELU_K), fadd(1.0f, fmul(fmul(fmul(3.0f, GELU_C), x), x))),
                   fsub(1.0f, fmul(t, t)));
    return fadd(fmul(0.5f, fadd(1.0f, t)), a);
}

// The CPU's rough_logf: the exponent plus a quartic in the mantissa (explicit fmaf: the same bits).
static __device__ __forceinline__ float rough_logf_d(float x) {
    uint32_t u = __float_as_uint(x);
    float e = (float)((int32_t)(u >> 23) - 127);
    float m = __uint_as_float((u & 0x007FFFFFu) | 0x3F800000u);
    float p = fmaf(fmaf(fmaf(fmaf(-0.0548682564f, m, 0.435901975f), m, -1.44258773f), m, 2.79237665f), m, -1.7306818f);
    return fmaf(e, 0.69314718f, p);
}

// One safeguarded Newton step (the CPU's newton_step, as selects).
static __device__ __forceinline__ void newton_step_d(float y, int right, float *x, float *lo, float *hi, int *conv) {
    float v = *x;
    float t = gelu_tanh(v);
    float g = fsub(fmul(fmul(0.5f, v), fadd(1.0f, t)), y);
    float d = newton_deriv(v, t);
    int below = (g < 0.0f) == (right != 0);
    float l = below ? v : *lo, h = below ? *hi : v;
    float mid = fmul(0.5f, fadd(l, h)), newton = fsub(v, __fdiv_rn(g, d));
    float next = ((d != 0.0f) & (newton >= l) & (newton <= h)) ? newton : mid;
    int at_root = fabsf(g) <= fmul(1.2e-7f, fadd(fabsf(y), fabsf(v)));
    int step_done = at_root | (fabsf(fsub(next, v)) <= fmul(2e-7f, fadd(1.0f, fabsf(v))));
    *x = (*conv | at_root) ? v : next;
    *lo = l;
    *hi = h;
    *conv |= step_done;
}

// The CPU's gelu_invert_fixed: 8 safeguarded steps; *done says whether they settled.
static __device__ __forceinline__ float gelu_invert_fixed_d(float y, int right, int *done) {
    int flat = y <= -0.17004075f, left_zero = !right & (y >= 0.0f);
    float lo = right ? GELU_XMIN : -12.0f;
    float y1 = fadd(y, 1.0f);
    float hi = right ? (y > 0.0f ? y1 : 0.0f) : GELU_XMIN;
    float arg = fmul(-y, 2.5066283f);
    float tail = fmul(-2.0f, rough_logf_d(arg > 1e-30f ? arg : 1e-30f));
    float mid = fmul(0.5f, fadd(lo, hi)), tail_x = -__fsqrt_rn(tail > 0.0f ? tail : 0.0f);
    float x = right ? (y > 0.0f ? y : mid) : (tail > 0.0f ? tail_x : mid);
    x = (((x > lo) & (x < hi)) | (right & (y > 0.0f))) ? x : mid;
    int conv = 0;
#pragma unroll
    for (int it = 0; it < 8; it++) newton_step_d(y, right, &x, &lo, &hi, &conv);
    *done = conv | flat | left_zero;
    return flat ? GELU_XMIN : left_zero ? -12.0f : x;
}

// The CPU's gelu_invert (the fallback for the ~1 % the fixed steps do not settle). Its libm logf
// becomes a double log rounded to float: correctly rounded nearly always, as glibc's logf.
static __device__ float gelu_invert_d(float y, int right) {
    float lo, hi, x;
    if (right) {
        if (y <= -0.17004075f) return GELU_XMIN;
        lo = GELU_XMIN;
        hi = y > 0.0f ? fadd(y, 1.0f) : 0.0f;
        x = y > 0.0f ? y : fmul(0.5f, fadd(lo, hi));
    } else {
        if (y >= 0.0f) return -12.0f;
        if (y <= -0.17004075f) return GELU_XMIN;
        lo = -12.0f;
        hi = GELU_XMIN;
        float t = fmul(-2.0f, (float)log((double)fmul(-y, 2.5066283f)));
        x = t > 0.0f ? -__fsqrt_rn(t) : fmul(0.5f, fadd(lo, hi));
        if (!(x > lo && x < hi)) x = fmul(0.5f, fadd(lo, hi));
    }
    for (int it = 0; it < 24; it++) {
        float t = gelu_tanh(x);
        float g = fsub(fmul(fmul(0.5f, x), fadd(1.0f, t)), y);
        float d = newton_deriv(x, t);
        if (fabsf(g) <= fmul(1.2e-7f, fadd(fabsf(y), fabsf(x)))) return x;
        if ((g < 0.0f) == (right != 0)) lo = x; else hi = x;
        float next = d != 0.0f ? fsub(x, __fdiv_rn(g, d)) : fmul(0.5f, fadd(lo, hi));
        if (!(next >= lo && next <= hi)) next = fmul(0.5f, fadd(lo, hi));
        if (fabsf(fsub(next, x)) <= fmul(2e-7f, fadd(1.0f, fabsf(x)))) return next;
        x = next;
    }
    return x;
}

// ---- kernels

// x[n,cols] += bias[cols] (x becomes GeLU's input), y[n,cols] = gelu(x); ROUND: both rounded to bf16.
// Grid-stride over the n·cols elements; VEC: float4 over cols/4 groups (cols % 4 == 0, aligned).
template <bool ROUND, bool VEC>
static __global__ void bias_gelu_kernel(float *y, float *x, const float *bias, size_t total, int cols) {
    if (VEC) {
        int cols4 = cols / 4;
        float4 *x4 = reinterpret_cast<float4 *>(x), *y4 = reinterpret_cast<float4 *>(y);
        const float4 *b4 = reinterpret_cast<const float4 *>(bias);
        CT_GRID_LOOP(i, total / 4) {
            float4 v = x4[i], bb = b4[i % (size_t)cols4], o;
            v.x = fadd(v.x, bb.x); v.y = fadd(v.y, bb.y); v.z = fadd(v.z, bb.z); v.w = fadd(v.w, bb.w);
            if (ROUND) { v.x = bf16_round_f(v.x); v.y = bf16_round_f(v.y); v.z = bf16_round_f(v.z); v.w = bf16_round_f(v.w); }
            o.x = gelu_d(v.x); o.y = gelu_d(v.y); o.z = gelu_d(v.z); o.w = gelu_d(v.w);
            if (ROUND) { o.x = bf16_round_f(o.x); o.y = bf16_round_f(o.y); o.z = bf16_round_f(o.z); o.w = bf16_round_f(o.w); }
            x4[i] = v;
            y4[i] = o;
        }
    } else {
        CT_GRID_LOOP(i, total) {
            float v = fadd(x[i], bias[i % (size_t)cols]);
            if (ROUND) v = bf16_round_f(v);
            float o = gelu_d(v);
            if (ROUND) o = bf16_round_f(o);
            x[i] = v;
            y[i] = o;
        }
    }
}

// bias_gelu_kernel<ROUND = true> into bf16 copies: x16 = x + bias rounded, y16 = gelu of it rounded (the bits
// bf16_pack gives of bias_gelu_forward's rounded outputs); x itself is left as it was.
template <bool VEC>
static __global__ void bias_gelu16_kernel(uint16_t *y16, uint16_t *x16, const float *x, const float *bias,
                                          size_t total, int cols) {
    size_t done = 0;
    if (VEC) {
        CT_GRID_LOOP(i, total / 4) {
            float v[4], bb[4], o[4];
            load_v<4>(v, x + 4 * i);
            load_v<4>(bb, bias + (4 * i) % (size_t)cols);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                v[k] = bf16_round_f(fadd(v[k], bb[k]));
                o[k] = gelu_d(v[k]);
            }
            store_v<4>(x16 + 4 * i, v);
            store_v<4>(y16 + 4 * i, o);
        }
        done = total / 4 * 4;
    }
    CT_GRID_LOOP(j, total - done) {
        size_t i = done + j;
        float v = bf16_round_f(fadd(x[i], bias[i % (size_t)cols]));
        x16[i] = bf16_from_f32(v);
        y16[i] = bf16_from_f32(gelu_d(v));
    }
}

// y[count] = gelu(x[count]); grid-stride, float4 over the aligned part when VEC.
template <bool VEC>
static __global__ void gelu_forward_kernel(float *y, const float *x, size_t count) {
    size_t done = 0;
    if (VEC) {
        float4 *y4 = reinterpret_cast<float4 *>(y);
        const float4 *x4 = reinterpret_cast<const float4 *>(x);
        CT_GRID_LOOP(i, count / 4) {
            float4 v = x4[i], o;
            o.x = gelu_d(v.x); o.y = gelu_d(v.y); o.z = gelu_d(v.z); o.w = gelu_d(v.w);
            y4[i] = o;
        }
        done = count / 4 * 4;
    }
    CT_GRID_LOOP(j, count - done) { size_t i = done + j; y[i] = gelu_d(x[i]); }
}

// dx[count] = dy · gelu′(x) (dx may alias dy: each element read before written, by the same thread);
// grid-stride, 4 at a time over the aligned part when VEC. x: fp32, or the kept bf16 copy of GeLU's input,
// read exactly (the same products).
template <bool VEC, typename TI>
static __global__ void gelu_backward_kernel(float *dx, const float *dy, const TI *x, size_t count) {
    size_t done = 0;
    if (VEC) {
        CT_GRID_LOOP(i, count / 4) {
            float v[4], d[4], o[4];
            load_v<4>(v, x + 4 * i);
            load_v<4>(d, dy + 4 * i);
#pragma unroll
            for (int k = 0; k < 4; k++) o[k] = fmul(d[k], gelu_slope_d(v[k]));
            store_v<4>(dx + 4 * i, o);
        }
        done = count / 4 * 4;
    }
    CT_GRID_LOOP(j, count - done) {
        size_t i = done + j;
        float v[1];
        load_v<1>(v, x + i);
        dx[i] = fmul(dy[i], gelu_slope_d(v[0]));
    }
}

// x[count] -> bits[⌈count/8⌉]: bit j of byte i is x[8i+j] ≥ x_min. A warp packs 32 elements (4 bytes)
// with one ballot; grid-stride by whole warps (blockDim a multiple of 32).
static __global__ void gelu_branch_pack_kernel(uint8_t *bits, const float *x, size_t count) {
    size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / CT_WARP;
    size_t warps = (size_t)gridDim.x * blockDim.x / CT_WARP;
    unsigned lane = threadIdx.x % CT_WARP;
    size_t nbytes = (count + 7) / 8;
    for (size_t base = warp * CT_WARP; base < count; base += warps * CT_WARP) {
        size_t i = base + lane;
        unsigned m = __ballot_sync(0xFFFFFFFFu, i < count && x[i] >= GELU_XMIN);
        size_t byte = base / 8 + lane;
        if (lane < 4 && byte < nbytes) bits[byte] = (uint8_t)(m >> (8 * lane));
    }
}

// dx[count] = dy · gelu′(x), x recovered from y and its branch bit (dx may alias dy): one thread per
// element; the few the fixed Newton steps do not settle take the bracketed fallback.
static __global__ void gelu_backward_from_output_kernel(float *dx, const float *dy, const float *y,
                                                        const uint8_t *bits, size_t count) {
    CT_GRID_LOOP(i, count) {
        int right = (bits[i / 8] >> (i % 8)) & 1;
        float yi = y[i];
        int done;
        float x = gelu_invert_fixed_d(yi, right, &done);
        if (!done) x = gelu_invert_d(yi, right);
        dx[i] = fmul(dy[i], gelu_slope_d(x));
    }
}

// The Few-Bit table's fields, by value (a kernel parameter).
struct FewBitParams {
    int k, levels;
    float bound[(1 << FEWBIT_MAX_BITS) - 1];
    float slope[1 << FEWBIT_MAX_BITS];
};

static FewBitParams fewbit_params(const FewBitGelu *t) {
    FewBitParams p;
    p.k = t->k;
    p.levels = t->levels;
    for (int j = 0; j < (1 << FEWBIT_MAX_BITS) - 1; j++) p.bound[j] = t->bound[j];
    for (int j = 0; j < (1 << FEWBIT_MAX_BITS); j++) p.slope[j] = t->slope[j];
    return p;
}

// x[count] -> codes[⌈count·k/8⌉]: element i's code at bits i·k .. i·k+k−1, LSB first. One thread per
// group of 8 elements, which fill k whole bytes (the last group only the bytes it reaches).
static __global__ void fewbit_encode_kernel(uint8_t *codes, const float *x, size_t count, FewBitParams t) {
    size_t groups = (count + 7) / 8, k = (size_t)t.k;
    CT_GRID_LOOP(gi, groups) {
        uint32_t word = 0;
        for (size_t j = 0; j < 8 && 8 * gi + j < count; j++) {
            float v = x[8 * gi + j];
            unsigned c = 0;
            for (int b = 0; b < t.levels - 1; b++) c += v >= t.bound[b];
            word |= c << (j * k);
        }
        size_t nbytes = 8 * gi + 8 <= count ? k : ((count - 8 * gi) * k + 7) / 8;
        for (size_t b = 0; b < nbytes; b++) codes[gi * k + b] = (uint8_t)(word >> (8 * b));
    }
}

// dx[count] = dy · slope[code] (dx may alias dy): one thread per element, its code read from the
// (at most two) bytes it spans.
static __global__ void fewbit_backward_kernel(float *dx, const float *dy, const uint8_t *codes, size_t count,
                                              FewBitParams t) {
    size_t k = (size_t)t.k, nbytes = (count * k + 7) / 8;
    unsigned mask = (1u << t.k) - 1;
    CT_GRID_LOOP(i, count) {
        size_t bit = i * k;
        unsigned two = codes[bit / 8] | (bit / 8 + 1 < nbytes ? (unsigned)codes[bit / 8 + 1] << 8 : 0u);
        dx[i] = fmul(dy[i], t.slope[(two >> (bit % 8)) & mask]);
    }
}

// ---- entries

extern "C" void cuda_bias_gelu_forward(Backend *be, float *y, float *x, const float *bias, int n, int cols,
                                       int round_bf16) {
    size_t total = (size_t)n * (size_t)cols;
    if (n <= 0 || cols <= 0) return;
    cudaStream_t st = cuda_stream(be);
    bool vec = cols % 4 == 0 && aligned16(x) && aligned16(y) && aligned16(bias);
    unsigned blocks = ct_elementwise_blocks(vec ? total / 4 : total, GELU_THREADS);
    if (round_bf16) {
        if (vec) bias_gelu_kernel<true, true><<<blocks, GELU_THREADS, 0, st>>>(y, x, bias, total, cols);
        else bias_gelu_kernel<true, false><<<blocks, GELU_THREADS, 0, st>>>(y, x, bias, total, cols);
    } else {
        if (vec) bias_gelu_kernel<false, true><<<blocks, GELU_THREADS, 0, st>>>(y, x, bias, total, cols);
        else bias_gelu_kernel<false, false><<<blocks, GELU_THREADS, 0, st>>>(y, x, bias, total, cols);
    }
    CUDA_LAUNCHED();
}

extern "C" void cuda_bias_gelu_forward16(Backend *be, uint16_t *y16, uint16_t *x16, const float *x, const float *bias,
                                         int n, int cols) {
    size_t total = (size_t)n * (size_t)cols;
    if (n <= 0 || cols <= 0) return;
    cudaStream_t st = cuda_stream(be);
    bool vec = cols % 4 == 0 && aligned16(x) && aligned16(bias) && aligned8(x16) && aligned8(y16);
    unsigned blocks = ct_elementwise_blocks(vec ? total / 4 : total, GELU_THREADS);
    if (vec) bias_gelu16_kernel<true><<<blocks, GELU_THREADS, 0, st>>>(y16, x16, x, bias, total, cols);
    else bias_gelu16_kernel<false><<<blocks, GELU_THREADS, 0, st>>>(y16, x16, x, bias, total, cols);
    CUDA_LAUNCHED();
}

extern "C" void cuda_gelu_forward(Backend *be, float *y, const float *x, size_t count) {
    if (!count) return;
    bool vec = aligned16(x) && aligned16(y);
    unsigned blocks = ct_elementwise_blocks(vec ? (count + 3) / 4 : count, GELU_THREADS);
    if (vec) gelu_forward_kernel<true><<<blocks, GELU_THREADS, 0, cuda_stream(be)>>>(y, x, count);
    else gelu_forward_kernel<false><<<blocks, GELU_THREADS, 0, cuda_stream(be)>>>(y, x, count);
    CUDA_LAUNCHED();
}

template <typename TI>
static void gelu_backward_launch(Backend *be, bool vec, float *dx, const float *dy, const TI *x, size_t count) {
    unsigned blocks = ct_elementwise_blocks(vec ? (count + 3) / 4 : count, GELU_THREADS);
    if (vec) gelu_backward_kernel<true, TI><<<blocks, GELU_THREADS, 0, cuda_stream(be)>>>(dx, dy, x, count);
    else gelu_backward_kernel<false, TI><<<blocks, GELU_THREADS, 0, cuda_stream(be)>>>(dx, dy, x, count);
    CUDA_LAUNCHED();
}

extern "C" void cuda_gelu_backward(Backend *be, float *dx, const float *dy, const float *x, size_t count) {
    if (count) gelu_backward_launch(be, aligned16(dx) && aligned16(dy) && aligned16(x), dx, dy, x, count);
}

extern "C" void cuda_gelu_backward16(Backend *be, float *dx, const float *dy, const uint16_t *x, size_t count) {
    if (count) gelu_backward_launch(be, aligned16(dx) && aligned16(dy) && aligned8(x), dx, dy, x, count);
}

extern "C" void cuda_gelu_branch_pack(Backend *be, uint8_t *bits, const float *x, size_t count) {
    if (!count) return;
    gelu_branch_pack_kernel<<<ct_elementwise_blocks(count, GELU_THREADS), GELU_THREADS, 0, cuda_stream(be)>>>(
        bits, x, count);
    CUDA_LAUNCHED();
}

extern "C" void cuda_gelu_backward_from_output(Backend *be, float *dx, const float *dy, const float *y,
                                               const uint8_t *bits, size_t count) {
    if (!count) return;
    gelu_backward_from_output_kernel<<<ct_elementwise_blocks(count, GELU_THREADS), GELU_THREADS, 0,
                                       cuda_stream(be)>>>(dx, dy, y, bits, count);
    CUDA_LAUNCHED();
}

extern "C" void cuda_fewbit_gelu_encode(Backend *be, uint8_t *codes, const float *x, size_t count,
                                        const FewBitGelu *t) {
    if (!count) return;
    fewbit_encode_kernel<<<ct_elementwise_blocks((count + 7) / 8, GELU_THREADS), GELU_THREADS, 0, cuda_stream(be)>>>(
        codes, x, count, fewbit_params(t));
    CUDA_LAUNCHED();
}

extern "C" void cuda_fewbit_gelu_backward(Backend *be, float *dx, const float *dy, const uint8_t *codes,
                                          size_t count, const FewBitGelu *t) {
    if (!count) return;
    fewbit_backward_kernel<<<ct_elementwise_blocks(count, GELU_THREADS), GELU_THREADS, 0, cuda_stream(be)>>>(
        dx, dy, codes, count, fewbit_params(t));
    CUDA_LAUNCHED();
}
