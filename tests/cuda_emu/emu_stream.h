// emu_stream.h: the emulated CUDA runtime's stream queue, as the library stand-ins (cuBLASLt, CUB) use it.
// Streams are deferred queues: work submitted to a stream runs in submission order, after every event
// the stream was told to wait for (cudaStreamWaitEvent), when the host synchronises. So a missing wait
// between the copy stream and the compute stream changes what a kernel reads, as it would on a GPU.
#ifndef CT_EMU_STREAM_H
#define CT_EMU_STREAM_H
#include <cuda_runtime.h>
#include <stddef.h>
#include <functional>

namespace ct_emu {
// Queues `work` on `stream` (0 / cudaStreamLegacy: the default stream); `what` names it in reports.
void stream_submit(cudaStream_t stream, std::function<void()> work, const char *what);
// True when [p, p + bytes) lies inside one live emulated device allocation (cudaMalloc).
bool device_range(const void *p, size_t bytes);
}  // namespace ct_emu
#endif
