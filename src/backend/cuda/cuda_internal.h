// The CUDA backend's own state and helpers, shared by cuda_backend.c (the device, the table) and the
// kernel files (*.cu). C and CUDA C++ both include it. Only src/backend/cuda/ calls CUDA.
#ifndef CTRON_CUDA_INTERNAL_H
#define CTRON_CUDA_INTERNAL_H
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// Growable device scratch, one slot per user, so that two kernels' temporaries never share bytes
// within a call. Counted by scratch_bytes beside the ledger (the run header prints it).
typedef enum {
    CUDA_SCRATCH_GEMM_X,      // gemm.cu: the bf16 copy of x (or of a strided view of it)
    CUDA_SCRATCH_GEMM_DY,     // gemm.cu: the bf16 copy of dy
    CUDA_SCRATCH_GEMM_T,      // gemm.cu: a packed copy when a view's stride does not suit cuBLASLt
    CUDA_SCRATCH_GEMM_SPLIT,  // gemm.cu: the partial products of a split-K GEMM (at most GEMM_SPLIT_BYTES)
    CUDA_SCRATCH_ATTN,        // attention.cu: per-head-batch temporaries the model's scratch does not hold
    CUDA_SCRATCH_FLASH,       // flash_attention.cu
    CUDA_SCRATCH_REDUCE,      // optim.cu, crossentropy.cu, layernorm.cu, embedding.cu: per-block partials
    CUDA_SCRATCH_MISC,        // dropout.cu, gelu.cu
    CUDA_SCRATCH_SLOTS
} CudaScratchSlot;

// Tables the multi-tensor kernels read (optim.cu): each kept on the device with a host copy, and
// uploaded again only when its bytes change (a training step's tables are the same every step).
typedef enum { CUDA_TABLE_ADAMW, CUDA_TABLE_STATS, CUDA_TABLES } CudaTableSlot;
typedef struct {
    void *dev, *host;
    size_t bytes, cap;
} CudaTable;

// The step's guard on the device (optim.cu's step_guard): Σ g², the clipping factor AdamW reads and
// whether the step is skipped.
typedef struct {
    double sumsq;
    float scale;
    int skip;
} CudaStepGuard;

typedef struct {
    int device;
    struct cudaDeviceProp prop;
    cudaStream_t stream;        // every kernel, GEMM and synchronous copy, in order
    cudaStream_t copy_stream;   // copy_async (the offload pool): overlaps the compute stream
    cublasLtHandle_t lt;
    void *lt_workspace;         // cuBLASLt's workspace (32 MiB, the size cuBLAS recommends on Hopper)
    size_t lt_workspace_bytes;
    int split_k;                // gemm.cu's own split-K on (CTRON_GEMM_SPLIT_K=1) or off (unset or 0)
    int flash_fwd_pairs;        // the bf16 flash forward: 32 query rows a warp (CTRON_FLASH_FWD_ROWS=32) or 16
    size_t used_at_open;   // in use on the device before the backend's first cudaMalloc (context, other processes)
    void *scratch[CUDA_SCRATCH_SLOTS];
    size_t scratch_cap[CUDA_SCRATCH_SLOTS];   // bytes
    void *host_result;          // pinned: reductions read back to the host (a few doubles; grows for
    size_t host_result_cap;     // the multi-tensor statistics, 16 bytes a tensor)
    CudaTable tables[CUDA_TABLES];
    double *loss_sums;          // device: the deferred loss, [0] the micro-batch's sum, [1] the step's
    CudaStepGuard *guard;       // device: the last step_guard's
    cudaEvent_t *marks;         // mark's events (timing on), n_marks recorded since marks_reset of cap_marks
    int n_marks, cap_marks;
    size_t live_bytes;          // what alloc has handed out and free not yet taken back
    int profiled;               // this backend's stream is the one kernel times follow (cuda_profile.c)
} CudaImpl;

static inline CudaImpl *cuda_impl(Backend *be) { return (CudaImpl *)be->impl; }
static inline cudaStream_t cuda_stream(Backend *be) { return ((CudaImpl *)be->impl)->stream; }

// A failed CUDA or cuBLASLt call mid-run is not recoverable: print what failed, where, and abort.
void cuda_fail(const char *what, const char *detail, const char *file, int line);
#define CUDA_CHECK(call)                                                                       \
    do {                                                                                       \
        cudaError_t cuda_check_err_ = (call);                                                  \
        if (cuda_check_err_ != cudaSuccess)                                                    \
            cuda_fail(#call, cudaGetErrorString(cuda_check_err_), __FILE__, __LINE__);         \
    } while (0)
// Kernel times (cuda_profile.c, CTRON_KERNEL_TIMES=1 or FILE.json): an event after every launch on the
// compute stream, the device time between two of them summed by launcher, reported when the backend
// closes. cuda_profile_open: 1 (this stream is followed), 0 (the variable unset, or another backend's
// stream already followed) or -1 with err (a bad value, or a FILE.json that cannot be written).
extern int cuda_profile_on;
int cuda_profile_open(cudaStream_t stream, char *err, size_t errlen);
// what: static storage or cuda_profile_name's; file: a launcher's __FILE__ (its row reads "what (file)"), or NULL
void cuda_profile_note(const char *what, const char *file, double flops);
const char *cuda_profile_name(const char *text);          // an interned copy of text
void cuda_profile_step(void);                             // a step boundary (the trainer's marks_reset)
void cuda_profile_close(void);                            // the table (and the JSON file)
// cudaStreamSynchronize, then (profiling) the device's idle time while the host waited gets its own row.
void cuda_stream_wait(cudaStream_t stream);

// After every launch: a bad configuration shows here, not at the next synchronisation.
#define CUDA_LAUNCHED()                                        \
    do {                                                       \
        CUDA_CHECK(cudaGetLastError());                        \
        if (cuda_profile_on) cuda_profile_note(__func__, __FILE__, 0.0); \
    } while (0)
// After every copy or memset on the compute stream (what: "memcpy D2H", "memset", ...): kernel times give
// it a row of its own ("memcpy D2H (optim.cu)"), not the next launch's.
#define CUDA_QUEUED(what)                                      \
    do {                                                       \
        if (cuda_profile_on) cuda_profile_note(what, __FILE__, 0.0); \
    } while (0)
#define CUBLAS_CHECK(call)                                                                     \
    do {                                                                                       \
        cublasStatus_t cublas_check_st_ = (call);                                              \
        if (cublas_check_st_ != CUBLAS_STATUS_SUCCESS)                                         \
            cuda_fail(#call, cublasLtGetStatusString(cublas_check_st_), __FILE__, __LINE__);   \
    } while (0)

// The first algorithm cuBLASLt's heuristic offers for desc over layouts a, b and c (= d) that needs at
// most align_ab bytes of alignment of A and B and align_cd of C and D, fits ws bytes of workspace and
// uses no split-K reduction (its sums would depend on the split): 1 and *algo, or 0 when none does.
// A status other than success or "not supported" is a ctron bug and aborts (gemm.cu).
int cuda_lt_heuristic(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                      cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, uint64_t ws, uint32_t align_ab,
                      uint32_t align_cd, cublasLtMatmulAlgo_t *algo);

// At least `bytes` of device scratch in `slot`. Growing synchronises the stream first (a kernel in
// flight may still read the old buffer). The contents are not kept.
void *cuda_scratch(Backend *be, CudaScratchSlot slot, size_t bytes);
// Pinned host memory of at least `bytes` that a reduction's result is copied into (valid until the
// next call that uses it). Growing synchronises the stream first.
void *cuda_host_result(Backend *be, size_t bytes);
// The device copy of `bytes` of host data for table `slot`: copied (in stream order) only when they
// differ from the last upload to that slot; a change synchronises the stream first, so a kernel in
// flight never sees the table change under it.
const void *cuda_upload_table(Backend *be, CudaTableSlot slot, const void *host, size_t bytes);

#ifdef CTRON_HAVE_NCCL
// NCCL behind Backend.collectives (cuda_nccl.c, built where CMake finds NCCL and MPI).
extern const BackendCollectives cuda_nccl_collectives;
#endif

// Blocks of `threads` for `n` items (at least one block).
static inline unsigned cuda_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b ? b : 1);
}

#ifdef __cplusplus
}
#endif
#endif
