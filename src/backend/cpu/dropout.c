#include "backend/cpu/dropout.h"
#if defined(__AVX512BW__) && defined(__BMI2__)
#include <immintrin.h>
#endif

// 16 Philox blocks side by side (structure of arrays), so the compiler vectorises the rounds:
// out[lane][k] is word `lane` of block g0 + k. Same numbers as philox4x32_10, block by block.
enum { PHILOX_BATCH = 16 };
static void philox_batch(uint32_t out[4][PHILOX_BATCH], uint64_t g0, uint32_t c1, uint32_t c2, uint32_t c3,
                         philox_key key) {
    uint32_t x0[PHILOX_BATCH], x1[PHILOX_BATCH], x2[PHILOX_BATCH], x3[PHILOX_BATCH];
    for (int k = 0; k < PHILOX_BATCH; k++) { x0[k] = (uint32_t)(g0 + (uint64_t)k); x1[k] = c1; x2[k] = c2; x3[k] = c3; }
    uint32_t k0 = key.v[0], k1 = key.v[1];
    for (int r = 0; r < 10; r++) {
        for (int k = 0; k < PHILOX_BATCH; k++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * x0[k], p1 = (uint64_t)0xCD9E8D57u * x2[k];
            uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1[k] ^ k0, y2 = (uint32_t)(p0 >> 32) ^ x3[k] ^ k1;
            x1[k] = (uint32_t)p1;
            x3[k] = (uint32_t)p0;
            x0[k] = y0;
            x2[k] = y2;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    for (int k = 0; k < PHILOX_BATCH; k++) { out[0][k] = x0[k]; out[1][k] = x1[k]; out[2][k] = x2[k]; out[3][k] = x3[k]; }
}

// keep[4k + lane] = word `lane` of block k ≥ thresh for the batch's 64 elements. With AVX-512 and
// BMI2: one compare mask per word, its bits spread to every fourth position (pdep), one 64-byte store
// (the byte-at-a-time transpose was most of the mask's time).
static void store_keep(uint8_t *dst, uint32_t out[4][PHILOX_BATCH], uint32_t thresh) {
#if defined(__AVX512BW__) && defined(__BMI2__)
    _Static_assert(PHILOX_BATCH == 16, "one 512-bit vector of words per lane");
    __m512i th = _mm512_set1_epi32((int)thresh);
    uint64_t bits = 0;
    for (int lane = 0; lane < 4; lane++) {
        __mmask16 ge = _mm512_cmpge_epu32_mask(_mm512_loadu_si512(out[lane]), th);
        bits |= _pdep_u64((uint64_t)ge, 0x1111111111111111ull << lane);
    }
    _mm512_storeu_si512(dst, _mm512_maskz_set1_epi8(bits, 1));
#else
    for (int k = 0; k < PHILOX_BATCH; k++)
        for (int lane = 0; lane < 4; lane++) dst[4 * k + lane] = out[lane][k] >= thresh;
#endif
}

void dropout_mask_run(uint8_t *keep, DropoutSite site, uint32_t sample, uint64_t first, size_t count) {
    uint32_t thresh = dropout_keep_threshold(site.p);
    uint64_t end = first + count;
    uint64_t g = first / 4;
    uint32_t c3 = dropout_counter_word3(site);
    // Whole batches of 16 blocks (64 elements) inside [first, end); the ragged ends one block at a time.
    uint64_t gb = (first + 3) / 4;
    if (g < gb) {
        philox_ctr ctr = {{(uint32_t)g, sample, site.step, c3}};
        philox_ctr r = philox4x32_10(ctr, site.key);
        for (int lane = 0; lane < 4; lane++) {
            uint64_t idx = g * 4 + (uint64_t)lane;
            if (idx >= first && idx < end) keep[idx - first] = r.v[lane] >= thresh;
        }
        g = gb;
    }
    uint32_t out[4][PHILOX_BATCH];
    while ((g + PHILOX_BATCH) * 4 <= end && (uint32_t)g <= UINT32_MAX - PHILOX_BATCH) {
        philox_batch(out, g, sample, site.step, c3, site.key);
        store_keep(keep + (g * 4 - first), out, thresh);
        g += PHILOX_BATCH;
    }
    while (g * 4 < end) {
        philox_ctr ctr = {{(uint32_t)g, sample, site.step, c3}};
        philox_ctr r = philox4x32_10(ctr, site.key);
        for (int lane = 0; lane < 4; lane++) {
            uint64_t idx = g * 4 + (uint64_t)lane;
            if (idx >= first && idx < end) keep[idx - first] = r.v[lane] >= thresh;
        }
        g++;
    }
}

void dropout_mask_sbw(uint8_t *keep, DropoutSite site, int s0, int s, int b, int w, uint32_t sample0) {
#pragma omp parallel for schedule(static)
    for (int row = 0; row < s * b; row++) {
        int si = s0 + row / b, bi = row % b;
        dropout_mask_run(keep + (size_t)row * w, site, sample0 + (uint32_t)bi, (uint64_t)si * (uint64_t)w, (size_t)w);
    }
}

void dropout_mask_cols(uint8_t *keep, DropoutSite site, int r0, int rows, int b, int w, int W, int c0,
                       uint32_t sample0) {
#pragma omp parallel for schedule(static)
    for (int row = 0; row < rows; row++) {
        int si = (r0 + row) / b, bi = (r0 + row) % b;
        dropout_mask_run(keep + (size_t)row * w, site, sample0 + (uint32_t)bi, (uint64_t)si * (uint64_t)W + (uint64_t)c0,
                         (size_t)w);
    }
}

void dropout_residual_forward(float *out, const float *res, const float *y, const float *bias,
                              const uint8_t *keep, float p, int n, int w) {
    float scale = 1.0f / (1.0f - p);
    // The NULL tests stay outside the loops, so that each inner loop vectorises (a conditional load
    // through a NULL pointer cannot be, and an if-converted one costs a microcode assist per element).
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        size_t o = (size_t)r * w;
        const float *yr = y + o, *rr = res + o;
        float *outr = out + o;
        if (keep && bias) {
            const uint8_t *kr = keep + o;
#pragma omp simd
            for (int c = 0; c < w; c++) {
                float v = yr[c] + bias[c];
                outr[c] = rr[c] + (kr[c] ? v * scale : 0.0f);
            }
        } else if (keep) {
            const uint8_t *kr = keep + o;
#pragma omp simd
            for (int c = 0; c < w; c++) outr[c] = rr[c] + (kr[c] ? yr[c] * scale : 0.0f);
        } else if (bias) {
#pragma omp simd
            for (int c = 0; c < w; c++) outr[c] = rr[c] + (yr[c] + bias[c]);
        } else {
#pragma omp simd
            for (int c = 0; c < w; c++) outr[c] = rr[c] + yr[c];
        }
    }
}

void dropout_residual_inverse(float *out, const float *res, const float *y, const float *bias,
                              const uint8_t *keep, float p, int n, int w) {
    float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        size_t o = (size_t)r * w;
        const float *yr = y + o, *rr = res + o;
        const uint8_t *kr = keep ? keep + o : NULL;
        float *outr = out + o;
#pragma omp simd
        for (int c = 0; c < w; c++) {
            float v = yr[c] + (bias ? bias[c] : 0.0f);   // the forward's branch value, then subtracted
            outr[c] = rr[c] - (kr ? (kr[c] ? v * scale : 0.0f) : v);
        }
    }
}

void dropout_apply(float *x, const uint8_t *keep, float p, size_t count) {
    float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < count; i++) x[i] = keep[i] ? x[i] * scale : 0.0f;
}

void dropout_backward(float *dy, const float *dout, const uint8_t *keep, float p, size_t count) {
    float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < count; i++) dy[i] = keep[i] ? dout[i] * scale : 0.0f;
}
