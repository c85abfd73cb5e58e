#include "backend/cpu/bf16_convert.h"
#include <omp.h>
#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif

// Below this many elements a conversion runs on one thread: waking the team costs more than it saves.
enum { PAR_MIN = 1 << 16, CHUNK = 1 << 14 };

// The scalar rule of backend/cpu/bf16.h written without a branch, so that the compiler vectorises it.
static inline uint16_t f32_bits_to_bf16(uint32_t u) {
    uint32_t nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet = (u >> 16) | 0x40u;
    return (uint16_t)(nan ? quiet : rounded);
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
// 16 lanes of the scalar rule in integer arithmetic (AVX-512F/BW only).
static inline __m256i cvt16_int(__m512i u) {
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

static inline __m256i cvt16(const float *src) {
    __m512 x = _mm512_loadu_ps(src);
#ifdef __AVX512BF16__
    // VCVTNEPS2BF16 rounds to nearest even and quietens NaN exactly as the scalar rule, but flushes
    // denormal inputs to zero: lanes with a zero exponent and nonzero mantissa take the integer path.
    __m512i u = _mm512_castps_si512(x);
    __m512i exp = _mm512_and_si512(u, _mm512_set1_epi32(0x7F800000));
    __mmask16 denorm = _mm512_cmpeq_epi32_mask(exp, _mm512_setzero_si512()) &
                       _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x007FFFFF));
    __m256i r = (__m256i)_mm512_cvtneps_pbh(x);
    return denorm ? cvt16_int(u) : r;
#else
    return cvt16_int(_mm512_castps_si512(x));
#endif
}
#endif

static void to_bf16_row(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(dst + i), cvt16(src + i));
    if (i < n) {   // the tail through masked loads: no scalar loop, no reading past the end
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512i u = _mm512_maskz_loadu_epi32(m, src + i);
        _mm256_mask_storeu_epi16(dst + i, m, cvt16_int(u));
        i = n;
    }
#endif
    for (; i < n; i++) {
        union { float f; uint32_t u; } v = {src[i]};
        dst[i] = f32_bits_to_bf16(v.u);
    }
}

static void to_f32_row(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_si512(dst + i, _mm512_slli_epi32(w, 16));
    }
#endif
    for (; i < n; i++) {
        union { uint32_t u; float f; } v = {(uint32_t)src[i] << 16};
        dst[i] = v.f;
    }
}

void bf16_round_row(float *x, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(cvt16(x + i));
        _mm512_storeu_si512(x + i, _mm512_slli_epi32(w, 16));
    }
#endif
    for (; i < n; i++) {
        union { float f; uint32_t u; } v = {x[i]};
        v.u = (uint32_t)f32_bits_to_bf16(v.u) << 16;
        x[i] = v.f;
    }
}

void cvt_f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    size_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t c = 0; c < chunks; c++) {
        size_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
        to_bf16_row(dst + i0, src + i0, len);
    }
}

void cvt_bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t c = 0; c < chunks; c++) {
        size_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
        to_f32_row(dst + i0, src + i0, len);
    }
}

void cvt_f32_to_bf16_2d(uint16_t *dst, size_t ld_dst, const float *src, size_t ld_src, size_t rows, size_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= PAR_MIN)
    for (size_t r = 0; r < rows; r++) to_bf16_row(dst + r * ld_dst, src + r * ld_src, cols);
}

void cvt_bf16_to_f32_2d(float *dst, size_t ld_dst, const uint16_t *src, size_t ld_src, size_t rows, size_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= PAR_MIN)
    for (size_t r = 0; r < rows; r++) to_f32_row(dst + r * ld_dst, src + r * ld_src, cols);
}
