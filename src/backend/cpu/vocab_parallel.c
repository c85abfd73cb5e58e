#include "backend/cpu/vocab_parallel.h"
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "backend/cpu/bf16.h"
#include "backend/cpu/fastmath.h"

void embedding_vocab_forward(float *x, const int32_t *tokens, const float *wte, int v0, int vl, int n, int h) {
#pragma omp parallel for schedule(static)
    for (int row = 0; row < n; row++) {
        float *xr = x + (size_t)row * h;
        int local = tokens[row] - v0;
        if (local >= 0 && local < vl) memcpy(xr, wte + (size_t)local * h, (size_t)h * sizeof(float));
        else memset(xr, 0, (size_t)h * sizeof(float));
    }
}

void embedding_vocab_forward16(float *x, const int32_t *tokens, const uint16_t *wte16, int v0, int vl, int n, int h) {
#pragma omp parallel for schedule(static)
    for (int row = 0; row < n; row++) {
        float *xr = x + (size_t)row * h;
        int local = tokens[row] - v0;
        if (local >= 0 && local < vl) bf16_unpack(xr, wte16 + (size_t)local * h, (size_t)h);
        else memset(xr, 0, (size_t)h * sizeof(float));
    }
}

void embedding_add_positions(float *x, const float *wpe, int s0, int s, int b, int h) {
#pragma omp parallel for schedule(static)
    for (int row = 0; row < s * b; row++) {
        const float *pe = wpe + (size_t)(s0 + row / b) * h;
        float *xr = x + (size_t)row * h;
        for (int c = 0; c < h; c++) xr[c] += pe[c];
    }
}

enum { CHUNK = 64 };

void embedding_vocab_backward(float *dwte, const float *dx, const int32_t *tokens, int v0, int vl, int n, int h) {
    int nchunks = (h + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nchunks; ch++) {
        int c0 = ch * CHUNK, c1 = c0 + CHUNK < h ? c0 + CHUNK : h;
        for (int row = 0; row < n; row++) {
            int local = tokens[row] - v0;
            if (local < 0 || local >= vl) continue;
            const float *g = dx + (size_t)row * h;
            float *te = dwte + (size_t)local * h;
            for (int c = c0; c < c1; c++) te[c] += g[c];
        }
    }
}

void embedding_positions_backward(float *dwpe, const float *dx, int s0, int s, int b, int h) {
    int nchunks = (h + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nchunks; ch++) {
        int c0 = ch * CHUNK, c1 = c0 + CHUNK < h ? c0 + CHUNK : h;
        for (int row = 0; row < s * b; row++) {
            const float *g = dx + (size_t)row * h;
            float *pe = dwpe + (size_t)(s0 + row / b) * h;
            for (int c = c0; c < c1; c++) pe[c] += g[c];
        }
    }
}

// Columns of the rank that belong to the model.
static int valid_cols(int vl, int v0, int n_valid) {
    int k = n_valid - v0;
    return k < 0 ? 0 : k < vl ? k : vl;
}

void crossentropy_vocab_partial(float *part, const float *logits, const int32_t *targets, int n, int vl, int v0,
                                int n_valid) {
    int k = valid_cols(vl, v0, n_valid);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        const float *z = logits + (size_t)r * vl;
        float m = -INFINITY, sum = 0.0f;
#pragma omp simd reduction(max : m)
        for (int c = 0; c < k; c++) m = z[c] > m ? z[c] : m;
        if (k > 0) {
#pragma omp simd reduction(+ : sum)
            for (int c = 0; c < k; c++) sum += ctron_expf(z[c] - m);
        }
        int local = targets[r] - v0;
        part[3 * (size_t)r] = k > 0 ? m : 0.0f;
        part[3 * (size_t)r + 1] = sum;
        part[3 * (size_t)r + 2] = local >= 0 && local < k ? z[local] : 0.0f;
    }
}

double crossentropy_vocab_combine(float *lse, float *row_loss, const float *parts, int t, int n) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        float m = -INFINITY, target = 0.0f;
        for (int q = 0; q < t; q++) {
            const float *p = parts + ((size_t)q * n + r) * 3;
            if (p[1] > 0.0f && p[0] > m) m = p[0];
            target += p[2];
        }
        float sum = 0.0f;
        for (int q = 0; q < t; q++) {
            const float *p = parts + ((size_t)q * n + r) * 3;
            if (p[1] > 0.0f) sum += p[1] * ctron_expf(p[0] - m);
        }
        lse[r] = m + logf(sum);
        row_loss[r] = lse[r] - target;
    }
    double total = 0.0;
    for (int r = 0; r < n; r++) total += row_loss[r];
    return total;
}

void crossentropy_vocab_backward(float *logits, const float *lse, const int32_t *targets, int n, int vl, int v0,
                                 int n_valid, float grad_scale) {
    int k = valid_cols(vl, v0, n_valid);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        float *z = logits + (size_t)r * vl;
        float l = lse[r];
#pragma omp simd
        for (int c = 0; c < k; c++) z[c] = ctron_expf(z[c] - l) * grad_scale;
        for (int c = k; c < vl; c++) z[c] = 0.0f;
        int local = targets[r] - v0;
        if (local >= 0 && local < k) z[local] -= grad_scale;
    }
}
