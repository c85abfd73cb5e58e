// emu_waits.h: what the emulated CUDA runtime (emu_runtime.cpp) tells a test, from C or C++.
#ifndef CT_EMU_WAITS_H
#define CT_EMU_WAITS_H
#ifdef __cplusplus
extern "C" {
#endif
// Calls so far that made the host wait for the device: cudaStreamSynchronize, cudaEventSynchronize,
// cudaDeviceSynchronize, cudaStreamQuery / cudaEventQuery (they wait here), a cudaMemcpyAsync to pageable
// host memory, cudaMemcpy, cudaMemset, cudaFree, cudaFreeHost, cudaStreamDestroy; each call counts once,
// whether or not work was pending.
unsigned long long ct_emu_host_waits(void);
#ifdef __cplusplus
}
#endif
#endif
