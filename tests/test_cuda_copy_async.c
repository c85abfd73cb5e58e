// The CUDA backend's copy stream (copy_async, event_wait: the offload pool's transfers) against the
// compute stream: a tensor a kernel has just written, copied out on the copy stream, must arrive with
// the kernel's values, and a tensor copied in must be what the next kernel reads. On a GPU the copy
// stream waits for the compute stream through an event (cuda_backend.c); under the CUDA emulation the
// streams are deferred queues, so without that wait the copy runs first and reads the old bytes.
#include "backend/cpu/bf16.h"
#include "cuda_check.h"

// A pattern no allocation or poison gives, exact in bf16 (integers of 7 bits): element i of round r.
static float pattern(size_t i, int r) { return (float)((i * 7 + (size_t)r * 13) % 200) - 100.0f; }

int main(void) {
    Backend *gpu = cuda_or_skip(PRECISION_FP32);
    const size_t n = 4099;   // not a multiple of any vector width
    float *host_in = malloc(n * sizeof(float));
    float *pinned = gpu->host_alloc(gpu, n * sizeof(float));
    float *x = gpu->alloc(gpu, n * sizeof(float)), *y = gpu->alloc(gpu, n * sizeof(float));

    // Out: the compute stream writes x (a copy, then a kernel in place), the copy stream reads it.
    for (int r = 0; r < 3; r++) {
        for (size_t i = 0; i < n; i++) host_in[i] = pattern(i, r) + 1.0f / 3.0f;   // not bf16-exact
        gpu->copy(gpu, x, host_in, n * sizeof(float), COPY_H2D);
        gpu->bf16_round(gpu, x, n);   // a kernel on the compute stream, queued, not waited for
        BackendEvent ev = {0};
        gpu->copy_async(gpu, pinned, x, n * sizeof(float), COPY_D2H, &ev);
        gpu->event_wait(gpu, &ev);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            float want = bf16_to_f32(bf16_from_f32(host_in[i]));
            bad += memcmp(&pinned[i], &want, 4) != 0;
        }
        CHECK(bad == 0, "round %d: %zu of %zu floats copied out on the copy stream are not the kernel's output", r,
              bad, n);
    }

    // In: the copy stream writes y from pinned memory; after event_wait the compute stream reads it.
    for (int r = 0; r < 2; r++) {
        for (size_t i = 0; i < n; i++) pinned[i] = pattern(i, r + 5);
        BackendEvent ev = {0};
        gpu->copy_async(gpu, y, pinned, n * sizeof(float), COPY_H2D, &ev);
        gpu->event_wait(gpu, &ev);
        for (size_t i = 0; i < n; i++) pinned[i] = -1.0f;   // the host reuses its buffer at once
        gpu->bf16_round(gpu, y, n);                           // exact: the pattern is bf16-exact
        float *got = host_download(gpu, y, n * sizeof(float));
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += got[i] != pattern(i, r + 5);
        CHECK(bad == 0, "round %d: %zu of %zu floats copied in on the copy stream differ", r, bad, n);
        free(got);
    }

    // Synchronous copy_async (no event): complete when it returns.
    gpu->memset(gpu, x, 0x40, n * sizeof(float));   // 3.0039 in every float
    gpu->copy_async(gpu, pinned, x, n * sizeof(float), COPY_D2H, NULL);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp(&pinned[i], "\x40\x40\x40\x40", 4) != 0;
    CHECK(bad == 0, "copy_async without an event: %zu of %zu floats not yet the memset's", bad, n);

    gpu->free(gpu, x), gpu->free(gpu, y);
    gpu->host_free(gpu, pinned);
    free(host_in);
    backend_close(gpu);
    return check_summary();
}
