// The CUDA backend (DESIGN.md §8): the device (allocations, copies on a compute stream and a copy
// stream, pinned host memory) and the table of kernels (cuda_kernels.h). One backend drives one GPU;
// `cuda:N` picks it. Opening fails with a message naming what is missing (no driver, no device, an
// index past the devices there are), which the CLI turns into exit 2.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cuda/cuda_kernels.h"
#include "backend/gpu_peaks.h"
#include "util/common.h"

void cuda_fail(const char *what, const char *detail, const char *file, int line) {
    fprintf(stderr, "ctron: CUDA error at %s:%d: %s: %s\n", file, line, what, detail);
    fflush(stderr);
    abort();
}

void *cuda_scratch(Backend *be, CudaScratchSlot slot, size_t bytes) {
    CudaImpl *c = cuda_impl(be);
    if (bytes > c->scratch_cap[slot]) {
        cuda_stream_wait(c->stream);
        if (c->scratch[slot]) CUDA_CHECK(cudaFree(c->scratch[slot]));
        size_t want = bytes < 256 ? 256 : bytes;
        if (cudaMalloc(&c->scratch[slot], want) != cudaSuccess)
            ctron_fatal("CUDA: cannot allocate %zu bytes of scratch on cuda:%d", want, c->device);
        c->scratch_cap[slot] = want;
    }
    return c->scratch[slot];
}

void *cuda_host_result(Backend *be, size_t bytes) {
    CudaImpl *c = cuda_impl(be);
    if (bytes > c->host_result_cap) {
        cuda_stream_wait(c->stream);
        CUDA_CHECK(cudaFreeHost(c->host_result));
        CUDA_CHECK(cudaMallocHost(&c->host_result, bytes));
        c->host_result_cap = bytes;
    }
    return c->host_result;
}

const void *cuda_upload_table(Backend *be, CudaTableSlot slot, const void *host, size_t bytes) {
    CudaImpl *c = cuda_impl(be);
    CudaTable *t = &c->tables[slot];
    if (bytes == t->bytes && (bytes == 0 || memcmp(host, t->host, bytes) == 0)) return t->dev;
    cuda_stream_wait(c->stream);   // the kernels that read the old table have finished
    if (bytes > t->cap) {
        if (t->dev) CUDA_CHECK(cudaFree(t->dev));
        if (cudaMalloc(&t->dev, bytes) != cudaSuccess)
            ctron_fatal("CUDA: cannot allocate %zu bytes of kernel tables on cuda:%d", bytes, c->device);
        free(t->host);
        t->host = xmalloc(bytes);
        t->cap = bytes;
    }
    memcpy(t->host, host, bytes);
    t->bytes = bytes;
    CUDA_CHECK(cudaMemcpyAsync(t->dev, t->host, bytes, cudaMemcpyHostToDevice, c->stream));
    CUDA_QUEUED("memcpy H2D");
    return t->dev;
}

static size_t cuda_scratch_bytes(const Backend *be) {
    const CudaImpl *c = (const CudaImpl *)be->impl;
    size_t total = c->lt_workspace_bytes;
    for (int i = 0; i < CUDA_SCRATCH_SLOTS; i++) total += c->scratch_cap[i];
    for (int i = 0; i < CUDA_TABLES; i++) total += c->tables[i].cap;
    return total;
}

// ---- the device
static void *cuda_alloc(Backend *be, size_t bytes) {
    CudaImpl *c = cuda_impl(be);
    void *p = NULL;
    size_t n = bytes ? bytes : 1;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        ctron_fatal("CUDA: cannot allocate %zu bytes on cuda:%d (%s; %zu of %zu bytes free)", n, c->device,
                    cudaGetErrorString(e), free_b, total_b);
    }
    CUDA_CHECK(cudaMemsetAsync(p, 0, n, c->stream));   // alloc's contract: zero-filled
    CUDA_QUEUED("memset");
    c->live_bytes += n;
    return p;
}
static void cuda_free(Backend *be, void *p) {
    if (!p) return;
    cuda_stream_wait(cuda_stream(be));
    CUDA_CHECK(cudaFree(p));
}
static enum cudaMemcpyKind copy_kind(CopyDir dir) {
    return dir == COPY_H2D ? cudaMemcpyHostToDevice : dir == COPY_D2H ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
}
static const char *copy_row(CopyDir dir) { return dir == COPY_H2D ? "memcpy H2D" : dir == COPY_D2H ? "memcpy D2H" : "memcpy D2D"; }
// In stream order. A copy that touches the host returns when it is complete (the caller reads or
// reuses the host buffer next); device to device is complete for every later kernel.
static void cuda_copy(Backend *be, void *dst, const void *src, size_t bytes, CopyDir dir) {
    if (!bytes) return;
    CudaImpl *c = cuda_impl(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, copy_kind(dir), c->stream));
    CUDA_QUEUED(copy_row(dir));
    if (dir != COPY_D2D) cuda_stream_wait(c->stream);
}
// On the copy stream, after everything the compute stream has been given so far (the tensor going
// out was written there). May be called from another host thread (the offload pool's I/O thread):
// the current device is per thread. `done` gets an event that event_wait waits for and releases.
static void cuda_copy_async(Backend *be, void *dst, const void *src, size_t bytes, CopyDir dir, BackendEvent *done) {
    CudaImpl *c = cuda_impl(be);
    CUDA_CHECK(cudaSetDevice(c->device));
    cudaEvent_t after_compute;
    CUDA_CHECK(cudaEventCreateWithFlags(&after_compute, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(after_compute, c->stream));
    CUDA_CHECK(cudaStreamWaitEvent(c->copy_stream, after_compute, 0));
    CUDA_CHECK(cudaEventDestroy(after_compute));
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, copy_kind(dir), c->copy_stream));
    if (!done) { CUDA_CHECK(cudaStreamSynchronize(c->copy_stream)); return; }
    cudaEvent_t ev;
    CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(ev, c->copy_stream));
    done->handle = ev;
    done->done = 0;
}
static void cuda_event_wait(Backend *be, BackendEvent *ev) {
    if (!ev->handle) return;
    CUDA_CHECK(cudaSetDevice(cuda_impl(be)->device));
    CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)ev->handle));
    CUDA_CHECK(cudaEventDestroy((cudaEvent_t)ev->handle));
    ev->handle = NULL;
    ev->done = 1;
}
static void cuda_memset(Backend *be, void *p, int byte, size_t bytes) {
    if (!bytes) return;
    CUDA_CHECK(cudaMemsetAsync(p, byte, bytes, cuda_stream(be)));
    CUDA_QUEUED("memset");
}
static void cuda_synchronize(Backend *be) { cuda_stream_wait(cuda_stream(be)); }
// From host_alloc (pinned) memory, which the caller keeps until its next wait: no staging, no wait.
static void cuda_copy_enqueue(Backend *be, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda_stream(be)));
    CUDA_QUEUED("memcpy H2D");
}
// ---- the device's clock: an event per mark, re-recorded after each marks_reset (the step's wait came
// between, so none is still pending when it is recorded again)
static int cuda_mark(Backend *be) {
    CudaImpl *c = cuda_impl(be);
    if (c->n_marks == c->cap_marks) {
        int cap = c->cap_marks ? 2 * c->cap_marks : 64;
        c->marks = xgrow(c->marks, (size_t)c->cap_marks * sizeof *c->marks, (size_t)cap * sizeof *c->marks);
        for (int i = c->cap_marks; i < cap; i++) CUDA_CHECK(cudaEventCreate(&c->marks[i]));
        c->cap_marks = cap;
    }
    CUDA_CHECK(cudaEventRecord(c->marks[c->n_marks], c->stream));
    return c->n_marks++;
}
static double cuda_mark_seconds(Backend *be, int from, int to) {
    CudaImpl *c = cuda_impl(be);
    if (from < 0 || to < 0 || from >= c->n_marks || to >= c->n_marks)
        ctron_fatal("mark_seconds(%d, %d): %d marks since marks_reset", from, to, c->n_marks);
    float ms = 0.0f;
    cudaError_t e = cudaEventElapsedTime(&ms, c->marks[from], c->marks[to]);
    if (e == cudaErrorNotReady) {   // read before a wait (not the trainer's way): wait for it
        (void)cudaGetLastError();
        CUDA_CHECK(cudaEventSynchronize(c->marks[to]));
        e = cudaEventElapsedTime(&ms, c->marks[from], c->marks[to]);
    }
    CUDA_CHECK(e);
    return 1e-3 * (double)ms;
}
static void cuda_marks_reset(Backend *be) {
    CudaImpl *c = cuda_impl(be);
    c->n_marks = 0;
    if (c->profiled) cuda_profile_step();   // the trainer resets its marks once a step: kernel times' boundary
}
// Pinned, so copies to and from it run on the copy engine at full speed and asynchronously.
static void *cuda_host_alloc(Backend *be, size_t bytes) {
    void *p = NULL;
    size_t n = bytes ? bytes : 1;
    CUDA_CHECK(cudaSetDevice(cuda_impl(be)->device));
    if (cudaMallocHost(&p, n) != cudaSuccess) ctron_fatal("CUDA: cannot allocate %zu bytes of pinned host memory", n);
    memset(p, 0, n);
    return p;
}
static void cuda_host_free(Backend *be, void *p) {
    (void)be;
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

static int cuda_describe(const Backend *be, char *out, size_t outlen);
static void cuda_device_memory(const Backend *be, size_t *in_use, size_t *total) {
    const CudaImpl *c = (const CudaImpl *)be->impl;
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    // What ctron's allocations added (the driver rounds each up to its granule): the CUDA context,
    // cuBLASLt's handle and other processes were in use before the backend's first cudaMalloc.
    size_t used = total_b - free_b;
    *in_use = used > c->used_at_open ? used - c->used_at_open : 0;
    *total = total_b;
}

static const Backend cuda_table = {
    .name = "cuda",
    .alloc = cuda_alloc, .free = cuda_free, .copy = cuda_copy, .copy_async = cuda_copy_async,
    .event_wait = cuda_event_wait, .memset = cuda_memset, .synchronize = cuda_synchronize,
    .scratch_bytes = cuda_scratch_bytes,
    .linear_forward = cuda_linear_forward, .linear_forward_acc = cuda_linear_forward_acc,
    .linear_backward = cuda_linear_backward,
    .bias_backward = cuda_bias_backward,
    .attention_forward = cuda_attention_forward, .attention_backward = cuda_attention_backward,
    .attention_backward_recompute = cuda_attention_backward_recompute,
    .flash_attention_forward = cuda_flash_attention_forward, .flash_attention_backward = cuda_flash_attention_backward,
    .flash_attention_forward_rows = cuda_flash_attention_forward_rows,
    .layernorm_forward = cuda_layernorm_forward, .layernorm_backward = cuda_layernorm_backward,
    .layernorm_backward_from_output = cuda_layernorm_backward_from_output,
    .bias_gelu_forward = cuda_bias_gelu_forward, .gelu_backward = cuda_gelu_backward,
    .gelu_branch_pack = cuda_gelu_branch_pack, .gelu_backward_from_output = cuda_gelu_backward_from_output,
    .fewbit_gelu_encode = cuda_fewbit_gelu_encode, .fewbit_gelu_backward = cuda_fewbit_gelu_backward,
    .attention_mask = cuda_attention_mask, .dropout_mask_sbw = cuda_dropout_mask_sbw,
    .dropout_residual_forward = cuda_dropout_residual_forward,
    .dropout_residual_inverse = cuda_dropout_residual_inverse,
    .dropout_apply = cuda_dropout_apply, .dropout_backward = cuda_dropout_backward, .axpby = cuda_axpby,
    .embedding_forward = cuda_embedding_forward, .embedding_backward = cuda_embedding_backward,
    .embedding_vocab_forward = cuda_embedding_vocab_forward, .embedding_add_positions = cuda_embedding_add_positions,
    .embedding_vocab_backward = cuda_embedding_vocab_backward,
    .embedding_positions_backward = cuda_embedding_positions_backward,
    .crossentropy_forward_backward = cuda_crossentropy_forward_backward, .crossentropy_loss = cuda_crossentropy_loss,
    .crossentropy_vocab_partial = cuda_crossentropy_vocab_partial,
    .crossentropy_vocab_combine = cuda_crossentropy_vocab_combine,
    .crossentropy_vocab_backward = cuda_crossentropy_vocab_backward,
    .bf16_round = cuda_bf16_round, .bf16_pack = cuda_bf16_pack, .bf16_pack_round = cuda_bf16_pack_round,
    .bf16_unpack = cuda_bf16_unpack,
    .mask_pack_bits = cuda_mask_pack_bits, .mask_unpack_bits = cuda_mask_unpack_bits,
    .adamw_update = cuda_adamw_update, .sum_squares = cuda_sum_squares, .count_nonfinite = cuda_count_nonfinite,
    .host_alloc = cuda_host_alloc, .host_free = cuda_host_free, .host_addressable = 0,
    .linear_forward_rows = cuda_linear_forward_rows, .kv_attention_forward = cuda_kv_attention_forward,
    .gelu_forward = cuda_gelu_forward, .attention_scratch_floats = cuda_attention_scratch_floats,
    .describe = cuda_describe, .device_memory = cuda_device_memory,
    .rmsnorm_forward = cuda_rmsnorm_forward, .rmsnorm_backward = cuda_rmsnorm_backward,
    .rmsnorm_backward_from_output = cuda_rmsnorm_backward_from_output,
    .rope_forward = cuda_rope_forward, .rope_backward = cuda_rope_backward,
    .swiglu_forward = cuda_swiglu_forward, .swiglu_backward = cuda_swiglu_backward,
#ifdef CTRON_HAVE_NCCL
    .collectives = &cuda_nccl_collectives,
#endif
    .adamw_update_multi = cuda_adamw_update_multi, .tensor_stats_multi = cuda_tensor_stats_multi,
    .peak_flops = cuda_peak_flops,
    .crossentropy_deferred = cuda_crossentropy_deferred, .loss_end_microbatch = cuda_loss_end_microbatch,
    .loss_take = cuda_loss_take, .embedding_vocab_forward16 = cuda_embedding_vocab_forward16,
    .dropout_mask_cols = cuda_dropout_mask_cols,
    .mark = cuda_mark, .mark_seconds = cuda_mark_seconds, .marks_reset = cuda_marks_reset,
    .copy_enqueue = cuda_copy_enqueue, .step_guard = cuda_step_guard, .adamw_update_guarded = cuda_adamw_update_guarded,
    .step_take = cuda_step_take,
};

// "cuda" or "cuda:N" → N (0 for "cuda": the open picks the rank's GPU), or -1 when the text is neither.
static int device_index(const char *name) {
    if (!strcmp(name, "cuda")) return 0;
    if (strncmp(name, "cuda:", 5) || !name[5]) return -1;
    char *end = NULL;
    long n = strtol(name + 5, &end, 10);
    return *end || n < 0 || n > 1023 ? -1 : (int)n;
}

// The rank's index among the ranks of its node, as launchers announce it (Open MPI, MPICH/Hydra,
// Slurm), or 0 when there is no launcher.
static int local_rank(void) {
    static const char *const VARS[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) {
        const char *v = getenv(VARS[i]);
        if (v && *v) return atoi(v) > 0 ? atoi(v) : 0;
    }
    return 0;
}

Backend *backend_cuda_open(const char *name, Precision precision, char *err, size_t errlen) {
    int dev = device_index(name);
    if (dev < 0) {
        snprintf(err, errlen, "device '%s': expected cuda or cuda:N with N a device index", name);
        return NULL;
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(err, errlen, "device '%s': no CUDA GPU is visible (%s%s)", name,
                 e != cudaSuccess ? "cudaGetDeviceCount: " : "the driver reports 0 devices",
                 e != cudaSuccess ? cudaGetErrorString(e) : "");
        return NULL;
    }
    // Plain "cuda" under a launcher: each rank of a node its own GPU (local rank modulo the GPUs).
    if (!strcmp(name, "cuda")) dev = local_rank() % count;
    if (dev >= count) {
        snprintf(err, errlen, "device '%s': only %d CUDA device%s visible (cuda:0..cuda:%d)", name, count,
                 count == 1 ? " is" : "s are", count - 1);
        return NULL;
    }
    const char *split = getenv("CTRON_GEMM_SPLIT_K");
    if (split && *split && strcmp(split, "0") && strcmp(split, "1")) {
        snprintf(err, errlen, "CTRON_GEMM_SPLIT_K='%s': expected 1 (split a long-k GEMM with few output tiles "
                 "into k-chunks) or 0 (never, the default)", split);
        return NULL;
    }
    int copies = backend_bf16_copies(err, errlen);
    if (copies < 0) return NULL;
    const char *fwd_rows = getenv("CTRON_FLASH_FWD_ROWS");
    if (fwd_rows && *fwd_rows && strcmp(fwd_rows, "16") && strcmp(fwd_rows, "32")) {
        snprintf(err, errlen, "CTRON_FLASH_FWD_ROWS='%s': expected 16 (the bf16 flash forward's warps own 16 query "
                 "rows each, the default) or 32 (two row groups a warp sharing each K and V fragment)", fwd_rows);
        return NULL;
    }
    CudaImpl *c = xcalloc(sizeof *c);
    c->device = dev;
    // Opt-in until a GPU has timed it; the same bits either way.
    c->flash_fwd_pairs = fwd_rows && !strcmp(fwd_rows, "32");
    // Opt-in until a GPU has verified and timed it: off is the path the H100s checked against the CPU.
    c->split_k = split && !strcmp(split, "1");
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaGetDeviceProperties(&c->prop, dev));
    if (precision == PRECISION_BF16 && c->prop.major < 8) {
        snprintf(err, errlen, "device '%s' (%s, compute capability %d.%d): bf16 needs 8.0 or later", name,
                 c->prop.name, c->prop.major, c->prop.minor);
        free(c);
        return NULL;
    }
    if (c->prop.major < 8) {   // the kernels are built for sm_80, sm_90 and compute_90 PTX (CMakeLists.txt)
        snprintf(err, errlen, "device '%s' (%s, compute capability %d.%d): this build has kernels for 8.0 (Ampere) "
                 "and later", name, c->prop.name, c->prop.major, c->prop.minor);
        free(c);
        return NULL;
    }
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking));
    int profiled = cuda_profile_open(c->stream, err, errlen);
    if (profiled < 0) {
        cudaStreamDestroy(c->stream);
        cudaStreamDestroy(c->copy_stream);
        free(c);
        return NULL;
    }
    c->profiled = profiled;
    CUBLAS_CHECK(cublasLtCreate(&c->lt));
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    c->used_at_open = total_b - free_b;
    c->lt_workspace_bytes = (size_t)32 << 20;
    CUDA_CHECK(cudaMalloc(&c->lt_workspace, c->lt_workspace_bytes));
    CUDA_CHECK(cudaMallocHost(&c->host_result, 4096));
    c->host_result_cap = 4096;
    CUDA_CHECK(cudaMalloc((void **)&c->loss_sums, 2 * sizeof(double)));
    CUDA_CHECK(cudaMemsetAsync(c->loss_sums, 0, 2 * sizeof(double), c->stream));
    CUDA_CHECK(cudaMalloc((void **)&c->guard, sizeof(CudaStepGuard)));
    CUDA_CHECK(cudaMemsetAsync(c->guard, 0, sizeof(CudaStepGuard), c->stream));
    Backend *be = xmalloc(sizeof *be);
    *be = cuda_table;
    be->precision = precision;
    // At bf16 the kernels read the arena's bf16 copies as they are (CTRON_BF16_COPIES=0: the fp32 values
    // unpacked from them, the same bits, for comparison)
    if (precision == PRECISION_BF16 && copies) {
        be->flash_attention_forward16 = cuda_flash_attention_forward16;
        be->flash_attention_backward16 = cuda_flash_attention_backward16;
        be->swiglu_forward16 = cuda_swiglu_forward16;
        be->swiglu_forward_pack16 = cuda_swiglu_forward_pack16;
        be->swiglu_backward16 = cuda_swiglu_backward16;
        be->gelu_backward16 = cuda_gelu_backward16;
        be->layernorm_backward16 = cuda_layernorm_backward16;
        be->rmsnorm_backward16 = cuda_rmsnorm_backward16;
        be->bias_gelu_forward16 = cuda_bias_gelu_forward16;
        be->crossentropy_deferred16 = cuda_crossentropy_deferred16;
        be->linear_backward16 = cuda_linear_backward16;
    }
    be->impl = c;
    return be;
}

void backend_cuda_close(Backend *be) {
    CudaImpl *c = cuda_impl(be);
    if (c->profiled) cuda_profile_close();
    cudaStreamSynchronize(c->stream);
    cudaStreamSynchronize(c->copy_stream);
    for (int i = 0; i < CUDA_SCRATCH_SLOTS; i++) cudaFree(c->scratch[i]);
    for (int i = 0; i < CUDA_TABLES; i++) {
        cudaFree(c->tables[i].dev);
        free(c->tables[i].host);
    }
    cudaFree(c->lt_workspace);
    cudaFreeHost(c->host_result);
    cudaFree(c->loss_sums);
    cudaFree(c->guard);
    for (int i = 0; i < c->cap_marks; i++) cudaEventDestroy(c->marks[i]);
    free(c->marks);
    cublasLtDestroy(c->lt);
    cudaStreamDestroy(c->stream);
    cudaStreamDestroy(c->copy_stream);
    free(c);
}

// The datasheet's dense peak of this device (backend/gpu_peaks.h): fp32 GEMMs run CUBLAS_COMPUTE_32F
// on the CUDA cores (no TF32, gemm.cu), bf16 GEMMs the tensor cores with fp32 accumulation.
double cuda_peak_flops(const Backend *be, Precision precision, char *source, size_t sourcelen) {
    const CudaImpl *c = (const CudaImpl *)be->impl;
    return gpu_peak_flops(c->prop.name, c->prop.multiProcessorCount,
                          precision == PRECISION_BF16 ? GPU_PEAK_BF16 : GPU_PEAK_FP32, source, sourcelen);
}

static int cuda_describe(const Backend *be, char *out, size_t outlen) {
    const CudaImpl *c = (const CudaImpl *)be->impl;
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return snprintf(out, outlen, "cuda:%d %s (sm_%d%d, %d SMs), driver %d.%d, runtime %d.%d, in use %zu of %zu bytes",
                    c->device, c->prop.name, c->prop.major, c->prop.minor, c->prop.multiProcessorCount,
                    driver / 1000, (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10,
                    total_b - free_b, total_b);
}
