// Helpers for the CUDA tests (CTest label `cuda`): open the GPU or skip with the reason, move
// arrays between host and device, and compare a device result with the CPU backend's.
// Every test runs the same op on both backends from the same inputs.
#ifndef CTRON_TEST_CUDA_CHECK_H
#define CTRON_TEST_CUDA_CHECK_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "check.h"

#define CUDA_TEST_SKIP 77

// Whether to run the timed cases: they measure the GPU. The CUDA emulation (tests/cuda_emu/, built with
// CTRON_CUDA_EMU) runs every other case but shows no speed.
static inline int cuda_test_timed(void) {
#ifdef CTRON_CUDA_EMU
    return 0;
#else
    return !getenv("CT_CUDA_TEST_SMALL");
#endif
}
// CT_CUDA_TEST_SMALL=1 (compute-sanitizer's racecheck, ~100x slower than the kernels): the cases up to
// `s` positions only, and no timed cases. The small cases still cover every tile shape and path.
static inline int cuda_test_small_only(int s) { return getenv("CT_CUDA_TEST_SMALL") && s > 256; }

// The GPU at `precision`, or exit 77 (CTest: skipped) printing why.
static inline Backend *cuda_or_skip(Precision precision) {
    char err[512] = "";
    Backend *be = backend_open("cuda", precision, err, sizeof err);
    if (!be) {
        printf("SKIP: %s\n", err);
        exit(CUDA_TEST_SKIP);
    }
    return be;
}

// Fresh values every call: uniform in [lo, hi), from a per-test LCG (never zeros: an unwritten
// output must not pass).
static uint64_t cuda_test_rng = 0x9E3779B97F4A7C15ull;
static inline float cuda_test_uniform(float lo, float hi) {
    cuda_test_rng = cuda_test_rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((cuda_test_rng >> 40) * (1.0 / 16777216.0));
}
static inline float *host_random(size_t n, float lo, float hi) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = cuda_test_uniform(lo, hi);
    return x;
}

static inline void *dev_upload(Backend *gpu, const void *host, size_t bytes) {
    void *d = gpu->alloc(gpu, bytes);
    gpu->copy(gpu, d, host, bytes, COPY_H2D);
    return d;
}
// A device buffer filled with NaN bytes (0xFF), so an element the kernel forgets shows.
static inline void *dev_poisoned(Backend *gpu, size_t bytes) {
    void *d = gpu->alloc(gpu, bytes);
    gpu->memset(gpu, d, 0xFF, bytes);
    return d;
}
static inline void *host_download(Backend *gpu, const void *dev, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    gpu->copy(gpu, h, dev, bytes, COPY_D2H);
    return h;
}

// ‖a − b‖ / ‖b‖ in double (b the CPU's); NaN anywhere gives +inf.
static inline double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

// Download n floats of `dev` and compare with the CPU's `ref` within `tol` (relative L2).
#define CHECK_CLOSE(gpu, dev, ref, n, tol, what)                                                  \
    do {                                                                                          \
        float *got_ = host_download((gpu), (dev), (n) * sizeof(float));                           \
        double e_ = rel_l2(got_, (ref), (n));                                                     \
        CHECK(e_ <= (tol), "%s: relative L2 error %.3g, tolerance %.1g", (what), e_, (double)(tol)); \
        free(got_);                                                                               \
    } while (0)
// Download n bytes and require them equal to `ref`.
#define CHECK_BYTES_EQUAL(gpu, dev, ref, n, what)                                                  \
    do {                                                                                           \
        uint8_t *got_ = host_download((gpu), (dev), (n));                                          \
        size_t bad_ = 0;                                                                           \
        for (size_t i_ = 0; i_ < (size_t)(n); i_++) bad_ += got_[i_] != ((const uint8_t *)(ref))[i_]; \
        CHECK(bad_ == 0, "%s: %zu of %zu bytes differ", (what), bad_, (size_t)(n));                \
        free(got_);                                                                                \
    } while (0)
#endif
