// The emulation's own checks (label cuda-emu): each bug class it claims to catch, planted in a small
// kernel here, must be caught, and the correct version must pass under every schedule. Compiled as the
// project's kernels are (cu2cpp.py, then g++ with cuda_emu.h); the fatal cases run in a forked child
// whose stderr must name the bug.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string>
#include "backend/cuda/cuda_common.cuh"

#include "check.h"

// block_sum without its trailing barrier, called twice: the second call's lane-0 writes race the
// first call's reads of `shared` (correct = 0: with the barrier).
__device__ float block_sum_racy(float v, float *shared, int barrier) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float t = lane < warps ? shared[lane] : 0.0f;
    t = warp_sum(t);
    if (barrier) __syncthreads();
    return t;
}
__global__ void two_sums(float *out, const float *x, int barrier) {
    __shared__ float red[32];
    float a = block_sum_racy(x[threadIdx.x], red, barrier);
    float b = block_sum_racy(2.0f * x[threadIdx.x], red, barrier);
    out[blockIdx.x * blockDim.x + threadIdx.x] = a + b;
}
__global__ void early_exit_shuffle(float *out, const float *x) {
    if (threadIdx.x % 32 >= 16) return;
    out[threadIdx.x] = warp_sum(x[threadIdx.x]);
}
__global__ void divergent_barrier(float *out) {
    if (threadIdx.x < 64) __syncthreads();
    else __syncthreads();
    out[threadIdx.x] = 1.0f;
}
__global__ void read_smem_first(float *out) {
    extern __shared__ float dyn[];
    out[threadIdx.x] = dyn[threadIdx.x];   // never written
}
__global__ void __launch_bounds__(128) bounded(float *out) { out[threadIdx.x] = 1.0f; }
__global__ void fill(float *out, float v, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = v;
}

// Runs fn in a child; true when it died by abort with `want` in its stderr.
template <class F> static bool dies_saying(F fn, const char *want) {
    int pipefd[2];
    if (pipe(pipefd)) return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        fn();
        cudaDeviceSynchronize();
        _exit(0);
    }
    close(pipefd[1]);
    std::string err;
    char buf[4096];
    ssize_t got;
    while ((got = read(pipefd[0], buf, sizeof buf)) > 0) err.append(buf, (size_t)got);
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && err.find(want) != std::string::npos;
    if (!ok) printf("  child: status %d, stderr: %.300s\n", status, err.c_str());
    return ok;
}

int main() {
    const int n = 256;
    float *x, *out, host[n];
    cudaMalloc((void **)&x, n * 4);
    cudaMalloc((void **)&out, 2 * n * 4);   // two_sums writes two blocks
    double ref = 0;
    for (int i = 0; i < n; i++) host[i] = 1.0f + (float)(i % 7), ref += 3.0 * host[i];
    cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice);

    // 1. A missing barrier: the correct reduction passes under every schedule; the racy one passes
    //    under rr (threads in order hide it) and fails under warp-rev (a warp runs ahead).
    const char *scheds[] = {"rr", "warp", "warp-rev", "7"};
    for (const char *s : scheds) {
        setenv("CT_EMU_SCHEDULE", s, 1);
        for (int barrier = 1; barrier >= 0; barrier--) {
            two_sums<<<2, n>>>(out, x, barrier);
            cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost);
            bool right = host[0] == (float)ref;
            if (barrier) CHECK(right, "block sum with its barrier, schedule %s: %g, expected %g", s, host[0], ref);
            if (!barrier && !strcmp(s, "warp-rev"))
                CHECK(!right, "the race without the barrier went unseen under warp-rev (%g)", host[0]);
            if (!barrier && !strcmp(s, "rr")) CHECK(right, "rr should hide the race (%g)", host[0]);
        }
    }
    setenv("CT_EMU_SCHEDULE", "rr", 1);

    // 2. Warp collectives and barriers the GPU leaves undefined abort, naming the bug.
    CHECK(dies_saying([&] { early_exit_shuffle<<<1, 64>>>(out, x); }, "returned"),
           "a full-mask shuffle after half the warp returned");
    CHECK(dies_saying([&] { divergent_barrier<<<1, 128>>>(out); }, "different __syncthreads"),
           "threads at different __syncthreads");
    CHECK(dies_saying([&] { fill<<<1, 32>>>(host, 1.0f, 4); }, "in no device allocation"),
           "a host pointer given to a kernel");

    // 3. Launches the GPU refuses are refused, and cudaGetLastError says so.
    fill<<<1, 2048>>>(out, 0.0f, n);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "2048 threads per block accepted");
    bounded<<<1, 256>>>(out);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "256 threads over __launch_bounds__(128) accepted");
    fill<<<dim3(1, 70000), 32>>>(out, 0.0f, n);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "grid.y = 70000 accepted");
    read_smem_first<<<1, 32, 64 * 1024>>>(out);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "64 KiB of dynamic shared memory without the attribute");
    CHECK(cudaFuncSetAttribute(read_smem_first, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) == cudaSuccess,
           "the attribute refused");
    read_smem_first<<<1, 32, 64 * 1024>>>(out);
    CHECK(cudaGetLastError() == cudaSuccess, "64 KiB with the attribute refused");

    // 4. Dynamic shared memory read before any write: NaN.
    cudaMemcpy(host, out, 32 * 4, cudaMemcpyDeviceToHost);
    int nans = 0;
    for (int i = 0; i < 32; i++) nans += host[i] != host[i];
    CHECK(nans == 32, "unwritten dynamic shared memory read as non-NaN in %d of 32 threads", 32 - nans);

    // 5. Streams are deferred queues that honour events: a copy on stream b of what stream a writes
    //    sees the write only when b waits for a's event.
    cudaStream_t a, b;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    float *pinned;
    cudaMallocHost((void **)&pinned, n * 4);
    for (int wait = 0; wait < 2; wait++) {
        cudaMemset(out, 0, n * 4);
        fill<<<1, 64, 0, a>>>(out, 5.0f, n);
        cudaEventRecord(ev, a);
        if (wait) cudaStreamWaitEvent(b, ev, 0);
        cudaMemcpyAsync(pinned, out, n * 4, cudaMemcpyDeviceToHost, b);
        cudaStreamSynchronize(b);
        if (wait) CHECK(pinned[n - 1] == 5.0f, "with the wait, the copy read %g, not the kernel's 5", pinned[n - 1]);
        else CHECK(pinned[n - 1] == 0.0f, "without the wait, the copy should run first: read %g", pinned[n - 1]);
        cudaDeviceSynchronize();
    }
    cudaFreeHost(pinned);
    cudaEventDestroy(ev);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    cudaFree(x);
    cudaFree(out);
    return check_summary();
}
