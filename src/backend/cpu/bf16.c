#include "backend/cpu/bf16.h"

void bf16_round(float *x, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = bf16_to_f32(bf16_from_f32(x[i]));
}

void bf16_pack(uint16_t *dst, const float *src, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = bf16_from_f32(src[i]);
}

void bf16_unpack(float *dst, const uint16_t *src, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}

void bf16_pack_rows(uint16_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        uint16_t *d = dst + (size_t)r * ld_dst;
        const float *x = src + (size_t)r * ld_src;
        for (int c = 0; c < cols; c++) d[c] = bf16_from_f32(x[c]);
    }
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
