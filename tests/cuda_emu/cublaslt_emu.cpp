// cublaslt_emu.cpp: a host stand-in for the part of cuBLASLt that ctron calls (gemm.cu, attention.cu,
// cuda_backend.c), written against the toolkit's own <cublasLt.h> declarations.
//
// It computes D = alpha·op(A)·op(B) + beta·C (+ bias) with strided batches, transposes, A and B both
// CUDA_R_32F or both CUDA_R_16BF (bf16 values widened exactly to fp32), fp32 compute, fp32 C and D, the
// DEFAULT and BIAS epilogues, through cblas_sgemm (fp32 accumulation), in stream order (emu_stream.h).
//
// It checks the library's documented contracts and answers as the library does (cublasLt.h, cuBLAS guide
// "cublasLtMatmul"):
//   - descriptors: attribute sizes (INVALID_VALUE), a live handle and live descriptors;
//   - layouts: column order only, ld ≥ rows ("large enough that matrix memory locations are not
//     overlapping"), equal batch counts, D's batches not overlapping each other;
//   - shapes: op(A) m×k, op(B) k×n, C and D m×n; C == D needs Cdesc equal to Ddesc (in place), C != D the
//     same type, rows, columns, batch and order (INVALID_VALUE);
//   - types: compute CUBLAS_COMPUTE_32F, scale CUDA_R_32F, A and B of one type (32F or 16BF), C and D 32F,
//     bias type 32F (NOT_SUPPORTED otherwise: the cuBLAS type table has other rows, which ctron does not
//     use and this file does not emulate; it says so on stderr);
//   - the heuristic: requestedAlgoCount > 0 (INVALID_VALUE); a MIN_ALIGNMENT_*_BYTES preference below the
//     element size leaves no algorithm (NOT_SUPPORTED, 0 results); the algorithm returned requires the
//     alignments it was asked for (up to 16 bytes) and, with the BIAS epilogue, the bias pointer's
//     alignment as the descriptor held it ("routines that don't dereference this pointer ... depend on its
//     value to determine expected pointer alignment"); it needs a workspace within MAX_WORKSPACE_BYTES; its
//     reduction scheme is NONE (allowed by every mask);
//   - cublasLtMatmul: an algorithm from the heuristic for this same problem; pointers at least as aligned
//     as the algorithm requires (NOT_SUPPORTED otherwise, what the real library answers for a misaligned
//     operand: pytorch#92201, #97205); workspaceSizeInBytes ≥ the algorithm's (INVALID_VALUE); BIAS with a
//     NULL bias pointer (INVALID_VALUE); every operand, the bias and the workspace inside live device
//     allocations (ct_emu::device_range), else it reports and aborts: the GPU would fault.
// A refused call prints one line naming the contract on stderr, so a test log shows why.
//
// Different algorithms are different kernels on a GPU, and need not sum in the same order. The stand-in
// has two: one for operands all at 16-byte alignment or more (K in one pass) and one for anything less
// (K in two halves added in turn), so code whose algorithm depends on where a tensor happens to sit gives
// different bits here too, as it may on a GPU. The same algorithm always gives the same bits.
//
// Test hook: CT_EMU_LT_NO_ALGO, a comma list read at every heuristic call: "all" (no algorithm for any
// problem), "aligned" (none when any MIN_ALIGNMENT preference exceeds its element size), "bias" (none with
// the BIAS epilogue). The heuristic then answers as the real library does when nothing fits.
#include <cblas.h>
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mutex>
#include <set>
#include <vector>
#include "emu_stream.h"

namespace {

struct Layout {
    cudaDataType type;
    int32_t order;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
};

struct Desc {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int32_t pointer_mode;
    int32_t transa, transb, transc;
    uint32_t epilogue;
    const void *bias;
    int32_t bias_type;   // -1: the library's default (D's type)
    int64_t bias_stride;
};

struct Pref {
    uint32_t search_mode;
    uint64_t max_workspace;
    uint32_t reduction_mask;
    uint32_t align[4];   // A, B, C, D
};

// What an emulated algorithm holds in cublasLtMatmulAlgo_t::data.
enum { ALGO_MAGIC = 0, ALGO_PROBLEM, ALGO_ALIGN, ALGO_WORKSPACE, ALGO_SCHEME, ALGO_HALVES };
const uint64_t kAlgoMagic = 0x4354454d554c5431ull;   // "CTEMULT1"

// What ctron could ask of the workspace: the stand-in's algorithms use 1 MiB when they may.
const uint64_t kAlgoWorkspace = (uint64_t)1 << 20;

std::mutex g_lock;
std::set<const void *> g_handles, g_layouts, g_descs, g_prefs;

cublasStatus_t refuse(cublasStatus_t st, const char *fn, const char *why) {
    fprintf(stderr, "cublaslt_emu: %s: %s -> %s\n", fn, why, cublasLtGetStatusString(st));
    return st;
}

[[noreturn]] void fault(const char *fn, const char *what) {
    fprintf(stderr, "cublaslt_emu: %s: %s: the GPU would fault here\n", fn, what);
    fflush(stderr);
    abort();
}

bool live(const std::set<const void *> &s, const void *p) {
    std::lock_guard<std::mutex> g(g_lock);
    return p && s.count(p);
}

template <class T>
T *make(std::set<const void *> &s) {
    T *p = new T();
    std::lock_guard<std::mutex> g(g_lock);
    s.insert(p);
    return p;
}

template <class T>
cublasStatus_t drop(std::set<const void *> &s, const void *p) {
    if (!p) return CUBLAS_STATUS_SUCCESS;   // destroying NULL is allowed
    {
        std::lock_guard<std::mutex> g(g_lock);
        if (!s.erase(p)) return refuse(CUBLAS_STATUS_INVALID_VALUE, "destroy", "not a live descriptor");
    }
    delete (const T *)p;
    return CUBLAS_STATUS_SUCCESS;
}

// Copies an attribute value of exactly sizeof(T) bytes (the library's check) into *dst.
template <class T>
cublasStatus_t set_value(T *dst, const void *buf, size_t size, const char *fn) {
    if (!buf || size != sizeof(T)) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "buffer NULL or size not the attribute's");
    memcpy(dst, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

size_t type_bytes(cudaDataType t) {
    switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF: case CUDA_R_16F: return 2;
    case CUDA_R_64F: return 8;
    case CUDA_R_8I: case CUDA_R_8U: return 1;
    case CUDA_R_32I: return 4;
    default: return 0;
    }
}

uint32_t alignment_of(const void *p) {
    uintptr_t u = (uintptr_t)p;
    if (!u) return 256;
    uintptr_t low = u & (~u + 1);
    return low >= 256 ? 256u : (uint32_t)low;
}

// Elements from a matrix's first to one past its last, over all batches (strides ≥ 0).
uint64_t span_elems(const Layout &l) {
    if (!l.rows || !l.cols) return 0;
    uint64_t one = (l.cols - 1) * (uint64_t)l.ld + l.rows;
    return (uint64_t)(l.batch - 1) * (uint64_t)l.stride + one;
}

bool same_layout(const Layout &x, const Layout &y) {
    return x.type == y.type && x.order == y.order && x.rows == y.rows && x.cols == y.cols && x.ld == y.ld &&
           x.batch == y.batch && x.stride == y.stride;
}

// D's batches write disjoint elements: one after another, or interleaved inside ld's gap.
bool batches_disjoint(const Layout &l) {
    if (l.batch <= 1) return true;
    uint64_t s = (uint64_t)l.stride, one = (l.cols - 1) * (uint64_t)l.ld + l.rows;
    if (s >= one) return true;
    return s >= l.rows && (uint64_t)(l.batch - 1) * s + l.rows <= (uint64_t)l.ld;
}

// The problem an algorithm was chosen for: types, transposes, shapes, epilogue, batch.
uint64_t problem_hash(const Desc &d, const Layout &a, const Layout &b, const Layout &c, const Layout &dd) {
    uint64_t v[] = {(uint64_t)d.compute, (uint64_t)d.scale, (uint64_t)d.transa, (uint64_t)d.transb, d.epilogue,
                    (uint64_t)a.type, a.rows, a.cols, (uint64_t)b.type, b.rows, b.cols, (uint64_t)c.type,
                    (uint64_t)dd.type, dd.rows, dd.cols, (uint64_t)dd.batch};
    uint64_t h = 1469598103934665603ull;
    for (uint64_t x : v) h = (h ^ x) * 1099511628211ull;
    return h;
}

// The checks shared by the heuristic and the matmul: descriptors, layouts, shapes, types. NULL when all
// hold, else why not (and *st the status the library returns).
const char *check_problem(const Desc &d, const Layout &a, const Layout &b, const Layout &c, const Layout &dd,
                          cublasStatus_t *st) {
    *st = CUBLAS_STATUS_INVALID_VALUE;
    const Layout *all[4] = {&a, &b, &c, &dd};
    for (const Layout *l : all) {
        if (l->ld < 0 || (uint64_t)l->ld < l->rows || l->ld < 1) return "a layout's ld is below its rows (CUBLASLT_MATRIX_LAYOUT_LD)";
        if (l->batch < 1) return "a layout's BATCH_COUNT is below 1";
        if (l->stride < 0) return "a negative STRIDED_BATCH_OFFSET";
        if (l->rows > INT32_MAX || l->cols > INT32_MAX) return "rows or columns beyond int32";
    }
    if (a.batch != dd.batch || b.batch != dd.batch || c.batch != dd.batch) return "batch counts of A, B, C, D differ";
    uint64_t m = dd.rows, n = dd.cols;
    uint64_t am = d.transa == CUBLAS_OP_N ? a.rows : a.cols, ak = d.transa == CUBLAS_OP_N ? a.cols : a.rows;
    uint64_t bk = d.transb == CUBLAS_OP_N ? b.rows : b.cols, bn = d.transb == CUBLAS_OP_N ? b.cols : b.rows;
    if (am != m || bn != n || ak != bk) return "op(A) is not m×k, op(B) not k×n or D not m×n";
    if (c.rows != dd.rows || c.cols != dd.cols || c.type != dd.type || c.order != dd.order)
        return "C and D differ in type, rows, columns or order";
    if (!batches_disjoint(dd)) return "D's batches overlap (STRIDED_BATCH_OFFSET too small for its layout)";
    *st = CUBLAS_STATUS_NOT_SUPPORTED;
    for (const Layout *l : all)
        if (l->order != CUBLASLT_ORDER_COL) return "a memory order other than CUBLASLT_ORDER_COL (not emulated)";
    if (d.transa != CUBLAS_OP_N && d.transa != CUBLAS_OP_T) return "TRANSA other than N or T (not emulated)";
    if (d.transb != CUBLAS_OP_N && d.transb != CUBLAS_OP_T) return "TRANSB other than N or T (not emulated)";
    if (d.transc != CUBLAS_OP_N) return "TRANSC other than N (only N is supported)";
    if (d.pointer_mode != CUBLASLT_POINTER_MODE_HOST) return "a pointer mode other than HOST (not emulated)";
    if (d.compute != CUBLAS_COMPUTE_32F || d.scale != CUDA_R_32F)
        return "compute type other than CUBLAS_COMPUTE_32F with scale CUDA_R_32F (not emulated)";
    if (a.type != b.type) return "A and B of different types";
    if (a.type != CUDA_R_32F && a.type != CUDA_R_16BF) return "A/B type other than CUDA_R_32F or CUDA_R_16BF (not emulated)";
    if (dd.type != CUDA_R_32F) return "C/D type other than CUDA_R_32F (not emulated)";
    if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT && d.epilogue != CUBLASLT_EPILOGUE_BIAS)
        return "an epilogue other than DEFAULT or BIAS (not emulated)";
    if (d.epilogue == CUBLASLT_EPILOGUE_BIAS) {
        if (d.bias_type != -1 && d.bias_type != CUDA_R_32F) return "a bias type other than CUDA_R_32F for fp32 D";
        if (dd.batch > 1 && d.bias_stride != 0) return "a batched bias (BIAS_BATCH_STRIDE, not emulated)";
    }
    return NULL;
}

bool no_algo_hook(const char *what) {
    const char *v = getenv("CT_EMU_LT_NO_ALGO");
    if (!v || !*v) return false;
    size_t n = strlen(what);
    for (const char *p = v; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, what, n)) return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

float bf16_value(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// One batch of op(A) or op(B) as fp32 column-major with its leading dimension: fp32 in place, bf16 widened.
const float *operand(const void *base, const Layout &l, int64_t batch, std::vector<float> &tmp) {
    size_t eb = type_bytes(l.type);
    const char *p = (const char *)base + (size_t)batch * (size_t)l.stride * eb;
    if (l.type == CUDA_R_32F) return (const float *)p;
    tmp.resize(l.rows * l.cols);
    const uint16_t *q = (const uint16_t *)p;
    for (uint64_t c = 0; c < l.cols; c++)
        for (uint64_t r = 0; r < l.rows; r++) tmp[c * l.rows + r] = bf16_value(q[c * (uint64_t)l.ld + r]);
    return tmp.data();
}

struct Work {
    Desc d;
    Layout a, b, c, dd;
    float alpha, beta;
    const void *A, *B, *C;
    void *D;
    bool halves;   // the under-aligned algorithm: K in two halves
};

// D += alpha · op(A)[:, q0:q1] · op(B)[q0:q1, :] for one batch (A, B as fp32 with their ld).
void accumulate(const Work &w, const float *A, int lda, const float *B, int ldb, float *D, int q0, int q1) {
    const int m = (int)w.dd.rows, n = (int)w.dd.cols;
    if (q1 <= q0) return;
    const bool ta = w.d.transa != CUBLAS_OP_N, tb = w.d.transb != CUBLAS_OP_N;
    const float *a = A + (ta ? (size_t)q0 : (size_t)q0 * (size_t)lda);   // column q0 of op(A)
    const float *b = B + (tb ? (size_t)q0 * (size_t)ldb : (size_t)q0);   // row q0 of op(B)
    cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, q1 - q0, w.alpha, a,
                lda, b, ldb, 1.0f, D, (int)w.dd.ld);
}

void run_matmul(const Work &w) {
    std::vector<float> ta, tb;
    const int m = (int)w.dd.rows, n = (int)w.dd.cols;
    const int k = (int)(w.d.transa == CUBLAS_OP_N ? w.a.cols : w.a.rows);
    for (int32_t i = 0; i < w.dd.batch; i++) {
        float *D = (float *)w.D + (size_t)i * (size_t)w.dd.stride;
        const float *C = (const float *)w.C + (size_t)i * (size_t)w.c.stride;
        // D = beta·C first (C is not read when beta is 0, as the library does not), then D += alpha·op(A)op(B).
        for (int col = 0; col < n; col++) {
            float *dcol = D + (size_t)col * (size_t)w.dd.ld;
            const float *ccol = C + (size_t)col * (size_t)w.c.ld;
            for (int r = 0; r < m; r++) dcol[r] = w.beta == 0.0f ? 0.0f : w.beta * ccol[r];
        }
        if (m > 0 && n > 0 && k > 0 && w.alpha != 0.0f) {
            const float *A = operand(w.A, w.a, i, ta), *B = operand(w.B, w.b, i, tb);
            int lda = w.a.type == CUDA_R_32F ? (int)w.a.ld : (int)w.a.rows;
            int ldb = w.b.type == CUDA_R_32F ? (int)w.b.ld : (int)w.b.rows;
            const int half = w.halves ? k / 2 : 0;
            accumulate(w, A, lda, B, ldb, D, 0, half);
            accumulate(w, A, lda, B, ldb, D, half, k);
        }
        if (w.d.epilogue == CUBLASLT_EPILOGUE_BIAS) {
            const float *bias = (const float *)w.d.bias;
            for (int col = 0; col < n; col++) {
                float *dcol = D + (size_t)col * (size_t)w.dd.ld;
                for (int r = 0; r < m; r++) dcol[r] += bias[r];
            }
        }
    }
}

void check_range(const char *fn, const char *name, const void *p, uint64_t bytes) {
    if (!bytes) return;
    if (!p || !ct_emu::device_range(p, (size_t)bytes)) {
        char what[160];
        snprintf(what, sizeof what, "%s [%p, +%llu bytes) is not inside one live device allocation", name, p,
                 (unsigned long long)bytes);
        fault(fn, what);
    }
}

}  // namespace

extern "C" {

const char *cublasLtGetStatusName(cublasStatus_t st) {
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *cublasLtGetStatusString(cublasStatus_t st) {
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
    default: return cublasLtGetStatusName(st);
    }
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    if (!h) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate", "NULL handle pointer");
    *h = (cublasLtHandle_t)make<char>(g_handles);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!live(g_handles, h)) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy", "not a live handle");
    return drop<char>(g_handles, h);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *out, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    if (!out) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate", "NULL descriptor pointer");
    Layout *l = make<Layout>(g_layouts);
    *l = Layout{type, CUBLASLT_ORDER_COL, rows, cols, ld, 1, 0};
    *out = (cublasLtMatrixLayout_t)l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { return drop<Layout>(g_layouts, l); }

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t h, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size) {
    const char *fn = "cublasLtMatrixLayoutSetAttribute";
    if (!live(g_layouts, h)) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "not a live layout");
    Layout *l = (Layout *)h;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: {
        uint32_t t;
        cublasStatus_t st = set_value(&t, buf, size, fn);
        if (st == CUBLAS_STATUS_SUCCESS) l->type = (cudaDataType)t;
        return st;
    }
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return set_value(&l->order, buf, size, fn);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return set_value(&l->rows, buf, size, fn);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return set_value(&l->cols, buf, size, fn);
    case CUBLASLT_MATRIX_LAYOUT_LD: return set_value(&l->ld, buf, size, fn);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set_value(&l->batch, buf, size, fn);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set_value(&l->stride, buf, size, fn);
    default: return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fn, "layout attribute not emulated");
    }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *out, cublasComputeType_t compute, cudaDataType_t scale) {
    if (!out) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate", "NULL descriptor pointer");
    Desc *d = make<Desc>(g_descs);
    *d = Desc{compute, scale, CUBLASLT_POINTER_MODE_HOST, CUBLAS_OP_N, CUBLAS_OP_N, CUBLAS_OP_N,
              CUBLASLT_EPILOGUE_DEFAULT, NULL, -1, 0};
    *out = (cublasLtMatmulDesc_t)d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { return drop<Desc>(g_descs, d); }

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t h, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
    const char *fn = "cublasLtMatmulDescSetAttribute";
    if (!live(g_descs, h)) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "not a live matmul descriptor");
    Desc *d = (Desc *)h;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: {
        int32_t v;
        cublasStatus_t st = set_value(&v, buf, size, fn);
        if (st == CUBLAS_STATUS_SUCCESS) d->compute = (cublasComputeType_t)v;
        return st;
    }
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: {
        int32_t v;
        cublasStatus_t st = set_value(&v, buf, size, fn);
        if (st == CUBLAS_STATUS_SUCCESS) d->scale = (cudaDataType_t)v;
        return st;
    }
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set_value(&d->pointer_mode, buf, size, fn);
    case CUBLASLT_MATMUL_DESC_TRANSA: return set_value(&d->transa, buf, size, fn);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set_value(&d->transb, buf, size, fn);
    case CUBLASLT_MATMUL_DESC_TRANSC: return set_value(&d->transc, buf, size, fn);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set_value(&d->epilogue, buf, size, fn);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set_value(&d->bias, buf, size, fn);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set_value(&d->bias_type, buf, size, fn);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return set_value(&d->bias_stride, buf, size, fn);
    default: return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fn, "matmul descriptor attribute not emulated");
    }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *out) {
    if (!out) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate", "NULL descriptor pointer");
    Pref *p = make<Pref>(g_prefs);
    *p = Pref{CUBLASLT_SEARCH_BEST_FIT, 0, CUBLASLT_REDUCTION_SCHEME_MASK, {256, 256, 256, 256}};
    *out = (cublasLtMatmulPreference_t)p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { return drop<Pref>(g_prefs, p); }

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t h,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t size) {
    const char *fn = "cublasLtMatmulPreferenceSetAttribute";
    if (!live(g_prefs, h)) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "not a live preference");
    Pref *p = (Pref *)h;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return set_value(&p->search_mode, buf, size, fn);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return set_value(&p->max_workspace, buf, size, fn);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return set_value(&p->reduction_mask, buf, size, fn);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return set_value(&p->align[0], buf, size, fn);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return set_value(&p->align[1], buf, size, fn);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return set_value(&p->align[2], buf, size, fn);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return set_value(&p->align[3], buf, size, fn);
    default: return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fn, "preference attribute not emulated");
    }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t ha, cublasLtMatrixLayout_t hb,
                                              cublasLtMatrixLayout_t hc, cublasLtMatrixLayout_t hd,
                                              cublasLtMatmulPreference_t hp, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int *returned) {
    const char *fn = "cublasLtMatmulAlgoGetHeuristic";
    if (!live(g_handles, handle)) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, fn, "not a live handle");
    if (requested <= 0) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "requestedAlgoCount ≤ 0");
    if (!results || !returned) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "NULL results or count");
    if (!live(g_descs, op) || !live(g_layouts, ha) || !live(g_layouts, hb) || !live(g_layouts, hc) ||
        !live(g_layouts, hd) || !live(g_prefs, hp))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "a descriptor that is not live");
    *returned = 0;
    const Desc &d = *(const Desc *)op;
    const Layout &a = *(const Layout *)ha, &b = *(const Layout *)hb, &c = *(const Layout *)hc,
                 &dd = *(const Layout *)hd;
    const Pref &p = *(const Pref *)hp;
    cublasStatus_t st;
    if (const char *why = check_problem(d, a, b, c, dd, &st)) return refuse(st, fn, why);
    const Layout *ls[4] = {&a, &b, &c, &dd};
    uint32_t need[5];
    bool above_minimum = false;
    for (int i = 0; i < 4; i++) {
        uint32_t eb = (uint32_t)type_bytes(ls[i]->type);
        if (p.align[i] < eb || (p.align[i] & (p.align[i] - 1)))
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fn, "a MIN_ALIGNMENT preference below its element size (no algorithm)");
        need[i] = p.align[i] < 16 ? p.align[i] : 16;
        above_minimum |= p.align[i] > eb;
    }
    need[4] = 0;
    if (d.epilogue == CUBLASLT_EPILOGUE_BIAS) {
        uint32_t ab = alignment_of(d.bias);
        if (ab < 4) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fn, "the descriptor's bias pointer is below 4-byte alignment");
        need[4] = ab < 16 ? ab : 16;
    }
    if (no_algo_hook("all") || (no_algo_hook("aligned") && above_minimum) ||
        (no_algo_hook("bias") && d.epilogue == CUBLASLT_EPILOGUE_BIAS))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fn, "no algorithm (forced by CT_EMU_LT_NO_ALGO)");
    cublasLtMatmulHeuristicResult_t &r = results[0];
    memset(&r, 0, sizeof r);
    r.algo.data[ALGO_MAGIC] = kAlgoMagic;
    r.algo.data[ALGO_PROBLEM] = problem_hash(d, a, b, c, dd);
    r.algo.data[ALGO_ALIGN] = (uint64_t)need[0] | (uint64_t)need[1] << 8 | (uint64_t)need[2] << 16 |
                              (uint64_t)need[3] << 24 | (uint64_t)need[4] << 32;
    r.workspaceSize = p.max_workspace >= kAlgoWorkspace ? kAlgoWorkspace : 0;
    r.algo.data[ALGO_WORKSPACE] = r.workspaceSize;
    r.algo.data[ALGO_SCHEME] = CUBLASLT_REDUCTION_SCHEME_NONE;
    r.algo.data[ALGO_HALVES] = need[0] < 16 || need[1] < 16 || need[2] < 16 || need[3] < 16;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void *buf,
                                                    size_t size, size_t *written) {
    const char *fn = "cublasLtMatmulAlgoConfigGetAttribute";
    if (!algo || algo->data[ALGO_MAGIC] != kAlgoMagic) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "not an algorithm from the heuristic");
    uint32_t v;
    switch (attr) {
    case CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME: v = (uint32_t)algo->data[ALGO_SCHEME]; break;
    case CUBLASLT_ALGO_CONFIG_SPLITK_NUM: v = 1; break;
    default: return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fn, "algorithm attribute not emulated");
    }
    if (size == 0) {
        if (!written) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "sizeInBytes 0 and sizeWritten NULL");
        *written = sizeof v;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || size != sizeof v) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "buffer NULL or size not the attribute's");
    memcpy(buf, &v, sizeof v);
    if (written) *written = sizeof v;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t ha, const void *B, cublasLtMatrixLayout_t hb, const void *beta,
                              const void *C, cublasLtMatrixLayout_t hc, void *D, cublasLtMatrixLayout_t hd,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
    const char *fn = "cublasLtMatmul";
    if (!live(g_handles, handle)) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, fn, "not a live handle");
    if (!live(g_descs, op) || !live(g_layouts, ha) || !live(g_layouts, hb) || !live(g_layouts, hc) ||
        !live(g_layouts, hd))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "a descriptor that is not live");
    if (!alpha || !beta) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "alpha or beta NULL");
    Work w;
    w.d = *(const Desc *)op;
    w.a = *(const Layout *)ha; w.b = *(const Layout *)hb; w.c = *(const Layout *)hc; w.dd = *(const Layout *)hd;
    cublasStatus_t st;
    if (const char *why = check_problem(w.d, w.a, w.b, w.c, w.dd, &st)) return refuse(st, fn, why);
    if (C == D && !same_layout(w.c, w.dd))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "in place (C == D) with Cdesc different from Ddesc");
    // Without an algorithm the library runs its heuristic's first; ctron always passes one, checked here.
    if (!algo) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fn, "algo NULL (the implicit heuristic is not emulated)");
    if (algo->data[ALGO_MAGIC] != kAlgoMagic) return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "not an algorithm from the heuristic");
    if (algo->data[ALGO_PROBLEM] != problem_hash(w.d, w.a, w.b, w.c, w.dd))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "the algorithm was chosen for a different problem");
    if (workspace_bytes < algo->data[ALGO_WORKSPACE])
        return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "workspaceSizeInBytes below the algorithm's workspace");
    if (w.d.epilogue == CUBLASLT_EPILOGUE_BIAS && !w.d.bias)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, fn, "the BIAS epilogue with a NULL bias pointer");
    const void *ptrs[5] = {A, B, C, D, w.d.bias};
    static const char *names[5] = {"A", "B", "C", "D", "bias"};
    for (int i = 0; i < 5; i++) {
        uint32_t need = (uint32_t)(algo->data[ALGO_ALIGN] >> (8 * i)) & 0xFF;
        if (need && alignment_of(ptrs[i]) < need) {
            char why[160];
            snprintf(why, sizeof why, "%s at %p is %u-byte aligned, the algorithm was chosen for %u", names[i], ptrs[i],
                     alignment_of(ptrs[i]), need);
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED, fn, why);
        }
    }
    check_range(fn, "A", A, span_elems(w.a) * type_bytes(w.a.type));
    check_range(fn, "B", B, span_elems(w.b) * type_bytes(w.b.type));
    if (*(const float *)beta != 0.0f) check_range(fn, "C", C, span_elems(w.c) * type_bytes(w.c.type));
    check_range(fn, "D", D, span_elems(w.dd) * type_bytes(w.dd.type));
    if (w.d.epilogue == CUBLASLT_EPILOGUE_BIAS) check_range(fn, "bias", w.d.bias, w.dd.rows * sizeof(float));
    check_range(fn, "workspace", workspace, algo->data[ALGO_WORKSPACE]);
    // Host pointer mode: alpha and beta are read now, the operands when the stream reaches the work.
    w.alpha = *(const float *)alpha;
    w.beta = *(const float *)beta;
    w.A = A; w.B = B; w.C = C; w.D = D;
    w.halves = algo->data[ALGO_HALVES] != 0;
    ct_emu::stream_submit(stream, [w]() { run_matmul(w); }, "cublasLtMatmul");
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
