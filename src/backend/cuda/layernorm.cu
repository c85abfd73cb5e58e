// LayerNorm over the last dimension (eps LN_EPS), forward and backward, the backward also from the
// output (Tempo). Semantics: backend/cpu/layernorm.c: stats[n,2] = (mean, rstd) per row; the backward
// writes or adds dx (accumulate) and adds this call's column sums into dw and db. Row statistics are
// block reductions over a fixed layout; dw/db sum fixed row chunks into CUDA_SCRATCH_REDUCE partials
// (rows in order inside a chunk), then add the partials in chunk order: no atomics, the same bits
// every run. Elementwise products and sums are __fmul_rn / __fadd_rn (the CPU does not contract).
#include <stdint.h>
#include "backend/cpu/layernorm.h"
#include "backend/cuda/cuda_common.cuh"

enum {
    LN_COL_THREADS = 128,   // columns per block of the dw/db partial pass
    LN_MAX_CHUNKS = 128,    // row chunks of the dw/db partial pass (at most)
    LN_MIN_CHUNK_ROWS = 32
};





// x[n,h] -> y[n,h] = (x − mean)·rstd·w + b, stats[n,2] = (mean, rstd): one block per row, threads
// over the columns V at a time (V = 4 needs h % 4 == 0 and aligned rows); two-pass variance.
template <int V>
static __global__ void ln_forward_kernel(float *y, float *stats, const float *x, const float *w, const float *b, int h) {
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const float *xr = x + r * (size_t)h;
    float *yr = y + r * (size_t)h;
    int step = (int)blockDim.x * V;
    float sum = 0.0f;
    for (int c = (int)threadIdx.x * V; c < h; c += step) {
        float v[V];
        load_v<V>(v, xr + c);
#pragma unroll
        for (int j = 0; j < V; j++) sum = fadd(sum, v[j]);
    }
    float mean = __fdiv_rn(block_sum(sum, red), (float)h);
    float var = 0.0f;
    for (int c = (int)threadIdx.x * V; c < h; c += step) {
        float v[V];
        load_v<V>(v, xr + c);
#pragma unroll
        for (int j = 0; j < V; j++) { float d = fsub(v[j], mean); var = fadd(var, fmul(d, d)); }
    }
    var = block_sum(var, red);
    float rstd = __fdiv_rn(1.0f, __fsqrt_rn(fadd(__fdiv_rn(var, (float)h), LN_EPS)));
    for (int c = (int)threadIdx.x * V; c < h; c += step) {
        float v[V], wv[V], bv[V], o[V];
        load_v<V>(v, xr + c);
        load_v<V>(wv, w + c);
        load_v<V>(bv, b + c);
#pragma unroll
        for (int j = 0; j < V; j++) o[j] = fadd(fmul(fmul(fsub(v[j], mean), rstd), wv[j]), bv[j]);
        store_v<V>(yr + c, o);
    }
    if (threadIdx.x == 0) {
        stats[2 * r] = mean;
        stats[2 * r + 1] = rstd;
    }
}

// x̂ from the input, (x − mean)·rstd, or (FROM_OUT) from the output, (y − b)/w.
template <bool FROM_OUT>
static __device__ __forceinline__ float xhat_of(float xv, float mean, float rstd, float wv, float bv) {
    return FROM_OUT ? __fdiv_rn(fsub(xv, bv), wv) : fmul(fsub(xv, mean), rstd);
}

// dy, x (or y) [n,h], stats -> dx[n,h] = (or +=) rstd·(dy·w − mean(dy·w) − x̂·mean(dy·w·x̂)): one block
// per row, threads over the columns V at a time. XT: the source's type, fp32 or the arena's bf16 copy (its
// values exactly, so the same bits).
template <int V, bool FROM_OUT, typename XT>
static __global__ void ln_backward_rows_kernel(float *dx, int accumulate, const float *dy, const XT *x,
                                               const float *stats, const float *w, const float *beta, int h) {
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const float *dyr = dy + r * (size_t)h;
    const XT *xr = x + r * (size_t)h;
    float *dxr = dx + r * (size_t)h;
    float mean = stats[2 * r], rstd = stats[2 * r + 1];
    int step = (int)blockDim.x * V;
    float s1 = 0.0f, s2 = 0.0f;
    for (int c = (int)threadIdx.x * V; c < h; c += step) {
        float d[V], xv[V], wv[V], bv[V] = {};
        load_v<V>(d, dyr + c);
        load_v<V>(xv, xr + c);
        load_v<V>(wv, w + c);
        if (FROM_OUT) load_v<V>(bv, beta + c);
#pragma unroll
        for (int j = 0; j < V; j++) {
            float dxh = fmul(d[j], wv[j]);
            float xh = xhat_of<FROM_OUT>(xv[j], mean, rstd, wv[j], FROM_OUT ? bv[j] : 0.0f);
            s1 = fadd(s1, dxh);
            s2 = fadd(s2, fmul(dxh, xh));
        }
    }
    float m1 = __fdiv_rn(block_sum(s1, red), (float)h);
    float m2 = __fdiv_rn(block_sum(s2, red), (float)h);
    for (int c = (int)threadIdx.x * V; c < h; c += step) {
        float d[V], xv[V], wv[V], bv[V] = {}, o[V] = {};
        load_v<V>(d, dyr + c);
        load_v<V>(xv, xr + c);
        load_v<V>(wv, w + c);
        if (FROM_OUT) load_v<V>(bv, beta + c);
        if (accumulate) load_v<V>(o, dxr + c);
#pragma unroll
        for (int j = 0; j < V; j++) {
            float xh = xhat_of<FROM_OUT>(xv[j], mean, rstd, wv[j], FROM_OUT ? bv[j] : 0.0f);
            float g = fmul(rstd, fsub(fsub(fmul(d[j], wv[j]), m1), fmul(xh, m2)));
            o[j] = accumulate ? fadd(o[j], g) : g;
        }
        store_v<V>(dxr + c, o);
    }
}

// dy, x (or y) [n,h] -> part[chunk][2][h]: Σ dy·x̂ and Σ dy over the rows of chunk blockIdx.y
// ([k·rows, k·rows + rows), in order), one thread per column (blockIdx.x: LN_COL_THREADS columns).
template <bool FROM_OUT, typename XT>
static __global__ void ln_dwdb_partial_kernel(float *part, const float *dy, const XT *x, const float *stats,
                                              const float *w, const float *beta, int n, int h, int rows) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= h) return;
    int r0 = blockIdx.y * rows, r1 = r0 + rows < n ? r0 + rows : n;
    float wc = w[c], bc = FROM_OUT ? beta[c] : 0.0f;
    float aw = 0.0f, ab = 0.0f;
#pragma unroll 4
    for (int r = r0; r < r1; r++) {
        size_t o = (size_t)r * h + c;
        float d = dy[o];
        float xh = xhat_of<FROM_OUT>(ct_f32(x[o]), stats[2 * r], stats[2 * r + 1], wc, bc);
        aw = fadd(aw, fmul(d, xh));
        ab = fadd(ab, d);
    }
    float *pk = part + (size_t)blockIdx.y * 2 * h;
    pk[c] = aw;
    pk[h + c] = ab;
}

// part[chunks][2][h] -> dw[h] += Σ_k part[k][0], db[h] += Σ_k part[k][1], chunks in order: one
// thread per column.
static __global__ void ln_dwdb_final_kernel(float *dw, float *db, const float *part, int chunks, int h) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= h) return;
    float aw = 0.0f, ab = 0.0f;
    for (int k = 0; k < chunks; k++) {
        const float *pk = part + (size_t)k * 2 * h;
        aw = fadd(aw, pk[c]);
        ab = fadd(ab, pk[h + c]);
    }
    dw[c] = fadd(dw[c], aw);
    db[c] = fadd(db[c], ab);
}

// ---- entries

extern "C" void cuda_layernorm_forward(Backend *be, float *y, float *stats, const float *x, const float *w,
                                       const float *b, int n, int h) {
    if (n <= 0 || h <= 0) return;
    cudaStream_t st = cuda_stream(be);
    if (h % 4 == 0 && aligned16(y) && aligned16(x) && aligned16(w) && aligned16(b))
        ln_forward_kernel<4><<<(unsigned)n, row_threads_v(h, 4), 0, st>>>(y, stats, x, w, b, h);
    else
        ln_forward_kernel<1><<<(unsigned)n, row_threads_v(h, 1), 0, st>>>(y, stats, x, w, b, h);
    CUDA_LAUNCHED();
}

template <bool FROM_OUT, typename XT>
static void ln_backward(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy,
                        const XT *x, const float *stats, const float *w, const float *beta, int n, int h) {
    if (n <= 0 || h <= 0) return;
    cudaStream_t st = cuda_stream(be);
    bool vec = h % 4 == 0 && aligned16(dx) && aligned16(dy) && aligned_v4(x) && aligned16(w) &&
               (!FROM_OUT || aligned16(beta));
    if (vec)
        ln_backward_rows_kernel<4, FROM_OUT, XT><<<(unsigned)n, row_threads_v(h, 4), 0, st>>>(dx, accumulate, dy, x,
                                                                                              stats, w, beta, h);
    else
        ln_backward_rows_kernel<1, FROM_OUT, XT><<<(unsigned)n, row_threads_v(h, 1), 0, st>>>(dx, accumulate, dy, x,
                                                                                              stats, w, beta, h);
    CUDA_LAUNCHED();
    if (!dw) return;   // a frozen norm (LoRA): no weight gradients

    // dw, db: fixed chunks of rows (a function of n alone), then the chunks in order.
    int rows = (n + LN_MAX_CHUNKS - 1) / LN_MAX_CHUNKS;
    if (rows < LN_MIN_CHUNK_ROWS) rows = LN_MIN_CHUNK_ROWS;
    int chunks = (n + rows - 1) / rows;
    float *part = (float *)cuda_scratch(be, CUDA_SCRATCH_REDUCE, (size_t)chunks * 2 * (size_t)h * sizeof(float));
    dim3 grid((unsigned)((h + LN_COL_THREADS - 1) / LN_COL_THREADS), (unsigned)chunks);
    ln_dwdb_partial_kernel<FROM_OUT, XT><<<grid, LN_COL_THREADS, 0, st>>>(part, dy, x, stats, w, beta, n, h, rows);
    CUDA_LAUNCHED();
    ln_dwdb_final_kernel<<<(unsigned)((h + 255) / 256), 256, 0, st>>>(dw, db, part, chunks, h);
    CUDA_LAUNCHED();
}

extern "C" void cuda_layernorm_backward(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy,
                                        const float *x, const float *stats, const float *w, int n, int h) {
    ln_backward<false>(be, dx, accumulate, dw, db, dy, x, stats, w, (const float *)NULL, n, h);
}

// The same from the input's bf16 copy in the arena (backend.h's layernorm_backward16).
extern "C" void cuda_layernorm_backward16(Backend *be, float *dx, int accumulate, float *dw, float *db,
                                          const float *dy, const uint16_t *x, const float *stats, const float *w,
                                          int n, int h) {
    ln_backward<false>(be, dx, accumulate, dw, db, dy, x, stats, w, (const float *)NULL, n, h);
}

extern "C" void cuda_layernorm_backward_from_output(Backend *be, float *dx, int accumulate, float *dw, float *db,
                                                    const float *dy, const float *y, const float *stats,
                                                    const float *w, const float *b, int n, int h) {
    ln_backward<true>(be, dx, accumulate, dw, db, dy, y, stats, w, b, n, h);
}
