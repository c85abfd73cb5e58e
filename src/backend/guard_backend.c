// The guarded CPU backend (`--device cpu-guarded`): the CPU backend with its device memory made
// unreadable to host code. Every allocation is its own mapping, kept PROT_NONE except while a
// kernel or a copy of the backend runs; every pointer a kernel is given must lie in a live
// allocation. A model, trainer or checkpoint path that dereferences a tensor on the host, or hands a
// kernel host memory, stops at once with a segmentation fault or a message naming the kernel and
// the argument — what a GPU would do silently wrong. Tests run the one-process trainer on it, so
// the CPU suite proves the code the CUDA backend runs reaches tensors only through the backend.
// Single-threaded use only (no offload I/O thread): locking is process-wide. Several MPI ranks are
// several processes, each with its own guard; their collectives and transfers stage device tensors
// through host memory (parallel/comm_device.h), so MPI never touches a guarded page.
#define _DEFAULT_SOURCE   // MAP_ANONYMOUS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "backend/backend.h"
#include "util/common.h"

Backend *backend_cpu_open(Precision precision, char *err, size_t errlen);
void backend_cpu_close(Backend *be);

typedef struct { uint8_t *base; size_t bytes, mapped; } GuardAlloc;
typedef struct {
    Backend *inner;
    GuardAlloc *allocs;
    int n, cap;
    int open;   // allocations readable (inside a kernel or copy)
} GuardImpl;

static GuardImpl *gi(Backend *be) { return (GuardImpl *)be->impl; }
static Backend *inner(Backend *be) { return gi(be)->inner; }

static void protect_all(Backend *be, int prot) {
    GuardImpl *g = gi(be);
    for (int i = 0; i < g->n; i++)
        if (mprotect(g->allocs[i].base, g->allocs[i].mapped, prot) != 0)
            ctron_fatal("cpu-guarded: mprotect of %zu bytes failed", g->allocs[i].mapped);
}
static void guard_open_all(Backend *be) {
    if (gi(be)->open++ == 0) protect_all(be, PROT_READ | PROT_WRITE);
}
static void guard_close_all(Backend *be) {
    if (--gi(be)->open == 0) protect_all(be, PROT_NONE);
}

// The allocation holding p (interior pointers and one-past-the-end included), or -1. One that holds p
// inside comes first: mappings may be adjacent, and one whose end is exactly p is not the one p starts.
static int find_alloc(Backend *be, const void *p) {
    GuardImpl *g = gi(be);
    const uint8_t *q = p;
    for (int i = 0; i < g->n; i++)
        if (q >= g->allocs[i].base && q < g->allocs[i].base + g->allocs[i].bytes) return i;
    for (int i = 0; i < g->n; i++)
        if (q == g->allocs[i].base + g->allocs[i].bytes) return i;
    return -1;
}
static void guard_check(Backend *be, const char *kernel, const char *const *names, const void *const *ptrs, int n) {
    for (int i = 0; i < n; i++)
        if (ptrs[i] && find_alloc(be, ptrs[i]) < 0)
            ctron_fatal("cpu-guarded: %s was given host memory as '%s' (%p): kernels take device allocations only",
                        kernel, names[i], ptrs[i]);
}

// ---- the device
static void *g_alloc(Backend *be, size_t bytes) {
    GuardImpl *g = gi(be);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), mapped = ((bytes ? bytes : 1) + page - 1) / page * page;
    void *p = mmap(NULL, mapped, g->open ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) ctron_fatal("cpu-guarded: cannot map %zu bytes", mapped);
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->allocs = realloc(g->allocs, sizeof(GuardAlloc) * (size_t)g->cap);
        if (!g->allocs) ctron_fatal("cpu-guarded: out of memory");
    }
    g->allocs[g->n++] = (GuardAlloc){p, bytes, mapped};
    return p;   // anonymous mappings are zero-filled
}
static void g_free(Backend *be, void *p) {
    if (!p) return;
    GuardImpl *g = gi(be);
    int i = 0;
    while (i < g->n && g->allocs[i].base != p) i++;   // by base: mappings may be adjacent
    if (i == g->n) ctron_fatal("cpu-guarded: free of %p, which alloc did not return", p);
    munmap(g->allocs[i].base, g->allocs[i].mapped);
    g->allocs[i] = g->allocs[--g->n];
}
// The side of a copy that is on the device must be an allocation; the host side must not be.
static void check_side(Backend *be, const void *p, size_t bytes, int device, const char *what) {
    int i = find_alloc(be, p);
    if (device && (i < 0 || (const uint8_t *)p + bytes > gi(be)->allocs[i].base + gi(be)->allocs[i].bytes))
        ctron_fatal("cpu-guarded: copy %s %p (%zu bytes) is not inside a device allocation", what, p, bytes);
    if (!device && i >= 0) ctron_fatal("cpu-guarded: copy %s %p is device memory where host memory was said", what, p);
}
static void g_copy(Backend *be, void *dst, const void *src, size_t bytes, CopyDir dir) {
    if (!bytes) return;
    check_side(be, dst, bytes, dir != COPY_D2H, "destination");
    check_side(be, src, bytes, dir != COPY_H2D, "source");
    guard_open_all(be);
    memmove(dst, src, bytes);
    guard_close_all(be);
}
static void g_copy_async(Backend *be, void *dst, const void *src, size_t bytes, CopyDir dir, BackendEvent *done) {
    g_copy(be, dst, src, bytes, dir);
    if (done) done->done = 1;
}
static void g_copy_enqueue(Backend *be, void *dst, const void *src, size_t bytes) { g_copy(be, dst, src, bytes, COPY_H2D); }
static void g_event_wait(Backend *be, BackendEvent *ev) { (void)be; (void)ev; }
static void g_memset(Backend *be, void *p, int byte, size_t bytes) {
    if (!bytes) return;
    check_side(be, p, bytes, 1, "memset of");
    guard_open_all(be);
    memset(p, byte, bytes);
    guard_close_all(be);
}
static void g_synchronize(Backend *be) { (void)be; }
static size_t g_scratch_bytes(const Backend *be) {
    const Backend *in = ((const GuardImpl *)be->impl)->inner;
    return in->scratch_bytes(in);
}
static void *g_host_alloc(Backend *be, size_t bytes) { (void)be; return xcalloc(bytes ? bytes : 1); }
static void g_host_free(Backend *be, void *p) { (void)be; free(p); }
static size_t g_attention_scratch_floats(Backend *be, AttnScratchKind kind, int s, int b, int a, int kv, int h) {
    return inner(be)->attention_scratch_floats(inner(be), kind, s, b, a, kv, h);
}
static int g_describe(const Backend *be, char *out, size_t outlen) {
    const GuardImpl *g = (const GuardImpl *)be->impl;
    return snprintf(out, outlen, "cpu-guarded (the CPU backend; host code cannot read its %d allocations)", g->n);
}
static void g_device_memory(const Backend *be, size_t *in_use, size_t *total) {
    const GuardImpl *g = (const GuardImpl *)be->impl;
    *in_use = 0;
    for (int i = 0; i < g->n; i++) *in_use += g->allocs[i].bytes;
    *total = 0;
}

// ---- the kernels: check the pointers, open the memory, run the CPU kernel, close it again
static void g_linear_forward(Backend *be, float *y, int ldy, const float *x, const uint16_t *x16, int ldx,
                             const float *w, const uint16_t *w16, const float *bias, int n, int in, int out) {
    static const char *const names[] = {"y", "x", "x16", "w", "w16", "bias"};
    const void *ptrs[] = {y, x, x16, w, w16, bias};
    guard_check(be, "linear_forward", names, ptrs, 6);
    guard_open_all(be);
    inner(be)->linear_forward(inner(be), y, ldy, x, x16, ldx, w, w16, bias, n, in, out);
    guard_close_all(be);
}
static void g_linear_forward_acc(Backend *be, float *y, int ldy, const float *x, const uint16_t *x16, int ldx,
                                 const float *w, const uint16_t *w16, int n, int in, int out) {
    static const char *const names[] = {"y", "x", "x16", "w", "w16"};
    const void *ptrs[] = {y, x, x16, w, w16};
    guard_check(be, "linear_forward_acc", names, ptrs, 5);
    guard_open_all(be);
    inner(be)->linear_forward_acc(inner(be), y, ldy, x, x16, ldx, w, w16, n, in, out);
    guard_close_all(be);
}
static void g_linear_backward(Backend *be, float *dx, int ldx_out, int accumulate, float *dw, float *db,
                              const float *dy, int lddy, const float *x, const uint16_t *x16, int ldx,
                              const float *w, const uint16_t *w16, int n, int in, int out) {
    static const char *const names[] = {"dx", "dw", "db", "dy", "x", "x16", "w", "w16"};
    const void *ptrs[] = {dx, dw, db, dy, x, x16, w, w16};
    guard_check(be, "linear_backward", names, ptrs, 8);
    guard_open_all(be);
    inner(be)->linear_backward(inner(be), dx, ldx_out, accumulate, dw, db, dy, lddy, x, x16, ldx, w, w16, n, in,
        out);
    guard_close_all(be);
}
static void g_bias_backward(Backend *be, float *db, const float *dy, int lddy, int n, int cols) {
    static const char *const names[] = {"db", "dy"};
    const void *ptrs[] = {db, dy};
    guard_check(be, "bias_backward", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->bias_backward(inner(be), db, dy, lddy, n, cols);
    guard_close_all(be);
}
static void g_attention_forward(Backend *be, float *ctx, float *prob, uint8_t *keep, float *drop, const float *q,
                                const float *k, const float *v, int s, int b, int a, int kv, int h, int window,
                                int head0, DropoutSite site, uint32_t sample0, int round_bf16) {
    static const char *const names[] = {"ctx", "prob", "keep", "drop", "q", "k", "v"};
    const void *ptrs[] = {ctx, prob, keep, drop, q, k, v};
    guard_check(be, "attention_forward", names, ptrs, 7);
    guard_open_all(be);
    inner(be)->attention_forward(inner(be), ctx, prob, keep, drop, q, k, v, s, b, a, kv, h, window, head0, site,
                                 sample0, round_bf16);
    guard_close_all(be);
}
static void g_attention_backward(Backend *be, float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                                 const uint8_t *keep, const float *drop, const float *q, const float *k,
                                 const float *v, float *scratch, int s, int b, int a, int kv, int h, float p,
                                 int round_bf16) {
    static const char *const names[] = {"dq", "dk", "dv", "dctx", "prob", "keep", "drop", "q", "k", "v", "scratch"};
    const void *ptrs[] = {dq, dk, dv, dctx, prob, keep, drop, q, k, v, scratch};
    guard_check(be, "attention_backward", names, ptrs, 11);
    guard_open_all(be);
    inner(be)->attention_backward(inner(be), dq, dk, dv, dctx, prob, keep, drop, q, k, v, scratch, s, b, a, kv, h, p,
        round_bf16);
    guard_close_all(be);
}
static void g_attention_backward_recompute(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                           const float *q, const float *k, const float *v, float *scratch, int s,
                                           int b, int a, int kv, int h, int window, int head0, DropoutSite site,
                                           uint32_t sample0, int round_bf16) {
    static const char *const names[] = {"dq", "dk", "dv", "dctx", "q", "k", "v", "scratch"};
    const void *ptrs[] = {dq, dk, dv, dctx, q, k, v, scratch};
    guard_check(be, "attention_backward_recompute", names, ptrs, 8);
    guard_open_all(be);
    inner(be)->attention_backward_recompute(inner(be), dq, dk, dv, dctx, q, k, v, scratch, s, b, a, kv, h, window,
                                            head0, site, sample0, round_bf16);
    guard_close_all(be);
}
static void g_flash_attention_forward(Backend *be, float *ctx, float *lse, const float *q, const float *k,
                                      const float *v, float *scratch, int s, int b, int a, int kv, int h, int window,
                                      int head0, DropoutSite site, uint32_t sample0) {
    static const char *const names[] = {"ctx", "lse", "q", "k", "v", "scratch"};
    const void *ptrs[] = {ctx, lse, q, k, v, scratch};
    guard_check(be, "flash_attention_forward", names, ptrs, 6);
    guard_open_all(be);
    inner(be)->flash_attention_forward(inner(be), ctx, lse, q, k, v, scratch, s, b, a, kv, h, window, head0, site,
                                       sample0);
    guard_close_all(be);
}
static void g_flash_attention_forward_rows(Backend *be, float *ctx, float *lse, const float *q, const float *k,
                                           const float *v, float *scratch, int s, int q0, int nq, int b, int a, int kv,
                                           int h, int window, int head0, DropoutSite site, uint32_t sample0) {
    static const char *const names[] = {"ctx", "lse", "q", "k", "v", "scratch"};
    const void *ptrs[] = {ctx, lse, q, k, v, scratch};
    guard_check(be, "flash_attention_forward_rows", names, ptrs, 6);
    guard_open_all(be);
    inner(be)->flash_attention_forward_rows(inner(be), ctx, lse, q, k, v, scratch, s, q0, nq, b, a, kv, h, window,
                                            head0, site, sample0);
    guard_close_all(be);
}
static void g_flash_attention_backward(Backend *be, float *dq, float *dk, float *dv, const float *dctx,
                                       const float *q, const float *k, const float *v, const float *ctx,
                                       const float *lse, float *scratch, int s, int b, int a, int kv, int h,
                                       int window, int head0, DropoutSite site, uint32_t sample0) {
    static const char *const names[] = {"dq", "dk", "dv", "dctx", "q", "k", "v", "ctx", "lse", "scratch"};
    const void *ptrs[] = {dq, dk, dv, dctx, q, k, v, ctx, lse, scratch};
    guard_check(be, "flash_attention_backward", names, ptrs, 10);
    guard_open_all(be);
    inner(be)->flash_attention_backward(inner(be), dq, dk, dv, dctx, q, k, v, ctx, lse, scratch, s, b, a, kv, h,
                                        window, head0, site, sample0);
    guard_close_all(be);
}
static void g_layernorm_forward(Backend *be, float *y, float *stats, const float *x, const float *w, const float *b,
                                int n, int h) {
    static const char *const names[] = {"y", "stats", "x", "w", "b"};
    const void *ptrs[] = {y, stats, x, w, b};
    guard_check(be, "layernorm_forward", names, ptrs, 5);
    guard_open_all(be);
    inner(be)->layernorm_forward(inner(be), y, stats, x, w, b, n, h);
    guard_close_all(be);
}
static void g_layernorm_backward(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy,
                                 const float *x, const float *stats, const float *w, int n, int h) {
    static const char *const names[] = {"dx", "dw", "db", "dy", "x", "stats", "w"};
    const void *ptrs[] = {dx, dw, db, dy, x, stats, w};
    guard_check(be, "layernorm_backward", names, ptrs, 7);
    guard_open_all(be);
    inner(be)->layernorm_backward(inner(be), dx, accumulate, dw, db, dy, x, stats, w, n, h);
    guard_close_all(be);
}
static void g_layernorm_backward_from_output(Backend *be, float *dx, int accumulate, float *dw, float *db,
                                             const float *dy, const float *y, const float *stats, const float *w,
                                             const float *b, int n, int h) {
    static const char *const names[] = {"dx", "dw", "db", "dy", "y", "stats", "w", "b"};
    const void *ptrs[] = {dx, dw, db, dy, y, stats, w, b};
    guard_check(be, "layernorm_backward_from_output", names, ptrs, 8);
    guard_open_all(be);
    inner(be)->layernorm_backward_from_output(inner(be), dx, accumulate, dw, db, dy, y, stats, w, b, n, h);
    guard_close_all(be);
}
static void g_bias_gelu_forward(Backend *be, float *y, float *x, const float *bias, int n, int cols,
                                int round_bf16) {
    static const char *const names[] = {"y", "x", "bias"};
    const void *ptrs[] = {y, x, bias};
    guard_check(be, "bias_gelu_forward", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->bias_gelu_forward(inner(be), y, x, bias, n, cols, round_bf16);
    guard_close_all(be);
}
static void g_gelu_backward(Backend *be, float *dx, const float *dy, const float *x, size_t count) {
    static const char *const names[] = {"dx", "dy", "x"};
    const void *ptrs[] = {dx, dy, x};
    guard_check(be, "gelu_backward", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->gelu_backward(inner(be), dx, dy, x, count);
    guard_close_all(be);
}
static void g_gelu_branch_pack(Backend *be, uint8_t *bits, const float *x, size_t count) {
    static const char *const names[] = {"bits", "x"};
    const void *ptrs[] = {bits, x};
    guard_check(be, "gelu_branch_pack", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->gelu_branch_pack(inner(be), bits, x, count);
    guard_close_all(be);
}
static void g_gelu_backward_from_output(Backend *be, float *dx, const float *dy, const float *y,
                                        const uint8_t *bits, size_t count) {
    static const char *const names[] = {"dx", "dy", "y", "bits"};
    const void *ptrs[] = {dx, dy, y, bits};
    guard_check(be, "gelu_backward_from_output", names, ptrs, 4);
    guard_open_all(be);
    inner(be)->gelu_backward_from_output(inner(be), dx, dy, y, bits, count);
    guard_close_all(be);
}
static void g_fewbit_gelu_encode(Backend *be, uint8_t *codes, const float *x, size_t count, const FewBitGelu *t) {
    static const char *const names[] = {"codes", "x"};
    const void *ptrs[] = {codes, x};
    guard_check(be, "fewbit_gelu_encode", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->fewbit_gelu_encode(inner(be), codes, x, count, t);
    guard_close_all(be);
}
static void g_fewbit_gelu_backward(Backend *be, float *dx, const float *dy, const uint8_t *codes, size_t count,
                                   const FewBitGelu *t) {
    static const char *const names[] = {"dx", "dy", "codes"};
    const void *ptrs[] = {dx, dy, codes};
    guard_check(be, "fewbit_gelu_backward", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->fewbit_gelu_backward(inner(be), dx, dy, codes, count, t);
    guard_close_all(be);
}
static void g_attention_mask(Backend *be, uint8_t *keep, int s, int b, int a, int head0, DropoutSite site,
                             uint32_t sample0) {
    static const char *const names[] = {"keep"};
    const void *ptrs[] = {keep};
    guard_check(be, "attention_mask", names, ptrs, 1);
    guard_open_all(be);
    inner(be)->attention_mask(inner(be), keep, s, b, a, head0, site, sample0);
    guard_close_all(be);
}
static void g_dropout_mask_sbw(Backend *be, uint8_t *keep, DropoutSite site, int s0, int s, int b, int w,
                               uint32_t sample0) {
    static const char *const names[] = {"keep"};
    const void *ptrs[] = {keep};
    guard_check(be, "dropout_mask_sbw", names, ptrs, 1);
    guard_open_all(be);
    inner(be)->dropout_mask_sbw(inner(be), keep, site, s0, s, b, w, sample0);
    guard_close_all(be);
}
static void g_dropout_residual_forward(Backend *be, float *out, const float *res, const float *y, const float *bias,
                                       const uint8_t *keep, float p, int n, int w) {
    static const char *const names[] = {"out", "res", "y", "bias", "keep"};
    const void *ptrs[] = {out, res, y, bias, keep};
    guard_check(be, "dropout_residual_forward", names, ptrs, 5);
    guard_open_all(be);
    inner(be)->dropout_residual_forward(inner(be), out, res, y, bias, keep, p, n, w);
    guard_close_all(be);
}
static void g_dropout_residual_inverse(Backend *be, float *out, const float *res, const float *y, const float *bias,
                                       const uint8_t *keep, float p, int n, int w) {
    static const char *const names[] = {"out", "res", "y", "bias", "keep"};
    const void *ptrs[] = {out, res, y, bias, keep};
    guard_check(be, "dropout_residual_inverse", names, ptrs, 5);
    guard_open_all(be);
    inner(be)->dropout_residual_inverse(inner(be), out, res, y, bias, keep, p, n, w);
    guard_close_all(be);
}
static void g_dropout_apply(Backend *be, float *x, const uint8_t *keep, float p, size_t count) {
    static const char *const names[] = {"x", "keep"};
    const void *ptrs[] = {x, keep};
    guard_check(be, "dropout_apply", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->dropout_apply(inner(be), x, keep, p, count);
    guard_close_all(be);
}
static void g_dropout_backward(Backend *be, float *dy, const float *dout, const uint8_t *keep, float p,
                               size_t count) {
    static const char *const names[] = {"dy", "dout", "keep"};
    const void *ptrs[] = {dy, dout, keep};
    guard_check(be, "dropout_backward", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->dropout_backward(inner(be), dy, dout, keep, p, count);
    guard_close_all(be);
}
static void g_axpby(Backend *be, float *y, float alpha, const float *x, float beta, size_t count) {
    static const char *const names[] = {"y", "x"};
    const void *ptrs[] = {y, x};
    guard_check(be, "axpby", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->axpby(inner(be), y, alpha, x, beta, count);
    guard_close_all(be);
}
static void g_embedding_forward(Backend *be, float *x, const int32_t *tokens, const float *wte, const float *wpe,
                                int s, int b, int h) {
    static const char *const names[] = {"x", "tokens", "wte", "wpe"};
    const void *ptrs[] = {x, tokens, wte, wpe};
    guard_check(be, "embedding_forward", names, ptrs, 4);
    guard_open_all(be);
    inner(be)->embedding_forward(inner(be), x, tokens, wte, wpe, s, b, h);
    guard_close_all(be);
}
static void g_embedding_backward(Backend *be, float *dwte, float *dwpe, const float *dx, const int32_t *tokens,
                                 int s, int b, int h) {
    static const char *const names[] = {"dwte", "dwpe", "dx", "tokens"};
    const void *ptrs[] = {dwte, dwpe, dx, tokens};
    guard_check(be, "embedding_backward", names, ptrs, 4);
    guard_open_all(be);
    inner(be)->embedding_backward(inner(be), dwte, dwpe, dx, tokens, s, b, h);
    guard_close_all(be);
}
static void g_embedding_vocab_forward(Backend *be, float *x, const int32_t *tokens, const float *wte, int v0,
                                      int vl, int n, int h) {
    static const char *const names[] = {"x", "tokens", "wte"};
    const void *ptrs[] = {x, tokens, wte};
    guard_check(be, "embedding_vocab_forward", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->embedding_vocab_forward(inner(be), x, tokens, wte, v0, vl, n, h);
    guard_close_all(be);
}
static void g_embedding_add_positions(Backend *be, float *x, const float *wpe, int s0, int s, int b, int h) {
    static const char *const names[] = {"x", "wpe"};
    const void *ptrs[] = {x, wpe};
    guard_check(be, "embedding_add_positions", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->embedding_add_positions(inner(be), x, wpe, s0, s, b, h);
    guard_close_all(be);
}
static void g_embedding_vocab_backward(Backend *be, float *dwte, const float *dx, const int32_t *tokens, int v0,
                                       int vl, int n, int h) {
    static const char *const names[] = {"dwte", "dx", "tokens"};
    const void *ptrs[] = {dwte, dx, tokens};
    guard_check(be, "embedding_vocab_backward", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->embedding_vocab_backward(inner(be), dwte, dx, tokens, v0, vl, n, h);
    guard_close_all(be);
}
static void g_embedding_positions_backward(Backend *be, float *dwpe, const float *dx, int s0, int s, int b, int h) {
    static const char *const names[] = {"dwpe", "dx"};
    const void *ptrs[] = {dwpe, dx};
    guard_check(be, "embedding_positions_backward", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->embedding_positions_backward(inner(be), dwpe, dx, s0, s, b, h);
    guard_close_all(be);
}
static double g_crossentropy_forward_backward(Backend *be, float *logits, const int32_t *targets, float *row_loss,
                                              int n, int v, float grad_scale) {
    static const char *const names[] = {"logits", "targets", "row_loss"};
    const void *ptrs[] = {logits, targets, row_loss};
    guard_check(be, "crossentropy_forward_backward", names, ptrs, 3);
    guard_open_all(be);
    double r = inner(be)->crossentropy_forward_backward(inner(be), logits, targets, row_loss, n, v, grad_scale);
    guard_close_all(be);
    return r;
}
static double g_crossentropy_loss(Backend *be, const float *logits, const int32_t *targets, float *row_loss, int n,
                                  int v) {
    static const char *const names[] = {"logits", "targets", "row_loss"};
    const void *ptrs[] = {logits, targets, row_loss};
    guard_check(be, "crossentropy_loss", names, ptrs, 3);
    guard_open_all(be);
    double r = inner(be)->crossentropy_loss(inner(be), logits, targets, row_loss, n, v);
    guard_close_all(be);
    return r;
}
static void g_crossentropy_vocab_partial(Backend *be, float *part, const float *logits, const int32_t *targets,
                                         int n, int vl, int v0, int n_valid) {
    static const char *const names[] = {"part", "logits", "targets"};
    const void *ptrs[] = {part, logits, targets};
    guard_check(be, "crossentropy_vocab_partial", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->crossentropy_vocab_partial(inner(be), part, logits, targets, n, vl, v0, n_valid);
    guard_close_all(be);
}
static double g_crossentropy_vocab_combine(Backend *be, float *lse, float *row_loss, const float *parts, int t,
                                           int n) {
    static const char *const names[] = {"lse", "row_loss", "parts"};
    const void *ptrs[] = {lse, row_loss, parts};
    guard_check(be, "crossentropy_vocab_combine", names, ptrs, 3);
    guard_open_all(be);
    double r = inner(be)->crossentropy_vocab_combine(inner(be), lse, row_loss, parts, t, n);
    guard_close_all(be);
    return r;
}
static void g_crossentropy_vocab_backward(Backend *be, float *logits, const float *lse, const int32_t *targets,
                                          int n, int vl, int v0, int n_valid, float grad_scale) {
    static const char *const names[] = {"logits", "lse", "targets"};
    const void *ptrs[] = {logits, lse, targets};
    guard_check(be, "crossentropy_vocab_backward", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->crossentropy_vocab_backward(inner(be), logits, lse, targets, n, vl, v0, n_valid, grad_scale);
    guard_close_all(be);
}
static void g_bf16_round(Backend *be, float *x, size_t n) {
    static const char *const names[] = {"x"};
    const void *ptrs[] = {x};
    guard_check(be, "bf16_round", names, ptrs, 1);
    guard_open_all(be);
    inner(be)->bf16_round(inner(be), x, n);
    guard_close_all(be);
}
static void g_bf16_pack(Backend *be, uint16_t *dst, const float *src, size_t n) {
    static const char *const names[] = {"dst", "src"};
    const void *ptrs[] = {dst, src};
    guard_check(be, "bf16_pack", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->bf16_pack(inner(be), dst, src, n);
    guard_close_all(be);
}
static void g_bf16_unpack(Backend *be, float *dst, const uint16_t *src, size_t n) {
    static const char *const names[] = {"dst", "src"};
    const void *ptrs[] = {dst, src};
    guard_check(be, "bf16_unpack", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->bf16_unpack(inner(be), dst, src, n);
    guard_close_all(be);
}
static void g_mask_pack_bits(Backend *be, uint8_t *bits, const uint8_t *keep, size_t n) {
    static const char *const names[] = {"bits", "keep"};
    const void *ptrs[] = {bits, keep};
    guard_check(be, "mask_pack_bits", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->mask_pack_bits(inner(be), bits, keep, n);
    guard_close_all(be);
}
static void g_mask_unpack_bits(Backend *be, uint8_t *keep, const uint8_t *bits, size_t n) {
    static const char *const names[] = {"keep", "bits"};
    const void *ptrs[] = {keep, bits};
    guard_check(be, "mask_unpack_bits", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->mask_unpack_bits(inner(be), keep, bits, n);
    guard_close_all(be);
}
static void g_adamw_update(Backend *be, float *p, uint16_t *w16, const float *g, float *m, float *v, size_t n,
                           float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2,
                           float grad_scale) {
    static const char *const names[] = {"p", "w16", "g", "m", "v"};
    const void *ptrs[] = {p, w16, g, m, v};
    guard_check(be, "adamw_update", names, ptrs, 5);
    guard_open_all(be);
    inner(be)->adamw_update(inner(be), p, w16, g, m, v, n, lr, beta1, beta2, eps, wd, bc1, bc2, grad_scale);
    guard_close_all(be);
}
static double g_sum_squares(Backend *be, const float *x, size_t n) {
    static const char *const names[] = {"x"};
    const void *ptrs[] = {x};
    guard_check(be, "sum_squares", names, ptrs, 1);
    guard_open_all(be);
    double r = inner(be)->sum_squares(inner(be), x, n);
    guard_close_all(be);
    return r;
}
static size_t g_count_nonfinite(Backend *be, const float *x, size_t n) {
    static const char *const names[] = {"x"};
    const void *ptrs[] = {x};
    guard_check(be, "count_nonfinite", names, ptrs, 1);
    guard_open_all(be);
    size_t r = inner(be)->count_nonfinite(inner(be), x, n);
    guard_close_all(be);
    return r;
}
// Every slice's pointers are checked, as adamw_update checks its own.
static void g_adamw_update_multi(Backend *be, const AdamWSlice *t, int count, float lr, float beta1, float beta2,
                                 float eps, float bc1, float bc2, float grad_scale) {
    static const char *const names[] = {"slice p", "slice w16", "slice g", "slice m", "slice v"};
    for (int i = 0; i < count; i++) {
        const void *ptrs[] = {t[i].p, t[i].w16, t[i].g, t[i].m, t[i].v};
        guard_check(be, "adamw_update_multi", names, ptrs, 5);
    }
    guard_open_all(be);
    inner(be)->adamw_update_multi(inner(be), t, count, lr, beta1, beta2, eps, bc1, bc2, grad_scale);
    guard_close_all(be);
}
static void g_tensor_stats_multi(Backend *be, const float *const *x, const size_t *n, int count, double *sumsq,
                                 size_t *nonfinite) {
    static const char *const names[] = {"x[i]"};
    for (int i = 0; i < count; i++) {
        const void *ptrs[] = {x[i]};
        guard_check(be, "tensor_stats_multi", names, ptrs, 1);
    }
    guard_open_all(be);
    inner(be)->tensor_stats_multi(inner(be), x, n, count, sumsq, nonfinite);
    guard_close_all(be);
}
static void g_crossentropy_deferred(Backend *be, float *logits, const int32_t *targets, float *row_loss, int n, int v,
                                    float grad_scale, int train) {
    static const char *const names[] = {"logits", "targets", "row_loss"};
    const void *ptrs[] = {logits, targets, row_loss};
    guard_check(be, "crossentropy_deferred", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->crossentropy_deferred(inner(be), logits, targets, row_loss, n, v, grad_scale, train);
    guard_close_all(be);
}
// The step's guard: g checked as a kernel's argument; the clipping factor, the verdict and the marks
// are the inner backend's own state (host values), not device memory.
static void g_step_guard(Backend *be, const float *g, size_t n, float max_norm) {
    static const char *const names[] = {"g"};
    const void *ptrs[] = {g};
    guard_check(be, "step_guard", names, ptrs, 1);
    guard_open_all(be);
    inner(be)->step_guard(inner(be), g, n, max_norm);
    guard_close_all(be);
}
static void g_adamw_update_guarded(Backend *be, const AdamWSlice *t, int count, float lr, float beta1, float beta2,
                                   float eps, float bc1, float bc2) {
    static const char *const names[] = {"slice p", "slice w16", "slice g", "slice m", "slice v"};
    for (int i = 0; i < count; i++) {
        const void *ptrs[] = {t[i].p, t[i].w16, t[i].g, t[i].m, t[i].v};
        guard_check(be, "adamw_update_guarded", names, ptrs, 5);
    }
    guard_open_all(be);
    inner(be)->adamw_update_guarded(inner(be), t, count, lr, beta1, beta2, eps, bc1, bc2);
    guard_close_all(be);
}
static void g_step_take(Backend *be, double *loss_sum, double *sumsq) { inner(be)->step_take(inner(be), loss_sum, sumsq); }
static int g_mark(Backend *be) { return inner(be)->mark(inner(be)); }
static double g_mark_seconds(Backend *be, int from, int to) { return inner(be)->mark_seconds(inner(be), from, to); }
static void g_marks_reset(Backend *be) { inner(be)->marks_reset(inner(be)); }
// The sums are the inner backend's own state (host doubles), not device memory.
static void g_loss_end_microbatch(Backend *be) { inner(be)->loss_end_microbatch(inner(be)); }
static double g_loss_take(Backend *be) { return inner(be)->loss_take(inner(be)); }
static void g_dropout_mask_cols(Backend *be, uint8_t *keep, DropoutSite site, int r0, int rows, int b, int w, int W,
                                int c0, uint32_t sample0) {
    static const char *const names[] = {"keep"};
    const void *ptrs[] = {keep};
    guard_check(be, "dropout_mask_cols", names, ptrs, 1);
    guard_open_all(be);
    inner(be)->dropout_mask_cols(inner(be), keep, site, r0, rows, b, w, W, c0, sample0);
    guard_close_all(be);
}
static void g_embedding_vocab_forward16(Backend *be, float *x, const int32_t *tokens, const uint16_t *wte16, int v0,
                                        int vl, int n, int h) {
    static const char *const names[] = {"x", "tokens", "wte16"};
    const void *ptrs[] = {x, tokens, wte16};
    guard_check(be, "embedding_vocab_forward16", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->embedding_vocab_forward16(inner(be), x, tokens, wte16, v0, vl, n, h);
    guard_close_all(be);
}
static void g_linear_forward_rows(Backend *be, float *y, int ldy, const float *x, int ldx, const float *w,
                                  const uint16_t *w16, const float *bias, int n, int in, int out) {
    static const char *const names[] = {"y", "x", "w", "w16", "bias"};
    const void *ptrs[] = {y, x, w, w16, bias};
    guard_check(be, "linear_forward_rows", names, ptrs, 5);
    guard_open_all(be);
    inner(be)->linear_forward_rows(inner(be), y, ldy, x, ldx, w, w16, bias, n, in, out);
    guard_close_all(be);
}
static void g_kv_attention_forward(Backend *be, float *ctx, const float *q, int ldq, const float *kc,
                                   const float *vc, float *scores, int seq, int p0, int n, int a, int kv, int h,
                                   int window) {
    static const char *const names[] = {"ctx", "q", "kc", "vc", "scores"};
    const void *ptrs[] = {ctx, q, kc, vc, scores};
    guard_check(be, "kv_attention_forward", names, ptrs, 5);
    guard_open_all(be);
    inner(be)->kv_attention_forward(inner(be), ctx, q, ldq, kc, vc, scores, seq, p0, n, a, kv, h, window);
    guard_close_all(be);
}
static void g_gelu_forward(Backend *be, float *y, const float *x, size_t count) {
    static const char *const names[] = {"y", "x"};
    const void *ptrs[] = {y, x};
    guard_check(be, "gelu_forward", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->gelu_forward(inner(be), y, x, count);
    guard_close_all(be);
}
static void g_rmsnorm_forward(Backend *be, float *y, float *rstd, const float *x, const float *w, float eps, int n,
                              int h, int round_bf16) {
    static const char *const names[] = {"y", "rstd", "x", "w"};
    const void *ptrs[] = {y, rstd, x, w};
    guard_check(be, "rmsnorm_forward", names, ptrs, 4);
    guard_open_all(be);
    inner(be)->rmsnorm_forward(inner(be), y, rstd, x, w, eps, n, h, round_bf16);
    guard_close_all(be);
}
static void g_rmsnorm_backward(Backend *be, float *dx, int accumulate, float *dw, const float *dy, const float *x,
                               const float *rstd, const float *w, int n, int h) {
    static const char *const names[] = {"dx", "dw", "dy", "x", "rstd", "w"};
    const void *ptrs[] = {dx, dw, dy, x, rstd, w};
    guard_check(be, "rmsnorm_backward", names, ptrs, 6);
    guard_open_all(be);
    inner(be)->rmsnorm_backward(inner(be), dx, accumulate, dw, dy, x, rstd, w, n, h);
    guard_close_all(be);
}
static void g_rmsnorm_backward_from_output(Backend *be, float *dx, int accumulate, float *dw, const float *dy,
                                           const float *y, const float *rstd, const float *w, int n, int h) {
    static const char *const names[] = {"dx", "dw", "dy", "y", "rstd", "w"};
    const void *ptrs[] = {dx, dw, dy, y, rstd, w};
    guard_check(be, "rmsnorm_backward_from_output", names, ptrs, 6);
    guard_open_all(be);
    inner(be)->rmsnorm_backward_from_output(inner(be), dx, accumulate, dw, dy, y, rstd, w, n, h);
    guard_close_all(be);
}
static void g_rope_forward(Backend *be, float *y, const float *x, int ld, const float *cs, int positions, int rows,
                           int b, int heads, int d, int rot, int pos0, int round_bf16) {
    static const char *const names[] = {"y", "x", "cs"};
    const void *ptrs[] = {y, x, cs};
    guard_check(be, "rope_forward", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->rope_forward(inner(be), y, x, ld, cs, positions, rows, b, heads, d, rot, pos0, round_bf16);
    guard_close_all(be);
}
static void g_rope_backward(Backend *be, float *dx, const float *dy, int ld, const float *cs, int positions, int rows,
                            int b, int heads, int d, int rot, int pos0) {
    static const char *const names[] = {"dx", "dy", "cs"};
    const void *ptrs[] = {dx, dy, cs};
    guard_check(be, "rope_backward", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->rope_backward(inner(be), dx, dy, ld, cs, positions, rows, b, heads, d, rot, pos0);
    guard_close_all(be);
}
static void g_swiglu_forward(Backend *be, float *y, float *gate, float *up, int ld, int n, int f, int round_bf16) {
    static const char *const names[] = {"y", "gate", "up"};
    const void *ptrs[] = {y, gate, up};
    guard_check(be, "swiglu_forward", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->swiglu_forward(inner(be), y, gate, up, ld, n, f, round_bf16);
    guard_close_all(be);
}
static void g_swiglu_backward(Backend *be, float *dgate, float *dup, int ldd, float *y, const float *dy,
                              const float *gate, const float *up, int ld, int n, int f, int round_bf16) {
    static const char *const names[] = {"dgate", "dup", "y", "dy", "gate", "up"};
    const void *ptrs[] = {dgate, dup, y, dy, gate, up};
    guard_check(be, "swiglu_backward", names, ptrs, 6);
    guard_open_all(be);
    inner(be)->swiglu_backward(inner(be), dgate, dup, ldd, y, dy, gate, up, ld, n, f, round_bf16);
    guard_close_all(be);
}

// ---- the ops on the arena's bf16 copies (the CPU backend has them at bf16)
static void g_bf16_pack_round(Backend *be, uint16_t *dst, float *x, size_t n) {
    static const char *const names[] = {"dst", "x"};
    const void *ptrs[] = {dst, x};
    guard_check(be, "bf16_pack_round", names, ptrs, 2);
    guard_open_all(be);
    inner(be)->bf16_pack_round(inner(be), dst, x, n);
    guard_close_all(be);
}
static void g_linear_backward16(Backend *be, float *dx, int ldx_out, int accumulate, float *dw, const uint16_t *dy16,
                                int lddy16, const float *x, const uint16_t *x16, int ldx, const uint16_t *w16, int n,
                                int in, int out) {
    static const char *const names[] = {"dx", "dw", "dy16", "x", "x16", "w16"};
    const void *ptrs[] = {dx, dw, dy16, x, x16, w16};
    guard_check(be, "linear_backward16", names, ptrs, 6);
    guard_open_all(be);
    inner(be)->linear_backward16(inner(be), dx, ldx_out, accumulate, dw, dy16, lddy16, x, x16, ldx, w16, n, in, out);
    guard_close_all(be);
}
static void g_rmsnorm_backward16(Backend *be, float *dx, int accumulate, float *dw, const float *dy, const uint16_t *x,
                                 const float *rstd, const float *w, int n, int h) {
    static const char *const names[] = {"dx", "dw", "dy", "x16", "rstd", "w"};
    const void *ptrs[] = {dx, dw, dy, x, rstd, w};
    guard_check(be, "rmsnorm_backward16", names, ptrs, 6);
    guard_open_all(be);
    inner(be)->rmsnorm_backward16(inner(be), dx, accumulate, dw, dy, x, rstd, w, n, h);
    guard_close_all(be);
}
static void g_layernorm_backward16(Backend *be, float *dx, int accumulate, float *dw, float *db, const float *dy,
                                   const uint16_t *x, const float *stats, const float *w, int n, int h) {
    static const char *const names[] = {"dx", "dw", "db", "dy", "x16", "stats", "w"};
    const void *ptrs[] = {dx, dw, db, dy, x, stats, w};
    guard_check(be, "layernorm_backward16", names, ptrs, 7);
    guard_open_all(be);
    inner(be)->layernorm_backward16(inner(be), dx, accumulate, dw, db, dy, x, stats, w, n, h);
    guard_close_all(be);
}
static void g_swiglu_forward16(Backend *be, uint16_t *y16, const uint16_t *gate, const uint16_t *up, int ld, int n,
                               int f) {
    static const char *const names[] = {"y16", "gate16", "up16"};
    const void *ptrs[] = {y16, gate, up};
    guard_check(be, "swiglu_forward16", names, ptrs, 3);
    guard_open_all(be);
    inner(be)->swiglu_forward16(inner(be), y16, gate, up, ld, n, f);
    guard_close_all(be);
}
static void g_swiglu_forward_pack16(Backend *be, uint16_t *y16, uint16_t *gate16, uint16_t *up16, const float *gate,
                                    const float *up, int ld, int n, int f) {
    static const char *const names[] = {"y16", "gate16", "up16", "gate", "up"};
    const void *ptrs[] = {y16, gate16, up16, gate, up};
    guard_check(be, "swiglu_forward_pack16", names, ptrs, 5);
    guard_open_all(be);
    inner(be)->swiglu_forward_pack16(inner(be), y16, gate16, up16, gate, up, ld, n, f);
    guard_close_all(be);
}
static void g_swiglu_backward16(Backend *be, void *dgate, void *dup, int ldd, int grad16, const float *dy,
                                const uint16_t *gate, const uint16_t *up, int ld, int n, int f) {
    static const char *const names[] = {"dgate", "dup", "dy", "gate16", "up16"};
    const void *ptrs[] = {dgate, dup, dy, gate, up};
    guard_check(be, "swiglu_backward16", names, ptrs, 5);
    guard_open_all(be);
    inner(be)->swiglu_backward16(inner(be), dgate, dup, ldd, grad16, dy, gate, up, ld, n, f);
    guard_close_all(be);
}

static void guard_kernels(Backend *t) {
    t->linear_forward = g_linear_forward;
    t->linear_forward_acc = g_linear_forward_acc;
    t->linear_backward = g_linear_backward;
    t->bias_backward = g_bias_backward;
    t->attention_forward = g_attention_forward;
    t->attention_backward = g_attention_backward;
    t->attention_backward_recompute = g_attention_backward_recompute;
    t->flash_attention_forward = g_flash_attention_forward;
    t->flash_attention_backward = g_flash_attention_backward;
    t->layernorm_forward = g_layernorm_forward;
    t->layernorm_backward = g_layernorm_backward;
    t->layernorm_backward_from_output = g_layernorm_backward_from_output;
    t->bias_gelu_forward = g_bias_gelu_forward;
    t->gelu_backward = g_gelu_backward;
    t->gelu_branch_pack = g_gelu_branch_pack;
    t->gelu_backward_from_output = g_gelu_backward_from_output;
    t->fewbit_gelu_encode = g_fewbit_gelu_encode;
    t->fewbit_gelu_backward = g_fewbit_gelu_backward;
    t->attention_mask = g_attention_mask;
    t->dropout_mask_sbw = g_dropout_mask_sbw;
    t->dropout_residual_forward = g_dropout_residual_forward;
    if (t->dropout_residual_inverse) t->dropout_residual_inverse = g_dropout_residual_inverse;
    t->dropout_apply = g_dropout_apply;
    t->dropout_backward = g_dropout_backward;
    t->axpby = g_axpby;
    t->embedding_forward = g_embedding_forward;
    t->embedding_backward = g_embedding_backward;
    t->embedding_vocab_forward = g_embedding_vocab_forward;
    t->embedding_add_positions = g_embedding_add_positions;
    t->embedding_vocab_backward = g_embedding_vocab_backward;
    t->embedding_positions_backward = g_embedding_positions_backward;
    t->crossentropy_forward_backward = g_crossentropy_forward_backward;
    t->crossentropy_loss = g_crossentropy_loss;
    t->crossentropy_vocab_partial = g_crossentropy_vocab_partial;
    t->crossentropy_vocab_combine = g_crossentropy_vocab_combine;
    t->crossentropy_vocab_backward = g_crossentropy_vocab_backward;
    t->bf16_round = g_bf16_round;
    t->bf16_pack = g_bf16_pack;
    t->bf16_unpack = g_bf16_unpack;
    t->mask_pack_bits = g_mask_pack_bits;
    t->mask_unpack_bits = g_mask_unpack_bits;
    t->adamw_update = g_adamw_update;
    t->sum_squares = g_sum_squares;
    t->count_nonfinite = g_count_nonfinite;
    t->adamw_update_multi = g_adamw_update_multi;
    t->tensor_stats_multi = g_tensor_stats_multi;
    t->crossentropy_deferred = g_crossentropy_deferred;
    t->loss_end_microbatch = g_loss_end_microbatch;
    t->loss_take = g_loss_take;
    t->step_guard = g_step_guard;
    t->adamw_update_guarded = g_adamw_update_guarded;
    t->step_take = g_step_take;
    t->mark = g_mark;
    t->mark_seconds = g_mark_seconds;
    t->marks_reset = g_marks_reset;
    t->embedding_vocab_forward16 = g_embedding_vocab_forward16;
    t->dropout_mask_cols = g_dropout_mask_cols;
    if (t->flash_attention_forward_rows) t->flash_attention_forward_rows = g_flash_attention_forward_rows;
    t->linear_forward_rows = g_linear_forward_rows;
    t->kv_attention_forward = g_kv_attention_forward;
    t->gelu_forward = g_gelu_forward;
    t->rmsnorm_forward = g_rmsnorm_forward;
    t->rmsnorm_backward = g_rmsnorm_backward;
    t->rmsnorm_backward_from_output = g_rmsnorm_backward_from_output;
    t->rope_forward = g_rope_forward;
    t->rope_backward = g_rope_backward;
    t->swiglu_forward = g_swiglu_forward;
    t->swiglu_backward = g_swiglu_backward;
    if (t->bf16_pack_round) t->bf16_pack_round = g_bf16_pack_round;
    if (t->linear_backward16) t->linear_backward16 = g_linear_backward16;
    if (t->rmsnorm_backward16) t->rmsnorm_backward16 = g_rmsnorm_backward16;
    if (t->layernorm_backward16) t->layernorm_backward16 = g_layernorm_backward16;
    if (t->swiglu_forward16) t->swiglu_forward16 = g_swiglu_forward16;
    if (t->swiglu_forward_pack16) t->swiglu_forward_pack16 = g_swiglu_forward_pack16;
    if (t->swiglu_backward16) t->swiglu_backward16 = g_swiglu_backward16;
    // any op on the copies not wrapped above would reach guarded memory unguarded: none may be left set
    if (t->flash_attention_forward16 || t->flash_attention_backward16 || t->gelu_backward16 ||
        t->bias_gelu_forward16 || t->crossentropy_deferred16)
        ctron_fatal("cpu-guarded: the CPU backend has an op on bf16 copies this guard does not wrap");
}

Backend *backend_guard_open(Precision precision, char *err, size_t errlen) {
    Backend *in = backend_cpu_open(precision, err, errlen);
    if (!in) return NULL;
    Backend *be = xmalloc(sizeof *be);
    *be = *in;
    be->name = "cpu-guarded";
    GuardImpl *g = xcalloc(sizeof *g);
    g->inner = in;
    be->impl = g;
    be->alloc = g_alloc; be->free = g_free; be->copy = g_copy; be->copy_async = g_copy_async;
    be->event_wait = g_event_wait; be->memset = g_memset; be->synchronize = g_synchronize;
    be->copy_enqueue = g_copy_enqueue;
    be->scratch_bytes = g_scratch_bytes; be->host_alloc = g_host_alloc; be->host_free = g_host_free;
    be->host_addressable = 0;
    be->attention_scratch_floats = g_attention_scratch_floats;
    be->describe = g_describe; be->device_memory = g_device_memory;
    guard_kernels(be);
    return be;
}

void backend_guard_close(Backend *be) {
    GuardImpl *g = gi(be);
    for (int i = 0; i < g->n; i++) munmap(g->allocs[i].base, g->allocs[i].mapped);
    free(g->allocs);
    backend_cpu_close(g->inner);
    free(g->inner);
    free(g);
}
