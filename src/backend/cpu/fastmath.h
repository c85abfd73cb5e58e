// Branch-free exp and tanh for the elementwise kernels, so their loops vectorise (libm's expf and
// tanhf are calls the compiler cannot vectorise). Cephes' expf: range reduction by ln 2 in two parts
// and a degree-6 polynomial, relative error ≈ 2 ulp; deterministic, the same on every thread.
#ifndef CTRON_FASTMATH_H
#define CTRON_FASTMATH_H
#include <math.h>
#include <string.h>
#include <stdint.h>
#include "util/hd.h"

CT_HD float ctron_expf(float x) {
    // keeps 2^k a normal float (selects, not fminf/fmaxf: gcc vectorises those calls only with
    // -ffinite-math-only; a NaN stays NaN here instead of becoming −87)
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float k = rintf(x * 1.44269504088896341f);
    float r = fmaf(k, -0.693359375f, x);
    r = fmaf(k, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r) + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

// tanh(x) = 1 − 2/(e^{2x} + 1): exact limits ±1, absolute error ~1e-7.
CT_HD float ctron_tanhf(float x) { return 1.0f - 2.0f / (ctron_expf(2.0f * x) + 1.0f); }
#endif
