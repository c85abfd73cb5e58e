#include "backend/cpu/rope.h"
#include <math.h>
#include <stddef.h>
#include "backend/cpu/bf16.h"
#include "util/common.h"

// YaRN (_compute_yarn_parameters): the correction range in Python doubles, the ramp and the blend in float32
// tensor arithmetic (a Python scalar entering a float32 operation as float32), operation by operation.
static float yarn_inv_freq(int j, int d, float theta, const RopeScaling *sc, float inv_extrapolation, float pos_freq) {
    const double two_pi = 6.283185307179586, orig = (double)sc->original_max_positions, lb = log((double)theta);
    double low = (double)d * log(orig / ((double)sc->beta_fast * two_pi)) / (2.0 * lb);
    double high = (double)d * log(orig / ((double)sc->beta_slow * two_pi)) / (2.0 * lb);
    if (sc->truncate) low = floor(low), high = ceil(high);
    if (low < 0.0) low = 0.0;                             // max(low, 0)
    if (high > (double)(d - 1)) high = (double)(d - 1);   // min(high, dim − 1)
    if (low == high) high += 0.001;                       // linear_ramp_factor's guard against a singularity
    float ramp = ((float)j - (float)low) / (float)(high - low);
    ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
    float extrapolation = 1.0f - ramp;                    // inv_freq_extrapolation_factor
    float inv_interpolation = 1.0f / (sc->factor * pos_freq);
    return inv_interpolation * (1.0f - extrapolation) + inv_extrapolation * extrapolation;
}

// Dynamic NTK's base for a sequence of `positions` (_compute_dynamic_ntk_parameters): past max_position_embeddings M
// the forward's seq_len is a tensor, so F·T/M − (F − 1) and its power are float32 tensor operations; up to M it is
// the init's, in Python doubles (where F·M/M − (F − 1) is 1 up to rounding). D > 2 (rope_table checks).
static float dynamic_base(float theta, const RopeScaling *sc, int d, int positions) {
    double F = (double)sc->factor, M = (double)sc->original_max_positions, x = (double)d / (double)(d - 2);
    if (positions <= sc->original_max_positions) return (float)((double)theta * pow(F * M / M - (F - 1.0), x));
    float grown = (float)F * (float)positions / (float)M - (float)(F - 1.0);
    return theta * powf(grown, (float)x);
}

// transformers (modeling_rope_utils): the default inv_freq, then _compute_linear_scaling_rope_parameters'
// inv_freq / factor, _compute_llama3_parameters' or _compute_longrope_parameters' float32 tensor arithmetic,
// operation by operation (its Python scalars enter as float32; -std=c11 contracts nothing into an fma).
float rope_inv_freq(int j, int d, float theta, const RopeScaling *sc, int positions) {
    float e = (float)(2 * j) / (float)d;
    if (sc && sc->type == ROPE_DYNAMIC) theta = dynamic_base(theta, sc, d, positions);
    float base = (float)pow((double)theta, (double)e);
    if (sc && sc->type == ROPE_LONGROPE)   // 1 / (ext_j · θ^(2j/d))
        return 1.0f / ((rope_long_factors(sc, positions) ? sc->long_factor[j] : sc->short_factor[j]) * base);
    float inv = 1.0f / base;
    if (!sc || sc->type == ROPE_PLAIN || sc->type == ROPE_DYNAMIC) return inv;
    if (sc->type == ROPE_LINEAR) return inv / sc->factor;
    if (sc->type == ROPE_YARN) return yarn_inv_freq(j, d, theta, sc, inv, base);
    float orig = (float)sc->original_max_positions;
    float low_wavelen = (float)((double)sc->original_max_positions / (double)sc->low_freq_factor);
    float high_wavelen = (float)((double)sc->original_max_positions / (double)sc->high_freq_factor);
    float wavelen = (float)6.283185307179586 / inv;   // Python's 2 * math.pi, as a float32 operand
    if (wavelen > low_wavelen) return inv / sc->factor;   // low frequency: interpolated by factor
    if (wavelen < high_wavelen) return inv;               // high frequency: kept
    float smooth = (orig / wavelen - sc->low_freq_factor) /
                   (float)((double)sc->high_freq_factor - (double)sc->low_freq_factor);
    float a = (1.0f - smooth) * inv;
    return a / sc->factor + smooth * inv;
}

void rope_table(float *cs, int positions, int d, float theta, const RopeScaling *sc) {
    int half = d / 2;
    if (sc && sc->type == ROPE_LONGROPE && sc->n_factors != half)
        ctron_fatal("rope_table: longrope has %d factors for heads of %d (expected d/2 = %d)", sc->n_factors, d, half);
    if (sc && sc->type == ROPE_DYNAMIC && d <= 2)
        ctron_fatal("rope_table: dynamic NTK scaling needs more than 2 rotated dims (its exponent is D/(D-2)), "
                    "got %d", d);
    // longrope's and yarn's cos and sin × attention_factor (a Python float times a float32 tensor: fp32 product)
    float scale = sc && (sc->type == ROPE_LONGROPE || sc->type == ROPE_YARN) ? (float)sc->attention_factor : 1.0f;
    for (int j = 0; j < half; j++) {
        float inv = rope_inv_freq(j, d, theta, sc, positions);
        for (int p = 0; p < positions; p++) {
            float a = (float)p * inv;
            cs[(size_t)p * d + j] = (float)cos((double)a) * scale;
            cs[(size_t)p * d + half + j] = (float)sin((double)a) * scale;
        }
    }
}

void rope_check_positions(const char *op, int positions, int rows, int b, int d, int rot, int pos0) {
    if (rot <= 0 || rot % 2 || rot > d)
        ctron_fatal("%s: %d rotary dims of heads of %d: expected an even number from 2 to the head's (pairs j, j + rot/2)",
                    op, rot, d);
    if (b <= 0) ctron_fatal("%s: micro-batch %d must be positive", op, b);
    if (rows > 0 && (pos0 < 0 || pos0 + (rows - 1) / b >= positions))
        ctron_fatal("%s: positions %d .. %d are outside the table's 0 .. %d", op, pos0, pos0 + (rows - 1) / b,
                    positions - 1);
}

// Dims rot .. d−1 of a head, which partial rotary passes through: copied (rounded to bf16 when asked).
static void pass_through(float *y, const float *x, int n, int round_bf16) {
    if (round_bf16)
        for (int j = 0; j < n; j++) y[j] = bf16_to_f32(bf16_from_f32(x[j]));
    else if (y != x)
        for (int j = 0; j < n; j++) y[j] = x[j];
}

// sign +1: the forward rotation, −1: its transpose. Heads d apart, the first rot dims of each rotated
// (pairs j, j + rot/2; the table's rows rot wide), the rest passed through.
static void rotate_rows(float *y, const float *x, int ld, const float *cs, int rows, int b, int heads, int d, int rot,
                        int pos0, float sign, int round_bf16) {
    int half = rot / 2;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *cr = cs + (size_t)(pos0 + r / b) * rot, *sr = cr + half;
        for (int hd = 0; hd < heads; hd++) {
            const float *x0 = x + (size_t)r * ld + (size_t)hd * d, *x1 = x0 + half;
            float *y0 = y + (size_t)r * ld + (size_t)hd * d, *y1 = y0 + half;
            if (rot < d) pass_through(y0 + rot, x0 + rot, d - rot, round_bf16);
            if (round_bf16) {
#pragma omp simd
                for (int j = 0; j < half; j++) {
                    float a, c;
                    rope_rotate(x0[j], x1[j], cr[j], sign * sr[j], &a, &c);
                    y0[j] = bf16_to_f32(bf16_from_f32(a));
                    y1[j] = bf16_to_f32(bf16_from_f32(c));
                }
            } else {
#pragma omp simd
                for (int j = 0; j < half; j++) {
                    float a, c;
                    rope_rotate(x0[j], x1[j], cr[j], sign * sr[j], &a, &c);
                    y0[j] = a;
                    y1[j] = c;
                }
            }
        }
    }
}

void rope_forward(float *y, const float *x, int ld, const float *cs, int positions, int rows, int b, int heads,
                  int d, int rot, int pos0, int round_bf16) {
    rope_check_positions("rope_forward", positions, rows, b, d, rot, pos0);
    rotate_rows(y, x, ld, cs, rows, b, heads, d, rot, pos0, 1.0f, round_bf16);
}

void rope_backward(float *dx, const float *dy, int ld, const float *cs, int positions, int rows, int b, int heads,
                   int d, int rot, int pos0) {
    rope_check_positions("rope_backward", positions, rows, b, d, rot, pos0);
    rotate_rows(dx, dy, ld, cs, rows, b, heads, d, rot, pos0, -1.0f, 0);
}
