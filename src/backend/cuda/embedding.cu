// Token and position embeddings, forward and backward, and their vocabulary-parallel forms.
// Semantics: backend/cpu/embedding.c and vocab_parallel.c. The backward adds each dx row into its
// dwte / dwpe row in increasing row order, exactly as the CPU does (one rounding per added row), so
// the gradients are the CPU's bit for bit and never depend on scheduling: for dwte the (token, row)
// pairs are sorted once per call (CUB's stable radix sort, in CUDA_SCRATCH_REDUCE) and each vocabulary
// row's run of rows is summed by one thread per column; dwpe sums the batch of each position in order.
#include <cub/device/device_radix_sort.cuh>
#include <stdint.h>
#include "backend/cuda/cuda_common.cuh"

enum { EMB_COL_THREADS = 128, EMB_KEY_THREADS = 256, EMB_MAX_SEG_BLOCKS = 2048 };





// tokens[s·b] -> x[s·b, h] = wte[token] + wpe[row / b]: one block per row, threads over the columns.
template <int V>
static __global__ void embedding_forward_kernel(float *x, const int32_t *tokens, const float *wte, const float *wpe,
                                                int b, int h) {
    size_t row = blockIdx.x;
    const float *te = wte + (size_t)tokens[row] * h, *pe = wpe + (row / (size_t)b) * h;
    float *xr = x + row * h;
    for (int c = (int)threadIdx.x * V; c < h; c += (int)blockDim.x * V) {
        float t[V], p[V], o[V];
        load_v<V>(t, te + c);
        load_v<V>(p, pe + c);
#pragma unroll
        for (int j = 0; j < V; j++) o[j] = fadd(t[j], p[j]);
        store_v<V>(xr + c, o);
    }
}

// tokens[n] -> x[n, h] = wte[token − v0] for tokens in [v0, v0 + vl), else 0: one block per row.
template <int V>
static __global__ void embedding_vocab_forward_kernel(float *x, const int32_t *tokens, const float *wte, int v0, int vl,
                                                      int h) {
    size_t row = blockIdx.x;
    int local = tokens[row] - v0;
    bool mine = local >= 0 && local < vl;
    const float *te = wte + (mine ? (size_t)local * h : 0);
    float *xr = x + row * h;
    for (int c = (int)threadIdx.x * V; c < h; c += (int)blockDim.x * V) {
        float o[V];
        if (mine) load_v<V>(o, te + c);
        else {
#pragma unroll
            for (int j = 0; j < V; j++) o[j] = 0.0f;
        }
        store_v<V>(xr + c, o);
    }
}

// The same from a bf16 table (--base-dtype bf16), each element widened exactly.
static __global__ void embedding_vocab_forward16_kernel(float *x, const int32_t *tokens, const uint16_t *wte16, int v0,
                                                        int vl, int h) {
    size_t row = blockIdx.x;
    int local = tokens[row] - v0;
    bool mine = local >= 0 && local < vl;
    const uint16_t *te = wte16 + (mine ? (size_t)local * h : 0);
    float *xr = x + row * h;
    for (int c = (int)threadIdx.x; c < h; c += (int)blockDim.x) xr[c] = mine ? bf16_to_f32(te[c]) : 0.0f;
}

// x[s·b, h] += wpe[s0 + row / b]: one block per row.
template <int V>
static __global__ void embedding_add_positions_kernel(float *x, const float *wpe, int s0, int b, int h) {
    size_t row = blockIdx.x;
    const float *pe = wpe + ((size_t)s0 + row / (size_t)b) * h;
    float *xr = x + row * h;
    for (int c = (int)threadIdx.x * V; c < h; c += (int)blockDim.x * V) {
        float v[V], p[V];
        load_v<V>(v, xr + c);
        load_v<V>(p, pe + c);
#pragma unroll
        for (int j = 0; j < V; j++) v[j] = fadd(v[j], p[j]);
        store_v<V>(xr + c, v);
    }
}

// dx[s·b, h] -> dwpe[s0 + p, c] += dx[p·b + 0, c], then + dx[p·b + 1, c], ... in order: block
// (p = blockIdx.x, column tile blockIdx.y), one thread per column.
static __global__ void embedding_positions_backward_kernel(float *dwpe, const float *dx, int s0, int b, int h) {
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= h) return;
    size_t p = blockIdx.x;
    float *pe = dwpe + ((size_t)s0 + p) * h + c;
    const float *g = dx + p * (size_t)b * h + c;
    float acc = *pe;
#pragma unroll 8
    for (int bi = 0; bi < b; bi++) acc = fadd(acc, g[(size_t)bi * h]);
    *pe = acc;
}

// tokens[n] -> key[n] = token − v0 for the rank's tokens, vl (past every vocabulary row) for the
// others; row[n] = the row index (the sort's payload).
static __global__ void embedding_keys_kernel(unsigned *key, int *row, const int32_t *tokens, int v0, int vl, int n) {
    CT_GRID_LOOP(r, (size_t)n) {
        int local = tokens[r] - v0;
        key[r] = local >= 0 && local < vl ? (unsigned)local : (unsigned)vl;
        row[r] = (int)r;
    }
}

// Sorted (key, row)[n] -> dwte[key, c] += dx[row, c] over each key's run, rows in increasing order
// (the stable sort kept them so). The block whose sorted position starts a run owns it (its end found
// by binary search in the ascending keys); blocks stride over the positions (blockIdx.x), column
// tiles on blockIdx.y, one thread per column. Loads go 8 ahead of the in-order adds (a frequent token
// has a long run).
static __global__ void embedding_vocab_accumulate_kernel(float *dwte, const float *dx, const unsigned *key,
                                                         const int *row, int n, unsigned vl, int h) {
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= h) return;
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
        unsigned k = key[i];
        if (k >= vl || (i > 0 && key[i - 1] == k)) continue;
        int end = i + 1, hi = n;   // the first position past the run: keys ascend
        while (end < hi) {
            int mid = end + (hi - end) / 2;
            if (key[mid] == k) end = mid + 1;
            else hi = mid;
        }
        float *te = dwte + (size_t)k * h + c;
        float acc = *te;
        int j = i;
        for (; j + 8 <= end; j += 8) {
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) v[u] = dx[(size_t)row[j + u] * h + c];
#pragma unroll
            for (int u = 0; u < 8; u++) acc = fadd(acc, v[u]);
        }
        for (; j < end; j++) acc = fadd(acc, dx[(size_t)row[j] * h + c]);
        *te = acc;
    }
}

// ---- entries


extern "C" void cuda_embedding_forward(Backend *be, float *x, const int32_t *tokens, const float *wte,
                                       const float *wpe, int s, int b, int h) {
    if (s <= 0 || b <= 0 || h <= 0) return;
    unsigned rows = (unsigned)(s * b);
    cudaStream_t st = cuda_stream(be);
    if (h % 4 == 0 && aligned16(x) && aligned16(wte) && aligned16(wpe))
        embedding_forward_kernel<4><<<rows, row_threads_v(h, 4), 0, st>>>(x, tokens, wte, wpe, b, h);
    else
        embedding_forward_kernel<1><<<rows, row_threads_v(h, 1), 0, st>>>(x, tokens, wte, wpe, b, h);
    CUDA_LAUNCHED();
}

extern "C" void cuda_embedding_vocab_forward(Backend *be, float *x, const int32_t *tokens, const float *wte, int v0,
                                             int vl, int n, int h) {
    if (n <= 0 || h <= 0) return;
    cudaStream_t st = cuda_stream(be);
    if (h % 4 == 0 && aligned16(x) && aligned16(wte))
        embedding_vocab_forward_kernel<4><<<(unsigned)n, row_threads_v(h, 4), 0, st>>>(x, tokens, wte, v0, vl, h);
    else
        embedding_vocab_forward_kernel<1><<<(unsigned)n, row_threads_v(h, 1), 0, st>>>(x, tokens, wte, v0, vl, h);
    CUDA_LAUNCHED();
}

extern "C" void cuda_embedding_vocab_forward16(Backend *be, float *x, const int32_t *tokens, const uint16_t *wte16,
                                               int v0, int vl, int n, int h) {
    if (n <= 0 || h <= 0) return;
    embedding_vocab_forward16_kernel<<<(unsigned)n, row_threads_v(h, 1), 0, cuda_stream(be)>>>(x, tokens, wte16, v0, vl,
                                                                                               h);
    CUDA_LAUNCHED();
}

extern "C" void cuda_embedding_add_positions(Backend *be, float *x, const float *wpe, int s0, int s, int b, int h) {
    if (s <= 0 || b <= 0 || h <= 0) return;
    unsigned rows = (unsigned)(s * b);
    cudaStream_t st = cuda_stream(be);
    if (h % 4 == 0 && aligned16(x) && aligned16(wpe))
        embedding_add_positions_kernel<4><<<rows, row_threads_v(h, 4), 0, st>>>(x, wpe, s0, b, h);
    else
        embedding_add_positions_kernel<1><<<rows, row_threads_v(h, 1), 0, st>>>(x, wpe, s0, b, h);
    CUDA_LAUNCHED();
}

extern "C" void cuda_embedding_positions_backward(Backend *be, float *dwpe, const float *dx, int s0, int s, int b,
                                                  int h) {
    if (s <= 0 || b <= 0 || h <= 0) return;
    dim3 grid((unsigned)s, (unsigned)((h + EMB_COL_THREADS - 1) / EMB_COL_THREADS));
    embedding_positions_backward_kernel<<<grid, EMB_COL_THREADS, 0, cuda_stream(be)>>>(dwpe, dx, s0, b, h);
    CUDA_LAUNCHED();
}

extern "C" void cuda_embedding_vocab_backward(Backend *be, float *dwte, const float *dx, const int32_t *tokens, int v0,
                                              int vl, int n, int h) {
    if (n <= 0 || h <= 0 || vl <= 0) return;
    cudaStream_t st = cuda_stream(be);
    // Keys 0 .. vl (vl: not this rank's): the sort looks at the bits that can be set.
    int end_bit = 0;
    while (end_bit < 32 && ((uint64_t)1 << end_bit) <= (uint64_t)vl) end_bit++;
    size_t sort_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (const unsigned *)nullptr, (unsigned *)nullptr,
                                               (const int *)nullptr, (int *)nullptr, n, 0, end_bit, st));
    size_t keys_bytes = ct_round256((size_t)n * sizeof(unsigned)), rows_bytes = ct_round256((size_t)n * sizeof(int));
    char *base = (char *)cuda_scratch(be, CUDA_SCRATCH_REDUCE, 2 * keys_bytes + 2 * rows_bytes + ct_round256(sort_bytes));
    unsigned *key_in = (unsigned *)base, *key_out = (unsigned *)(base + keys_bytes);
    int *row_in = (int *)(base + 2 * keys_bytes), *row_out = (int *)(base + 2 * keys_bytes + rows_bytes);
    void *sort_tmp = base + 2 * keys_bytes + 2 * rows_bytes;

    embedding_keys_kernel<<<ct_elementwise_blocks((size_t)n, EMB_KEY_THREADS), EMB_KEY_THREADS, 0, st>>>(
        key_in, row_in, tokens, v0, vl, n);
    CUDA_LAUNCHED();
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, key_in, key_out, row_in, row_out, n, 0, end_bit,
                                               st));
    unsigned seg_blocks = (unsigned)(n < EMB_MAX_SEG_BLOCKS ? n : EMB_MAX_SEG_BLOCKS);
    dim3 grid(seg_blocks, (unsigned)((h + EMB_COL_THREADS - 1) / EMB_COL_THREADS));
    embedding_vocab_accumulate_kernel<<<grid, EMB_COL_THREADS, 0, st>>>(dwte, dx, key_out, row_out, n, (unsigned)vl, h);
    CUDA_LAUNCHED();
}

extern "C" void cuda_embedding_backward(Backend *be, float *dwte, float *dwpe, const float *dx, const int32_t *tokens,
                                        int s, int b, int h) {
    cuda_embedding_vocab_backward(be, dwte, dx, tokens, 0, INT32_MAX, s * b, h);
    cuda_embedding_positions_backward(be, dwpe, dx, 0, s, b, h);
}
