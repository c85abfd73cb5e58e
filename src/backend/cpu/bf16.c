#include "backend/cpu/bf16.h"
#include "backend/cpu/bf16_convert.h"

void bf16_round(float *x, size_t n) {
    enum { CHUNK = 1 << 14 };
    size_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) bf16_round_row(x + c * CHUNK, c + 1 < chunks ? CHUNK : n - c * CHUNK);
}

void bf16_pack(uint16_t *dst, const float *src, size_t n) { cvt_f32_to_bf16(dst, src, n); }

void bf16_pack_round(uint16_t *dst, float *x, size_t n) {
    enum { CHUNK = 1 << 14 };
    size_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        float *xc = x + c * CHUNK;
        uint16_t *dc = dst + c * CHUNK;
        size_t len = c + 1 < chunks ? CHUNK : n - c * CHUNK;
#pragma omp simd
        for (size_t i = 0; i < len; i++) {
            uint16_t b = bf16_from_f32(xc[i]);
            dc[i] = b;
            xc[i] = bf16_to_f32(b);
        }
    }
}

void bf16_unpack(float *dst, const uint16_t *src, size_t n) { cvt_bf16_to_f32(dst, src, n); }

void bf16_pack_rows(uint16_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols) {
    cvt_f32_to_bf16_2d(dst, (size_t)ld_dst, src, (size_t)ld_src, (size_t)rows, (size_t)cols);
}

void mask_pack_bits(uint8_t *bits, const uint8_t *keep, size_t n) {
    size_t nbytes = mask_bits_bytes(n);
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < nbytes; j++) {
        uint8_t byte = 0;
        for (size_t k = 0; k < 8 && j * 8 + k < n; k++) byte |= (uint8_t)((keep[j * 8 + k] & 1u) << k);
        bits[j] = byte;
    }
}

void mask_unpack_bits(uint8_t *keep, const uint8_t *bits, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) keep[i] = (bits[i / 8] >> (i % 8)) & 1u;
}
