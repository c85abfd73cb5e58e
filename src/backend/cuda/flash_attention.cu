// Flash attention on the GPU (backend/cpu/flash_attention.h gives the semantics): causal
// softmax(q kᵀ/√d) → dropout → · v in 64×64 tiles with an online softmax, keeping ctx [s,b,h] and one
// log-sum-exp per query, lse [b,a,s]; the backward recomputes each tile's probabilities from q, k and
// lse. Two arithmetic paths, picked by be->precision:
//   fp32 — SIMT FMAs, 256 threads per block, the CPU's exp (ctron_expf): matches the CPU to fp32
//          summation order;
//   bf16 — mma.sync m16n8k16 (bf16 operands, fp32 accumulation) for every tile product, 128 threads
//          (four warps of 16 rows, two blocks per SM; the forward's warps own 32 rows, two query tiles a
//          block, under CTRON_FLASH_FWD_ROWS=32, with the same bits), operands rounded to bf16 copies once per call
//          and streamed by cp.async into double-buffered tiles while the previous tile computes, exp
//          through ex2.approx (bf16 operands dominate the error by far).
// Dropout: each tile's keep bits are drawn from the same Philox counters as the CPU (element index
// (head·s + i)·s + j of sample sample0 + bi), so the mask equals attention_forward's.
// Backward, deterministic without atomics: D = rowsum(dO ∘ O) per query (into the model's scratch),
// then one block per (key tile, kv head, sample) accumulates dK, dV over the query tiles in a fixed order
// (grouped-query attention: the kv head's query heads one after another in the block, in ascending
// order, each one's sum added to the earlier ones'), and one block per (query tile, head, sample)
// accumulates dQ over the key tiles in a fixed order.
// Grouped-query attention: k, v, dk, dv are [s, b, kv·d]; query head j reads kv head j / (a/kv).
// Head dims up to 128: kernels are instantiated for padded widths 32, 64, 96, 128 (zero columns past d).
// Architectures: mma.sync, ldmatrix and cp.async are sm_80 features (the build's sm_80, sm_90 and
// compute_90 targets all have them). Each tile kernel says one block per SM is enough
// (__launch_bounds__(threads, 1)): without it ptxas (CUDA 13) held some instantiations to 128 or 96
// registers and spilled 8–24 bytes (fwd_f32<64>, fwd_f32<128>, bwd_dkdv_f32<32>, bwd_dq_f32<64>,
// fwd_bf16<32>); the tiles' shared memory allows one or two blocks per SM anyway. The cuda-static
// test (tests/check_spills.py) keeps them free of spills.
#include <math.h>
#include <stdio.h>
#include "backend/cuda/cuda_common.cuh"

enum { FT = 64 };   // tile rows (queries) and columns (keys)

// Everything a kernel needs to place one (sequence, head) and draw its dropout mask. q, ctx, dq, dO
// are [s, b, a·d] (row stride ld); k, v, dk, dv [s, b, kv·d] (row stride ldk): grouped-query
// attention, grp = a/kv consecutive query heads per kv head (grp 1: multi-head).
struct FlashDims {
    int s, b, a, h, d, ld, head0, drop, vec, kv, grp, ldk;
    int vec8;     // the bf16 path: d % 8 == 0, so 16-byte cp.async reaches every row of the bf16 copies
    int q0, q1;   // the forward's query positions [q0, q1) (0, s: every one; MEMO's token ranges: a part)
    int window;   // sliding window: query i sees keys attn_first_key(i, window) .. i (0: none, also for one ≥ s)
    uint32_t span;   // i sees j iff 0 <= i − j < span: window, or INT_MAX for none (flash_sees)
    uint32_t sample0, thresh;
    float scale, keep_scale;
    DropoutSite site;
};

// Where head bj = bi·a + j of the q-side tensors starts (off), where its kv head bj / grp = bi·kv + j/grp
// starts in k and v (koff), and its dropout sample and global head.
struct FlashHead {
    size_t off, koff;
    uint32_t sample;
    int head;
};
__device__ __forceinline__ FlashHead flash_head(const FlashDims &f, int bj) {
    FlashHead x;
    int bi = bj / f.a, j = bj % f.a;
    x.off = (size_t)bi * f.h + (size_t)j * f.d;
    x.koff = (size_t)(bj / f.grp) * (size_t)f.d;
    x.sample = f.sample0 + (uint32_t)bi;
    x.head = f.head0 + j;
    return x;
}

// The forward's query tiles: rows q0, q0 + 64, … below q1 (one grid column each).
__device__ __forceinline__ int flash_query_tiles(const FlashDims &f) { return (f.q1 - f.q0 + FT - 1) / FT; }
// Key tiles 0 .. the one holding the causal limit of query tile i0's last row below q1.
__device__ __forceinline__ int flash_key_tiles(const FlashDims &f, int i0) {
    int last = (i0 + FT < f.q1 ? i0 + FT : f.q1) - 1;
    return last / FT + 1;
}
// The first key tile query tile i0 needs: the one holding its first row's first key (the CPU's
// attention_first_key(i0, window) / T); the tiles left of it are outside every row's window.
__device__ __forceinline__ int flash_first_key_tile(const FlashDims &f, int i0) {
    return attn_first_key(i0, f.window) / FT;
}
// The end of the query tiles key tile j0 meets (the backward): past the last query whose window reaches
// the tile's last key j0+63 (queries up to j0+63+window−1), or every tile.
__device__ __forceinline__ int flash_query_tile_end(const FlashDims &f, int j0) {
    int ntiles = (f.s + FT - 1) / FT;
    if (f.window <= 0 || j0 + FT - 1 + f.window >= f.s) return ntiles;
    return (j0 + FT - 1 + f.window + FT - 1) / FT;
}
// Whether query i sees key j: causal (j <= i) and within its window (j >= attn_first_key(i, window), i.e.
// i − j < window), as one unsigned compare against a kernel parameter: the inner loops hold no more
// registers than the causal test alone did (the bf16 dK/dV kernels at d 96 and 128 spill otherwise).
__device__ __forceinline__ bool flash_sees(const FlashDims &f, int i, int j) { return (uint32_t)(i - j) < f.span; }

// ---- dropout bits of one tile
// bits[r·4 + w] bit c = keep of query i0 + r, key j0 + 16·w + c (r < 64, w < 4): Philox blocks
// (e/4, sample, step, word3) of element e = (head·s + i)·s + j, word e mod 4, as dropout_keep_at.
// Rows past s and 16-key groups wholly above the diagonal are left 0 (their probabilities are 0).
template <int NT>
__device__ __forceinline__ void keep_bits_tile(uint16_t *bits, const FlashDims &f, uint32_t sample, int head, int i0,
                                               int j0) {
    uint32_t w3 = dropout_counter_word3(f.site);
    for (int item = threadIdx.x; item < FT * 4; item += NT) {
        int r = item >> 2, w = item & 3, i = i0 + r, jf = j0 + 16 * w;
        uint32_t out = 0;
        if (i < f.s && jf <= i) {
            uint64_t e0 = ((uint64_t)head * (uint64_t)f.s + (uint64_t)i) * (uint64_t)f.s + (uint64_t)jf;
            uint64_t blk0 = e0 >> 2;
            int r4 = (int)(e0 & 3u), nblk = r4 ? 5 : 4;
            for (int m = 0; m < nblk; m++) {
                philox_ctr ctr = {{(uint32_t)(blk0 + (uint64_t)m), sample, f.site.step, w3}};
                philox_ctr rr = philox4x32_10_inline(ctr, f.site.key);
#pragma unroll
                for (int w2 = 0; w2 < 4; w2++) {
                    int c = m * 4 + w2 - r4;
                    if (c >= 0 && c < 16) out |= (uint32_t)(rr.v[w2] >= f.thresh) << c;
                }
            }
        }
        bits[item] = (uint16_t)out;
    }
}
__device__ __forceinline__ int keep_bit(const uint16_t *bits, int r, int col) {
    return (bits[r * 4 + (col >> 4)] >> (col & 15)) & 1;
}

// ---- D = rowsum(dO ∘ O): one warp per (query, head, sample), 8 per block; Drow [b·a, s] as lse.
template <typename OT>
static __global__ void __launch_bounds__(256) flash_rowdot_kernel(float *Drow, const OT *o, const float *dout,
                                                                  FlashDims f) {
    size_t item = (size_t)blockIdx.x * 8 + threadIdx.x / CT_WARP;
    int lane = threadIdx.x % CT_WARP;
    if (item >= (size_t)f.s * f.b * f.a) return;   // whole warps leave together
    int bj = (int)(item / (size_t)f.s), i = (int)(item % (size_t)f.s);
    FlashHead hd = flash_head(f, bj);
    const OT *orow = o + hd.off + (size_t)i * f.ld;
    const float *grow = dout + hd.off + (size_t)i * f.ld;
    float acc = 0.0f;
    for (int c = lane; c < f.d; c += CT_WARP) acc = fmaf(ct_f32(orow[c]), grow[c], acc);
    acc = warp_sum(acc);
    if (lane == 0) Drow[item] = acc;
}

// =====================================================================================================
// fp32 path: SIMT. Thread t of 256: tr = t/16 owns tile rows 4·tr .. 4·tr+3; tc = t%16 owns tile
// columns tc + 16·u (u < 4 for 64-wide score tiles, u < DPAD/16 for head-dim accumulators). Row
// reductions run over the 16 lanes of a half-warp (xor butterflies: every lane ends with the same bits).
// =====================================================================================================
template <int DPAD>
struct F32Smem {
    static constexpr int LDS = DPAD + 4;   // float row stride of q/k/v/dO tiles (float4 rows, banks spread)
    static constexpr int LDP = FT + 4;     // float row stride of score tiles
    static constexpr size_t tile = (size_t)FT * LDS;
    static constexpr size_t score = (size_t)FT * LDP;
    static constexpr size_t bits_bytes = FT * 4 * sizeof(uint16_t);
    static constexpr size_t fwd = (3 * tile + score) * sizeof(float) + bits_bytes;
    static constexpr size_t dkdv = (4 * tile + 2 * score + 2 * FT) * sizeof(float) + bits_bytes;
    static constexpr size_t dq = (4 * tile + score + 2 * FT) * sizeof(float) + bits_bytes;
};

// Rows r0 .. r0+63 of one head (base: its first column; d columns, row stride ld) into dst [64][DPAD+4],
// zeros past s and past d.
template <int DPAD, int NT>
__device__ __forceinline__ void load_tile_f32(float *dst, const float *base, int r0, const FlashDims &f, int ld) {
    constexpr int LDS = F32Smem<DPAD>::LDS;
    if (f.vec) {
        constexpr int C4 = DPAD / 4;
        for (int it = threadIdx.x; it < FT * C4; it += NT) {
            int r = it / C4, c = (it % C4) * 4;
            float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (r0 + r < f.s && c < f.d) x = __ldg(reinterpret_cast<const float4 *>(base + (size_t)(r0 + r) * ld + c));
            *reinterpret_cast<float4 *>(dst + r * LDS + c) = x;
        }
    } else {
        for (int it = threadIdx.x; it < FT * DPAD; it += NT) {
            int r = it / DPAD, c = it % DPAD;
            dst[r * LDS + c] = (r0 + r < f.s && c < f.d) ? __ldg(base + (size_t)(r0 + r) * ld + c) : 0.0f;
        }
    }
}
// lse and D of query rows i0 .. i0+63 (0 past s).
__device__ __forceinline__ void load_rows(float *lse_s, float *D_s, const float *lse, const float *Drow, int bj,
                                          int i0, const FlashDims &f) {
    for (int r = threadIdx.x; r < FT; r += blockDim.x) {
        int i = i0 + r;
        size_t at = (size_t)bj * f.s + i;
        lse_s[r] = i < f.s ? lse[at] : 0.0f;
        D_s[r] = i < f.s ? Drow[at] : 0.0f;
    }
}

// acc[i][u] += Σ_k A[4·tr+i][k] · B[tc+16u][k] over k < DPAD (A, B [64][DPAD+4] tiles): the 4×4 score
// block of this thread, float4 loads along k, sequential FMAs per entry.
template <int DPAD>
__device__ __forceinline__ void scores_f32(float (&acc)[4][4], const float *A, const float *B, int tr, int tc) {
    constexpr int LDS = F32Smem<DPAD>::LDS;
#pragma unroll 4
    for (int k = 0; k < DPAD; k += 4) {
        float4 x[4], y[4];
#pragma unroll
        for (int i = 0; i < 4; i++) x[i] = *reinterpret_cast<const float4 *>(A + (4 * tr + i) * LDS + k);
#pragma unroll
        for (int u = 0; u < 4; u++) y[u] = *reinterpret_cast<const float4 *>(B + (tc + 16 * u) * LDS + k);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int u = 0; u < 4; u++) {
                float t = acc[i][u];
                t = fmaf(x[i].x, y[u].x, t);
                t = fmaf(x[i].y, y[u].y, t);
                t = fmaf(x[i].z, y[u].z, t);
                t = fmaf(x[i].w, y[u].w, t);
                acc[i][u] = t;
            }
    }
}
// acc[i][u] += Σ_c P[4·tr+i][c] · M[c][tc+16u] over the 64 columns of P ([64][68]) and rows of M
// ([64][DPAD+4]).
template <int DPAD>
__device__ __forceinline__ void pv_f32(float (&acc)[4][DPAD / 16], const float *P, const float *M, int tr, int tc) {
    constexpr int LDS = F32Smem<DPAD>::LDS, LDP = F32Smem<DPAD>::LDP, NU = DPAD / 16;
#pragma unroll 2
    for (int c = 0; c < FT; c += 4) {
        float4 p[4];
#pragma unroll
        for (int i = 0; i < 4; i++) p[i] = *reinterpret_cast<const float4 *>(P + (4 * tr + i) * LDP + c);
#pragma unroll
        for (int cc = 0; cc < 4; cc++) {
            const float *mrow = M + (c + cc) * LDS + tc;
#pragma unroll
            for (int u = 0; u < NU; u++) {
                float mv = mrow[16 * u];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    float pv = cc == 0 ? p[i].x : cc == 1 ? p[i].y : cc == 2 ? p[i].z : p[i].w;
                    acc[i][u] = fmaf(pv, mv, acc[i][u]);
                }
            }
        }
    }
}
__device__ __forceinline__ float half_warp_max(float v) {
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}
__device__ __forceinline__ float half_warp_sum(float v) {
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

// Forward, fp32: grid (query tiles, b·a), 256 threads; heaviest query tiles (most key tiles) first.
template <int DPAD>
static __global__ void __launch_bounds__(256, 1) flash_fwd_f32(float *ctx, float *lse, const float *q, const float *k,
                                                            const float *v, FlashDims f) {
    using SM = F32Smem<DPAD>;
    constexpr int LDP = SM::LDP, NU = DPAD / 16;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float *Qs = reinterpret_cast<float *>(smem_raw), *Ks = Qs + SM::tile, *Vs = Ks + SM::tile, *Ps = Vs + SM::tile;
    uint16_t *bits = reinterpret_cast<uint16_t *>(Ps + SM::score);
    int qt = flash_query_tiles(f) - 1 - (int)blockIdx.x, i0 = f.q0 + qt * FT, bj = blockIdx.y;
    int nkt = flash_key_tiles(f, i0);
    int tr = threadIdx.x >> 4, tc = threadIdx.x & 15;
    FlashHead hd = flash_head(f, bj);
    load_tile_f32<DPAD, 256>(Qs, q + hd.off, i0, f, f.ld);
    float o[4][NU], mrow[4], lrow[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        mrow[i] = -INFINITY;
        lrow[i] = 0.0f;
#pragma unroll
        for (int u = 0; u < NU; u++) o[i][u] = 0.0f;
    }
    for (int kt = flash_first_key_tile(f, i0); kt < nkt; kt++) {   // key tiles from the window's to the diagonal
        int j0 = kt * FT;
        __syncthreads();   // the previous tile's readers of Ks, Vs, Ps, bits are done
        load_tile_f32<DPAD, 256>(Ks, k + hd.koff, j0, f, f.ldk);
        load_tile_f32<DPAD, 256>(Vs, v + hd.koff, j0, f, f.ldk);
        if (f.drop) keep_bits_tile<256>(bits, f, hd.sample, hd.head, i0, j0);
        __syncthreads();
        float sc[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int u = 0; u < 4; u++) sc[i][u] = 0.0f;
        scores_f32<DPAD>(sc, Qs, Ks, tr, tc);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int r = 4 * tr + i, row = i0 + r;
            float mx = mrow[i];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                sc[i][u] *= f.scale;
                if (flash_sees(f, row, j0 + tc + 16 * u)) mx = fmaxf(mx, sc[i][u]);
            }
            mx = half_warp_max(mx);
            // mx = −∞: no key of this row seen yet (its window starts past this tile); its p are all 0
            // and m, l, O stay as they are (the CPU skips the row), not e^(−∞+∞) = NaN
            float corr = mx == -INFINITY ? 1.0f : ctron_expf(mrow[i] - mx), sum = 0.0f;
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int col = tc + 16 * u;
                float p = flash_sees(f, row, j0 + col) ? ctron_expf(sc[i][u] - mx) : 0.0f;
                sum += p;
                if (f.drop) p = keep_bit(bits, r, col) ? p * f.keep_scale : 0.0f;
                Ps[r * LDP + col] = p;
            }
            sum = half_warp_sum(sum);
            lrow[i] = lrow[i] * corr + sum;
            mrow[i] = mx;
#pragma unroll
            for (int u = 0; u < NU; u++) o[i][u] *= corr;
        }
        __syncwarp();   // a thread's P̃ rows come from its own half-warp
        pv_f32<DPAD>(o, Ps, Vs, tr, tc);   // O += P̃ · V_tile
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int row = i0 + 4 * tr + i;
        if (row >= f.q1) continue;
        float inv = 1.0f / lrow[i];
        float *dst = ctx + hd.off + (size_t)row * f.ld;
#pragma unroll
        for (int u = 0; u < NU; u++)
            if (tc + 16 * u < f.d) dst[tc + 16 * u] = o[i][u] * inv;
        if (tc == 0) lse[(size_t)bj * f.s + row] = mrow[i] + logf(lrow[i]);
    }
}

// The group's sum: the first query head's product writes, each later one's is added (the order of the
// earlier launch per head and its separate add, so the same bits).
__device__ __forceinline__ void dkdv_store(float *dk, float *dv, float dka, float dva, int t, const FlashDims &f) {
    float k = dka * f.scale;
    *dk = t ? fadd(*dk, k) : k;
    *dv = t ? fadd(*dv, dva) : dva;
}

// dK, dV, fp32: grid (key tiles, b·kv), 256 threads; the key tile stays in shared memory while the kv
// head's query heads go by in ascending order, each summed on its own and added to the group's sum in dk,
// dv (dkdv_store). tr owns keys 4·tr.., tc queries tc+16u of each query tile (scores) and columns tc+16u
// (accumulators). Query tiles from the diagonal down, in order.
template <int DPAD>
static __global__ void __launch_bounds__(256, 1) flash_bwd_dkdv_f32(float *dk, float *dv, const float *q, const float *k,
                                                                 const float *v, const float *dout, const float *lse,
                                                                 const float *Drow, FlashDims f) {
    using SM = F32Smem<DPAD>;
    constexpr int LDP = SM::LDP, NU = DPAD / 16;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float *Ks = reinterpret_cast<float *>(smem_raw), *Vs = Ks + SM::tile, *Qs = Vs + SM::tile, *Os = Qs + SM::tile;
    float *Pt = Os + SM::tile, *dSt = Pt + SM::score, *lse_s = dSt + SM::score, *D_s = lse_s + FT;
    uint16_t *bits = reinterpret_cast<uint16_t *>(D_s + FT);
    int kt = blockIdx.x, j0 = kt * FT, qend = flash_query_tile_end(f, j0);
    int tr = threadIdx.x >> 4, tc = threadIdx.x & 15;
    size_t koff = flash_head(f, blockIdx.y * f.grp).koff;
    load_tile_f32<DPAD, 256>(Ks, k + koff, j0, f, f.ldk);
    load_tile_f32<DPAD, 256>(Vs, v + koff, j0, f, f.ldk);
    for (int t = 0; t < f.grp; t++) {   // the group's query heads, in ascending order
        int bj = blockIdx.y * f.grp + t;
        FlashHead hd = flash_head(f, bj);
        float dka[4][NU], dva[4][NU];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int u = 0; u < NU; u++) dka[i][u] = dva[i][u] = 0.0f;
        for (int qt = kt; qt < qend; qt++) {   // from the diagonal to the last query tile whose windows reach it
            int i0 = qt * FT;
            __syncthreads();
            load_tile_f32<DPAD, 256>(Qs, q + hd.off, i0, f, f.ld);
            load_tile_f32<DPAD, 256>(Os, dout + hd.off, i0, f, f.ld);
            load_rows(lse_s, D_s, lse, Drow, bj, i0, f);
            if (f.drop) keep_bits_tile<256>(bits, f, hd.sample, hd.head, i0, j0);
            __syncthreads();
            float st[4][4], dpt[4][4];   // Sᵀ = K Qᵀ and dP̃ᵀ = V dOᵀ, this thread's keys × queries
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int u = 0; u < 4; u++) st[i][u] = dpt[i][u] = 0.0f;
            scores_f32<DPAD>(st, Ks, Qs, tr, tc);
            scores_f32<DPAD>(dpt, Vs, Os, tr, tc);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int kr = 4 * tr + i, key = j0 + kr;
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    int qr = tc + 16 * u, qi = i0 + qr;
                    float p = flash_sees(f, qi, key) && qi < f.s ? ctron_expf(st[i][u] * f.scale - lse_s[qr])
                                                                 : 0.0f;
                    float m = f.drop ? (keep_bit(bits, qr, kr) ? f.keep_scale : 0.0f) : 1.0f;
                    dSt[kr * LDP + qr] = p * (dpt[i][u] * m - D_s[qr]);   // dS = P ⊙ (dP − D)
                    Pt[kr * LDP + qr] = p * m;                             // P̃
                }
            }
            __syncwarp();   // a thread's P̃ᵀ, dSᵀ rows come from its own half-warp
            pv_f32<DPAD>(dva, Pt, Os, tr, tc);    // dV += P̃ᵀ dO
            pv_f32<DPAD>(dka, dSt, Qs, tr, tc);   // dK += dSᵀ Q (scaled at the end)
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int key = j0 + 4 * tr + i;
            if (key >= f.s) continue;
            size_t at = (size_t)blockIdx.y * f.d + (size_t)key * f.ldk;   // the kv head's rows
#pragma unroll
            for (int u = 0; u < NU; u++)
                if (tc + 16 * u < f.d)
                    dkdv_store(dk + at + tc + 16 * u, dv + at + tc + 16 * u, dka[i][u], dva[i][u], t, f);
        }
    }
}

// dQ, fp32: grid (query tiles, b·a), 256 threads; tr owns queries 4·tr.., tc keys tc+16u (scores) and
// columns tc+16u (dQ). Key tiles from 0 to the diagonal, in order.
template <int DPAD>
static __global__ void __launch_bounds__(256, 1) flash_bwd_dq_f32(float *dq, const float *q, const float *k,
                                                               const float *v, const float *dout, const float *lse,
                                                               const float *Drow, FlashDims f) {
    using SM = F32Smem<DPAD>;
    constexpr int LDP = SM::LDP, NU = DPAD / 16;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float *Qs = reinterpret_cast<float *>(smem_raw), *Os = Qs + SM::tile, *Ks = Os + SM::tile, *Vs = Ks + SM::tile;
    float *dSs = Vs + SM::tile, *lse_s = dSs + SM::score, *D_s = lse_s + FT;
    uint16_t *bits = reinterpret_cast<uint16_t *>(D_s + FT);
    int ntiles = (f.s + FT - 1) / FT, qt = ntiles - 1 - (int)blockIdx.x, i0 = qt * FT, bj = blockIdx.y;
    int tr = threadIdx.x >> 4, tc = threadIdx.x & 15;
    FlashHead hd = flash_head(f, bj);
    load_tile_f32<DPAD, 256>(Qs, q + hd.off, i0, f, f.ld);
    load_tile_f32<DPAD, 256>(Os, dout + hd.off, i0, f, f.ld);
    load_rows(lse_s, D_s, lse, Drow, bj, i0, f);
    float dqa[4][NU];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int u = 0; u < NU; u++) dqa[i][u] = 0.0f;
    for (int kt = flash_first_key_tile(f, i0); kt <= qt; kt++) {
        int j0 = kt * FT;
        __syncthreads();
        load_tile_f32<DPAD, 256>(Ks, k + hd.koff, j0, f, f.ldk);
        load_tile_f32<DPAD, 256>(Vs, v + hd.koff, j0, f, f.ldk);
        if (f.drop) keep_bits_tile<256>(bits, f, hd.sample, hd.head, i0, j0);
        __syncthreads();
        float sc[4][4], dp[4][4];   // S = Q Kᵀ, dP̃ = dO Vᵀ
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int u = 0; u < 4; u++) sc[i][u] = dp[i][u] = 0.0f;
        scores_f32<DPAD>(sc, Qs, Ks, tr, tc);
        scores_f32<DPAD>(dp, Os, Vs, tr, tc);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int r = 4 * tr + i, row = i0 + r;
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int col = tc + 16 * u;
                float p = flash_sees(f, row, j0 + col) ? ctron_expf(sc[i][u] * f.scale - lse_s[r]) : 0.0f;
                float m = f.drop ? (keep_bit(bits, r, col) ? f.keep_scale : 0.0f) : 1.0f;
                dSs[r * LDP + col] = p * (dp[i][u] * m - D_s[r]);
            }
        }
        __syncwarp();   // a thread's dS rows come from its own half-warp
        pv_f32<DPAD>(dqa, dSs, Ks, tr, tc);   // dQ += dS K (scaled at the end)
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int row = i0 + 4 * tr + i;
        if (row >= f.s) continue;
        float *dst = dq + hd.off + (size_t)row * f.ld;
#pragma unroll
        for (int u = 0; u < NU; u++)
            if (tc + 16 * u < f.d) dst[tc + 16 * u] = dqa[i][u] * f.scale;
    }
}

// =====================================================================================================
// bf16 path: tensor cores. Four warps; warp w owns tile rows 16·w .. 16·w+15 of its side (queries in
// the forward and dQ, keys in dK/dV). The operands are rounded (nearest even, bf16_from_f32: the CPU's
// bits) once per call into bf16 copies in CUDA_SCRATCH_FLASH (pack_operands below); tiles travel from
// those copies by cp.async straight into bf16 tiles [64][DPAD+8] (16-byte row pad: ldmatrix rows fall on
// distinct banks). The streamed side (keys in the forward and dQ, queries in dK/dV) is double-buffered:
// tile t+1 (its bf16 rows, its dropout bits, its lse and D) is fetched into the other buffer while tile
// t computes, and one __syncthreads per tile separates a buffer's readers from its next writers. Without
// an fp32 staging copy a block needs 86 KiB (forward) or 104 KiB (backward) at head dim 128, so two
// blocks (eight warps) share an SM; the tile loop rounded each fp32 tile again per block before (the
// second H100 measured 60 TFLOP/s with one block per SM). The rounding is the same, so the bits are.
// mma.sync m16n8k16 fragments (g = lane/4, c = lane%4):
//   A 16×16: a0 (g, 2c..2c+1), a1 (g+8, 2c..), a2 (g, 2c+8..), a3 (g+8, 2c+8..)
//   B 16×8 : b0 (k 2c..2c+1, n g), b1 (k 2c+8.., n g)
//   C 16×8 : c0,c1 (g, 2c, 2c+1), c2,c3 (g+8, 2c, 2c+1)
// so the C fragments of two adjacent 8-column tiles are the A fragment of a 16-wide k step (P → P·V).
// =====================================================================================================
template <int DPAD>
struct B16Smem {
    static constexpr int LDB = DPAD + 8;   // bf16 row stride
    static constexpr size_t tile_b = (size_t)FT * LDB * sizeof(uint16_t);
    static constexpr size_t bits_bytes = FT * 4 * sizeof(uint16_t);
    static constexpr size_t rows_bytes = 2 * FT * sizeof(float);   // lse and D of one query tile
    // two fixed tiles (Q, dO or K, V), two streamed ones twice; lse and D twice; the bits twice
    static constexpr size_t bwd = 6 * tile_b + 2 * rows_bytes + 2 * bits_bytes;
};

#include "backend/cuda/cuda_ptx.cuh"   // cp.async, ldmatrix, mma.sync, ex2 (and their host twins for the emulation)

// Fragment addresses in a bf16 tile [64][LDB]; row0/col0 the 16×16 block's corner.
// A operand (rows = M): matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) → a0..a3.
template <int LDB>
__device__ __forceinline__ const uint16_t *frag_a(const uint16_t *t, int row0, int col0, int lane) {
    return t + (row0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDB + col0 + (lane >> 4) * 8;
}
// B operand from a tile whose rows are the n index (B[k][n] = t[n][k], e.g. K for Q·Kᵀ): matrices
// (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) → b0,b1 of n-tile n0 and of n0+8.
template <int LDB>
__device__ __forceinline__ const uint16_t *frag_bn(const uint16_t *t, int n0, int k0, int lane) {
    return t + (n0 + (lane & 7) + (lane >> 4) * 8) * LDB + k0 + ((lane >> 3) & 1) * 8;
}
// B operand from a tile whose rows are the k index (B[k][n] = t[k][n], e.g. V for P·V), with .trans:
// matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
template <int LDB>
__device__ __forceinline__ const uint16_t *frag_bk(const uint16_t *t, int k0, int n0, int lane) {
    return t + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDB + n0 + (lane >> 4) * 8;
}

// Rows r0 .. r0+63 of one head of a bf16 copy (base: the head's first column; row stride ld) into the
// bf16 tile dst [64][LDB], zeros past s and past d. f.vec8 (d % 8 == 0; the copies are 256-byte aligned,
// so every row and head starts on 16 bytes): 16-byte cp.async per 8 columns; otherwise element by
// element. The zeros are plain stores: a buffer is written only after the __syncthreads that ends its
// last readers' tile, and read only after the one that follows the writers' cp_async_wait_all.
template <int DPAD, int NT>
__device__ __forceinline__ void fetch_tile(uint16_t *dst, const uint16_t *base, int r0, const FlashDims &f, int ld) {
    constexpr int LDB = B16Smem<DPAD>::LDB, C8 = DPAD / 8;
    for (int it = threadIdx.x; it < FT * C8; it += NT) {
        int r = it / C8, c = (it % C8) * 8;
        uint16_t *d = dst + r * LDB + c;
        const uint16_t *src = base + (size_t)(r0 + r) * ld + c;
        if (r0 + r >= f.s || c >= f.d) {
            *reinterpret_cast<uint4 *>(d) = make_uint4(0u, 0u, 0u, 0u);
        } else if (f.vec8) {
            cp_async16(d, src);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) d[e] = c + e < f.d ? src[e] : (uint16_t)0;
        }
    }
}

// One 16-row group's online softmax over key tile j0 (the forward): S in sacc (scaled and masked here, left as
// P̃, the dropped probabilities), O rescaled, the running max m and sum l of its rows row0 = first + g and
// row0 + 8 (first: the group's first query; r0: row0's row in its 64-row tile, for the dropout bits).
template <int NO>
__device__ __forceinline__ void online_softmax_tile(float (&sacc)[8][4], float (&o)[NO][4], float (&m)[2],
                                                    float (&l)[2], const FlashDims &f, const uint16_t *bits, int first,
                                                    int r0, int j0, int g, int c) {
    int row0 = first + g, row1 = row0 + 8;
    float mx0 = m[0], mx1 = m[1];
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int key = j0 + n * 8 + 2 * c + e;
            sacc[n][e] = flash_sees(f, row0, key) ? sacc[n][e] * f.scale : -INFINITY;
            sacc[n][2 + e] = flash_sees(f, row1, key) ? sacc[n][2 + e] * f.scale : -INFINITY;
            mx0 = fmaxf(mx0, sacc[n][e]);
            mx1 = fmaxf(mx1, sacc[n][2 + e]);
        }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xFFFFFFFFu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xFFFFFFFFu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xFFFFFFFFu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xFFFFFFFFu, mx1, 2));
    // A row with no key seen yet (its window starts past this tile: mx = −∞) exponentiates against 0
    // instead: its p and corr are e^−∞ = 0, its l and O stay 0 (not e^(−∞+∞) = NaN); m stays −∞.
    float ms0 = mx0 == -INFINITY ? 0.0f : mx0, ms1 = mx1 == -INFINITY ? 0.0f : mx1;
    float corr0 = exp_fast(m[0] - ms0), corr1 = exp_fast(m[1] - ms1), sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int col = n * 8 + 2 * c + e;
            float p0 = exp_fast(sacc[n][e] - ms0), p1 = exp_fast(sacc[n][2 + e] - ms1);   // masked: e^−∞ = 0
            sum0 += p0;
            sum1 += p1;
            if (f.drop) {
                p0 = keep_bit(bits, r0, col) ? p0 * f.keep_scale : 0.0f;
                p1 = keep_bit(bits, r0 + 8, col) ? p1 * f.keep_scale : 0.0f;
            }
            sacc[n][e] = p0;
            sacc[n][2 + e] = p1;
        }
    sum0 += __shfl_xor_sync(0xFFFFFFFFu, sum0, 1);
    sum0 += __shfl_xor_sync(0xFFFFFFFFu, sum0, 2);
    sum1 += __shfl_xor_sync(0xFFFFFFFFu, sum1, 1);
    sum1 += __shfl_xor_sync(0xFFFFFFFFu, sum1, 2);
    l[0] = l[0] * corr0 + sum0;
    l[1] = l[1] * corr1 + sum1;
    m[0] = mx0;
    m[1] = mx1;
#pragma unroll
    for (int n = 0; n < NO; n++) {
        o[n][0] *= corr0;
        o[n][1] *= corr0;
        o[n][2] *= corr1;
        o[n][3] *= corr1;
    }
}

// Forward, bf16: grid (blocks of MT query tiles, b·a), 128 threads, two blocks per SM; heaviest query tiles
// first. Warp w owns 16·MT query rows of one 64-row query tile (MT 1: rows 16w.. of the block's tile; MT 2:
// rows 32(w%2).. of tile w/2): their S (16×64 each) and O (16×DPAD each) in accumulators. MT 2 shares each K
// and V fragment between two row groups (half the shared-memory reads a product), reading Q's fragments from
// shared memory; MT 1 keeps them in registers. A warp runs exactly the key tiles its own 64-row tile needs, in
// the same order with the same products, so every row's bits are the same for MT 1 and 2. q, k, v: the bf16
// copies.
template <int DPAD, int MT>
struct FwdSmem {
    static constexpr size_t bytes = (size_t)(MT + 4) * B16Smem<DPAD>::tile_b + 2 * MT * B16Smem<DPAD>::bits_bytes;
};
template <int DPAD, int MT>
static __global__ void __launch_bounds__(128, 2) flash_fwd_bf16(float *ctx, float *lse, const uint16_t *q,
                                                             const uint16_t *k, const uint16_t *v, FlashDims f) {
    using SM = B16Smem<DPAD>;
    constexpr int LDB = SM::LDB, KS = DPAD / 16, NO = DPAD / 8, TB = FT * LDB, BT = FT * 4;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    // Q's MT tiles, then K and V twice; the bits [2][MT][64·4]
    uint16_t *Qb = reinterpret_cast<uint16_t *>(smem_raw), *Kb2 = Qb + MT * TB, *Vb2 = Kb2 + 2 * TB;
    uint16_t *bits2 = Vb2 + 2 * TB;
    int nqt = flash_query_tiles(f), t0 = ((nqt + MT - 1) / MT - 1 - (int)blockIdx.x) * MT, bj = blockIdx.y;
    int tiles = nqt - t0 < MT ? nqt - t0 : MT;   // the block's query tiles t0 .. t0 + tiles − 1
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    int u = warp * MT / 4, w16 = (warp * 16 * MT) % FT;   // this warp's tile and its first row in it
    int iu = f.q0 + (t0 + u) * FT;                         // that tile's first query
    bool live = u < tiles;
    // the block's key tiles, and this warp's (its tile's): from the window's first to the diagonal
    int kt0 = flash_first_key_tile(f, f.q0 + t0 * FT), nkt = flash_key_tiles(f, f.q0 + (t0 + tiles - 1) * FT);
    int wkt0 = flash_first_key_tile(f, iu), wnkt = live ? flash_key_tiles(f, iu) : 0;
    FlashHead hd = flash_head(f, bj);

    for (int t = 0; t < tiles; t++) fetch_tile<DPAD, 128>(Qb + t * TB, q + hd.off, f.q0 + (t0 + t) * FT, f, f.ld);
    fetch_tile<DPAD, 128>(Kb2, k + hd.koff, kt0 * FT, f, f.ldk);
    fetch_tile<DPAD, 128>(Vb2, v + hd.koff, kt0 * FT, f, f.ldk);
    if (f.drop)
        for (int t = 0; t < tiles; t++)
            keep_bits_tile<128>(bits2 + t * BT, f, hd.sample, hd.head, f.q0 + (t0 + t) * FT, kt0 * FT);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();
    const uint16_t *Qu = Qb + u * TB;
    uint32_t qf[MT == 1 ? KS : 1][4];   // MT 1: the rows' Q fragments, kept
    if constexpr (MT == 1) {
#pragma unroll
        for (int kk = 0; kk < KS; kk++) ldsm_x4(qf[kk], frag_a<LDB>(Qu, w16, kk * 16, lane));
    }

    float o[MT][NO][4], m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int n = 0; n < NO; n++) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.0f;
    }
    for (int kt = kt0; kt < nkt; kt++) {   // key tiles from the window's to the diagonal
        int j0 = kt * FT, buf = (kt - kt0) & 1;
        const uint16_t *Kb = Kb2 + buf * TB, *Vb = Vb2 + buf * TB, *bits = bits2 + (buf * MT + u) * BT;
        cp_async_wait_all();
        __syncthreads();   // tile kt has landed; every reader of the other buffer (tile kt − 1) is done
        if (kt + 1 < nkt) {   // the next tile streams in while this one computes
            fetch_tile<DPAD, 128>(Kb2 + (buf ^ 1) * TB, k + hd.koff, j0 + FT, f, f.ldk);
            fetch_tile<DPAD, 128>(Vb2 + (buf ^ 1) * TB, v + hd.koff, j0 + FT, f, f.ldk);
            if (f.drop)
                for (int t = 0; t < tiles; t++)
                    keep_bits_tile<128>(bits2 + ((buf ^ 1) * MT + t) * BT, f, hd.sample, hd.head, f.q0 + (t0 + t) * FT,
                                        j0 + FT);
            cp_async_commit();
        }
        if (kt < wkt0 || kt >= wnkt) continue;   // outside this warp's tile's key tiles
        float sacc[MT][8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int n = 0; n < 8; n++) sacc[mt][n][0] = sacc[mt][n][1] = sacc[mt][n][2] = sacc[mt][n][3] = 0.0f;
        if constexpr (MT == 1) {
#pragma unroll
            for (int kk = 0; kk < KS; kk++)
#pragma unroll
                for (int np = 0; np < 4; np++) {
                    uint32_t b[4];
                    ldsm_x4(b, frag_bn<LDB>(Kb, np * 16, kk * 16, lane));
                    mma_bf16(sacc[0][2 * np], qf[kk], b[0], b[1]);
                    mma_bf16(sacc[0][2 * np + 1], qf[kk], b[2], b[3]);
                }
        } else {
#pragma unroll 1   // rolled: its addresses made per step, not all held (the two groups' S and O fill the registers)
            for (int kk = 0; kk < KS; kk++) {
                uint32_t qa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) ldsm_x4(qa[mt], frag_a<LDB>(Qu, w16 + 16 * mt, kk * 16, lane));
#pragma unroll
                for (int np = 0; np < 4; np++) {
                    uint32_t b[4];
                    ldsm_x4(b, frag_bn<LDB>(Kb, np * 16, kk * 16, lane));
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma_bf16(sacc[mt][2 * np], qa[mt], b[0], b[1]);
                        mma_bf16(sacc[mt][2 * np + 1], qa[mt], b[2], b[3]);
                    }
                }
            }
        }
        // P̃ as the A fragments of P̃·V, packed to bf16 as soon as each group's softmax is done (half the registers)
        uint32_t pa[MT][4][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            online_softmax_tile<NO>(sacc[mt], o[mt], m[mt], l[mt], f, bits, iu + w16 + 16 * mt, w16 + 16 * mt + g, j0,
                                    g, c);
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                pa[mt][kk][0] = pack_bf16(sacc[mt][2 * kk][0], sacc[mt][2 * kk][1]);
                pa[mt][kk][1] = pack_bf16(sacc[mt][2 * kk][2], sacc[mt][2 * kk][3]);
                pa[mt][kk][2] = pack_bf16(sacc[mt][2 * kk + 1][0], sacc[mt][2 * kk + 1][1]);
                pa[mt][kk][3] = pack_bf16(sacc[mt][2 * kk + 1][2], sacc[mt][2 * kk + 1][3]);
            }
        }
        // O += P̃ · V_tile
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
#pragma unroll
            for (int dp = 0; dp < KS; dp++) {
                uint32_t b[4];
                ldsm_x4_t(b, frag_bk<LDB>(Vb, kk * 16, dp * 16, lane));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma_bf16(o[mt][2 * dp], pa[mt][kk], b[0], b[1]);
                    mma_bf16(o[mt][2 * dp + 1], pa[mt][kk], b[2], b[3]);
                }
            }
    }
    if (!live) return;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        int row0 = iu + w16 + 16 * mt + g, row1 = row0 + 8;   // this thread's two query rows
        float inv0 = 1.0f / l[mt][0], inv1 = 1.0f / l[mt][1];
        float *dst0 = ctx + hd.off + (size_t)row0 * f.ld, *dst1 = ctx + hd.off + (size_t)row1 * f.ld;
#pragma unroll
        for (int n = 0; n < NO; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int col = n * 8 + 2 * c + e;
                if (col >= f.d) continue;
                if (row0 < f.q1) dst0[col] = o[mt][n][e] * inv0;
                if (row1 < f.q1) dst1[col] = o[mt][n][2 + e] * inv1;
            }
        if (c == 0) {
            if (row0 < f.q1) lse[(size_t)bj * f.s + row0] = m[mt][0] + logf(l[mt][0]);
            if (row1 < f.q1) lse[(size_t)bj * f.s + row1] = m[mt][1] + logf(l[mt][1]);
        }
    }
}

// dK, dV, bf16: grid (key tiles, b·kv), 128 threads, two blocks per SM. The key tile stays in shared
// memory while the kv head's query heads go by in ascending order, each summed on its own (dkdv_head_bf16)
// and added to the group's sum in dk, dv (dkdv_store). Warp w owns keys 16·w.. of the tile. q, k, v, dout:
// the bf16 copies.
template <int DPAD>
struct DkdvSmem {   // the kernel's shared memory: the key tile, double-buffered query tiles, their rows
    static constexpr int TB = FT * B16Smem<DPAD>::LDB;
    float *rows2;   // [2][lse 64, D 64]
    uint16_t *Kb, *Vb, *Qb2, *Ob2, *bits2;
    __device__ explicit DkdvSmem(unsigned char *raw) {
        rows2 = reinterpret_cast<float *>(raw);
        Kb = reinterpret_cast<uint16_t *>(rows2 + 4 * FT);
        Vb = Kb + TB;
        Qb2 = Vb + TB;
        Ob2 = Qb2 + 2 * TB;
        bits2 = Ob2 + 2 * TB;
    }
};

// One query head bj's dK, dV of key tile kt (scale not applied) into this warp's accumulators: query
// tiles from the diagonal down to qend, in order; each is taken QS queries at a time (QS = 16 at DPAD 128
// to stay within registers: at 32 the double buffers' pointers made ptxas spill 48 bytes on sm_90; the
// sums run in the same order at any QS, so the bits do not depend on it). The key tile has been fetched.
template <int DPAD>
__device__ __forceinline__ void dkdv_head_bf16(float (&dka)[DPAD / 8][4], float (&dva)[DPAD / 8][4],
                                               const DkdvSmem<DPAD> &sm, const uint16_t *q, const uint16_t *dout,
                                               const float *lse, const float *Drow, const FlashDims &f, int bj,
                                               int kt, int qend) {
    constexpr int LDB = B16Smem<DPAD>::LDB, KS = DPAD / 16, NO = DPAD / 8, QS = DPAD > 96 ? 16 : 64, NQ = QS / 8;
    constexpr int TB = DkdvSmem<DPAD>::TB;
    const uint16_t *Kb = sm.Kb, *Vb = sm.Vb;
    uint16_t *Qb2 = sm.Qb2, *Ob2 = sm.Ob2, *bits2 = sm.bits2;
    float *rows2 = sm.rows2;
    int j0 = kt * FT, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, w16 = warp * 16;
    int kr0 = w16 + g, key0 = j0 + kr0, key1 = key0 + 8;   // this thread's two keys
    FlashHead hd = flash_head(f, bj);
    if (kt < qend) {
        fetch_tile<DPAD, 128>(Qb2, q + hd.off, j0, f, f.ld);
        fetch_tile<DPAD, 128>(Ob2, dout + hd.off, j0, f, f.ld);
        load_rows(rows2, rows2 + FT, lse, Drow, bj, j0, f);
        if (f.drop) keep_bits_tile<128>(bits2, f, hd.sample, hd.head, j0, j0);
    }
    cp_async_commit();

#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dka[n][e] = dva[n][e] = 0.0f;
    for (int qt = kt; qt < qend; qt++) {   // from the diagonal to the last query tile whose windows reach it
        int i0 = qt * FT, buf = (qt - kt) & 1;
        const uint16_t *Qb = Qb2 + buf * TB, *Ob = Ob2 + buf * TB, *bits = bits2 + buf * FT * 4;
        const float *lse_s = rows2 + buf * 2 * FT, *D_s = lse_s + FT;
        cp_async_wait_all();
        __syncthreads();   // tile qt has landed; every reader of the other buffer (tile qt − 1) is done
        if (qt + 1 < qend) {
            int nb = buf ^ 1;
            fetch_tile<DPAD, 128>(Qb2 + nb * TB, q + hd.off, i0 + FT, f, f.ld);
            fetch_tile<DPAD, 128>(Ob2 + nb * TB, dout + hd.off, i0 + FT, f, f.ld);
            load_rows(rows2 + nb * 2 * FT, rows2 + nb * 2 * FT + FT, lse, Drow, bj, i0 + FT, f);
            if (f.drop) keep_bits_tile<128>(bits2 + nb * FT * 4, f, hd.sample, hd.head, i0 + FT, j0);
            cp_async_commit();
        }
#pragma unroll
        for (int q0 = 0; q0 < FT; q0 += QS) {
            float sacc[NQ][4], pacc[NQ][4];   // Sᵀ = K Qᵀ, dP̃ᵀ = V dOᵀ: this warp's 16 keys × QS queries
#pragma unroll
            for (int n = 0; n < NQ; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) sacc[n][e] = pacc[n][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                uint32_t ka[4], va[4];
                ldsm_x4(ka, frag_a<LDB>(Kb, w16, kk * 16, lane));
                ldsm_x4(va, frag_a<LDB>(Vb, w16, kk * 16, lane));
#pragma unroll
                for (int np = 0; np < QS / 16; np++) {
                    uint32_t b[4];
                    ldsm_x4(b, frag_bn<LDB>(Qb, q0 + np * 16, kk * 16, lane));
                    mma_bf16(sacc[2 * np], ka, b[0], b[1]);
                    mma_bf16(sacc[2 * np + 1], ka, b[2], b[3]);
                    ldsm_x4(b, frag_bn<LDB>(Ob, q0 + np * 16, kk * 16, lane));
                    mma_bf16(pacc[2 * np], va, b[0], b[1]);
                    mma_bf16(pacc[2 * np + 1], va, b[2], b[3]);
                }
            }
#pragma unroll
            for (int n = 0; n < NQ; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int qr = q0 + n * 8 + 2 * c + e, qi = i0 + qr;
                    float ls = lse_s[qr], Dq = D_s[qr];
#pragma unroll
                    for (int hh = 0; hh < 2; hh++) {
                        int key = hh ? key1 : key0, at = 2 * hh + e;
                        float p = flash_sees(f, qi, key) && qi < f.s ? exp_fast(sacc[n][at] * f.scale - ls) : 0.0f;
                        float m = f.drop ? (keep_bit(bits, qr, kr0 + 8 * hh) ? f.keep_scale : 0.0f) : 1.0f;
                        pacc[n][at] = p * (pacc[n][at] * m - Dq);   // dSᵀ
                        sacc[n][at] = p * m;                         // P̃ᵀ
                    }
                }
#pragma unroll
            for (int kq = 0; kq < QS / 16; kq++) {
                uint32_t ap[4] = {pack_bf16(sacc[2 * kq][0], sacc[2 * kq][1]),
                                  pack_bf16(sacc[2 * kq][2], sacc[2 * kq][3]),
                                  pack_bf16(sacc[2 * kq + 1][0], sacc[2 * kq + 1][1]),
                                  pack_bf16(sacc[2 * kq + 1][2], sacc[2 * kq + 1][3])};
                uint32_t ad[4] = {pack_bf16(pacc[2 * kq][0], pacc[2 * kq][1]),
                                  pack_bf16(pacc[2 * kq][2], pacc[2 * kq][3]),
                                  pack_bf16(pacc[2 * kq + 1][0], pacc[2 * kq + 1][1]),
                                  pack_bf16(pacc[2 * kq + 1][2], pacc[2 * kq + 1][3])};
#pragma unroll
                for (int dp = 0; dp < KS; dp++) {
                    uint32_t b[4];
                    ldsm_x4_t(b, frag_bk<LDB>(Ob, q0 + kq * 16, dp * 16, lane));   // dV += P̃ᵀ dO
                    mma_bf16(dva[2 * dp], ap, b[0], b[1]);
                    mma_bf16(dva[2 * dp + 1], ap, b[2], b[3]);
                    ldsm_x4_t(b, frag_bk<LDB>(Qb, q0 + kq * 16, dp * 16, lane));   // dK += dSᵀ Q
                    mma_bf16(dka[2 * dp], ad, b[0], b[1]);
                    mma_bf16(dka[2 * dp + 1], ad, b[2], b[3]);
                }
            }
        }
    }
}

template <int DPAD>
static __global__ void __launch_bounds__(128, 2) flash_bwd_dkdv_bf16(float *dk, float *dv, const uint16_t *q,
                                                                  const uint16_t *k, const uint16_t *v,
                                                                  const uint16_t *dout, const float *lse,
                                                                  const float *Drow, FlashDims f) {
    constexpr int NO = DPAD / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const DkdvSmem<DPAD> sm(smem_raw);
    int kt = blockIdx.x, j0 = kt * FT, qend = flash_query_tile_end(f, j0);
    int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    int key0 = j0 + (threadIdx.x >> 5) * 16 + g, key1 = key0 + 8;   // this thread's two keys
    size_t koff = flash_head(f, blockIdx.y * f.grp).koff;
    fetch_tile<DPAD, 128>(sm.Kb, k + koff, j0, f, f.ldk);
    fetch_tile<DPAD, 128>(sm.Vb, v + koff, j0, f, f.ldk);
    for (int t = 0; t < f.grp; t++) {   // the group's query heads, in ascending order
        if (t) __syncthreads();         // every reader of the previous head's last query tiles is done
        float dka[NO][4], dva[NO][4];
        dkdv_head_bf16<DPAD>(dka, dva, sm, q, dout, lse, Drow, f, blockIdx.y * f.grp + t, kt, qend);
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            int key = hh ? key1 : key0;
            if (key >= f.s) continue;
            size_t at = (size_t)blockIdx.y * f.d + (size_t)key * f.ldk;   // the kv head's rows
#pragma unroll
            for (int n = 0; n < NO; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int col = n * 8 + 2 * c + e;
                    if (col < f.d)
                        dkdv_store(dk + at + col, dv + at + col, dka[n][2 * hh + e], dva[n][2 * hh + e], t, f);
                }
        }
    }
}

// dQ, bf16: grid (query tiles, b·a), 128 threads, two blocks per SM; warp w owns queries 16·w.. and
// their dQ (16×DPAD) in accumulators. Key tiles from 0 to the diagonal, in order. q, k, v, dout: the
// bf16 copies.
template <int DPAD>
static __global__ void __launch_bounds__(128, 2) flash_bwd_dq_bf16(float *dq, const uint16_t *q, const uint16_t *k,
                                                                const uint16_t *v, const uint16_t *dout,
                                                                const float *lse, const float *Drow, FlashDims f) {
    using SM = B16Smem<DPAD>;
    constexpr int LDB = SM::LDB, KS = DPAD / 16, NO = DPAD / 8, TB = FT * LDB;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float *lse_s = reinterpret_cast<float *>(smem_raw), *D_s = lse_s + FT;
    uint16_t *Qb = reinterpret_cast<uint16_t *>(lse_s + 4 * FT), *Ob = Qb + TB, *Kb2 = Ob + TB, *Vb2 = Kb2 + 2 * TB,
             *bits2 = Vb2 + 2 * TB;
    int ntiles = (f.s + FT - 1) / FT, qt = ntiles - 1 - (int)blockIdx.x, i0 = qt * FT, bj = blockIdx.y;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3, w16 = warp * 16;
    FlashHead hd = flash_head(f, bj);

    const int kt0 = flash_first_key_tile(f, i0);
    fetch_tile<DPAD, 128>(Qb, q + hd.off, i0, f, f.ld);
    fetch_tile<DPAD, 128>(Ob, dout + hd.off, i0, f, f.ld);
    load_rows(lse_s, D_s, lse, Drow, bj, i0, f);
    fetch_tile<DPAD, 128>(Kb2, k + hd.koff, kt0 * FT, f, f.ldk);
    fetch_tile<DPAD, 128>(Vb2, v + hd.koff, kt0 * FT, f, f.ldk);
    if (f.drop) keep_bits_tile<128>(bits2, f, hd.sample, hd.head, i0, kt0 * FT);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    int r0 = w16 + g, row0 = i0 + r0, row1 = row0 + 8;
    float ls0 = lse_s[r0], ls1 = lse_s[r0 + 8], D0 = D_s[r0], D1 = D_s[r0 + 8];
    float dqa[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) dqa[n][0] = dqa[n][1] = dqa[n][2] = dqa[n][3] = 0.0f;
    for (int kt = kt0; kt <= qt; kt++) {   // key tiles from the window's to the diagonal
        int j0 = kt * FT, buf = (kt - kt0) & 1;
        const uint16_t *Kb = Kb2 + buf * TB, *Vb = Vb2 + buf * TB, *bits = bits2 + buf * FT * 4;
        cp_async_wait_all();
        __syncthreads();   // tile kt has landed; every reader of the other buffer (tile kt − 1) is done
        if (kt < qt) {
            fetch_tile<DPAD, 128>(Kb2 + (buf ^ 1) * TB, k + hd.koff, j0 + FT, f, f.ldk);
            fetch_tile<DPAD, 128>(Vb2 + (buf ^ 1) * TB, v + hd.koff, j0 + FT, f, f.ldk);
            if (f.drop) keep_bits_tile<128>(bits2 + (buf ^ 1) * FT * 4, f, hd.sample, hd.head, i0, j0 + FT);
            cp_async_commit();
        }
        float sacc[8][4], pacc[8][4];   // S = Q Kᵀ, dP̃ = dO Vᵀ: this warp's 16 queries × 64 keys
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) sacc[n][e] = pacc[n][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            uint32_t qa[4], oa[4];
            ldsm_x4(qa, frag_a<LDB>(Qb, w16, kk * 16, lane));
            ldsm_x4(oa, frag_a<LDB>(Ob, w16, kk * 16, lane));
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t b[4];
                ldsm_x4(b, frag_bn<LDB>(Kb, np * 16, kk * 16, lane));
                mma_bf16(sacc[2 * np], qa, b[0], b[1]);
                mma_bf16(sacc[2 * np + 1], qa, b[2], b[3]);
                ldsm_x4(b, frag_bn<LDB>(Vb, np * 16, kk * 16, lane));
                mma_bf16(pacc[2 * np], oa, b[0], b[1]);
                mma_bf16(pacc[2 * np + 1], oa, b[2], b[3]);
            }
        }
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int col = n * 8 + 2 * c + e, key = j0 + col;
                float p0 = flash_sees(f, row0, key) ? exp_fast(sacc[n][e] * f.scale - ls0) : 0.0f;
                float p1 = flash_sees(f, row1, key) ? exp_fast(sacc[n][2 + e] * f.scale - ls1) : 0.0f;
                float m0 = 1.0f, m1 = 1.0f;
                if (f.drop) {
                    m0 = keep_bit(bits, r0, col) ? f.keep_scale : 0.0f;
                    m1 = keep_bit(bits, r0 + 8, col) ? f.keep_scale : 0.0f;
                }
                pacc[n][e] = p0 * (pacc[n][e] * m0 - D0);   // dS
                pacc[n][2 + e] = p1 * (pacc[n][2 + e] * m1 - D1);
            }
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {   // dQ += dS · K_tile
            uint32_t a[4] = {pack_bf16(pacc[2 * kk][0], pacc[2 * kk][1]), pack_bf16(pacc[2 * kk][2], pacc[2 * kk][3]),
                             pack_bf16(pacc[2 * kk + 1][0], pacc[2 * kk + 1][1]),
                             pack_bf16(pacc[2 * kk + 1][2], pacc[2 * kk + 1][3])};
#pragma unroll
            for (int dp = 0; dp < KS; dp++) {
                uint32_t b[4];
                ldsm_x4_t(b, frag_bk<LDB>(Kb, kk * 16, dp * 16, lane));
                mma_bf16(dqa[2 * dp], a, b[0], b[1]);
                mma_bf16(dqa[2 * dp + 1], a, b[2], b[3]);
            }
        }
    }
    float *dst0 = dq + hd.off + (size_t)row0 * f.ld, *dst1 = dq + hd.off + (size_t)row1 * f.ld;
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int col = n * 8 + 2 * c + e;
            if (col >= f.d) continue;
            if (row0 < f.s) dst0[col] = dqa[n][e] * f.scale;
            if (row1 < f.s) dst1[col] = dqa[n][2 + e] * f.scale;
        }
}

// =====================================================================================================
// host side
// =====================================================================================================

static FlashDims flash_dims(int s, int b, int a, int kv, int h, int window, int head0, DropoutSite site,
                            uint32_t sample0) {
    if (kv <= 0 || a % kv) cuda_fail("flash attention", "the kv heads must divide the query heads", __FILE__, __LINE__);
    FlashDims f;
    f.s = s;
    f.b = b;
    f.a = a;
    f.h = h;
    f.d = h / a;
    f.ld = b * h;
    f.kv = kv;
    f.grp = a / kv;
    f.ldk = b * kv * f.d;
    f.head0 = head0;
    f.sample0 = sample0;
    f.site = site;
    f.drop = site.p > 0.0f;
    f.thresh = dropout_keep_threshold(site.p);
    f.scale = 1.0f / sqrtf((float)f.d);
    f.keep_scale = f.drop ? 1.0f / (1.0f - site.p) : 1.0f;
    f.vec = 0;
    f.vec8 = f.d % 8 == 0;
    f.q0 = 0;
    f.q1 = s;
    f.window = window > 0 && window < s ? window : 0;   // one of s or more sees every key: no window, its bits
    f.span = f.window ? (uint32_t)f.window : (uint32_t)INT_MAX;
    return f;
}

// The padded head width a kernel is instantiated for.
static int flash_dpad(int d) {
    if (d > 128 || d < 1) cuda_fail("flash attention", "head dim must be 1..128", __FILE__, __LINE__);
    return d <= 32 ? 32 : d <= 64 ? 64 : d <= 96 ? 96 : 128;
}

// The tiles' shared memory, above 48 KiB by opt-in. Devices allow less than Hopper's 227 KiB per block
// (A100 163 KiB, sm_86/sm_89 99 KiB): a kernel that needs more is refused with the shape and the limit,
// not with cudaFuncSetAttribute's "invalid argument".
template <typename K>
static void set_smem(Backend *be, K kernel, size_t bytes, const char *which, int d) {
    const CudaImpl *c = cuda_impl(be);
    if (bytes > (size_t)c->prop.sharedMemPerBlockOptin) {
        char why[512];
        snprintf(why, sizeof why, "%s for head dim %d needs %zu bytes of shared memory per block; %s (sm_%d%d) allows "
                 "%zu: run without --flash, or with a smaller head dim", which, d, bytes,
                 c->prop.name, c->prop.major, c->prop.minor, (size_t)c->prop.sharedMemPerBlockOptin);
        cuda_fail("flash attention", why, __FILE__, __LINE__);
    }
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// The bf16 path's operands: bf16 copies (bf16_from_f32, the bits the tiles were rounded to in the kernels
// before) in CUDA_SCRATCH_FLASH, each part 256-byte aligned. Only the rows a call's tiles read are
// packed: q (and dO) rows [r0, r1) and k, v rows [0, r1), r1 taken to the end of its 64-row tile (or s):
// a tile's rows past the last query still meet P·V with probability 0, and 0 · (stale scratch, maybe
// NaN) would not be 0. The copies keep the fp32 tensors' indexing.
struct Flash16 {
    const uint16_t *q, *k, *v, *o;
};
// The end of the 64-row tile holding row r − 1, tiles counted from row base, at most s.
static int tile_end(int r, int base, int s) {
    int end = base + (r - base + FT - 1) / FT * FT;
    return end < s ? end : s;
}
// A part of the flash scratch, or the given copy: room for one operand only when it is packed.
static uint16_t *operand_room(char **w, const uint16_t *given, size_t bytes) {
    if (given) return (uint16_t *)given;
    uint16_t *at = (uint16_t *)*w;
    *w += bytes;
    return at;
}
// in: operands given as kept bf16 copies (flash_attention_forward16 / _backward16), used as they are, with
// no room for them in the scratch; f.vec8 then also asks that they start on 16 bytes (an arena's copies do;
// the packed ones are 256-byte aligned).
static Flash16 pack_operands(Backend *be, FlashDims &f, const float *q, const float *k, const float *v,
                             const float *o, int r0, int r1, const FlashIn16 *in) {
    static const FlashIn16 none = {NULL, NULL, NULL, NULL};
    const FlashIn16 *g = in ? in : &none;
    size_t nq = (size_t)f.s * (size_t)f.ld, nk = (size_t)f.s * (size_t)f.ldk;
    size_t qb = ct_round256(nq * sizeof(uint16_t)), kb = ct_round256(nk * sizeof(uint16_t));
    size_t room = (g->q ? 0 : qb) + (o ? qb : 0) + (g->k ? 0 : kb) + (g->v ? 0 : kb);
    char *w = room ? (char *)cuda_scratch(be, CUDA_SCRATCH_FLASH, room) : NULL;
    uint16_t *q16 = operand_room(&w, g->q, qb), *k16 = operand_room(&w, g->k, kb), *v16 = operand_room(&w, g->v, kb);
    uint16_t *o16 = o ? operand_room(&w, NULL, qb) : NULL;
    int qend = tile_end(r1, r0, f.s);    // the query tiles start at r0 (flash_query_tiles)
    int kend = tile_end(qend, 0, f.s);   // the key tiles at 0, up to the one holding the last query
    size_t qrow0 = (size_t)r0 * (size_t)f.ld, qrows = (size_t)(qend - r0) * (size_t)f.ld;
    size_t krows = (size_t)kend * (size_t)f.ldk;
    if (!g->q) cuda_bf16_pack(be, q16 + qrow0, q + qrow0, qrows);
    if (!g->k) cuda_bf16_pack(be, k16, k, krows);
    if (!g->v) cuda_bf16_pack(be, v16, v, krows);
    if (o) cuda_bf16_pack(be, o16 + qrow0, o + qrow0, qrows);
    Flash16 x = {q16, k16, v16, o16};
    f.vec8 = f.d % 8 == 0 && aligned16(q16) && aligned16(k16) && aligned16(v16);
    return x;
}

template <int DPAD>
static void forward_launch(Backend *be, float *ctx, float *lse, const float *q, const float *k, const float *v,
                           FlashDims f, const FlashIn16 *in) {
    dim3 grid((unsigned)((f.q1 - f.q0 + FT - 1) / FT), (unsigned)(f.b * f.a));   // flash_query_tiles
    cudaStream_t st = cuda_stream(be);
    if (be->precision == PRECISION_BF16) {
        Flash16 x = pack_operands(be, f, q, k, v, NULL, f.q0, f.q1, in);
        if (cuda_impl(be)->flash_fwd_pairs) {   // two query tiles a block (CTRON_FLASH_FWD_ROWS=32)
            size_t bytes = FwdSmem<DPAD, 2>::bytes;
            set_smem(be, flash_fwd_bf16<DPAD, 2>, bytes, "the bf16 forward", f.d);
            grid.x = (grid.x + 1) / 2;
            flash_fwd_bf16<DPAD, 2><<<grid, 128, bytes, st>>>(ctx, lse, x.q, x.k, x.v, f);
        } else {
            size_t bytes = FwdSmem<DPAD, 1>::bytes;
            set_smem(be, flash_fwd_bf16<DPAD, 1>, bytes, "the bf16 forward", f.d);
            flash_fwd_bf16<DPAD, 1><<<grid, 128, bytes, st>>>(ctx, lse, x.q, x.k, x.v, f);
        }
    } else {
        size_t bytes = F32Smem<DPAD>::fwd;
        set_smem(be, flash_fwd_f32<DPAD>, bytes, "the fp32 forward", f.d);
        flash_fwd_f32<DPAD><<<grid, 256, bytes, st>>>(ctx, lse, q, k, v, f);
    }
    CUDA_LAUNCHED();
}

// dK, dV (a block per key tile and kv head, the group's query heads summed in the block), then dQ (a
// block per query tile and query head). x: the bf16 copies (the bf16 path), else q, k, v, dout are read as
// they are.
template <int DPAD>
static void backward_launch(Backend *be, float *dq, float *dk, float *dv, const float *q, const float *k,
                            const float *v, const float *dout, const float *lse, const float *Drow, FlashDims f,
                            const FlashIn16 *in) {
    dim3 kgrid((unsigned)((f.s + FT - 1) / FT), (unsigned)(f.b * f.kv));
    dim3 qgrid((unsigned)((f.s + FT - 1) / FT), (unsigned)(f.b * f.a));
    cudaStream_t st = cuda_stream(be);
    if (be->precision == PRECISION_BF16) {
        Flash16 x = pack_operands(be, f, q, k, v, dout, 0, f.s, in);
        size_t bytes = B16Smem<DPAD>::bwd;
        set_smem(be, flash_bwd_dkdv_bf16<DPAD>, bytes, "the bf16 backward (dK, dV)", f.d);
        flash_bwd_dkdv_bf16<DPAD><<<kgrid, 128, bytes, st>>>(dk, dv, x.q, x.k, x.v, x.o, lse, Drow, f);
        CUDA_LAUNCHED();
        set_smem(be, flash_bwd_dq_bf16<DPAD>, bytes, "the bf16 backward (dQ)", f.d);
        flash_bwd_dq_bf16<DPAD><<<qgrid, 128, bytes, st>>>(dq, x.q, x.k, x.v, x.o, lse, Drow, f);
    } else {
        size_t bytes = F32Smem<DPAD>::dkdv;
        set_smem(be, flash_bwd_dkdv_f32<DPAD>, bytes, "the fp32 backward (dK, dV)", f.d);
        flash_bwd_dkdv_f32<DPAD><<<kgrid, 256, bytes, st>>>(dk, dv, q, k, v, dout, lse, Drow, f);
        CUDA_LAUNCHED();
        bytes = F32Smem<DPAD>::dq;
        set_smem(be, flash_bwd_dq_f32<DPAD>, bytes, "the fp32 backward (dQ)", f.d);
        flash_bwd_dq_f32<DPAD><<<qgrid, 256, bytes, st>>>(dq, q, k, v, dout, lse, Drow, f);
    }
    CUDA_LAUNCHED();
}

// The model's scratch for flash: the backward's D (one float per query row and head), [b·a, s].
extern "C" size_t cuda_flash_scratch_floats(int s, int b, int a, int h) {
    (void)h;
    return (size_t)s * (size_t)b * (size_t)a;
}

// Query tiles start at q0 (as the CPU's), so with q0 a multiple of 64 every tile, its key tiles and its
// arithmetic are the whole call's: the rows are bitwise the same (MEMO's token ranges, model/memo.h).
// Query positions [q0, q0+nq); in: operands given as bf16 copies (NULL: none).
static void forward_rows(Backend *be, float *ctx, float *lse, const FlashIn16 *in, const float *q, const float *k,
                         const float *v, int s, int q0, int nq, int b, int a, int kv, int h, int window, int head0,
                         DropoutSite site, uint32_t sample0) {
    if (q0 < 0 || nq < 0 || q0 + nq > s) {
        char why[96];
        snprintf(why, sizeof why, "query positions %d .. %d of %d", q0, q0 + nq, s);
        cuda_fail("flash attention", why, __FILE__, __LINE__);
    }
    if (nq == 0 || b <= 0 || a <= 0) return;
    FlashDims f = flash_dims(s, b, a, kv, h, window, head0, site, sample0);
    f.q0 = q0;
    f.q1 = q0 + nq;
    f.vec = f.d % 4 == 0 && aligned16(q) && aligned16(k) && aligned16(v);
    switch (flash_dpad(f.d)) {
    case 32: forward_launch<32>(be, ctx, lse, q, k, v, f, in); break;
    case 64: forward_launch<64>(be, ctx, lse, q, k, v, f, in); break;
    case 96: forward_launch<96>(be, ctx, lse, q, k, v, f, in); break;
    default: forward_launch<128>(be, ctx, lse, q, k, v, f, in); break;
    }
}

extern "C" void cuda_flash_attention_forward_rows(Backend *be, float *ctx, float *lse, const float *q, const float *k,
                                                  const float *v, float *scratch, int s, int q0, int nq, int b, int a,
                                                  int kv, int h, int window, int head0, DropoutSite site,
                                                  uint32_t sample0) {
    (void)scratch;
    forward_rows(be, ctx, lse, NULL, q, k, v, s, q0, nq, b, a, kv, h, window, head0, site, sample0);
}

extern "C" void cuda_flash_attention_forward(Backend *be, float *ctx, float *lse, const float *q, const float *k,
                                             const float *v, float *scratch, int s, int b, int a, int kv, int h,
                                             int window, int head0, DropoutSite site, uint32_t sample0) {
    (void)scratch;
    if (s <= 0) return;
    forward_rows(be, ctx, lse, NULL, q, k, v, s, 0, s, b, a, kv, h, window, head0, site, sample0);
}

// The bf16 path on kept copies (backend.h): a given member is read as it is, the rest packed as above.
extern "C" void cuda_flash_attention_forward16(Backend *be, float *ctx, float *lse, const FlashIn16 *in,
                                               const float *q, const float *k, const float *v, float *scratch, int s,
                                               int q0, int nq, int b, int a, int kv, int h, int window, int head0,
                                               DropoutSite site, uint32_t sample0) {
    (void)scratch;
    if (be->precision != PRECISION_BF16) cuda_fail("flash attention", "bf16 operands at fp32", __FILE__, __LINE__);
    forward_rows(be, ctx, lse, in, q, k, v, s, q0, nq, b, a, kv, h, window, head0, site, sample0);
}

// D (the rows of dO·O, into scratch), then dK, dV and dQ; in: operands given as bf16 copies (NULL: none).
static void backward(Backend *be, float *dq, float *dk, float *dv, const float *dctx, const FlashIn16 *in,
                     const float *q, const float *k, const float *v, const float *ctx, const float *lse,
                     float *scratch, int s, int b, int a, int kv, int h, int window, int head0, DropoutSite site,
                     uint32_t sample0) {
    if (s <= 0 || b <= 0 || a <= 0) return;
    FlashDims f = flash_dims(s, b, a, kv, h, window, head0, site, sample0);
    f.vec = f.d % 4 == 0 && aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dctx);
    unsigned blocks = (unsigned)(((size_t)s * b * a + 7) / 8);
    if (in && in->ctx)   // the same products: O's bf16 values are the fp32 ones
        flash_rowdot_kernel<uint16_t><<<blocks, 256, 0, cuda_stream(be)>>>(scratch, in->ctx, dctx, f);
    else
        flash_rowdot_kernel<float><<<blocks, 256, 0, cuda_stream(be)>>>(scratch, ctx, dctx, f);
    CUDA_LAUNCHED();
    switch (flash_dpad(f.d)) {
    case 32: backward_launch<32>(be, dq, dk, dv, q, k, v, dctx, lse, scratch, f, in); break;
    case 64: backward_launch<64>(be, dq, dk, dv, q, k, v, dctx, lse, scratch, f, in); break;
    case 96: backward_launch<96>(be, dq, dk, dv, q, k, v, dctx, lse, scratch, f, in); break;
    default: backward_launch<128>(be, dq, dk, dv, q, k, v, dctx, lse, scratch, f, in); break;
    }
}

extern "C" void cuda_flash_attention_backward(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                              const float *q, const float *k, const float *v, const float *ctx,
                                              const float *lse, float *scratch, int s, int b, int a, int kv, int h,
                                              int window, int head0, DropoutSite site, uint32_t sample0) {
    backward(be, dq, dk, dv, dctx, NULL, q, k, v, ctx, lse, scratch, s, b, a, kv, h, window, head0, site, sample0);
}

extern "C" void cuda_flash_attention_backward16(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                                const FlashIn16 *in, const float *q, const float *k, const float *v,
                                                const float *ctx, const float *lse, float *scratch, int s, int b,
                                                int a, int kv, int h, int window, int head0, DropoutSite site,
                                                uint32_t sample0) {
    if (be->precision != PRECISION_BF16) cuda_fail("flash attention", "bf16 operands at fp32", __FILE__, __LINE__);
    backward(be, dq, dk, dv, dctx, in, q, k, v, ctx, lse, scratch, s, b, a, kv, h, window, head0, site, sample0);
}
