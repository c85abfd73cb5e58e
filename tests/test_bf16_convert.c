// The array conversions against the scalar rule of backend/cpu/bf16.h, bit for bit: every bit pattern of a
// stride through all 2^32 (all of them with --exhaustive), and every special class (zeros, denormals,
// the rounding ties, the largest finite values, infinities, NaNs); odd lengths for the vector tails;
// strided 2-D views leaving the padding untouched; bf16 -> fp32 for all 65536 patterns.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/bf16_convert.h"
#include "check.h"
#include "backend/cpu/bf16.h"

static int compare(const uint32_t *bits, size_t n, uint16_t *out) {
    cvt_f32_to_bf16(out, (const float *)bits, n);
    for (size_t i = 0; i < n; i++) {
        union { uint32_t u; float f; } v = {bits[i]};
        if (out[i] != bf16_from_f32(v.f)) {
            CHECK(0, "0x%08x -> 0x%04x, scalar 0x%04x", bits[i], out[i], bf16_from_f32(v.f));
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    int exhaustive = argc > 1 && strcmp(argv[1], "--exhaustive") == 0;
    enum { N = 1 << 20 };
    uint32_t *bits = malloc(N * sizeof *bits);
    uint16_t *out = malloc(N * sizeof *out);
    // A stride through all bit patterns (odd, so every residue class of the low bits shows up).
    uint64_t step = exhaustive ? 1 : 4093, bad = 0;
    for (uint64_t start = 0; start < (1ull << 32) && !bad; start += (uint64_t)N * step) {
        size_t n = 0;
        for (uint64_t u = start; u < (1ull << 32) && n < N; u += step) bits[n++] = (uint32_t)u;
        bad += compare(bits, n, out);
    }
    CHECK(!bad, "strided sweep of the bit patterns (step %llu)", (unsigned long long)step);
    // Special classes, each with both signs: around 0 and the denormals, the rounding ties (low half
    // 0x8000 with even and odd bf16), the largest finite values (round up to inf), inf, NaNs.
    const uint32_t special[] = {0x00000000, 0x00000001, 0x00007FFF, 0x00008000, 0x00018000, 0x007FFFFF,
                                0x00800000, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x7F7F7FFF,
                                0x7F7F8000, 0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF,
                                0x7F810000, 0x7F80FFFF};
    size_t ns = 0;
    for (int rep = 0; rep < 3; rep++)   // 120 values: the specials land in vector lanes and in the tail
        for (size_t i = 0; i < sizeof special / sizeof *special; i++) {
            bits[ns++] = special[i];
            bits[ns++] = special[i] | 0x80000000u;
        }
    CHECK(!compare(bits, ns, out), "special values");
    // NaN stays NaN.
    for (size_t i = 0; i < ns; i++) {
        union { uint32_t u; float f; } v = {bits[i]};
        if (v.f != v.f) CHECK((out[i] & 0x7F80) == 0x7F80 && (out[i] & 0x7F), "NaN 0x%08x -> 0x%04x", bits[i], out[i]);
    }
    // Every length 0..40 (vector body, tail, both), at an odd offset.
    for (size_t n = 0; n <= 40; n++) {
        for (size_t i = 0; i < n + 1; i++) bits[i] = 0x3F800000u + (uint32_t)(i * 0x9E37u);
        CHECK(!compare(bits + 1, n, out + 1), "length %zu", n);
    }
    // bf16 -> fp32: all 65536 patterns, exact.
    uint16_t *h = malloc(65536 * sizeof *h);
    float *f = malloc(65536 * sizeof *f);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    cvt_bf16_to_f32(f, h, 65536);
    int ok = 1;
    for (uint32_t i = 0; i < 65536; i++) ok &= memcmp(&f[i], &(float){bf16_to_f32((uint16_t)i)}, 4) == 0;
    CHECK(ok, "bf16 -> fp32 on all 65536 patterns");
    // 2-D views: 37 x 29 out of a 37 x 41 fp32 source into a 37 x 33 bf16 destination; the padding
    // columns of the destination are untouched; and back.
    enum { R = 37, C = 29, LS = 41, LD = 33 };
    float *src = malloc(R * LS * sizeof *src), *back = malloc(R * LS * sizeof *back);
    uint16_t *dst = malloc(R * LD * sizeof *dst);
    for (int i = 0; i < R * LS; i++) src[i] = (float)i * 0.001f - 0.7f;
    for (int i = 0; i < R * LD; i++) dst[i] = 0xBEEF;
    for (int i = 0; i < R * LS; i++) back[i] = -1.0f;
    cvt_f32_to_bf16_2d(dst, LD, src, LS, R, C);
    cvt_bf16_to_f32_2d(back, LS, dst, LD, R, C);
    int ok2 = 1, pad = 1;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < LD; c++) {
            if (c < C) ok2 &= dst[r * LD + c] == bf16_from_f32(src[r * LS + c]) &&
                              back[r * LS + c] == bf16_to_f32(dst[r * LD + c]);
            else pad &= dst[r * LD + c] == 0xBEEF && (c >= LS || back[r * LS + c] == -1.0f);
        }
    CHECK(ok2, "2-D strided conversion both ways");
    CHECK(pad, "2-D conversion leaves the padding alone");
    free(bits), free(out), free(h), free(f), free(src), free(back), free(dst);
    return check_summary();
}
