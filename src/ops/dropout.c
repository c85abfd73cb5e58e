#include "ops/dropout.h"

static inline uint32_t keep_threshold(float p) {
    double t = (double)p * 4294967296.0;
    return t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
}

void dropout_mask_run(uint8_t *keep, DropoutSite site, uint32_t sample, uint64_t first, size_t count) {
    uint32_t thresh = keep_threshold(site.p);
    uint64_t end = first + count;
    uint64_t g = first / 4;
    while (g * 4 < end) {
        philox_ctr ctr = {{(uint32_t)g, sample, site.step,
                           ((uint32_t)PHILOX_DROPOUT << 24) | ((site.layer & 0xFFFFu) << 8) | (site.site & 0xFFu)}};
        philox_ctr r = philox4x32_10(ctr, site.key);
        for (int lane = 0; lane < 4; lane++) {
            uint64_t idx = g * 4 + (uint64_t)lane;
            if (idx >= first && idx < end) keep[idx - first] = r.v[lane] >= thresh;
        }
        g++;
    }
}

void dropout_mask_sbw(uint8_t *keep, DropoutSite site, int s, int b, int w, uint32_t sample0) {
#pragma omp parallel for schedule(static)
    for (int row = 0; row < s * b; row++) {
        int si = row / b, bi = row % b;
        dropout_mask_run(keep + (size_t)row * w, site, sample0 + (uint32_t)bi, (uint64_t)si * (uint64_t)w, (size_t)w);
    }
}

void dropout_residual_forward(float *out, const float *res, const float *y, const float *bias,
                              const uint8_t *keep, float p, int n, int w) {
    float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        size_t o = (size_t)r * w;
        for (int c = 0; c < w; c++) {
            float v = y[o + c] + (bias ? bias[c] : 0.0f);
            out[o + c] = res[o + c] + (keep ? (keep[o + c] ? v * scale : 0.0f) : v);
        }
    }
}

void dropout_apply(float *x, const uint8_t *keep, float p, size_t count) {
    float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) x[i] = keep[i] ? x[i] * scale : 0.0f;
}

void dropout_backward(float *dy, const float *dout, const uint8_t *keep, float p, size_t count) {
    float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) dy[i] = keep[i] ? dout[i] * scale : 0.0f;
}
