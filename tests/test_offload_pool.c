// The offload pool behind the backend (memory/offload_pool.h): its memory is the backend's
// host_alloc, and every byte moves by the backend's copy_async with an event the I/O thread waits
// on. Host memory: one copy per store and per load. A file with host-addressable device memory (the
// CPU backend): no copy at all, the file is read and written in place. A file with device memory
// the host cannot address (the CPU backend with host_addressable cleared, standing in for a GPU):
// through the bounce buffer in 8 MiB pieces — a 20 MiB region is 3 copies each way. Every way, the
// bytes come back unchanged.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "memory/offload_pool.h"
#include "util/common.h"

static int n_d2h, n_h2d;
static void (*real_copy_async)(Backend *, void *, const void *, size_t, CopyDir, BackendEvent *);

static void counting_copy_async(Backend *be, void *dst, const void *src, size_t bytes, CopyDir dir, BackendEvent *done) {
    n_d2h += dir == COPY_D2H;
    n_h2d += dir == COPY_H2D;
    real_copy_async(be, dst, src, bytes, dir, done);
}

// Stores two regions of n bytes, overwrites the device buffers, loads them back: 1 when both match.
static int round_trip(Backend *be, const char *dir, size_t n, const char *what) {
    char err[640];
    OffloadPool *p = offload_pool_open(be, 2 * n, dir, err, sizeof err);
    CHECK(p != NULL, "%s: cannot open the pool: %s", what, err);
    if (!p) return 0;
    uint8_t *a = be->alloc(be, n), *b = be->alloc(be, n), *want = xmalloc(2 * n);
    for (size_t i = 0; i < 2 * n; i++) want[i] = (uint8_t)(i * 2654435761u >> 13);
    be->copy(be, a, want, n, COPY_H2D);
    be->copy(be, b, want + n, n, COPY_H2D);
    offload_pool_store(p, 0, a, n);
    uint64_t t = offload_pool_store(p, n, b, n);
    offload_pool_wait(p, t);
    be->memset(be, a, 0, n);
    be->memset(be, b, 0xff, n);
    offload_pool_load(p, n, b, n);
    offload_pool_wait(p, offload_pool_load(p, 0, a, n));
    uint8_t *got = xmalloc(2 * n);
    be->copy(be, got, a, n, COPY_D2H);
    be->copy(be, got + n, b, n, COPY_D2H);
    int same = memcmp(got, want, 2 * n) == 0;
    OffloadStats st = offload_pool_stats(p);
    CHECK(same, "%s: the bytes did not come back unchanged", what);
    CHECK(st.stored == 2 * n && st.loaded == 2 * n, "%s: stored %llu, loaded %llu bytes (expected %zu each)", what,
          (unsigned long long)st.stored, (unsigned long long)st.loaded, 2 * n);
    offload_pool_close(p);
    be->free(be, a);
    be->free(be, b);
    free(want);
    free(got);
    return same;
}

int main(void) {
    char err[256];
    Backend *be = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    CHECK(be != NULL, "cpu backend: %s", err);
    if (!be) return check_summary();
    real_copy_async = be->copy_async;
    be->copy_async = counting_copy_async;
    char tmpl[] = "/tmp/ctron-test-pool-XXXXXX";
    const char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL, "mkdtemp failed");
    size_t n = 20u << 20;

    n_d2h = n_h2d = 0;
    round_trip(be, NULL, n, "host memory");
    CHECK(n_d2h == 2 && n_h2d == 2, "host memory: %d D2H and %d H2D copies (expected 2 and 2)", n_d2h, n_h2d);

    n_d2h = n_h2d = 0;
    round_trip(be, dir, n, "file, host-addressable device");
    CHECK(n_d2h == 0 && n_h2d == 0, "file in place: %d D2H and %d H2D copies (expected none)", n_d2h, n_h2d);

    be->host_addressable = 0;   // as on a GPU: the file goes through the bounce buffer
    n_d2h = n_h2d = 0;
    round_trip(be, dir, n, "file, bounce buffer");
    CHECK(n_d2h == 6 && n_h2d == 6, "file through the bounce: %d D2H and %d H2D copies (expected 2 regions x 3 "
          "pieces of 8 MiB = 6 each)", n_d2h, n_h2d);
    printf("host memory, file in place and file through the bounce buffer: %zu-byte regions back unchanged\n", n);
    be->host_addressable = 1;
    rmdir(dir);
    backend_close(be);
    return check_summary();
}
