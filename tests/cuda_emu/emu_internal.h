// What the emulation's device (emu_device.cpp: blocks, fibers, collectives) and runtime (emu_runtime.cpp:
// memory, streams, events) share. Not for the kernels or the library stand-ins (they use cuda_emu.h and
// emu_stream.h).
#ifndef CT_EMU_INTERNAL_H
#define CT_EMU_INTERNAL_H
#include <cuda_runtime.h>
#include <stddef.h>
#include <functional>

namespace ct_emu {
// Runs a whole grid now, on the calling OS thread (the stream queue calls it).
void run_grid(const char *kernel, const dim3 &grid, const dim3 &block, size_t smem,
              const std::function<void()> &thread);
// The limit cudaFuncSetAttribute(MaxDynamicSharedMemorySize) gave fn, or 48 KiB.
size_t dynamic_smem_limit(const void *fn);
void set_dynamic_smem_limit(const void *fn, size_t bytes);
// cudaGetLastError's value for the calling host thread.
void set_last_error(cudaError_t e);
// Whether the stream handle names a live stream (0 and the special handles included).
bool stream_valid(cudaStream_t s);
// The start of the device allocation holding p (p may be one past its end), or NULL.
const void *device_allocation(const void *p);

// The emulated device's limits (an H100 SXM): what the launch checks and cudaGetDeviceProperties use.
enum : size_t {
    SMEM_DEFAULT = 48 * 1024,      // dynamic + static shared memory without the attribute
    SMEM_OPTIN = 227 * 1024,       // sharedMemPerBlockOptin on sm_90
    MAX_THREADS = 1024,
};
}  // namespace ct_emu
#endif
