// The emulated CUDA runtime API on host memory: one device (an H100's limits, CT_EMU_MEMORY bytes of it),
// allocations poisoned with NaN bytes, and streams as deferred queues. Work given to a stream (kernels,
// copies, memsets, the library stand-ins' products) runs in order, after every event the stream was
// told to wait for, only when the host synchronises (a stream, an event, the device, a copy to pageable
// memory, cudaFree). So a missing cudaStreamWaitEvent between two streams, or a host read of a pinned
// buffer before its copy was waited for, changes what is read, as it may on the GPU.
// Every call that makes the host wait for the device (a synchronisation, a copy to pageable memory,
// cudaMemcpy, cudaMemset, cudaFree) adds one to a counter, ct_emu_host_waits() (emu_waits.h), whether or
// not work was pending: what a test of a step's waits counts. An event records, when its stream reaches
// it, the host's monotonic clock (cudaEventElapsedTime: the emulated device's time between two records).
// Differences from libcudart, on purpose: created streams act as cudaStreamNonBlocking (no implicit
// sync with the legacy stream); nothing runs concurrently (one global lock), so what the GPU leaves to
// timing always resolves here to "as late as allowed".
#include <time.h>
#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>
#include "cuda_emu.h"
#include "emu_internal.h"
#include "emu_stream.h"
#include "emu_waits.h"

namespace ct_emu {
namespace {
struct Stream;
struct Ticket {   // one cudaEventRecord: done once the stream reaches it, at `seconds`
    Stream *stream;
    bool done;
    double seconds;
};
struct Item {
    enum Kind { WORK, RECORD, WAIT } kind;
    std::function<void()> work;
    std::shared_ptr<Ticket> ticket;
    const char *what;
};
struct Stream {
    std::deque<Item> q;
    bool draining = false;
    unsigned flags = 0;
};
struct Event {
    std::shared_ptr<Ticket> last;
};
struct Allocation {
    size_t bytes;
    bool pinned;   // cudaMallocHost (host memory the device may also address)
};

std::recursive_mutex mu;   // every queue, every allocation; work runs holding it
Stream legacy;             // stream 0, cudaStreamLegacy, cudaStreamPerThread
std::vector<Stream *> streams;
std::vector<Event *> events;
std::map<uintptr_t, Allocation> allocs;
size_t device_used = 0;
thread_local cudaError_t last_error = cudaSuccess;
std::atomic<unsigned long long> host_waits{0};

void count_wait() { host_waits.fetch_add(1, std::memory_order_relaxed); }
double monotonic_seconds() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t device_total() {
    static size_t total = [] {
        const char *e = getenv("CT_EMU_MEMORY");   // e.g. 80G, 512M, or bytes
        if (!e || !*e) return (size_t)80 << 30;
        char *end = nullptr;
        double v = strtod(e, &end);
        int shift = *end == 'G' || *end == 'g' ? 30 : *end == 'M' || *end == 'm' ? 20 : *end == 'K' || *end == 'k' ? 10 : 0;
        if (!(v > 0) || (*end && !shift) || (shift && end[1]))
            fatal("CT_EMU_MEMORY=%s: expected a size in bytes, or with K, M or G (e.g. 80G)", e);
        return (size_t)(v * (double)((size_t)1 << shift));
    }();
    return total;
}

[[noreturn]] void api_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void api_fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda-emu: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    abort();
}
cudaError_t fail(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudaError_t fail(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda-emu: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return e;
}

Stream *stream_of(cudaStream_t s) {
    if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return &legacy;
    Stream *p = (Stream *)s;
    if (std::find(streams.begin(), streams.end(), p) == streams.end()) return nullptr;
    return p;
}

// Runs the stream's work in order until `until` is done (or the queue is empty). A wait for another
// stream's event first runs that stream up to the event.
void drain(Stream *s, const Ticket *until = nullptr) {
    if (s->draining) return;   // a synchronisation from inside the stream's own work: it is running
    s->draining = true;
    while (!s->q.empty() && !(until && until->done)) {
        Item it = std::move(s->q.front());
        s->q.pop_front();
        if (it.kind == Item::WORK) it.work();
        else if (it.kind == Item::RECORD) {
            it.ticket->done = true;
            it.ticket->seconds = monotonic_seconds();
        }
        else if (!it.ticket->done) {
            drain(it.ticket->stream, it.ticket.get());
            if (!it.ticket->done) api_fatal("a stream waits for an event that its stream can never reach");
        }
    }
    s->draining = false;
}
void drain_all() {
    drain(&legacy);
    for (size_t i = 0; i < streams.size(); i++) drain(streams[i]);
}

std::map<uintptr_t, Allocation>::iterator find_alloc(const void *p) {
    uintptr_t a = (uintptr_t)p;
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin()) return allocs.end();
    --it;
    return a <= it->first + it->second.bytes ? it : allocs.end();
}
bool in_device(const void *p, size_t bytes) {
    auto it = find_alloc(p);
    return it != allocs.end() && !it->second.pinned && (uintptr_t)p + bytes <= it->first + it->second.bytes;
}
bool in_pinned(const void *p, size_t bytes) {
    auto it = find_alloc(p);
    return it != allocs.end() && it->second.pinned && (uintptr_t)p + bytes <= it->first + it->second.bytes;
}
size_t granule(size_t n) { return ((n ? n : 1) + 255) & ~(size_t)255; }   // cudaMalloc's 256 bytes
void submit(Stream *s, std::function<void()> work, const char *what) {
    s->q.push_back(Item{Item::WORK, std::move(work), nullptr, what});
}
}  // namespace

void set_last_error(cudaError_t e) { last_error = e; }

bool stream_valid(cudaStream_t s) {
    std::lock_guard<std::recursive_mutex> g(mu);
    return stream_of(s) != nullptr;
}

void stream_submit(cudaStream_t stream, std::function<void()> work, const char *what) {
    std::lock_guard<std::recursive_mutex> g(mu);
    Stream *s = stream_of(stream);
    if (!s) api_fatal("%s submitted to stream %p, which is not a live stream", what, (void *)stream);
    submit(s, std::move(work), what);
}

bool device_range(const void *p, size_t bytes) {
    std::lock_guard<std::recursive_mutex> g(mu);
    return in_device(p, bytes);
}

const void *device_allocation(const void *p) {
    std::lock_guard<std::recursive_mutex> g(mu);
    auto it = find_alloc(p);
    return it == allocs.end() ? nullptr : (const void *)it->first;
}

void check_kernel_pointer(const char *kernel, int index, const void *p) {
    if (p && !device_allocation(p))
        api_fatal("kernel %s: argument %d is %p, which is in no device allocation (host memory, or freed): an "
                  "illegal address on the GPU", kernel, index, p);
}

bool launch_ok(const char *kernel, const void *fn, const Cfg &c, unsigned max_threads) {
    char why[256] = "";
    unsigned long threads = (unsigned long)c.block.x * c.block.y * c.block.z;
    size_t limit = dynamic_smem_limit(fn);
    if (threads == 0 || threads > MAX_THREADS || c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64)
        snprintf(why, sizeof why, "block %u x %u x %u (at most 1024 threads; z at most 64)", c.block.x, c.block.y,
                 c.block.z);
    else if (threads > max_threads)
        snprintf(why, sizeof why, "%lu threads per block, over the kernel's __launch_bounds__ of %u", threads,
                 max_threads);
    else if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || c.grid.x > 0x7FFFFFFFu || c.grid.y > 65535 ||
             c.grid.z > 65535)
        snprintf(why, sizeof why, "grid %u x %u x %u (x at most 2^31-1, y and z at most 65535, none 0)", c.grid.x,
                 c.grid.y, c.grid.z);
    else if (c.smem > limit)
        snprintf(why, sizeof why, "%zu bytes of dynamic shared memory, over the kernel's limit of %zu (raise it with "
                 "cudaFuncSetAttribute(MaxDynamicSharedMemorySize))", c.smem, limit);
    else if (!stream_valid(c.stream))
        snprintf(why, sizeof why, "stream %p is not a live stream", (void *)c.stream);
    if (!why[0]) return true;
    fprintf(stderr, "cuda-emu: launch of %s refused: %s\n", kernel, why);
    last_error = why[0] == 's' ? cudaErrorInvalidResourceHandle : cudaErrorInvalidConfiguration;
    return false;
}

void launch_grid(const char *kernel, const Cfg &c, std::function<void()> thread) {
    dim3 grid = c.grid, block = c.block;
    size_t smem = c.smem;
    stream_submit(c.stream, [kernel, grid, block, smem, thread]() { run_grid(kernel, grid, block, smem, thread); },
                  kernel);
}
}  // namespace ct_emu

using namespace ct_emu;
#define LOCK std::lock_guard<std::recursive_mutex> lock_(mu)

extern "C" {
unsigned long long ct_emu_host_waits(void) { return host_waits.load(std::memory_order_relaxed); }
cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    default: return "cudaErrorUnknown";
    }
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    default: return "unknown error";
    }
}
cudaError_t cudaGetDeviceCount(int *count) {
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) { return dev == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDevice(int *dev) {
    *dev = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev) {
    if (dev != 0) return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "NVIDIA H100 80GB HBM3 (ctron's CUDA emulation on the host CPU)");
    p->major = 9, p->minor = 0, p->multiProcessorCount = 132, p->warpSize = 32;
    p->totalGlobalMem = device_total();
    p->sharedMemPerBlock = SMEM_DEFAULT, p->sharedMemPerBlockOptin = SMEM_OPTIN;
    p->sharedMemPerMultiprocessor = 228 * 1024, p->reservedSharedMemPerBlock = 1024;
    p->regsPerBlock = 65536, p->regsPerMultiprocessor = 65536;
    p->maxThreadsPerBlock = 1024, p->maxThreadsPerMultiProcessor = 2048, p->maxBlocksPerMultiProcessor = 32;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7FFFFFFF, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536, p->l2CacheSize = 50 << 20, p->memoryBusWidth = 5120;
    p->concurrentKernels = 1, p->asyncEngineCount = 2, p->unifiedAddressing = 1, p->canMapHostMemory = 1;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total) {
    LOCK;
    *total = device_total();
    *free_b = device_total() - device_used;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n) {
    LOCK;
    *p = nullptr;
    size_t rounded = granule(n);
    if (rounded > device_total() - device_used) return cudaErrorMemoryAllocation;
    void *m = aligned_alloc(256, rounded);
    if (!m) return cudaErrorMemoryAllocation;
    memset(m, 0xFF, rounded);   // what the device held before: NaN bytes, so a read before a write shows
    allocs[(uintptr_t)m] = Allocation{n, false};
    device_used += rounded;
    *p = m;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n) {
    LOCK;
    void *m = malloc(n ? n : 1);
    if (!m) return cudaErrorMemoryAllocation;
    allocs[(uintptr_t)m] = Allocation{n, true};
    *p = m;
    return cudaSuccess;
}
static cudaError_t free_any(void *p, bool pinned, const char *api) {
    if (!p) return cudaSuccess;
    LOCK;
    count_wait();
    drain_all();   // cudaFree waits for the device
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end() || it->second.pinned != pinned)
        return fail(cudaErrorInvalidValue, "%s(%p): not a pointer that %s returned, or freed already", api, p,
                    pinned ? "cudaMallocHost" : "cudaMalloc");
    if (!pinned) device_used -= granule(it->second.bytes);
    allocs.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) { return free_any(p, false, "cudaFree"); }
cudaError_t cudaFreeHost(void *p) { return free_any(p, true, "cudaFreeHost"); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    LOCK;
    Stream *st = new Stream;
    st->flags = flags;
    streams.push_back(st);
    *s = (cudaStream_t)st;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    LOCK;
    Stream *st = stream_of(s);
    if (!st || st == &legacy) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy(%p): no such stream", (void *)s);
    count_wait();
    drain(st);   // its work still completes
    streams.erase(std::find(streams.begin(), streams.end(), st));
    delete st;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    LOCK;
    Stream *st = stream_of(s);
    if (!st) return fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize(%p): no such stream", (void *)s);
    count_wait();
    drain(st);
    return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s) { return cudaStreamSynchronize(s); }
cudaError_t cudaDeviceSynchronize(void) {
    LOCK;
    count_wait();
    drain_all();
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
    LOCK;
    Event *ev = new Event;
    events.push_back(ev);
    *e = (cudaEvent_t)ev;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
static Event *event_of(cudaEvent_t e) {
    Event *ev = (Event *)e;
    return std::find(events.begin(), events.end(), ev) == events.end() ? nullptr : ev;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    LOCK;
    Event *ev = event_of(e);
    if (!ev) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy(%p): no such event", (void *)e);
    events.erase(std::find(events.begin(), events.end(), ev));
    delete ev;   // a stream waiting for its last record keeps the ticket
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    LOCK;
    Event *ev = event_of(e);
    Stream *st = stream_of(s);
    if (!ev || !st) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord(%p, %p): no such event or stream",
                                (void *)e, (void *)s);
    ev->last = std::make_shared<Ticket>(Ticket{st, false, 0.0});
    st->q.push_back(Item{Item::RECORD, nullptr, ev->last, "cudaEventRecord"});
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
    LOCK;
    Event *ev = event_of(e);
    Stream *st = stream_of(s);
    if (!ev || !st) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent(%p, %p): no such event or stream",
                                (void *)s, (void *)e);
    // Waits for the event's most recent record (none yet: nothing to wait for), as CUDA defines it.
    if (ev->last && !ev->last->done && ev->last->stream != st)
        st->q.push_back(Item{Item::WAIT, nullptr, ev->last, "cudaStreamWaitEvent"});
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    LOCK;
    Event *ev = event_of(e);
    if (!ev) return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize(%p): no such event", (void *)e);
    count_wait();
    if (ev->last && !ev->last->done) drain(ev->last->stream, ev->last.get());
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
// As libcudart: both events recorded and reached (else cudaErrorNotReady: it does not wait), in ms.
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    LOCK;
    Event *a = event_of(start), *b = event_of(end);
    if (!a || !b) return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime(%p, %p): no such event",
                              (void *)start, (void *)end);
    if (!a->last || !b->last) return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event never recorded");
    if (!a->last->done || !b->last->done) return cudaErrorNotReady;
    *ms = (float)((b->last->seconds - a->last->seconds) * 1e3);
    return cudaSuccess;
}

// Copies check that the device side lies inside one allocation. From pageable host memory the source
// is read at the call (the runtime stages it); to pageable host memory the call returns when the copy
// is done; pinned memory is read and written when the stream gets there.
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
    LOCK;
    Stream *st = stream_of(s);
    if (!st) return fail(cudaErrorInvalidResourceHandle, "cudaMemcpyAsync on %p: no such stream", (void *)s);
    if (!n) return cudaSuccess;
    if (kind == cudaMemcpyDefault)
        kind = in_device(src, n) ? (in_device(dst, n) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                 : (in_device(dst, n) ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
    bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    if (src_dev && !in_device(src, n))
        return fail(cudaErrorInvalidValue, "cudaMemcpyAsync: source %p + %zu bytes is not inside one device allocation",
                    src, n);
    if (dst_dev && !in_device(dst, n))
        return fail(cudaErrorInvalidValue,
                    "cudaMemcpyAsync: destination %p + %zu bytes is not inside one device allocation", dst, n);
    if (!src_dev && !in_pinned(src, n)) {   // pageable source: staged now
        std::shared_ptr<std::vector<unsigned char>> copy =
            std::make_shared<std::vector<unsigned char>>((const unsigned char *)src, (const unsigned char *)src + n);
        submit(st, [dst, copy]() { memcpy(dst, copy->data(), copy->size()); }, "cudaMemcpyAsync");
        return cudaSuccess;
    }
    submit(st, [dst, src, n]() { memmove(dst, src, n); }, "cudaMemcpyAsync");
    if (!dst_dev && !in_pinned(dst, n)) {   // pageable destination: synchronous
        count_wait();
        drain(st);
    }
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
    LOCK;
    unsigned long long before = host_waits.load();
    drain_all();
    cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, nullptr);
    drain(&legacy);
    host_waits.store(before + 1);   // one wait, whatever cudaMemcpyAsync counted
    return e;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    LOCK;
    Stream *st = stream_of(s);
    if (!st) return fail(cudaErrorInvalidResourceHandle, "cudaMemsetAsync on %p: no such stream", (void *)s);
    if (!n) return cudaSuccess;
    if (!in_device(p, n))
        return fail(cudaErrorInvalidValue, "cudaMemsetAsync: %p + %zu bytes is not inside one device allocation", p, n);
    submit(st, [p, v, n]() { memset(p, v, n); }, "cudaMemsetAsync");
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
    LOCK;
    cudaError_t e = cudaMemsetAsync(p, v, n, nullptr);
    count_wait();
    drain_all();
    return e;
}

cudaError_t cudaFuncSetAttribute(const void *fn, enum cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > SMEM_OPTIN)
            return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d): at most %zu on sm_90",
                        value, (size_t)SMEM_OPTIN);
        set_dynamic_smem_limit(fn, (size_t)value);
    }
    return cudaSuccess;
}
}
