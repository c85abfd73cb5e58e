#include "backend/cpu/gelu.h"
#include "backend/cpu/bf16.h"
#include <math.h>
#include <stdint.h>
#include "backend/cpu/fastmath.h"

#define GELU_K 0.7978845608028654f  // sqrt(2/pi)
#define GELU_C 0.044715f

float gelu_scalar(float x) {
    return 0.5f * x * (1.0f + ctron_tanhf(GELU_K * (x + GELU_C * x * x * x)));
}

void bias_gelu_forward(float *y, float *x, const float *bias, int n, int cols, int round_bf16) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        float *xr = x + (size_t)r * cols, *yr = y + (size_t)r * cols;
        if (round_bf16) {
#pragma omp simd
            for (int c = 0; c < cols; c++) {
                float v = bf16_to_f32(bf16_from_f32(xr[c] + bias[c]));
                xr[c] = v;
                yr[c] = bf16_to_f32(bf16_from_f32(gelu_scalar(v)));
            }
        } else {
#pragma omp simd
            for (int c = 0; c < cols; c++) {
                float v = xr[c] + bias[c];
                xr[c] = v;
                yr[c] = gelu_scalar(v);
            }
        }
    }
}

void gelu_backward(float *dx, const float *dy, const float *x, size_t count) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < count; i++) {
        float v = x[i];
        float t = ctron_tanhf(GELU_K * (v + GELU_C * v * v * v));
        float dt = GELU_K * (1.0f + 3.0f * GELU_C * v * v) * (1.0f - t * t);
        dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * dt);
    }
}

// Tempo's in-place GeLU. GeLU falls on (−∞, x_min] and rises on [x_min, ∞), so the output and the
// side of x_min (one bit) determine the input.
#define GELU_XMIN (-0.75246141f)   // argmin of the tanh-form GeLU (f(x_min) = −0.170041)

static inline __attribute__((always_inline)) float gelu_slope(float v) {
    float t = ctron_tanhf(GELU_K * (v + GELU_C * v * v * v));
    float dt = GELU_K * (1.0f + 3.0f * GELU_C * v * v) * (1.0f - t * t);
    return 0.5f * (1.0f + t) + 0.5f * v * dt;
}

void gelu_branch_pack(uint8_t *bits, const float *x, size_t count) {
    size_t nbytes = (count + 7) / 8;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < nbytes; i++) {
        uint8_t b = 0;
        for (size_t j = 0; j < 8 && 8 * i + j < count; j++) b |= (uint8_t)((x[8 * i + j] >= GELU_XMIN) << j);
        bits[i] = b;
    }
}

// The x on the given side of x_min with gelu(x) = y: Newton's method kept inside a bracket that
// holds the root (bisection when a step leaves it). On the falling side x below −12 gives gelu(x)
// = −0 in fp32, so that is where the bracket starts.
static float gelu_invert(float y, int right) {
    float lo, hi, x;
    if (right) {
        if (y <= -0.17004075f) return GELU_XMIN;
        lo = GELU_XMIN;
        hi = y > 0.0f ? y + 1.0f : 0.0f;
        x = y > 0.0f ? y : 0.5f * (lo + hi);
    } else {
        if (y >= 0.0f) return -12.0f;
        if (y <= -0.17004075f) return GELU_XMIN;
        lo = -12.0f;
        hi = GELU_XMIN;
        // the tail: gelu(x) ≈ −φ(x) (Mills' ratio), so x ≈ −√(−2 ln(−y·√(2π))); without this start
        // Newton's first steps leave the bracket and bisection takes ~25 halvings
        float t = -2.0f * logf(-y * 2.5066283f);
        x = t > 0.0f ? -sqrtf(t) : 0.5f * (lo + hi);
        if (!(x > lo && x < hi)) x = 0.5f * (lo + hi);
    }
    for (int it = 0; it < 24; it++) {
        // GeLU and its slope from one tanh
        float t = ctron_tanhf(GELU_K * (x + GELU_C * x * x * x));
        float g = 0.5f * x * (1.0f + t) - y;
        float d = 0.5f * (1.0f + t) + 0.5f * x * GELU_K * (1.0f + 3.0f * GELU_C * x * x) * (1.0f - t * t);
        if (fabsf(g) <= 1.2e-7f * (fabsf(y) + fabsf(x))) return x;   // y within GeLU's own rounding
        // on the rising side g < 0 means x is too small; on the falling side, too large
        if ((g < 0.0f) == (right != 0)) lo = x; else hi = x;
        float next = d != 0.0f ? x - g / d : 0.5f * (lo + hi);
        if (!(next >= lo && next <= hi)) next = 0.5f * (lo + hi);
        if (fabsf(next - x) <= 2e-7f * (1.0f + fabsf(x))) return next;   // ~2 ulp: fp32 goes no further
        x = next;
    }
    return x;
}

// ln x for x > 0 to ~1.4e-4 (a starting point, not a result): the exponent plus a quartic in the
// mantissa, branch-free so that the loop below vectorises (libm's logf is a call).
static inline __attribute__((always_inline)) float rough_logf(float x) {
    union { float f; uint32_t u; } v = {x};
    float e = (float)((int32_t)(v.u >> 23) - 127);
    v.u = (v.u & 0x007FFFFFu) | 0x3F800000u;   // the mantissa in [1, 2)
    float m = v.f;
    float p = fmaf(fmaf(fmaf(fmaf(-0.0548682564f, m, 0.435901975f), m, -1.44258773f), m, 2.79237665f), m, -1.7306818f);
    return fmaf(e, 0.69314718f, p);
}

// The inversion as GELU_NEWTON_STEPS safeguarded Newton steps, branch-free (selects only), so that
// a loop of them vectorises: the same start, bracket and bisection fallback as gelu_invert. *done
// says whether the last step moved less than ~2 ulp (or hit the root); the others are redone by
// gelu_invert (near x_min, where GeLU′ ≈ 0, Newton is slow).
#ifndef GELU_NEWTON_STEPS
#define GELU_NEWTON_STEPS 8
#endif

// One safeguarded Newton step on the side `right` of x_min, as selects.
// always_inline: at -O2 gcc would call it, and a call keeps the loop from vectorising
static inline __attribute__((always_inline)) void newton_step(float y, int right, float *x, float *lo, float *hi, int *conv) {
    float v = *x;
    float t = ctron_tanhf(GELU_K * (v + GELU_C * v * v * v));
    float g = 0.5f * v * (1.0f + t) - y;
    float d = 0.5f * (1.0f + t) + 0.5f * v * GELU_K * (1.0f + 3.0f * GELU_C * v * v) * (1.0f - t * t);
    int below = (g < 0.0f) == (right != 0);
    float l = below ? v : *lo, h = below ? *hi : v;
    // every value computed before it is chosen, so the choices are selects, not branches
    float mid = 0.5f * (l + h), newton = v - g / d;   // d = 0: ±inf or NaN, rejected by the bracket test
    float next = ((d != 0.0f) & (newton >= l) & (newton <= h)) ? newton : mid;
    // settled: the step is below ~2 ulp, or GeLU(x) is y within the rounding of computing GeLU in
    // fp32 (1 + tanh loses up to an ulp of 1, times x/2): in the left tail y holds few digits and Newton
    // only jitters, while GeLU′ ≈ 0 there makes x's last digits irrelevant to the gradient
    int at_root = fabsf(g) <= 1.2e-7f * (fabsf(y) + fabsf(v));
    int step_done = at_root | (fabsf(next - v) <= 2e-7f * (1.0f + fabsf(v)));
    *x = (*conv | at_root) ? v : next;
    *lo = l;
    *hi = h;
    *conv |= step_done;
}

static inline __attribute__((always_inline)) float gelu_invert_fixed(float y, int right, int *done) {
    int flat = y <= -0.17004075f, left_zero = !right & (y >= 0.0f);
    float lo = right ? GELU_XMIN : -12.0f;
    float y1 = y + 1.0f;
    float hi = right ? (y > 0.0f ? y1 : 0.0f) : GELU_XMIN;
    float arg = -y * 2.5066283f;   // (ternaries, not fmaxf: gcc does not vectorise that call here)
    float tail = -2.0f * rough_logf(arg > 1e-30f ? arg : 1e-30f);   // the left tail's start (gelu_invert)
    float mid = 0.5f * (lo + hi), tail_x = -sqrtf(tail > 0.0f ? tail : 0.0f);
    float x = right ? (y > 0.0f ? y : mid) : (tail > 0.0f ? tail_x : mid);
    x = (((x > lo) & (x < hi)) | (right & (y > 0.0f))) ? x : mid;
    int conv = 0;
    // unrolled in full: a loop left here would keep the outer loop from vectorising
#pragma GCC unroll 16
    for (int it = 0; it < GELU_NEWTON_STEPS; it++) newton_step(y, right, &x, &lo, &hi, &conv);
    *done = conv | flat | left_zero;
    return flat ? GELU_XMIN : left_zero ? -12.0f : x;
}

void gelu_backward_from_output(float *dx, const float *dy, const float *y, const uint8_t *bits, size_t count) {
    enum { BLOCK = 256 };   // a multiple of 8: blocks start on a byte of branch bits
    size_t blocks = (count + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < blocks; k++) {
        size_t i0 = k * BLOCK, n = count - i0 < BLOCK ? count - i0 : BLOCK;
        const float *yb = y + i0, *dyb = dy + i0;
        float *dxb = dx + i0, x[BLOCK];
        int right[BLOCK], done[BLOCK];
        for (size_t j = 0; j < n; j++) right[j] = (bits[(i0 + j) / 8] >> ((i0 + j) % 8)) & 1;
#pragma omp simd
        for (size_t j = 0; j < n; j++) x[j] = gelu_invert_fixed(yb[j], right[j], &done[j]);
        for (size_t j = 0; j < n; j++)   // the few (~1 %) the fixed steps did not settle
            if (!done[j]) x[j] = gelu_invert(yb[j], right[j]);
#pragma omp simd
        for (size_t j = 0; j < n; j++) dxb[j] = dyb[j] * gelu_slope(x[j]);
    }
}
