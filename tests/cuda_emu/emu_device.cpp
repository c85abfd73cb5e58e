// The emulated device: a grid runs block after block on the calling OS thread; a block's threads are
// fibers (a hand-written x86-64 context switch: glibc's swapcontext makes a system call per switch).
// A thread runs until it waits (at __syncthreads, a warp collective) or returns, and the schedule
// (CT_EMU_SCHEDULE) picks who runs next:
//   rr        every runnable thread in turn, by thread index (the default);
//   warp      one warp at a time, the lowest first, each as far as it can go before it must wait;
//   warp-rev  the same, the highest warp first and lanes in descending order (the adversarial order:
//             a warp runs ahead of the others between two barriers, so a missing __syncthreads shows
//             as a changed result);
//   <number>  warps in a random order, drawn afresh after every barrier from that seed.
// __syncthreads completes when every live thread of the block is there; a warp collective when every
// lane of its mask is. Bugs the GPU would leave undefined (a collective with an exited lane or with a
// mask that leaves out its caller, lanes meeting at different collectives, threads at different
// __syncthreads, a barrier that can never complete) are reported with the threads' source lines and
// abort. Shared memory is poisoned (0xFF: NaN in every float) at every block's start.
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>
#include "cuda_emu.h"
#include "emu_internal.h"
#include "emu_stream.h"
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CT_ASAN 1
#else
#define CT_ASAN 0
#endif

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

// ct_swap(&save_sp, next_sp): saves the callee-saved registers, MXCSR and the x87 control word on the
// current stack, stores rsp in *save_sp and resumes the stack next_sp (the System V ABI's contract).
extern "C" void ct_swap(void **save_sp, void *next_sp);
asm(R"(
.text
.globl ct_swap
.type ct_swap,@function
ct_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size ct_swap, .-ct_swap
.section .note.GNU-stack,"",@progbits
.text
)");

namespace ct_emu {
namespace {
enum State { RUNNABLE, AT_BARRIER, AT_WARP, DONE };
#if CT_ASAN
const size_t STACK = 1 << 20;   // ASan's redzones and fake frames need room
#else
const size_t STACK = 256 << 10;
#endif

struct Copy {
    void *dst;
    const void *src;
    int bytes;
};
struct Fiber {
    void *sp;
    State state;
    const char *what, *file;   // where it waits
    int line;
    unsigned mask;             // of the collective it waits at
    std::vector<Copy> async;   // cp.async not yet waited for
};
struct Group {                 // a warp collective being gathered
    unsigned mask, arrived;
    const char *what;
    WarpOp op;
};
struct Warp {
    unsigned runnable, done;
    std::vector<Group> groups;
    WarpIO io;
};
struct Shared {
    const void *key;
    void *p;
    size_t bytes;
    long epoch;
};
enum Policy { RR, WARP, WARP_REV, RANDOM };

struct Sched {
    std::vector<char *> stacks;
    std::vector<Fiber> f;
    std::vector<Warp> w;
    std::vector<int> order;   // warps, in the order the warp policies prefer
    void *sched_sp = nullptr;
    int n = 0, nw = 0, cur = 0, live = 0, at_barrier = 0;
    const std::function<void()> *thread = nullptr;
    const char *kernel = "";
    void *smem = nullptr;
    size_t smem_bytes = 0, static_bytes = 0;
    std::vector<Shared> statics;
    long epoch = 0;   // blocks run so far
    Policy policy = RR;
    uint64_t rng = 0;
    bool running = false;
#if CT_ASAN
    const void *sched_bottom = nullptr;
    size_t sched_size = 0;
    void *fake = nullptr;
#endif
};
thread_local Sched S;
std::mutex attr_mu;
std::map<const void *, size_t> smem_attr;   // cudaFuncSetAttribute(MaxDynamicSharedMemorySize)
std::mutex warn_mu;
std::set<std::string> warned;

void where(char *out, size_t len, const Fiber &f) {
    if (f.state == AT_BARRIER) snprintf(out, len, "__syncthreads at %s:%d", f.file, f.line);
    else if (f.state == AT_WARP) snprintf(out, len, "%s (mask %08x) at %s:%d", f.what, f.mask, f.file, f.line);
    else if (f.state == DONE) snprintf(out, len, "returned");
    else snprintf(out, len, "runnable");
}

void set_thread_idx(int id) {
    threadIdx.x = id % blockDim.x;
    threadIdx.y = (id / blockDim.x) % blockDim.y;
    threadIdx.z = id / (blockDim.x * blockDim.y);
}

// Back to the scheduler (the fiber's state says why).
void yield() {
    Fiber &me = S.f[S.cur];
#if CT_ASAN
    __sanitizer_start_switch_fiber(&S.fake, S.sched_bottom, S.sched_size);
#endif
    ct_swap(&me.sp, S.sched_sp);
#if CT_ASAN
    __sanitizer_finish_switch_fiber(S.fake, nullptr, nullptr);
#endif
}

void make_runnable(int id) {
    S.f[id].state = RUNNABLE;
    S.w[id / 32].runnable |= 1u << (id % 32);
}

void shuffle_order() {
    for (int i = S.nw - 1; i > 0; i--) {
        S.rng = S.rng * 6364136223846793005ull + 1442695040888963407ull;
        std::swap(S.order[i], S.order[(int)((S.rng >> 33) % (uint64_t)(i + 1))]);
    }
}

// Every live thread waits at __syncthreads: all go on. Threads that returned before it are allowed
// by the hardware (they no longer count) but not by the CUDA guide: reported once per kernel.
void release_barrier() {
    int first = -1;
    for (int i = 0; i < S.n; i++) {
        if (S.f[i].state != AT_BARRIER) continue;
        if (first < 0) first = i;
        else if (S.f[i].line != S.f[first].line || strcmp(S.f[i].file, S.f[first].file))
            fatal("threads %d and %d of block (%u,%u,%u) meet at different __syncthreads (%s:%d and %s:%d): "
                  "divergent barriers are undefined", first, i, blockIdx.x, blockIdx.y, blockIdx.z, S.f[first].file,
                  S.f[first].line, S.f[i].file, S.f[i].line);
        make_runnable(i);
    }
    if (S.live < S.n) {
        char key[512];
        snprintf(key, sizeof key, "%s %s:%d", S.kernel, S.f[first].file, S.f[first].line);
        std::lock_guard<std::mutex> g(warn_mu);
        if (warned.insert(key).second)
            fprintf(stderr, "cuda-emu: kernel %s: the __syncthreads at %s:%d completed with %d of %d threads already "
                    "returned (undefined by the CUDA guide; reported once)\n", S.kernel, S.f[first].file, S.f[first].line,
                    S.n - S.live, S.n);
    }
    S.at_barrier = 0;
    if (S.policy == RANDOM) shuffle_order();
}

[[noreturn]] void fiber_main() {
#if CT_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &S.sched_bottom, &S.sched_size);
#endif
    (*S.thread)();
    Fiber &me = S.f[S.cur];
    int wi = S.cur / 32, lane = S.cur % 32;
    me.state = DONE;
    me.async.clear();   // copies never waited for are lost with the thread's shared memory view
    S.w[wi].done |= 1u << lane;
    S.live--;
    for (const Group &g : S.w[wi].groups)
        if (g.mask >> lane & 1)
            fatal("thread %d (warp %d lane %d) of block (%u,%u,%u) returned while lanes of its warp wait for it at %s "
                  "(mask %08x): a collective's mask must name only lanes that reach it", S.cur, wi, lane, blockIdx.x,
                  blockIdx.y, blockIdx.z, g.what, g.mask);
    if (S.at_barrier && S.at_barrier == S.live) release_barrier();
#if CT_ASAN
    __sanitizer_start_switch_fiber(nullptr, S.sched_bottom, S.sched_size);
#endif
    void *dummy;
    ct_swap(&dummy, S.sched_sp);
    abort();
}

void *fresh_stack(char *base) {
#if CT_ASAN
    __asan_unpoison_memory_region(base, STACK);   // the last fiber's frames never returned
#endif
    uintptr_t top = ((uintptr_t)(base + STACK)) & ~(uintptr_t)15;
    uint64_t *p = (uint64_t *)top;
    *--p = 0;                                 // fiber_main's (never used) return address
    *--p = (uint64_t)(uintptr_t)&fiber_main;  // ct_swap's ret goes here
    for (int i = 0; i < 6; i++) *--p = 0;     // rbp rbx r12 r13 r14 r15
    uint32_t csr[2] = {0x1F80u, 0x037Fu};     // MXCSR, x87 control word: the defaults
    --p;
    memcpy(p, csr, sizeof csr);
    return p;
}

void resume(int i) {
    S.cur = i;
    S.w[i / 32].runnable &= ~(1u << (i % 32));
    set_thread_idx(i);
#if CT_ASAN
    __sanitizer_start_switch_fiber(&S.fake, S.stacks[i], STACK);
#endif
    ct_swap(&S.sched_sp, S.f[i].sp);
#if CT_ASAN
    __sanitizer_finish_switch_fiber(S.fake, &S.sched_bottom, &S.sched_size);
#endif
}

// The next thread to run under the policy, or -1 when none can.
int pick(int last) {
    if (S.policy == RR) {
        for (int k = 1; k <= S.nw + 1; k++) {
            int wi = ((last / 32) + k - 1) % S.nw;
            unsigned r = S.w[wi].runnable;
            if (k == 1) r &= (last % 32 == 31) ? 0u : ~0u << (last % 32 + 1);   // after `last` in its warp
            if (r) return wi * 32 + __builtin_ctz(r);
        }
        return -1;
    }
    for (int wi : S.order) {
        unsigned r = S.w[wi].runnable;
        if (r) return wi * 32 + (S.policy == WARP_REV ? 31 - __builtin_clz(r) : __builtin_ctz(r));
    }
    return -1;
}

[[noreturn]] void deadlock() {
    fprintf(stderr, "cuda-emu: kernel %s: block (%u,%u,%u) can never finish; where its threads wait:\n", S.kernel,
            blockIdx.x, blockIdx.y, blockIdx.z);
    int shown = 0;
    for (int i = 0; i < S.n && shown < 64; i++) {
        if (S.f[i].state == DONE) continue;
        char w[300];
        where(w, sizeof w, S.f[i]);
        fprintf(stderr, "  thread %d (warp %d lane %d): %s\n", i, i / 32, i % 32, w);
        shown++;
    }
    fatal("deadlock: a barrier or warp collective that not every thread it needs can reach (above)");
}

void run_block(unsigned bx, unsigned by, unsigned bz) {
    blockIdx.x = bx, blockIdx.y = by, blockIdx.z = bz;
    S.epoch++;
    if (S.smem_bytes) memset(S.smem, 0xFF, S.smem_bytes);
    for (int i = 0; i < S.n; i++) {
        Fiber &f = S.f[i];
        f.state = RUNNABLE;
        f.sp = fresh_stack(S.stacks[i]);
        f.async.clear();
    }
    for (int wi = 0; wi < S.nw; wi++) {
        int lanes = std::min(32, S.n - 32 * wi);
        S.w[wi].runnable = lanes == 32 ? ~0u : (1u << lanes) - 1;
        S.w[wi].done = ~S.w[wi].runnable;   // lanes past the block's end count as returned
        S.w[wi].groups.clear();
    }
    S.live = S.n;
    S.at_barrier = 0;
    if (S.policy == RANDOM) shuffle_order();
    int last = S.n - 1;
    while (S.live > 0) {
        int next = pick(last);
        if (next < 0) deadlock();
        resume(next);
        last = next;
    }
}
}  // namespace

[[noreturn]] void fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda-emu: %s%s", S.running ? "kernel " : "", S.running ? S.kernel : "");
    if (S.running) fprintf(stderr, ", thread (%u,%u,%u) of block (%u,%u,%u): ", threadIdx.x, threadIdx.y, threadIdx.z,
                           blockIdx.x, blockIdx.y, blockIdx.z);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    abort();
}

size_t dynamic_smem_limit(const void *fn) {
    std::lock_guard<std::mutex> g(attr_mu);
    auto it = smem_attr.find(fn);
    return it == smem_attr.end() ? SMEM_DEFAULT : it->second;
}
void set_dynamic_smem_limit(const void *fn, size_t bytes) {
    std::lock_guard<std::mutex> g(attr_mu);
    smem_attr[fn] = bytes;
}

void run_grid(const char *kernel, const dim3 &grid, const dim3 &block, size_t smem,
              const std::function<void()> &thread) {
    if (S.running) fatal("a kernel launched work from inside kernel %s", S.kernel);
    unsigned threads = block.x * block.y * block.z;
    static const long page = sysconf(_SC_PAGESIZE);
    while (S.stacks.size() < threads) {
        void *m = mmap(nullptr, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) fatal("cannot map a fiber stack of %zu bytes", STACK);
        mprotect(m, (size_t)page, PROT_NONE);   // a stack overflow faults instead of corrupting the next
        S.stacks.push_back((char *)m);
    }
    S.kernel = kernel;
    S.n = (int)threads;
    S.nw = (S.n + 31) / 32;
    S.f.assign(threads, Fiber{nullptr, RUNNABLE, "", "", 0, 0, {}});
    S.w.resize(S.nw);
    S.order.resize(S.nw);
    const char *pol = getenv("CT_EMU_SCHEDULE");
    if (!pol || !*pol || !strcmp(pol, "rr")) S.policy = RR;
    else if (!strcmp(pol, "warp")) S.policy = WARP;
    else if (!strcmp(pol, "warp-rev")) S.policy = WARP_REV;
    else {
        char *end = nullptr;
        unsigned long long seed = strtoull(pol, &end, 10);
        if (*end) fatal("CT_EMU_SCHEDULE=%s: expected rr, warp, warp-rev or a number (a random warp order's seed)", pol);
        S.policy = RANDOM;
        if (!S.rng) S.rng = seed * 2654435761u + 1;
    }
    for (int i = 0; i < S.nw; i++) S.order[i] = S.policy == WARP_REV ? S.nw - 1 - i : i;
    S.thread = &thread;
    S.smem_bytes = smem;
    S.smem = smem ? malloc(smem) : nullptr;   // its own allocation: AddressSanitizer sees overruns
    S.static_bytes = 0;
    blockDim = block;
    gridDim = grid;
    S.running = true;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) run_block(x, y, z);
    S.running = false;
    free(S.smem);
    S.smem = nullptr;
    S.smem_bytes = 0;
    for (Shared &sh : S.statics) free(sh.p);
    S.statics.clear();
}

void *dynamic_smem() {
    if (!S.running) fatal("extern __shared__ memory used outside a kernel");
    return S.smem;
}

void *static_smem(const void *key, size_t bytes, size_t align, const char *file, int line) {
    if (!S.running) fatal("__shared__ declaration (%s:%d) outside a kernel", file, line);
    for (Shared &sh : S.statics) {
        if (sh.key != key) continue;
        if (sh.epoch != S.epoch) memset(sh.p, 0xFF, sh.bytes), sh.epoch = S.epoch;
        return sh.p;
    }
    S.static_bytes += bytes;
    if (S.static_bytes > SMEM_DEFAULT)
        fatal("%zu bytes of static __shared__ memory (%s:%d the last): more than the 48 KiB a block may declare",
              S.static_bytes, file, line);
    if (S.static_bytes + S.smem_bytes > SMEM_OPTIN)
        fatal("%zu bytes of static and %zu of dynamic shared memory: more than the SM's %zu", S.static_bytes,
              S.smem_bytes, (size_t)SMEM_OPTIN);
    void *p = aligned_alloc(align < 16 ? 16 : align, (bytes + 15) / 16 * 16);
    memset(p, 0xFF, bytes);
    S.statics.push_back(Shared{key, p, bytes, S.epoch});
    return p;
}

bool in_shared(const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t)p;
    auto inside = [&](const void *base, size_t n) { return a >= (uintptr_t)base && a + bytes <= (uintptr_t)base + n; };
    if (S.smem && inside(S.smem, S.smem_bytes)) return true;
    for (const Shared &sh : S.statics)
        if (inside(sh.p, sh.bytes)) return true;
    return false;
}

void syncthreads(const char *file, int line) {
    Fiber &me = S.f[S.cur];
    me.state = AT_BARRIER;
    me.file = file;
    me.line = line;
    if (++S.at_barrier == S.live) release_barrier();
    yield();   // the scheduler picks who runs next, even when this thread completed the barrier
}

int lane_id() { return S.cur % 32; }
int thread_rank() { return S.cur; }

void warp_collective(unsigned mask, const char *what, const char *file, int line, const void *in, size_t in_bytes,
                     void *out, size_t out_bytes, WarpOp op) {
    if (!S.running) fatal("%s outside a kernel (%s:%d)", what, file, line);
    int wi = S.cur / 32, lane = S.cur % 32;
    Warp &w = S.w[wi];
    if (!(mask >> lane & 1))
        fatal("%s at %s:%d: lane %d calls it with mask %08x, which leaves the lane out (undefined)", what, file, line,
              lane, mask);
    if (mask & w.done)
        fatal("%s at %s:%d with mask %08x: lane %d of warp %d has already returned (undefined on the GPU)", what, file,
              line, mask, __builtin_ctz(mask & w.done), wi);
    Group *g = nullptr;
    for (Group &x : w.groups) {
        if (!(x.mask & mask)) continue;
        if (x.mask != mask || strcmp(x.what, what)) {
            int other = wi * 32 + __builtin_ctz(x.arrived);
            fatal("lanes of warp %d meet at different warp collectives: lane %d at %s (mask %08x, %s:%d), lane %d at %s "
                  "(mask %08x, %s:%d)", wi, lane, what, mask, file, line, other % 32, x.what, x.mask, S.f[other].file,
                  S.f[other].line);
        }
        g = &x;
    }
    if (!g) {
        w.groups.push_back(Group{mask, 0, what, op});
        g = &w.groups.back();
    }
    if (in_bytes > SLOT || out_bytes > SLOT) fatal("%s: a payload over %d bytes", what, (int)SLOT);
    if (in_bytes) memcpy(w.io.in[lane], in, in_bytes);
    g->arrived |= 1u << lane;
    Fiber &me = S.f[S.cur];
    if (g->arrived == g->mask) {   // the last lane: run the collective for all, wake the others
        g->op(w.io, g->mask);
        for (int l = 0; l < 32; l++)
            if ((mask >> l & 1) && l != lane) make_runnable(wi * 32 + l);
        w.groups.erase(w.groups.begin() + (g - w.groups.data()));
    } else {
        me.state = AT_WARP;
        me.what = what;
        me.file = file;
        me.line = line;
        me.mask = mask;
        yield();
    }
    if (out_bytes) memcpy(out, w.io.out[lane], out_bytes);
}

void cp_async(void *dst, const void *src, int bytes, const char *what) {
    if (((uintptr_t)dst | (uintptr_t)src) % (uintptr_t)bytes)
        fatal("%s: %d-byte copy from %p to %p, not aligned to its size", what, bytes, src, dst);
    if (!in_shared(dst, (size_t)bytes)) fatal("%s: destination %p is not in the block's shared memory", what, dst);
    if (!device_range(src, (size_t)bytes))
        fatal("%s: source %p (+%d bytes) is not inside a device allocation", what, src, bytes);
    S.f[S.cur].async.push_back(Copy{dst, src, bytes});
}
void cp_async_wait_all() {
    std::vector<Copy> &q = S.f[S.cur].async;
    for (const Copy &c : q) memcpy(c.dst, c.src, (size_t)c.bytes);
    q.clear();
}
}  // namespace ct_emu

// Shuffle: lane l receives the value of the lane it named (its own for -1). A source outside the mask
// is undefined on the GPU; here it reads as NaN bits.
void ct_emu_shfl_op(ct_emu::WarpIO &io, unsigned mask) {
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        CtEmuShfl me;
        memcpy(&me, io.in[l], sizeof me);
        uint64_t v = ~0ull;
        if (me.src < 0) v = me.value;
        else if (me.src < 32 && (mask >> me.src & 1)) memcpy(&v, io.in[me.src], sizeof v);
        memcpy(io.out[l], &v, sizeof v);
    }
}

static void ballot_op(ct_emu::WarpIO &io, unsigned mask) {
    unsigned bits = 0;
    for (int l = 0; l < 32; l++)
        if ((mask >> l & 1) && io.in[l][0]) bits |= 1u << l;
    for (int l = 0; l < 32; l++)
        if (mask >> l & 1) memcpy(io.out[l], &bits, sizeof bits);
}
unsigned ct_emu_ballot(unsigned mask, int pred, const char *file, int line) {
    unsigned char p = pred != 0;
    unsigned bits = 0;
    ct_emu::warp_collective(mask, "__ballot_sync", file, line, &p, 1, &bits, sizeof bits, ballot_op);
    return bits;
}
static void nothing_op(ct_emu::WarpIO &, unsigned) {}
void ct_emu_syncwarp(unsigned mask, const char *file, int line) {
    ct_emu::warp_collective(mask, "__syncwarp", file, line, nullptr, 0, nullptr, 0, nothing_op);
}
