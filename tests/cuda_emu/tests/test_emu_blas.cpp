// test_emu_blas: the library stand-ins of the host emulation (tests/cuda_emu/cublaslt_emu.cpp and
// include/cub/device/device_radix_sort.cuh) checked against references, before any ctron code uses them.
//
// 1. Products. Every combination ctron's GEMMs use (gemm.cu: T·N with bias, N·N with beta 0 and 1, N·T with
//    beta 1; attention.cu: strided batches, T·N, N·T, N·N, alpha ≠ 1), and T·T besides, for fp32 and bf16
//    operands, batch 1, batches one after another and batches interleaved inside ld (attention's heads),
//    beta 0 (C poisoned with NaN: it must not be read) and beta 1, the BIAS epilogue, in place and C ≠ D
//    with another ld. Each element of D must be within (k + 4)·2⁻²³ of the magnitude sum
//    |alpha|·Σ|a·b| + |beta·c| + |bias| of a double-precision reference (fp32 accumulation of exactly
//    widened bf16 values: a wrong index, transpose, stride or rounding is O(1) off), and every element of
//    D's buffer outside its matrices must keep its poison bits.
// 2. Contracts. Each documented violation gives the status the real library returns (INVALID_VALUE or
//    NOT_SUPPORTED, with no algorithm), and the legal neighbour of each case succeeds, so the check
//    cannot pass by refusing everything. An operand outside device memory aborts (forked child).
// 2b. Two algorithms (chosen at 16- and at 4-byte alignment) give different bits, one algorithm the same.
// 2c. Stream order: the product reads its operands when the stream runs it (at the host's synchronisation
//     under the emulated runtime), not when cublasLtMatmul is called.
// 3. The CT_EMU_LT_NO_ALGO hook: "all", "aligned" and "bias" refuse exactly what they name; "splitk" and
//    "workspace" answer with what the preference excluded.
// 4. cub::DeviceRadixSort::SortPairs: the two-call protocol, a stable sort on [begin_bit, end_bit) against
//    std::stable_sort, too little temporary storage refused, overlapping ranges abort.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <vector>
#include <cub/device/device_radix_sort.cuh>

#include "check.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float uniform(float lo, float hi) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((rng >> 40) * (1.0 / 16777216.0));
}
static uint16_t bf16_of(float f) {   // round to nearest even (finite inputs)
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float f32_of_bf16(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void *dmalloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        printf("cudaMalloc(%zu) failed\n", bytes);
        exit(1);
    }
    return p;
}

// A column-major operand: rows × cols, ld, batch, stride (elements), fp32 or bf16.
struct Mat {
    int rows, cols, ld, batch;
    long long stride;
    cudaDataType type;
    size_t elems() const { return (size_t)(batch - 1) * (size_t)stride + (size_t)(cols - 1) * ld + rows; }
    size_t bytes() const { return elems() * (type == CUDA_R_32F ? 4 : 2); }
    size_t at(int b, int r, int c) const { return (size_t)b * (size_t)stride + (size_t)c * ld + r; }
};

static cublasLtMatrixLayout_t layout(const Mat &m) {
    cublasLtMatrixLayout_t l;
    cublasLtMatrixLayoutCreate(&l, m.type, (uint64_t)m.rows, (uint64_t)m.cols, m.ld);
    int32_t count = m.batch;
    int64_t stride = m.stride;
    cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    return l;
}

// Operand values (host copy as fp32 of what the device holds) filled into a device buffer.
static void *fill(const Mat &m, std::vector<float> &host, size_t slack = 0) {
    host.assign(m.elems(), 0.0f);
    void *d = dmalloc(m.bytes() + slack);
    for (size_t i = 0; i < host.size(); i++) {
        float v = uniform(-1.0f, 1.0f);
        if (m.type == CUDA_R_16BF) {
            uint16_t b = bf16_of(v);
            host[i] = f32_of_bf16(b);
            ((uint16_t *)d)[i] = b;
        } else {
            host[i] = v;
            ((float *)d)[i] = v;
        }
    }
    return d;
}

struct Lt {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulPreference_t pref;
};

static Lt lt_make(cublasLtHandle_t h, int ta, int tb, const Mat &a, const Mat &b, const Mat &c, const Mat &d,
                  const float *bias, uint32_t align) {
    Lt s;
    s.h = h;
    cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    int32_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    if (bias) {
        uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
        int32_t bt = CUDA_R_32F;
        cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
        cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    }
    s.la = layout(a); s.lb = layout(b); s.lc = layout(c); s.ld = layout(d);
    cublasLtMatmulPreferenceCreate(&s.pref);
    uint64_t ws = (uint64_t)32 << 20;
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(s.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &scheme, sizeof scheme);
    cublasLtMatmulPreferenceAttributes_t al[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++) cublasLtMatmulPreferenceSetAttribute(s.pref, al[i], &align, sizeof align);
    return s;
}
static void lt_free(Lt &s) {
    cublasLtMatmulPreferenceDestroy(s.pref);
    cublasLtMatrixLayoutDestroy(s.la);
    cublasLtMatrixLayoutDestroy(s.lb);
    cublasLtMatrixLayoutDestroy(s.lc);
    cublasLtMatrixLayoutDestroy(s.ld);
    cublasLtMatmulDescDestroy(s.op);
}
static cublasStatus_t heuristic(Lt &s, cublasLtMatmulHeuristicResult_t *r, int *found) {
    memset(r, 0, sizeof *r);
    *found = -1;
    return cublasLtMatmulAlgoGetHeuristic(s.h, s.op, s.la, s.lb, s.lc, s.ld, s.pref, 1, r, found);
}

static void *g_ws;
static const size_t kWs = (size_t)32 << 20;

// ---------------------------------------------------------------------------------------------------
// 1. Products

struct Case {
    int ta, tb, m, n, k, batch;
    int interleaved;   // batches side by side inside ld (attention's heads) instead of one after another
    cudaDataType ab;
    float alpha, beta;
    int bias, out_of_place;
};

static void run_case(cublasLtHandle_t h, const Case &t) {
    // Stored shapes: A m×k (k×m when transposed), B k×n (n×k), C and D m×n.
    int ar = t.ta ? t.k : t.m, ac = t.ta ? t.m : t.k, br = t.tb ? t.n : t.k, bc = t.tb ? t.k : t.n;
    Mat a, b, c, d;
    if (t.interleaved) {
        a = Mat{ar, ac, ar * t.batch + 3, t.batch, ar, t.ab};
        b = Mat{br, bc, br * t.batch + 1, t.batch, br, t.ab};
        d = Mat{t.m, t.n, t.m * t.batch + 2, t.batch, t.m, CUDA_R_32F};
    } else {
        a = Mat{ar, ac, ar + 2, t.batch, (long long)(ar + 2) * ac + 5, t.ab};
        b = Mat{br, bc, br + 1, t.batch, (long long)(br + 1) * bc + 3, t.ab};
        d = Mat{t.m, t.n, t.m + 3, t.batch, (long long)(t.m + 3) * t.n + 7, CUDA_R_32F};
    }
    c = d;
    if (t.out_of_place) c.ld = d.ld + 4, c.stride = t.interleaved ? c.stride : (long long)c.ld * c.cols + 1;
    std::vector<float> ha, hb, hc, hbias;
    void *A = fill(a, ha), *B = fill(b, hb);
    float *C = (float *)fill(c, hc);   // with beta 0 poisoned below
    float *D = t.out_of_place ? (float *)dmalloc(d.bytes()) : C;
    if (t.out_of_place) memset(D, 0xFF, d.bytes());
    if (t.beta == 0.0f) memset(C, 0xFF, c.bytes());   // NaN: beta 0 must not read C
    std::vector<float> hd_before(d.elems());
    memcpy(hd_before.data(), D, d.bytes());
    float *bias = NULL;
    if (t.bias) {
        bias = (float *)dmalloc((size_t)t.m * 4);
        hbias.resize(t.m);
        for (int i = 0; i < t.m; i++) bias[i] = hbias[i] = uniform(-1, 1);
    }
    Lt s = lt_make(h, t.ta, t.tb, a, b, c, d, bias, 16);
    cublasLtMatmulHeuristicResult_t r;
    int found;
    cublasStatus_t st = heuristic(s, &r, &found);
    char name[160];
    snprintf(name, sizeof name, "%c%c m=%d n=%d k=%d batch=%d%s %s alpha=%g beta=%g%s%s", t.ta ? 'T' : 'N',
             t.tb ? 'T' : 'N', t.m, t.n, t.k, t.batch, t.interleaved ? " interleaved" : "",
             t.ab == CUDA_R_32F ? "fp32" : "bf16", t.alpha, t.beta, t.bias ? " +bias" : "",
             t.out_of_place ? " C!=D" : "");
    CHECK(st == CUBLAS_STATUS_SUCCESS && found == 1 && r.state == CUBLAS_STATUS_SUCCESS, "%s: heuristic", name);
    st = cublasLtMatmul(h, s.op, &t.alpha, A, s.la, B, s.lb, &t.beta, C, s.lc, D, s.ld, &r.algo, g_ws, kWs, 0);
    CHECK(st == CUBLAS_STATUS_SUCCESS, "%s: matmul status %d", name, (int)st);
    cudaStreamSynchronize(0);
    std::vector<char> inside(d.elems(), 0);
    double worst = 0;
    for (int bi = 0; bi < t.batch; bi++)
        for (int i = 0; i < t.m; i++)
            for (int j = 0; j < t.n; j++) {
                double acc = 0, mag = 0;
                for (int q = 0; q < t.k; q++) {
                    double x = ha[t.ta ? a.at(bi, q, i) : a.at(bi, i, q)];
                    double y = hb[t.tb ? b.at(bi, j, q) : b.at(bi, q, j)];
                    acc += x * y;
                    mag += fabs(x * y);
                }
                double ref = t.alpha * acc, bound = fabs(t.alpha) * mag;
                if (t.beta != 0.0f) ref += t.beta * (double)hc[c.at(bi, i, j)], bound += fabs(t.beta * hc[c.at(bi, i, j)]);
                if (t.bias) ref += hbias[i], bound += fabs(hbias[i]);
                bound *= (t.k + 4) * ldexp(1.0, -23);
                size_t at = d.at(bi, i, j);
                inside[at] = 1;
                double err = fabs((double)D[at] - ref);
                if (!(err <= bound)) worst = std::isnan(err) ? INFINITY : std::max(worst, err);
            }
    CHECK(worst == 0, "%s: an element of D off its reference by %g (beyond the fp32 bound)", name, worst);
    size_t changed = 0;
    for (size_t i = 0; i < d.elems(); i++)
        if (!inside[i] && memcmp(&D[i], &hd_before[i], 4)) changed++;
    CHECK(changed == 0, "%s: %zu elements of D's buffer outside its matrices changed", name, changed);
    lt_free(s);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    if (t.out_of_place) cudaFree(D);
    if (bias) cudaFree(bias);
}

static void products(cublasLtHandle_t h) {
    const int trans[4][2] = {{1, 0}, {0, 0}, {0, 1}, {1, 1}};
    const cudaDataType types[2] = {CUDA_R_32F, CUDA_R_16BF};
    int n = 0;
    for (auto &tr : trans)
        for (cudaDataType ab : types)
            for (int layout = 0; layout < 3; layout++)
                for (int beta = 0; beta < 2; beta++)
                    for (int bias = 0; bias < 2; bias++) {
                        Case t = {tr[0], tr[1], 7, 5, 9, layout == 0 ? 1 : 3, layout == 2, ab,
                                  layout == 2 ? 0.375f : 1.0f, beta ? 1.0f : 0.0f, bias, (layout + bias + beta) % 2};
                        run_case(h, t);
                        n++;
                    }
    // A GPT-2-like projection: k large enough that an index mistake cannot hide in rounding.
    Case big = {1, 0, 96, 33, 768, 1, 0, CUDA_R_16BF, 1.0f, 0.0f, 1, 0};
    run_case(h, big);
    printf("products: %d cases\n", n + 1);
}

// ---------------------------------------------------------------------------------------------------
// 2. Contracts

struct Problem {
    Mat a, b, d;
    void *A, *B;
    float *D, *bias;
};
// fp32 T·N, m = 8, n = 6, k = 12 (gemm.cu's forward), every buffer with 64 bytes of slack before it.
static Problem problem(cudaDataType ab) {
    Problem p;
    p.a = Mat{12, 8, 12, 1, 0, ab};
    p.b = Mat{12, 6, 12, 1, 0, ab};
    p.d = Mat{8, 6, 8, 1, 0, CUDA_R_32F};
    std::vector<float> tmp;
    p.A = fill(p.a, tmp, 64);   // room for the shifted views below
    p.B = fill(p.b, tmp, 64);
    p.D = (float *)dmalloc(p.d.bytes() + 64);
    p.bias = (float *)dmalloc(64 * 4);
    return p;
}
static void problem_free(Problem &p) {
    cudaFree(p.A);
    cudaFree(p.B);
    cudaFree(p.D);
    cudaFree(p.bias);
}

static cublasStatus_t matmul(Lt &s, const cublasLtMatmulAlgo_t *algo, const void *A, const void *B, float *D,
                             size_t ws = kWs) {
    float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasLtMatmul(s.h, s.op, &one, A, s.la, B, s.lb, &zero, D, s.lc, D, s.ld, algo, g_ws, ws, 0);
    cudaStreamSynchronize(0);
    return st;
}

static void contracts(cublasLtHandle_t h) {
    cublasLtMatmulHeuristicResult_t r;
    int found;
    Problem p = problem(CUDA_R_32F);
    {   // the legal problem: success; the algorithm has no split-K reduction and needs ≤ the workspace asked
        Lt s = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, NULL, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_SUCCESS && found == 1, "legal problem: heuristic");
        CHECK(r.workspaceSize <= kWs, "workspace %zu above the preference", r.workspaceSize);
        uint32_t scheme = 99;
        size_t written = 0;
        CHECK(cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                     sizeof scheme, &written) == CUBLAS_STATUS_SUCCESS &&
                   scheme == CUBLASLT_REDUCTION_SCHEME_NONE && written == sizeof scheme,
               "reduction scheme NONE");
        CHECK(matmul(s, &r.algo, p.A, p.B, p.D) == CUBLAS_STATUS_SUCCESS, "legal problem: matmul");
        // pointers below the 16 bytes the algorithm was chosen for: NOT_SUPPORTED; 16-aligned others fine
        CHECK(matmul(s, &r.algo, (float *)p.A + 1, p.B, p.D) == CUBLAS_STATUS_NOT_SUPPORTED, "A 4-aligned vs 16");
        CHECK(matmul(s, &r.algo, p.A, (float *)p.B + 2, p.D) == CUBLAS_STATUS_NOT_SUPPORTED, "B 8-aligned vs 16");
        CHECK(matmul(s, &r.algo, p.A, p.B, p.D + 1) == CUBLAS_STATUS_NOT_SUPPORTED, "D 4-aligned vs 16");
        CHECK(matmul(s, &r.algo, p.A, p.B, p.D + 4) == CUBLAS_STATUS_SUCCESS, "D 16-aligned at +16 bytes");
        // workspace: the algorithm's need (> 0 with 32 MiB allowed) must be passed
        CHECK(r.workspaceSize > 0 && matmul(s, &r.algo, p.A, p.B, p.D, r.workspaceSize - 1) ==
                                          CUBLAS_STATUS_INVALID_VALUE,
               "workspace below the algorithm's");
        CHECK(matmul(s, &r.algo, p.A, p.B, p.D, r.workspaceSize) == CUBLAS_STATUS_SUCCESS, "workspace exactly");
        // requestedAlgoCount ≤ 0
        CHECK(cublasLtMatmulAlgoGetHeuristic(h, s.op, s.la, s.lb, s.ld, s.ld, s.pref, 0, &r, &found) ==
                   CUBLAS_STATUS_INVALID_VALUE,
               "requestedAlgoCount 0");
        // an attribute of the wrong size
        int64_t wide = CUBLAS_OP_T;
        CHECK(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide) ==
                   CUBLAS_STATUS_INVALID_VALUE,
               "TRANSA given 8 bytes");
        lt_free(s);
    }
    {   // the same pointers are fine for an algorithm chosen with 4-byte alignment
        Lt s = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, NULL, 4);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_SUCCESS && found == 1, "align 4: heuristic");
        CHECK(matmul(s, &r.algo, (float *)p.A + 1, (float *)p.B + 1, p.D + 1) == CUBLAS_STATUS_SUCCESS,
               "align 4: 4-aligned operands");
        lt_free(s);
    }
    {   // an alignment preference below the element size: no algorithm
        Lt s = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, NULL, 2);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_NOT_SUPPORTED && found == 0, "fp32 at 2-byte alignment");
        lt_free(s);
    }
    {   // ld below rows
        Mat a = p.a;
        a.ld = 11;
        Lt s = lt_make(h, 1, 0, a, p.b, p.d, p.d, NULL, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_INVALID_VALUE && found == 0, "A's ld 11 < rows 12");
        lt_free(s);
        Mat d = p.d;
        d.ld = 7;
        s = lt_make(h, 1, 0, p.a, p.b, d, d, NULL, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_INVALID_VALUE, "D's ld 7 < rows 8");
        lt_free(s);
    }
    {   // inner dimensions that disagree; D of the wrong shape
        Mat b = p.b;
        b.rows = 11;
        Lt s = lt_make(h, 1, 0, p.a, b, p.d, p.d, NULL, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_INVALID_VALUE, "k of A 12, of B 11");
        lt_free(s);
        s = lt_make(h, 0, 0, p.a, p.b, p.d, p.d, NULL, 16);   // op(A) = A is 12×8, D is 8×6
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_INVALID_VALUE, "op(A) 12 rows, D 8");
        lt_free(s);
    }
    {   // C and D: in place needs equal layouts, out of place may differ in ld only
        Mat c = p.d;
        c.ld = 10;
        float *C = (float *)dmalloc(c.bytes());
        Lt s = lt_make(h, 1, 0, p.a, p.b, c, p.d, NULL, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_SUCCESS, "C ld 10, D ld 8: heuristic");
        float one = 1.0f;
        CHECK(cublasLtMatmul(h, s.op, &one, p.A, s.la, p.B, s.lb, &one, p.D, s.lc, p.D, s.ld, &r.algo, g_ws, kWs, 0) ==
                   CUBLAS_STATUS_INVALID_VALUE,
               "in place with Cdesc != Ddesc");
        memset(C, 0, c.bytes());
        CHECK(cublasLtMatmul(h, s.op, &one, p.A, s.la, p.B, s.lb, &one, C, s.lc, p.D, s.ld, &r.algo, g_ws, kWs, 0) ==
                   CUBLAS_STATUS_SUCCESS,
               "out of place with another ld");
        cudaStreamSynchronize(0);
        lt_free(s);
        Mat c2 = p.d;
        c2.cols = 5;
        s = lt_make(h, 1, 0, p.a, p.b, c2, p.d, NULL, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_INVALID_VALUE, "C 8×5, D 8×6");
        lt_free(s);
        cudaFree(C);
    }
    {   // batches: counts must agree; D's batches must not overlap
        Mat a = p.a, b = p.b, d = p.d;
        a.batch = b.batch = 2, a.stride = 0, b.stride = 0;
        Lt s = lt_make(h, 1, 0, a, b, d, d, NULL, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_INVALID_VALUE, "batch 2, 2, 1, 1");
        lt_free(s);
        d.batch = 2, d.stride = 4;   // rows 8 > stride 4 and not inside ld
        s = lt_make(h, 1, 0, a, b, d, d, NULL, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_INVALID_VALUE, "D's batches overlap");
        lt_free(s);
        d.stride = 48;
        s = lt_make(h, 1, 0, a, b, d, d, NULL, 16);   // A and B broadcast (stride 0), D apart: legal
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_SUCCESS, "batch 2 with A, B broadcast");
        lt_free(s);
    }
    {   // types: A and B alike; compute 32F; what the stand-in does not emulate is refused, never guessed
        Mat b16 = p.b;
        b16.type = CUDA_R_16BF;
        Lt s = lt_make(h, 1, 0, p.a, b16, p.d, p.d, NULL, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_NOT_SUPPORTED, "A fp32, B bf16");
        lt_free(s);
        s = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, NULL, 16);
        cublasLtMatmulDesc_t tf32;
        cublasLtMatmulDescCreate(&tf32, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F);
        int32_t t = CUBLAS_OP_T;
        cublasLtMatmulDescSetAttribute(tf32, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
        CHECK(cublasLtMatmulAlgoGetHeuristic(h, tf32, s.la, s.lb, s.ld, s.ld, s.pref, 1, &r, &found) ==
                   CUBLAS_STATUS_NOT_SUPPORTED,
               "COMPUTE_32F_FAST_TF32 (not emulated)");
        cublasLtMatmulDescDestroy(tf32);
        lt_free(s);
    }
    {   // the bias: its alignment in the descriptor at the heuristic is what the algorithm requires
        Lt s = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, p.bias, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_SUCCESS, "bias: heuristic");
        CHECK(matmul(s, &r.algo, p.A, p.B, p.D) == CUBLAS_STATUS_SUCCESS, "bias 256-aligned");
        const float *shifted = p.bias + 1;
        cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &shifted, sizeof shifted);
        CHECK(matmul(s, &r.algo, p.A, p.B, p.D) == CUBLAS_STATUS_NOT_SUPPORTED, "bias 4-aligned after 16 chosen");
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_SUCCESS, "bias 4-aligned: heuristic");
        CHECK(matmul(s, &r.algo, p.A, p.B, p.D) == CUBLAS_STATUS_SUCCESS, "bias 4-aligned, chosen for it");
        const float *none = NULL;
        cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &none, sizeof none);
        CHECK(matmul(s, &r.algo, p.A, p.B, p.D) == CUBLAS_STATUS_INVALID_VALUE, "BIAS with a NULL bias");
        int32_t bt = CUDA_R_16BF;
        cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_NOT_SUPPORTED, "bf16 bias for fp32 D");
        lt_free(s);
    }
    {   // an algorithm is for its problem: another m is refused
        Lt s = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, NULL, 16);
        CHECK(heuristic(s, &r, &found) == CUBLAS_STATUS_SUCCESS, "reuse: heuristic");
        Mat a = p.a, d = p.d;
        a.cols = 4, d.rows = 4;
        Lt s2 = lt_make(h, 1, 0, a, p.b, d, d, NULL, 16);
        CHECK(matmul(s2, &r.algo, p.A, p.B, p.D) == CUBLAS_STATUS_INVALID_VALUE, "algorithm of m=8 used for m=4");
        lt_free(s2);
        lt_free(s);
    }
    problem_free(p);
}

// A pointer outside device memory: the child must abort (a GPU would fault).
static void outside_device_memory(cublasLtHandle_t h) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        Problem p = problem(CUDA_R_32F);
        Lt s = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, NULL, 16);
        cublasLtMatmulHeuristicResult_t r;
        int found;
        heuristic(s, &r, &found);
        float *host = (float *)aligned_alloc(256, 4096);
        freopen("/dev/null", "w", stderr);
        matmul(s, &r.algo, host, p.B, p.D);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "host memory as A: abort expected (status %d)", status);
}

// 2b. Algorithms chosen for different alignments sum in different orders (as different GPU kernels may);
//     one algorithm always gives the same bits.
static void variants(cublasLtHandle_t h) {
    Mat a{64, 40, 64, 1, 0, CUDA_R_32F}, b{64, 30, 64, 1, 0, CUDA_R_32F}, d{40, 30, 40, 1, 0, CUDA_R_32F};
    std::vector<float> tmp;
    void *A = fill(a, tmp), *B = fill(b, tmp);
    float *D = (float *)dmalloc(d.bytes());
    std::vector<float> out[3];
    uint32_t aligns[3] = {16, 16, 4};
    for (int i = 0; i < 3; i++) {
        Lt s = lt_make(h, 1, 0, a, b, d, d, NULL, aligns[i]);
        cublasLtMatmulHeuristicResult_t r;
        int found;
        heuristic(s, &r, &found);
        CHECK(matmul(s, &r.algo, A, B, D) == CUBLAS_STATUS_SUCCESS, "variants: matmul %d", i);
        out[i].assign(D, D + d.elems());
        lt_free(s);
    }
    CHECK(!memcmp(out[0].data(), out[1].data(), d.bytes()), "variants: one algorithm, two runs, different bits");
    size_t differ = 0;
    for (size_t i = 0; i < d.elems(); i++) differ += memcmp(&out[0][i], &out[2][i], 4) != 0;
    CHECK(differ > 0, "variants: the 16-byte and 4-byte algorithms gave the same bits everywhere");
    printf("variants: %zu of %zu elements differ between the 16- and 4-byte algorithms\n", differ, d.elems());
    cudaFree(A);
    cudaFree(B);
    cudaFree(D);
}


static void stream_order(cublasLtHandle_t h) {
    Problem p = problem(CUDA_R_32F);
    Lt s = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, NULL, 16);
    cublasLtMatmulHeuristicResult_t r;
    int found;
    heuristic(s, &r, &found);
    float alpha = 1.0f, beta = 0.0f;
    CHECK(cublasLtMatmul(h, s.op, &alpha, p.A, s.la, p.B, s.lb, &beta, p.D, s.ld, p.D, s.ld, &r.algo, g_ws, kWs, 0) ==
               CUBLAS_STATUS_SUCCESS,
           "stream order: matmul");
    memset(p.A, 0, p.a.bytes());           // read by the stream: A is now zero
    cudaStreamSynchronize(0);
    size_t nonzero = 0;
    for (size_t i = 0; i < p.d.elems(); i++) nonzero += p.D[i] != 0.0f;
    CHECK(nonzero == 0, "stream order: %zu elements of D nonzero (the product ran before the stream reached it)",
           nonzero);
    lt_free(s);
    problem_free(p);
}

// ---------------------------------------------------------------------------------------------------
// 3. The no-algorithm hook

static void hook(cublasLtHandle_t h) {
    cublasLtMatmulHeuristicResult_t r;
    int found;
    Problem p = problem(CUDA_R_32F);
    Lt s16 = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, NULL, 16), s4 = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, NULL, 4);
    Lt sb = lt_make(h, 1, 0, p.a, p.b, p.d, p.d, p.bias, 4);
    setenv("CT_EMU_LT_NO_ALGO", "all", 1);
    CHECK(heuristic(s4, &r, &found) == CUBLAS_STATUS_NOT_SUPPORTED && found == 0, "hook all");
    setenv("CT_EMU_LT_NO_ALGO", "aligned", 1);
    CHECK(heuristic(s16, &r, &found) == CUBLAS_STATUS_NOT_SUPPORTED && found == 0, "hook aligned: 16 refused");
    CHECK(heuristic(s4, &r, &found) == CUBLAS_STATUS_SUCCESS && found == 1, "hook aligned: 4 found");
    setenv("CT_EMU_LT_NO_ALGO", "bias", 1);
    CHECK(heuristic(sb, &r, &found) == CUBLAS_STATUS_NOT_SUPPORTED && found == 0, "hook bias: BIAS refused");
    CHECK(heuristic(s16, &r, &found) == CUBLAS_STATUS_SUCCESS && found == 1, "hook bias: DEFAULT found");
    setenv("CT_EMU_LT_NO_ALGO", "splitk,workspace", 1);
    uint32_t scheme = 0;
    size_t written = 0;
    CHECK(heuristic(s16, &r, &found) == CUBLAS_STATUS_SUCCESS && found == 1 && r.workspaceSize > kWs &&
               cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                    sizeof scheme, &written) == CUBLAS_STATUS_SUCCESS &&
               scheme == CUBLASLT_REDUCTION_SCHEME_INPLACE,
           "hook splitk,workspace: an in-place split-K answer above the workspace");
    unsetenv("CT_EMU_LT_NO_ALGO");
    CHECK(heuristic(sb, &r, &found) == CUBLAS_STATUS_SUCCESS && found == 1, "hook off");
    lt_free(s16);
    lt_free(s4);
    lt_free(sb);
    problem_free(p);
}

// ---------------------------------------------------------------------------------------------------
// 4. CUB

static void radix_sort() {
    const int n = 1000;
    unsigned *kin = (unsigned *)dmalloc(n * 4), *kout = (unsigned *)dmalloc(n * 4);
    int *vin = (int *)dmalloc(n * 4), *vout = (int *)dmalloc(n * 4);
    std::vector<unsigned> keys(n);
    for (int i = 0; i < n; i++) {
        // low 3 bits noise outside [3, 9): equal digits must keep input order
        keys[i] = kin[i] = ((unsigned)(uniform(0, 40)) << 3) | (unsigned)uniform(0, 8) | (1u << 12) * (i % 2);
        vin[i] = i;
    }
    size_t bytes = 0;
    CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const unsigned *)nullptr, (unsigned *)nullptr,
                                           (const int *)nullptr, (int *)nullptr, n, 3, 9, (cudaStream_t)0) ==
                   cudaSuccess &&
               bytes > 0,
           "SortPairs: size query");
    void *tmp = dmalloc(bytes);
    size_t small = bytes - 1;
    CHECK(cub::DeviceRadixSort::SortPairs(tmp, small, kin, kout, vin, vout, n, 3, 9, (cudaStream_t)0) ==
               cudaErrorInvalidValue,
           "SortPairs: too little temporary storage");
    CHECK(cub::DeviceRadixSort::SortPairs(tmp, bytes, kin, kout, vin, vout, n, 3, 9, (cudaStream_t)0) == cudaSuccess,
           "SortPairs");
    cudaStreamSynchronize(0);
    std::vector<int> order(n);
    for (int i = 0; i < n; i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ((keys[a] >> 3) & 63) < ((keys[b] >> 3) & 63); });
    int bad = 0;
    for (int i = 0; i < n; i++) bad += vout[i] != order[i] || kout[i] != keys[order[i]];
    CHECK(bad == 0, "SortPairs: %d items differ from std::stable_sort on bits [3, 9)", bad);
    bool input_kept = true;
    for (int i = 0; i < n; i++) input_kept &= kin[i] == keys[i] && vin[i] == i;
    CHECK(input_kept, "SortPairs: the inputs were modified");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        cub::DeviceRadixSort::SortPairs(tmp, bytes, kin, kin + 1, vin, vout, n - 1, 0, 32, (cudaStream_t)0);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "SortPairs: overlapping keys must abort");
    cudaFree(tmp);
    cudaFree(kin);
    cudaFree(kout);
    cudaFree(vin);
    cudaFree(vout);
}

int main(void) {
    unsetenv("CT_EMU_LT_NO_ALGO");
    cublasLtHandle_t h;
    if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
    g_ws = dmalloc(kWs);
    products(h);
    contracts(h);
    variants(h);
    stream_order(h);
    outside_device_memory(h);
    hook(h);
    radix_sort();
    cudaFree(g_ws);
    cublasLtDestroy(h);
    return check_summary();
}
