#include "io/st_convert.h"
#include <math.h>
#include <string.h>

float st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);          // inf, or NaN with its payload
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);  // normal: rebias 15 → 127
    } else if (man == 0) {
        bits = sign;                                      // ±0
    } else {                                              // subnormal: man · 2^-24, normal as a float
        int shift = 0;
        while (!(man & 0x400u)) { man <<= 1; shift++; }
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

int st_is_float(StDtype d) { return d == ST_F32 || d == ST_BF16 || d == ST_F16; }

static long first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return (long)i;
    return -1;
}

long st_to_f32(const StTensor *t, size_t first, size_t n, float *dst) {
    const uint8_t *src = (const uint8_t *)t->data + first * st_dtype_size(t->dtype);
    if (t->dtype == ST_F32) {
        memcpy(dst, src, n * sizeof(float));
    } else {
        // 16-bit elements, read through an aligned staging block (the mapping may be unaligned)
        enum { BLOCK = 4096 };
        uint16_t h[BLOCK];
        for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
            size_t k = n - i0 < BLOCK ? n - i0 : BLOCK;
            memcpy(h, src + 2 * i0, 2 * k);
            if (t->dtype == ST_BF16) {
                for (size_t i = 0; i < k; i++) {
                    uint32_t bits = (uint32_t)h[i] << 16;
                    memcpy(&dst[i0 + i], &bits, sizeof bits);
                }
            } else {
                for (size_t i = 0; i < k; i++) dst[i0 + i] = st_f16_to_f32(h[i]);
            }
        }
    }
    return first_nonfinite(dst, n);
}

long st_find_nonfinite(const StTensor *t) {
    const uint8_t *p = t->data;
    size_t n = t->nbytes / st_dtype_size(t->dtype);
    for (size_t i = 0; i < n; i++) {   // exponent all ones: inf or NaN
        if (t->dtype == ST_F32) {
            uint32_t b;
            memcpy(&b, p + 4 * i, 4);
            if ((b & 0x7f800000u) == 0x7f800000u) return (long)i;
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            uint16_t mask = t->dtype == ST_BF16 ? 0x7f80u : 0x7c00u;
            if ((h & mask) == mask) return (long)i;
        }
    }
    return -1;
}
