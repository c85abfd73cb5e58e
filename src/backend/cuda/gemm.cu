// The GEMMs of the CUDA backend (cuda_kernels.h, semantics of backend/cpu/linear.h and the cpu_linear_*
// wrappers of cpu_backend.c): cuBLASLt for the products, small kernels for the bf16 rounding of GEMM
// inputs, the bias gradient and single-row decoding.
//
// Row-major to cuBLASLt's column-major: a row-major [r, c] matrix with row stride ld is the column-major
// [c, r] matrix with leading dimension ld, so row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ. The three
// products (y, dx, dW; shapes in the comments of each) are written directly in column-major terms.
//
// Precision. fp32: CUBLAS_COMPUTE_32F on fp32 operands, TF32 off (COMPUTE_32F never uses TF32; only
// CUBLAS_COMPUTE_32F_FAST_TF32 would): the fp32 path exists for parity with the CPU. bf16 (w16 != NULL):
// A and B CUDA_R_16BF, C and D CUDA_R_32F, compute CUBLAS_COMPUTE_32F (fp32 accumulation); x and dy are
// rounded to bf16 with bf16_from_f32, the CPU's bf16_pack_rows bit for bit; the bias gradient sums the
// fp32 dy, as the CPU does.
//
// Determinism. The cuBLAS guide, "Results reproducibility" (cuBLAS docs §2.1.4): by design every cuBLAS
// routine gives the same bits run to run on GPUs of the same architecture and SM count with one toolkit
// version; the multi-stream caveat there concerns library-chosen workspaces and does not apply to
// cublasLtMatmul given a user-owned workspace (ours: CudaImpl's lt_workspace, one stream). What is not
// fixed is which algorithm the heuristic picks, and split-K algorithms (partial sums over K reduced in a
// second step or in place) change the summation order between configurations. So:
//   - the heuristic is asked with CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = CUBLASLT_REDUCTION_SCHEME_NONE
//     ("no reduction scheme, dot-product shall be performed in one sequence", cublasLt.h): no split-K at
//     all. This is what NVIDIA recommends for run-to-run stable results (NVIDIA/CUDALibrarySamples issue
//     #243: "remove all reduction schemes but CUBLASLT_REDUCTION_SCHEME_NONE from
//     CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK when querying heuristics"); an answer whose
//     CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME is not NONE counts as no algorithm (the next fallback runs).
//   - the first heuristic answer for a problem (shapes, strides, types, transposes, epilogue; never the
//     pointers: see "cuBLASLt plans" below) is cached with its descriptors in a table below, so the same
//     problem runs the same algorithm on every call, wherever its tensors sit.
// The bias gradient and the GEMV are our own kernels with fixed summation orders (no atomics).
//
// Split-K of our own. Without cuBLASLt's split-K, a GEMM with few output tiles and a long k leaves most
// SMs idle: on an H100 GPT-2 124M's 768×768 weight gradients of q, k, v and the projection (k = 16,384
// tokens: 36 tiles for 132 SMs) ran at 53 TFLOP/s and took a fifth of the step, and LoRA's rank-16
// products (x·Aᵀ, k = 14,336) at 7 TFLOP/s (docs/PERFORMANCE.md, the second H100). gemm_ksplit picks S
// from the shape alone; the GEMM then runs as one strided batch of S GEMMs over consecutive k-chunks into
// CUDA_SCRATCH_GEMM_SPLIT, and ksplit_sum_kernel adds the S partial products in the order 0..S-1 (then D's old value when beta is
// 1). The bits are a function of the shape, as every plan's are: run to run, and wherever the tensors sit.
// CTRON_GEMM_SPLIT_K=1 turns it on; unset or 0, each GEMM runs in one pass, the path the H100s verified
// against the CPU (the split has run only on the host emulation so far); any other value is refused.
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm_simple.cuh"

// ---------------------------------------------------------------------------------------------------
// Column passes over a row-major fp32 matrix src [rows, cols] (row stride ld): PACK writes its bf16
// rounding to dst [rows, cols] (contiguous, row stride cols); SUM adds up each column over the rows of
// one chunk. Block (32, 8): blockIdx.x a tile of 32·VEC columns (thread x: VEC adjacent columns),
// blockIdx.y a chunk of rows_per_chunk rows, thread y: rows y, y+8, y+16, ... of the chunk.
// The sum of column c over chunk k: each thread y sums its rows in increasing order, then thread y = 0
// adds the 8 per-y sums in the order y = 0..7. That order depends on rows, cols and rows_per_chunk
// only, never on VEC (each column's lanes are the same whether a thread holds 1 or 4 columns), so the
// scalar and vector forms give the same bits. to_db == 0: out[k·cols + c] = the chunk's sum (partials);
// to_db == 1: out[c] += the sum (the bias gradient, gridDim.y == 1).
template <int VEC, bool PACK, bool SUM>
__global__ static void __launch_bounds__(256) colpass_kernel(const float *__restrict__ src, int ld, int rows, int cols,
                                                             int rows_per_chunk, uint16_t *__restrict__ dst,
                                                             float *__restrict__ out, int to_db) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = (blockIdx.x * 32 + tx) * VEC;   // VEC == 4 only when cols % 4 == 0: c < cols covers c..c+3
    const bool live = c < cols;
    const int r0 = blockIdx.y * rows_per_chunk;
    const int r1 = min(rows, r0 + rows_per_chunk);
    float acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; j++) acc[j] = 0.0f;
    if (live) {
        for (int r = r0 + ty; r < r1; r += 8) {
            const float *s = src + (size_t)r * ld + c;
            float v[VEC];
            if constexpr (VEC == 4) {
                float4 q = *reinterpret_cast<const float4 *>(s);
                v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
            } else {
                v[0] = s[0];
            }
            if constexpr (PACK) {
                uint16_t *d = dst + (size_t)r * cols + c;
                if constexpr (VEC == 4) {
                    uint2 p;
                    p.x = (uint32_t)bf16_from_f32(v[0]) | ((uint32_t)bf16_from_f32(v[1]) << 16);
                    p.y = (uint32_t)bf16_from_f32(v[2]) | ((uint32_t)bf16_from_f32(v[3]) << 16);
                    *reinterpret_cast<uint2 *>(d) = p;
                } else {
                    d[0] = bf16_from_f32(v[0]);
                }
            }
            if constexpr (SUM) {
#pragma unroll
                for (int j = 0; j < VEC; j++) acc[j] += v[j];
            }
        }
    }
    if constexpr (SUM) {
        __shared__ float part[8][32 * VEC];
#pragma unroll
        for (int j = 0; j < VEC; j++) part[ty][tx * VEC + j] = acc[j];
        __syncthreads();
        if (ty == 0 && live) {
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                float t = part[0][tx * VEC + j];
#pragma unroll
                for (int y = 1; y < 8; y++) t += part[y][tx * VEC + j];
                if (to_db) out[c + j] += t;
                else out[(size_t)blockIdx.y * cols + c + j] = t;
            }
        }
    }
}

// How a column pass splits the rows: about 2048 blocks of 128 columns in all, chunks of at least 32 rows.
// A function of (rows, cols) only, so a sum's order never depends on alignment or the device.
static void colpass_chunks(int rows, int cols, int *chunks, int *rows_per_chunk) {
    int col_groups = (cols + 127) / 128;
    int want = (2048 + col_groups - 1) / col_groups;
    int most = (rows + 31) / 32;
    int k = want < most ? want : most;
    if (k < 1) k = 1;
    int rpc = (rows + k - 1) / k;
    if (rpc < 1) rpc = 1;
    *rows_per_chunk = rpc;
    *chunks = (rows + rpc - 1) / rpc;
    if (*chunks < 1) *chunks = 1;
}

static int aligned_to(const void *p, unsigned bytes) { return ((uintptr_t)p % bytes) == 0; }

template <bool PACK, bool SUM>
static void colpass_launch(Backend *be, const float *src, int ld, int rows, int cols, int rows_per_chunk, int chunks,
                           uint16_t *dst, float *out, int to_db) {
    int vec4 = cols % 4 == 0 && ld % 4 == 0 && aligned_to(src, 16) && (!PACK || aligned_to(dst, 8));
    dim3 block(32, 8);
    if (vec4) {
        dim3 grid((unsigned)((cols / 4 + 31) / 32), (unsigned)chunks);
        colpass_kernel<4, PACK, SUM><<<grid, block, 0, cuda_stream(be)>>>(src, ld, rows, cols, rows_per_chunk, dst, out,
                                                                          to_db);
    } else {
        dim3 grid((unsigned)((cols + 31) / 32), (unsigned)chunks);
        colpass_kernel<1, PACK, SUM><<<grid, block, 0, cuda_stream(be)>>>(src, ld, rows, cols, rows_per_chunk, dst, out,
                                                                          to_db);
    }
    CUDA_LAUNCHED();
}

// dst[r, c] = bf16(src[r, c]) for src [rows, cols] (row stride ld) into dst [rows, cols] contiguous; with db,
// also db[c] += Σ_r src[r, c] (the bias gradient, fp32, fixed order: chunk sums into CUDA_SCRATCH_GEMM_T, then
// the chunk sums added up by the same pass). dst may be NULL (the bias gradient alone).
static void pack_and_colsum(Backend *be, uint16_t *dst, const float *src, int ld, int rows, int cols, float *db) {
    if (rows <= 0 || cols <= 0) return;
    int chunks, rpc;
    colpass_chunks(rows, cols, &chunks, &rpc);
    if (!db) {
        colpass_launch<true, false>(be, src, ld, rows, cols, rpc, chunks, dst, NULL, 0);
        return;
    }
    if (chunks == 1) {
        if (dst) colpass_launch<true, true>(be, src, ld, rows, cols, rpc, 1, dst, db, 1);
        else colpass_launch<false, true>(be, src, ld, rows, cols, rpc, 1, NULL, db, 1);
        return;
    }
    float *part = (float *)cuda_scratch(be, CUDA_SCRATCH_GEMM_T, (size_t)chunks * cols * sizeof(float));
    if (dst) colpass_launch<true, true>(be, src, ld, rows, cols, rpc, chunks, dst, part, 0);
    else colpass_launch<false, true>(be, src, ld, rows, cols, rpc, chunks, NULL, part, 0);
    // The chunk sums [chunks, cols] as one chunk of `chunks` rows: db[c] += Σ_k part[k, c].
    colpass_launch<false, true>(be, part, cols, chunks, cols, chunks, 1, NULL, db, 1);
}

// y[r, c] += bias[c] for y [rows, cols] (row stride ldy): only where cuBLASLt offers no bias epilogue.
__global__ static void bias_add_kernel(float *__restrict__ y, int ldy, const float *__restrict__ bias, int rows,
                                       int cols) {
    size_t total = (size_t)rows * cols;
    CT_GRID_LOOP(i, total) {
        size_t r = i / (size_t)cols, c = i % (size_t)cols;
        y[r * ldy + c] += bias[c];
    }
}

// ---------------------------------------------------------------------------------------------------
// cuBLASLt plans: descriptors and the algorithm, built once per problem and kept.
//
// A plan depends on the problem's shape alone (transposes, m, n, k, leading dimensions, precision, bias or
// not), never on where its tensors sit, so a tensor placed elsewhere (arena or static plan, recompute or
// stored, another offset in a pool) runs the same algorithm and gives the same bits. The heuristic is asked
// for operands aligned to GEMM_ALIGN bytes, which every allocation gives (cudaMalloc: 256; the arena's and
// the static plan's entries: 64). A view at an odd offset (a column slice, a row chunk, a parameter inside
// the flat buffer, a bias slice) may be less aligned: such an operand is staged through an aligned copy in
// CUDA_SCRATCH_GEMM_T (D copied in and back), so the algorithm still gets what it was chosen for.
// For the BIAS epilogue the heuristic reads the bias pointer's alignment from the descriptor (cublasLt.h):
// it is given a canonical pointer of exactly the plan's alignment, never the caller's.
//
// When the heuristic has nothing (or only algorithms above the workspace limit or with a split-K
// reduction), the next step is tried, in the order of plan_steps: BIAS epilogue at 16 bytes, no epilogue at
// 16 (bias_add_kernel adds it), the same two at the elements' own alignment (nothing staged), and last
// gemm_simple (gemm_simple.cuh: slow, correct, fixed order), with one note on stderr naming the shape.
// Each step is a function of the shape alone, so the fallbacks keep the placement independence.
enum { GEMM_ALIGN = 16 };

typedef struct {
    const void *be;   // the backend (its handle and workspace)
    int device;
    int transa, transb, m, n, k;
    int64_t lda, ldb, ldd;
    int bf16;         // A and B CUDA_R_16BF (else CUDA_R_32F); C and D always CUDA_R_32F
    int bias;         // a bias vector of length m wanted (the epilogue when cuBLASLt has one)
    int ksplit;       // S > 1: S batched GEMMs over k-chunks of k/S into partials [S, m, n] (ldd m)
} GemmKey;

typedef enum { PLAN_LT, PLAN_SIMPLE } PlanKind;

typedef struct {
    GemmKey key;
    int used;
    PlanKind kind;
    int epilogue_bias;         // the bias is added by the epilogue (else by bias_add_kernel or gemm_simple)
    uint32_t align_ab, align_d;   // what the algorithm was chosen for: operands below it are staged
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} GemmPlan;

// The heuristic's requests, in order: relaxed 0 asks GEMM_ALIGN bytes, 1 the elements' own size.
static const struct { int relaxed, epilogue_bias; } plan_steps[] = {{0, 1}, {0, 0}, {1, 1}, {1, 0}};

enum { GEMM_PLANS = 1024 };
static GemmPlan gemm_plans[GEMM_PLANS];
static pthread_mutex_t gemm_plans_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t key_hash(const GemmKey *k) {
    const unsigned char *b = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void gemm_problem(const GemmKey *k, char *out, size_t len) {
    snprintf(out, len, "%s m=%d n=%d k=%d op(A)=%c op(B)=%c lda=%lld ldb=%lld ldd=%lld%s", k->bf16 ? "bf16" : "fp32",
             k->m, k->n, k->k, k->transa ? 'T' : 'N', k->transb ? 'T' : 'N', (long long)k->lda, (long long)k->ldb,
             (long long)k->ldd, k->bias ? " +bias" : "");
}

static void plan_destroy(GemmPlan *p) {
    if (p->kind != PLAN_LT) return;
    cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb);
    cublasLtMatrixLayoutDestroy(p->ld);
    cublasLtMatmulDescDestroy(p->desc);
}

// One heuristic request for plan p's descriptors at alignments align_ab (A, B) and align_d (C, D, bias),
// with or without the BIAS epilogue: 1 and p->algo set when an algorithm qualifies (no split-K reduction,
// workspace within the limit).
static int plan_try(CudaImpl *c, GemmPlan *p, uint32_t align_ab, uint32_t align_d, int epilogue_bias) {
    uint32_t epi = epilogue_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (epilogue_bias) {
        int32_t bias_type = CUDA_R_32F;
        // Exactly align_d-aligned (the workspace is cudaMalloc's, 256-aligned); never dereferenced here.
        const void *canonical = (const char *)c->lt_workspace + align_d;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                    sizeof bias_type));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &canonical,
                                                    sizeof canonical));
    }
    return cuda_lt_heuristic(c->lt, p->desc, p->la, p->lb, p->ld, c->lt_workspace_bytes, align_ab, align_d, &p->algo);
}

int cuda_lt_heuristic(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                      cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, uint64_t ws, uint32_t align_ab,
                      uint32_t align_cd, cublasLtMatmulAlgo_t *algo) {
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &scheme,
                                                      sizeof scheme));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_ab,
                                                      sizeof align_ab));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_ab,
                                                      sizeof align_ab));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_cd,
                                                      sizeof align_cd));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_cd,
                                                      sizeof align_cd));
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &res, &found);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) return 0;   // what it answers when nothing fits
    CUBLAS_CHECK(st);
    if (found < 1 || res.state != CUBLAS_STATUS_SUCCESS || res.workspaceSize > ws) return 0;
    uint32_t got_scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &got_scheme,
                                             sizeof got_scheme, &written) == CUBLAS_STATUS_SUCCESS &&
        written == sizeof got_scheme && got_scheme != CUBLASLT_REDUCTION_SCHEME_NONE)
        return 0;
    *algo = res.algo;
    return 1;
}

static void batch_layout(cublasLtMatrixLayout_t l, int32_t count, int64_t offset) {
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset,
                                                  sizeof offset));
}

// The plan of `key`: the first of plan_steps with an algorithm, else gemm_simple.
static void plan_build(Backend *be, GemmPlan *p, const GemmKey *key) {
    CudaImpl *c = cuda_impl(be);
    memset(p, 0, sizeof *p);
    memcpy(&p->key, key, sizeof *key);   // bytes, padding included: keys are compared with memcmp
    p->kind = PLAN_LT;
    cudaDataType_t ab = key->bf16 ? CUDA_R_16BF : CUDA_R_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t ta = key->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = key->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    // Stored shapes: A is m×k (k×m when transposed), B is k×n (n×k when transposed), C = D is m×n.
    const int kc = key->k / (key->ksplit > 1 ? key->ksplit : 1);   // the k of one chunk
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, ab, (uint64_t)(key->transa ? kc : key->m),
                                            (uint64_t)(key->transa ? key->m : kc), key->lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, ab, (uint64_t)(key->transb ? key->n : kc),
                                            (uint64_t)(key->transb ? kc : key->n), key->ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->ld, CUDA_R_32F, (uint64_t)key->m, (uint64_t)key->n, key->ldd));
    if (key->ksplit > 1) {
        // Chunk j of op(A) is its columns j·kc.. (rows of a transposed A), of op(B) its rows j·kc..
        const int64_t off_a = key->transa ? kc : (int64_t)kc * key->lda;
        const int64_t off_b = key->transb ? (int64_t)kc * key->ldb : kc;
        batch_layout(p->la, key->ksplit, off_a);
        batch_layout(p->lb, key->ksplit, off_b);
        batch_layout(p->ld, key->ksplit, (int64_t)key->m * key->n);
    }
    for (size_t i = 0; i < sizeof plan_steps / sizeof plan_steps[0]; i++) {
        if (plan_steps[i].epilogue_bias && !key->bias) continue;
        uint32_t align_ab = plan_steps[i].relaxed ? (uint32_t)(key->bf16 ? 2 : 4) : (uint32_t)GEMM_ALIGN;
        uint32_t align_d = plan_steps[i].relaxed ? 4u : (uint32_t)GEMM_ALIGN;
        if (plan_try(c, p, align_ab, align_d, plan_steps[i].epilogue_bias)) {
            p->epilogue_bias = plan_steps[i].epilogue_bias;
            p->align_ab = align_ab;
            p->align_d = align_d;
            return;
        }
    }
    plan_destroy(p);
    p->kind = PLAN_SIMPLE;
    if (key->ksplit > 1) return;   // gemm_lt runs the GEMM unsplit instead: its own plan says what it finds
    char what[256];
    gemm_problem(key, what, sizeof what);
    fprintf(stderr, "ctron: cuBLASLt offers no usable algorithm for the GEMM %s on cuda:%d; a simple kernel runs it (slow)\n",
            what, c->device);
}

// The plan of `key` from the table (built on first use); *temporary when the table is full and the plan
// must be destroyed after use (built the same way: the same answer).
static GemmPlan *plan_get(Backend *be, const GemmKey *key, GemmPlan *scratch_plan, int *temporary) {
    GemmPlan *plan = NULL;
    pthread_mutex_lock(&gemm_plans_lock);
    uint64_t h = key_hash(key);
    for (int probe = 0; probe < GEMM_PLANS; probe++) {
        GemmPlan *e = &gemm_plans[(h + (uint64_t)probe) % GEMM_PLANS];
        if (!e->used) {
            plan_build(be, e, key);
            e->used = 1;
            plan = e;
            break;
        }
        if (!memcmp(&e->key, key, sizeof *key)) { plan = e; break; }
    }
    pthread_mutex_unlock(&gemm_plans_lock);
    *temporary = plan == NULL;
    if (*temporary) {
        plan_build(be, scratch_plan, key);
        plan = scratch_plan;
    }
    return plan;
}

// A column-major operand's bytes from its first element to one past its last.
static size_t span_bytes(int64_t rows, int64_t cols, int64_t ld, size_t elem) {
    return rows <= 0 || cols <= 0 ? 0 : ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * elem;
}
static int below(const void *p, uint32_t align) { return ((uintptr_t)p % align) != 0; }

// Operands below the plan's alignment, copied into CUDA_SCRATCH_GEMM_T (each part 256-aligned) in stream
// order: A, B and the bias are read from the copies; D is copied in (beta and the bytes between its
// columns) and back by stage_finish.
typedef struct {
    const void *a, *b;
    float *d;
    const float *bias;
    float *d_orig;   // the caller's D when D is staged, else NULL
    size_t d_bytes;
} GemmPtrs;

static void stage_copy(CudaImpl *c, void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
    CUDA_QUEUED("memcpy D2D (GEMM operand staging)");
}

static GemmPtrs stage(Backend *be, const GemmPlan *p, const void *a, const void *b, float *d, const float *bias) {
    CudaImpl *c = cuda_impl(be);
    const GemmKey *k = &p->key;
    const size_t eab = k->bf16 ? 2 : 4;
    GemmPtrs r = {a, b, d, bias, NULL, 0};
    const size_t sa = span_bytes(k->transa ? k->k : k->m, k->transa ? k->m : k->k, k->lda, eab);
    const size_t sb = span_bytes(k->transb ? k->n : k->k, k->transb ? k->k : k->n, k->ldb, eab);
    const size_t sd = span_bytes(k->m, k->n, k->ldd, sizeof(float)), sbias = bias ? (size_t)k->m * sizeof(float) : 0;
    const int move_a = below(a, p->align_ab) && sa, move_b = below(b, p->align_ab) && sb;
    const int move_d = below(d, p->align_d), move_bias = p->epilogue_bias && below(bias, p->align_d);
    size_t total = (move_a ? ct_round256(sa) : 0) + (move_b ? ct_round256(sb) : 0) + (move_d ? ct_round256(sd) : 0) +
                   (move_bias ? ct_round256(sbias) : 0);
    if (!total) return r;
    char *at = (char *)cuda_scratch(be, CUDA_SCRATCH_GEMM_T, total);
    if (move_a) { stage_copy(c, at, a, sa); r.a = at; at += ct_round256(sa); }
    if (move_b) { stage_copy(c, at, b, sb); r.b = at; at += ct_round256(sb); }
    if (move_bias) { stage_copy(c, at, bias, sbias); r.bias = (const float *)at; at += ct_round256(sbias); }
    if (move_d) {
        stage_copy(c, at, d, sd);
        r.d = (float *)at;
        r.d_orig = d;
        r.d_bytes = sd;
    }
    return r;
}

static void stage_finish(Backend *be, const GemmPtrs *r) {
    if (r->d_orig) stage_copy(cuda_impl(be), r->d_orig, r->d, r->d_bytes);
}

// How many k-chunks a GEMM runs as (1: one pass), from the shape alone: a GEMM whose output has fewer
// than GEMM_SPLIT_TILES / 2 tiles of 128×128 is split in two while that keeps the tiles (×S) within
// GEMM_SPLIT_TILES (about two waves of an H100's 132 SMs), each chunk at least GEMM_SPLIT_MIN_K long and
// a multiple of GEMM_SPLIT_ALIGN elements (so every chunk starts as aligned as the operand), up to
// GEMM_SPLIT_MAX chunks and GEMM_SPLIT_BYTES of partial products. Never with a bias (the forward's
// epilogue; such GEMMs have a token-long n).
enum { GEMM_SPLIT_TILES = 256, GEMM_SPLIT_MAX = 16, GEMM_SPLIT_ALIGN = 256, GEMM_SPLIT_MIN_K = 1024 };
static const size_t GEMM_SPLIT_BYTES = (size_t)32 << 20;

static int gemm_ksplit(int m, int n, int k, int bias) {
    const long tiles = (long)((m + 127) / 128) * (long)((n + 127) / 128);
    if (bias || tiles >= GEMM_SPLIT_TILES / 2) return 1;
    int s = 1;
    while (2 * s <= GEMM_SPLIT_MAX && tiles * 2 * s <= GEMM_SPLIT_TILES && k % (2 * s * GEMM_SPLIT_ALIGN) == 0 &&
           k / (2 * s) >= GEMM_SPLIT_MIN_K && (size_t)(2 * s) * (size_t)m * (size_t)n * sizeof(float) <= GEMM_SPLIT_BYTES)
        s *= 2;
    return s;
}

// d[j·ldd + i] (= when beta is 0, += when beta is 1) Σ_p part[p·m·n + j·m + i], p = 0..S-1 in that order.
__global__ static void ksplit_sum_kernel(float *__restrict__ d, int ldd, const float *__restrict__ part, int m, int n,
                                         int s, int beta) {
    const size_t total = (size_t)m * n;
    CT_GRID_LOOP(e, total) {
        float acc = part[e];
        for (int p = 1; p < s; p++) acc += part[(size_t)p * total + e];
        float *out = d + (e / (size_t)m) * (size_t)ldd + e % (size_t)m;
        *out = beta ? *out + acc : acc;
    }
}

static void gemm_profile_note(const GemmKey *key, int epilogue_bias) {
    char name[128];
    char split[24] = "";
    if (key->ksplit > 1) snprintf(split, sizeof split, " split %d", key->ksplit);
    snprintf(name, sizeof name, "gemm %s %c%c m=%d n=%d k=%d%s%s", key->bf16 ? "bf16" : "fp32", key->transa ? 'T' : 'N',
             key->transb ? 'T' : 'N', key->m, key->n, key->k, epilogue_bias && key->bias ? " +bias" : "", split);
    cuda_profile_note(cuda_profile_name(name), NULL, 2.0 * key->m * key->n * (double)key->k);
}

static void lt_matmul(CudaImpl *c, const GemmPlan *plan, const GemmPtrs *g, float beta) {
    const float alpha = 1.0f;
    cublasStatus_t st = cublasLtMatmul(c->lt, plan->desc, &alpha, g->a, plan->la, g->b, plan->lb, &beta, g->d,
                                       plan->ld, g->d, plan->ld, &plan->algo, c->lt_workspace, c->lt_workspace_bytes,
                                       c->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        char what[320];
        gemm_problem(&plan->key, what, sizeof what);
        snprintf(what + strlen(what), sizeof what - strlen(what), ": %s", cublasLtGetStatusString(st));
        cuda_fail("cublasLtMatmul", what, __FILE__, __LINE__);
    }
}

// The GEMM as gemm_ksplit's S chunks (key->ksplit, key->ldd == m): 0 when no algorithm takes the batch
// (the caller then runs it in one pass), else 1 with the partials summed into d.
static int gemm_split(Backend *be, const GemmKey *key, const void *a, const void *b, float beta, float *d, int ldd) {
    CudaImpl *c = cuda_impl(be);
    GemmPlan scratch_plan;
    int temporary;
    GemmPlan *plan = plan_get(be, key, &scratch_plan, &temporary);
    if (plan->kind == PLAN_SIMPLE) return 0;
    const size_t total = (size_t)key->m * key->n;
    float *part = (float *)cuda_scratch(be, CUDA_SCRATCH_GEMM_SPLIT, (size_t)key->ksplit * total * sizeof(float));
    GemmPtrs g = stage(be, plan, a, b, part, NULL);   // the partials are aligned: only A or B may move
    lt_matmul(c, plan, &g, 0.0f);
    if (cuda_profile_on) gemm_profile_note(key, 0);
    if (temporary) plan_destroy(&scratch_plan);
    ksplit_sum_kernel<<<ct_elementwise_blocks(total, 256), 256, 0, c->stream>>>(d, ldd, part, key->m, key->n,
                                                                               key->ksplit, beta != 0.0f);
    CUDA_LAUNCHED();
    return 1;
}

// C (= when beta is 0, += when beta is 1) op(A)·op(B) (+ bias[m] broadcast over the columns), column-major:
// op(A) m×k, op(B) k×n, C m×n with leading dimensions lda, ldb, ldd. A and B bf16 when `bf16`, else fp32.
static void gemm_lt(Backend *be, int transa, int transb, int m, int n, int k, const void *a, int lda, const void *b,
                    int ldb, int bf16, float beta, float *d, int ldd, const float *bias) {
    if (m <= 0 || n <= 0) return;
    CudaImpl *c = cuda_impl(be);
    GemmKey key;
    memset(&key, 0, sizeof key);   // padding too: the key is hashed and compared as bytes
    key.be = be;
    key.device = c->device;
    key.transa = transa; key.transb = transb;
    key.m = m; key.n = n; key.k = k;
    key.lda = lda; key.ldb = ldb;
    key.bf16 = bf16;
    key.bias = bias != NULL;
    key.ksplit = c->split_k ? gemm_ksplit(m, n, k, bias != NULL) : 1;
    if (key.ksplit > 1) {
        key.ldd = m;   // the partials' leading dimension
        if (gemm_split(be, &key, a, b, beta, d, ldd)) return;
        key.ksplit = 1;
    }
    key.ldd = ldd;

    GemmPlan scratch_plan;
    int temporary;
    GemmPlan *plan = plan_get(be, &key, &scratch_plan, &temporary);
    if (plan->kind == PLAN_SIMPLE) {
        gemm_simple(c->stream, transa, transb, m, n, k, 1.0f, a, lda, 0, b, ldb, 0, beta, d, ldd, 0, 1, bf16, bias);
        return;
    }
    GemmPtrs g = stage(be, plan, a, b, d, bias);
    // A plan belongs to one backend, which one host thread drives: setting its bias pointer here is safe.
    if (bias && plan->epilogue_bias)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                    sizeof g.bias));
    lt_matmul(c, plan, &g, beta);
    if (cuda_profile_on) gemm_profile_note(&key, plan->epilogue_bias);
    stage_finish(be, &g);
    int bias_kernel = bias && !plan->epilogue_bias;
    if (temporary) plan_destroy(&scratch_plan);
    if (bias_kernel) {
        // Row-major y [n, m] (row stride ldd) += bias[m].
        size_t total = (size_t)m * n;
        bias_add_kernel<<<ct_elementwise_blocks(total, 256), 256, 0, c->stream>>>(d, ldd, bias, n, m);
        CUDA_LAUNCHED();
    }
}

// ---------------------------------------------------------------------------------------------------
// Decoding, one row: y[o] = Σ_i x[i]·w[o, i] (+ bias[o]) for o < out, w [out, in] fp32 (BF16W false) or its
// bf16 copy (BF16W true, x then rounded to bf16 as the bf16 GEMM's input). One warp per output row, 8 rows
// per block; lane l holds elements l·VEC + 32·VEC·j, summed in that order, then the warp's xor tree: a fixed
// order. VEC > 1 needs in % VEC == 0 and 16-byte aligned x and w.
template <int VEC, bool BF16W>
__global__ static void __launch_bounds__(256) gemv_kernel(float *__restrict__ y, const float *__restrict__ x,
                                                          const float *__restrict__ w,
                                                          const uint16_t *__restrict__ w16,
                                                          const float *__restrict__ bias, int in, int out) {
    const int lane = threadIdx.x % CT_WARP;
    const int o = blockIdx.x * (blockDim.x / CT_WARP) + threadIdx.x / CT_WARP;
    if (o >= out) return;   // the whole warp: o is the same for its 32 lanes
    float acc = 0.0f;
    for (int i = lane * VEC; i < in; i += CT_WARP * VEC) {
        float xv[VEC], wv[VEC];
        if constexpr (VEC == 1) {
            xv[0] = x[i];
        } else {
#pragma unroll
            for (int q = 0; q < VEC; q += 4) {
                float4 t = *reinterpret_cast<const float4 *>(x + i + q);
                xv[q] = t.x; xv[q + 1] = t.y; xv[q + 2] = t.z; xv[q + 3] = t.w;
            }
        }
        if constexpr (BF16W) {
            const uint16_t *wr = w16 + (size_t)o * in + i;
            if constexpr (VEC == 8) {
                uint4 t = *reinterpret_cast<const uint4 *>(wr);
                uint32_t u[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    wv[2 * q] = bf16_to_f32((uint16_t)(u[q] & 0xFFFFu));
                    wv[2 * q + 1] = bf16_to_f32((uint16_t)(u[q] >> 16));
                }
            } else {
#pragma unroll
                for (int q = 0; q < VEC; q++) wv[q] = bf16_to_f32(wr[q]);
            }
#pragma unroll
            for (int q = 0; q < VEC; q++) xv[q] = bf16_round_f(xv[q]);
        } else {
            const float *wr = w + (size_t)o * in + i;
            if constexpr (VEC == 1) {
                wv[0] = wr[0];
            } else {
#pragma unroll
                for (int q = 0; q < VEC; q += 4) {
                    float4 t = *reinterpret_cast<const float4 *>(wr + q);
                    wv[q] = t.x; wv[q + 1] = t.y; wv[q + 2] = t.z; wv[q + 3] = t.w;
                }
            }
        }
#pragma unroll
        for (int q = 0; q < VEC; q++) acc = fmaf(xv[q], wv[q], acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) y[o] = bias ? acc + bias[o] : acc;
}

static void gemv(Backend *be, float *y, const float *x, const float *w, const uint16_t *w16, const float *bias, int in,
                 int out) {
    const unsigned threads = 256, rows_per_block = threads / CT_WARP;
    dim3 grid((unsigned)((out + rows_per_block - 1) / rows_per_block));
    cudaStream_t s = cuda_stream(be);
    if (w16) {
        if (in % 8 == 0 && aligned_to(x, 16) && aligned_to(w16, 16))
            gemv_kernel<8, true><<<grid, threads, 0, s>>>(y, x, NULL, w16, bias, in, out);
        else
            gemv_kernel<1, true><<<grid, threads, 0, s>>>(y, x, NULL, w16, bias, in, out);
    } else {
        if (in % 4 == 0 && aligned_to(x, 16) && aligned_to(w, 16))
            gemv_kernel<4, false><<<grid, threads, 0, s>>>(y, x, w, NULL, bias, in, out);
        else
            gemv_kernel<1, false><<<grid, threads, 0, s>>>(y, x, w, NULL, bias, in, out);
    }
    CUDA_LAUNCHED();
}

// ---------------------------------------------------------------------------------------------------
// The entries (cuda_kernels.h).

// y[n,out] = x[n,in]·Wᵀ (+ bias). Column-major: yᵀ [out, n] (ld ldy) = op(W) · xᵀ with W stored [in, out]
// (ld in) transposed, xᵀ stored [in, n] (ld ldx): m = out, n = n, k = in; the bias (length out = m) by the
// epilogue. bf16: x16 (given, [n, in] contiguous) or x rounded into CUDA_SCRATCH_GEMM_X, w16 ld in.
void cuda_linear_forward(Backend *be, float *y, int ldy, const float *x, const uint16_t *x16, int ldx,
                         const float *w, const uint16_t *w16, const float *bias, int n, int in, int out) {
    if (n <= 0 || out <= 0) return;
    if (!w16) {
        gemm_lt(be, 1, 0, out, n, in, w, in, x, ldx, 0, 0.0f, y, ldy, bias);
        return;
    }
    if (!x16) {
        uint16_t *packed = (uint16_t *)cuda_scratch(be, CUDA_SCRATCH_GEMM_X, (size_t)n * in * sizeof(uint16_t));
        pack_and_colsum(be, packed, x, ldx, n, in, NULL);
        x16 = packed;
    }
    gemm_lt(be, 1, 0, out, n, in, w16, in, x16, in, 1, 0.0f, y, ldy, bias);
}

// y[n,out] += x[n,in]·Wᵀ: linear_forward's GEMM with beta 1 and no epilogue bias.
void cuda_linear_forward_acc(Backend *be, float *y, int ldy, const float *x, const uint16_t *x16, int ldx,
                             const float *w, const uint16_t *w16, int n, int in, int out) {
    if (n <= 0 || out <= 0) return;
    if (!w16) {
        gemm_lt(be, 1, 0, out, n, in, w, in, x, ldx, 0, 1.0f, y, ldy, NULL);
        return;
    }
    if (!x16) {
        uint16_t *packed = (uint16_t *)cuda_scratch(be, CUDA_SCRATCH_GEMM_X, (size_t)n * in * sizeof(uint16_t));
        pack_and_colsum(be, packed, x, ldx, n, in, NULL);
        x16 = packed;
    }
    gemm_lt(be, 1, 0, out, n, in, w16, in, x16, in, 1, 1.0f, y, ldy, NULL);
}

// dx[n,in] (= or +=) dy[n,out]·W: column-major dxᵀ [in, n] (ld ldx_out) = W stored [in, out] (ld in) ·
// dyᵀ stored [out, n] (ld lddy): m = in, n = n, k = out, beta = accumulate.
// dW[out,in] += dyᵀ·x: column-major dWᵀ [in, out] (ld in) = xᵀ stored [in, n] (ld ldx) · op(dyᵀ) with dyᵀ
// stored [out, n] (ld lddy) transposed: m = in, n = out, k = n, beta 1.
// db[out] += Σ_rows dy (fp32 dy at both precisions). bf16: dy rounded into CUDA_SCRATCH_GEMM_DY ([n, out],
// the bias sums taken in the same pass), x16 given or x rounded into CUDA_SCRATCH_GEMM_X.
void cuda_linear_backward(Backend *be, float *dx, int ldx_out, int accumulate, float *dw, float *db,
                          const float *dy, int lddy, const float *x, const uint16_t *x16, int ldx, const float *w,
                          const uint16_t *w16, int n, int in, int out) {
    if (n <= 0 || out <= 0) return;
    float beta_dx = accumulate ? 1.0f : 0.0f;
    if (!w16) {
        if (dx) gemm_lt(be, 0, 0, in, n, out, w, in, dy, lddy, 0, beta_dx, dx, ldx_out, NULL);
        if (dw) gemm_lt(be, 0, 1, in, out, n, x, ldx, dy, lddy, 0, 1.0f, dw, in, NULL);
        if (db) pack_and_colsum(be, NULL, dy, lddy, n, out, db);
        return;
    }
    uint16_t *dy16 = (uint16_t *)cuda_scratch(be, CUDA_SCRATCH_GEMM_DY, (size_t)n * out * sizeof(uint16_t));
    pack_and_colsum(be, dy16, dy, lddy, n, out, db);
    cuda_linear_backward16(be, dx, ldx_out, accumulate, dw, dy16, out, x, x16, ldx, w16, n, in, out);
}

// linear_backward at bf16 with dy given in bf16 (dy16 [n, out], row stride lddy16): the GEMMs of
// cuda_linear_backward on the copy as it is, so the bits of a dy that rounds to it; no bias gradient.
void cuda_linear_backward16(Backend *be, float *dx, int ldx_out, int accumulate, float *dw, const uint16_t *dy16,
                            int lddy16, const float *x, const uint16_t *x16, int ldx, const uint16_t *w16, int n,
                            int in, int out) {
    if (n <= 0 || out <= 0) return;
    if (!x16 && dw) {   // x is read only for the weight gradient (none for a frozen weight)
        uint16_t *packed = (uint16_t *)cuda_scratch(be, CUDA_SCRATCH_GEMM_X, (size_t)n * in * sizeof(uint16_t));
        pack_and_colsum(be, packed, x, ldx, n, in, NULL);
        x16 = packed;
    }
    if (dx) gemm_lt(be, 0, 0, in, n, out, w16, in, dy16, lddy16, 1, accumulate ? 1.0f : 0.0f, dx, ldx_out, NULL);
    if (dw) gemm_lt(be, 0, 1, in, out, n, x16, in, dy16, lddy16, 1, 1.0f, dw, in, NULL);
}

// db[c] += Σ_r dy[r, c] for dy [n, cols] (row stride lddy): fixed-order chunk sums, then their sum.
void cuda_bias_backward(Backend *be, float *db, const float *dy, int lddy, int n, int cols) {
    pack_and_colsum(be, NULL, dy, lddy, n, cols, db);
}

// Inference: one row is a GEMV that reads W once (fp32, or the bf16 copy with x rounded to bf16, the
// values the bf16 GEMM would multiply); more rows are linear_forward with x rounded by the backend.
void cuda_linear_forward_rows(Backend *be, float *y, int ldy, const float *x, int ldx, const float *w,
                              const uint16_t *w16, const float *bias, int n, int in, int out) {
    if (n <= 0 || out <= 0) return;
    if (n == 1) {
        gemv(be, y, x, w, w16, bias, in, out);
        return;
    }
    cuda_linear_forward(be, y, ldy, x, NULL, ldx, w, w16, bias, n, in, out);
}
