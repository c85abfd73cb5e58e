// TEMPORARY (deleted before the final commit): an immediate-execution stand-in for the emu runtime's
// stream_submit/device_range and the few runtime calls test_emu_blas uses, until branch `emu` has them.
#include <cuda_runtime.h>
#include <stdlib.h>
#include <map>
#include <mutex>
#include "../emu_stream.h"

static std::map<uintptr_t, size_t> g_allocs;
static std::mutex g_mu;

namespace ct_emu {
void stream_submit(cudaStream_t, std::function<void()> work, const char *) { work(); }
bool device_range(const void *p, size_t bytes) {
    std::lock_guard<std::mutex> g(g_mu);
    uintptr_t u = (uintptr_t)p;
    auto it = g_allocs.upper_bound(u);
    if (it == g_allocs.begin()) return false;
    --it;
    return u >= it->first && u + bytes <= it->first + it->second;
}
}  // namespace ct_emu

extern "C" {
cudaError_t cudaMalloc(void **p, size_t n) {
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    std::lock_guard<std::mutex> g(g_mu);
    g_allocs[(uintptr_t)*p] = n;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    { std::lock_guard<std::mutex> g(g_mu); g_allocs.erase((uintptr_t)p); }
    free(p);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
}
