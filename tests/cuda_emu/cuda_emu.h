// cuda_emu.h: the device side of the CUDA emulation. Force-included (g++ -include cuda_emu.h) into every
// src/backend/cuda/*.cu after cu2cpp.py's rewrite (launches and __shared__ declarations), so the kernels
// compile as host C++ and run on the CPU: a block's threads are fibers (emu_device.cpp), __syncthreads and
// the warp collectives are real rendezvous, and launches go on the emulated streams (emu_runtime.cpp).
// The CUDA toolkit's own headers supply the types (dim3, float4, __nv_bfloat162) and the runtime API's
// declarations; nothing of libcudart is linked.
#ifndef CT_CUDA_EMU_H
#define CT_CUDA_EMU_H
#define CT_EMU 1
#ifdef __cplusplus
// Execution-space qualifiers first: host_defines.h keeps a definition that is already there.
#define __host__
#define __device__
#define __global__
#define __constant__ static
// Every __shared__ declaration is rewritten by cu2cpp.py; one it missed fails to compile here.
#define __shared__ __shared___declaration_not_rewritten_by_cu2cpp
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#undef __launch_bounds__
#define __launch_bounds__(...)
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

// Set by the scheduler each time it resumes a thread.
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;

namespace ct_emu {
struct Cfg {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    Cfg(dim3 g, dim3 b, size_t s = 0, cudaStream_t st = 0) : grid(g), block(b), smem(s), stream(st) {}
};
// What the GPU would refuse at launch (threads per block and __launch_bounds__, grid extents, dynamic
// shared memory above 48 KiB without the attribute or above the SM's limit): reported on stderr, the
// launch dropped and cudaGetLastError set, as on the GPU. True when the launch may go ahead.
bool launch_ok(const char *kernel, const void *fn, const Cfg &c, unsigned max_threads);
// Queues a grid on c.stream: `thread` runs once per thread of every block.
void launch_grid(const char *kernel, const Cfg &c, std::function<void()> thread);
// A pointer argument of a kernel that lies in no device allocation (host memory, freed memory) is an
// illegal address on the GPU: reported, and the process aborts.
void check_kernel_pointer(const char *kernel, int index, const void *p);

template <class T> inline void check_arg(const char *kernel, int index, const T &v) {
    if constexpr (std::is_pointer<T>::value) check_kernel_pointer(kernel, index, (const void *)v);
    else (void)kernel, (void)index, (void)v;
}

// cu2cpp.py turns K<<<cfg>>>(args) into launch("K", bound, Cfg(cfg), K)(args): the arguments convert to
// the kernel's parameter types at that call (NULL included), as for a kernel; they are copied once, at
// the launch (as the GPU does), and each thread gets its own copy (a kernel may change its parameters).
template <class... P> struct Launch {
    const char *kernel;
    unsigned max_threads;
    Cfg c;
    void (*k)(P...);
    void operator()(P... a) const {
        if (!launch_ok(kernel, (const void *)k, c, max_threads)) return;
        int i = 0;
        (check_arg(kernel, i++, a), ...);
        auto params = std::make_shared<std::tuple<typename std::decay<P>::type...>>(a...);
        void (*fn)(P...) = k;
        launch_grid(kernel, c, [fn, params]() {
            auto mine = *params;
            std::apply(fn, mine);
        });
    }
};
template <class... P> Launch<P...> launch(const char *kernel, unsigned max_threads, const Cfg &c, void (*k)(P...)) {
    return Launch<P...>{kernel, max_threads, c, k};
}

// Shared memory of the running block: poisoned (0xFF bytes, a NaN in every float) at each block's
// start, so a read before any write shows.
void *dynamic_smem();
void *static_smem(const void *key, size_t bytes, size_t align, const char *file, int line);
template <class T, int N> inline T &block_shared(const char *file, int line) {
    static const char key = 0;
    return *static_cast<T *>(static_smem(&key, sizeof(T), alignof(T), file, line));
}
bool in_shared(const void *p, size_t bytes);

void syncthreads(const char *file, int line);

// Warp collectives: every lane of `mask` (which must include the caller and only lanes still running)
// deposits `in`; when the last arrives it runs op once over the whole warp's deposits, writing each
// lane's `out`. A lane that exited, a mask without the caller, lanes meeting at different collectives
// with overlapping masks, or a collective that can never complete are reported and abort.
enum { SLOT = 64 };
struct WarpIO {
    unsigned char in[32][SLOT];
    unsigned char out[32][SLOT];
};
typedef void (*WarpOp)(WarpIO &io, unsigned mask);
void warp_collective(unsigned mask, const char *what, const char *file, int line, const void *in, size_t in_bytes,
                     void *out, size_t out_bytes, WarpOp op);
int lane_id();
int thread_rank();   // linear thread index in the block

// cp.async: queued per thread, landing at that thread's cp.async.wait_all (cuda_ptx.cuh).
void cp_async(void *dst, const void *src, int bytes, const char *what);
void cp_async_wait_all();

// A bug the GPU would show as undefined behaviour: print where and abort.
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
}  // namespace ct_emu

// cuda_runtime.h has this template only under nvcc.
template <class T> static inline cudaError_t cudaFuncSetAttribute(T *fn, enum cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute((const void *)fn, attr, value);
}

#define __syncthreads() ct_emu::syncthreads(__FILE__, __LINE__)

template <class T> static inline uint64_t ct_emu_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type wider than 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T> static inline T ct_emu_from_bits(uint64_t b) {
    T r;
    memcpy(&r, &b, sizeof(T));
    return r;
}
struct CtEmuShfl {
    uint64_t value;
    int src;   // the lane to read; -1: keep this lane's own value
};
void ct_emu_shfl_op(ct_emu::WarpIO &io, unsigned mask);
template <class T> static inline T ct_emu_shfl(unsigned mask, T v, int src, const char *what, const char *file,
                                               int line) {
    CtEmuShfl in = {ct_emu_bits(v), src};
    uint64_t out;
    ct_emu::warp_collective(mask, what, file, line, &in, sizeof in, &out, sizeof out, ct_emu_shfl_op);
    return ct_emu_from_bits<T>(out);
}
// Lane arithmetic of the CUDA guide: width-wide segments; a source past the segment keeps the own value.
static inline int ct_emu_seg(int width) { return ct_emu::lane_id() & ~(width - 1); }
template <class T> static inline T ct_emu_shfl_xor(const char *file, int line, unsigned mask, T v, int lane_mask,
                                                   int width = 32) {
    int me = ct_emu::lane_id(), src = me ^ lane_mask;
    return ct_emu_shfl(mask, v, src >= ct_emu_seg(width) + width ? -1 : src, "__shfl_xor_sync", file, line);
}
template <class T> static inline T ct_emu_shfl_idx(const char *file, int line, unsigned mask, T v, int src_lane,
                                                   int width = 32) {
    return ct_emu_shfl(mask, v, ct_emu_seg(width) + (src_lane & (width - 1)), "__shfl_sync", file, line);
}
template <class T> static inline T ct_emu_shfl_down(const char *file, int line, unsigned mask, T v, unsigned delta,
                                                    int width = 32) {
    int me = ct_emu::lane_id(), src = me + (int)delta;
    return ct_emu_shfl(mask, v, src >= ct_emu_seg(width) + width ? -1 : src, "__shfl_down_sync", file, line);
}
template <class T> static inline T ct_emu_shfl_up(const char *file, int line, unsigned mask, T v, unsigned delta,
                                                  int width = 32) {
    int me = ct_emu::lane_id(), src = me - (int)delta;
    return ct_emu_shfl(mask, v, src < ct_emu_seg(width) ? -1 : src, "__shfl_up_sync", file, line);
}
unsigned ct_emu_ballot(unsigned mask, int pred, const char *file, int line);
void ct_emu_syncwarp(unsigned mask, const char *file, int line);
#define __shfl_xor_sync(...) ct_emu_shfl_xor(__FILE__, __LINE__, __VA_ARGS__)
#define __shfl_sync(...) ct_emu_shfl_idx(__FILE__, __LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) ct_emu_shfl_down(__FILE__, __LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) ct_emu_shfl_up(__FILE__, __LINE__, __VA_ARGS__)
#define __ballot_sync(mask, pred) ct_emu_ballot((mask), (pred), __FILE__, __LINE__)
#define CT_EMU_SYNCWARP_(mask, ...) ct_emu_syncwarp((mask), __FILE__, __LINE__)
#define __syncwarp(...) CT_EMU_SYNCWARP_(__VA_ARGS__ __VA_OPT__(, ) 0xFFFFFFFFu)

// Intrinsics. The emulated build has -ffp-contract=off: a*b is one rounding, as __fmul_rn.
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline unsigned __float_as_uint(float f) { return ct_emu_from_bits<unsigned>(ct_emu_bits(f)); }
static inline int __float_as_int(float f) { return ct_emu_from_bits<int>(ct_emu_bits(f)); }
static inline float __uint_as_float(unsigned u) { return ct_emu_from_bits<float>(ct_emu_bits(u)); }
static inline float __int_as_float(int i) { return ct_emu_from_bits<float>(ct_emu_bits(i)); }
template <class T> static inline T __ldg(const T *p) { return *p; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
#endif  // __cplusplus
#endif
