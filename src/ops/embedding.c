#include "ops/embedding.h"
#include <stddef.h>

void embedding_forward(float *x, const int32_t *tokens, const float *wte, const float *wpe, int s, int b, int h) {
#pragma omp parallel for schedule(static)
    for (int row = 0; row < s * b; row++) {
        const float *te = wte + (size_t)tokens[row] * h, *pe = wpe + (size_t)(row / b) * h;
        float *xr = x + (size_t)row * h;
        for (int c = 0; c < h; c++) xr[c] = te[c] + pe[c];
    }
}

void embedding_backward(float *dwte, float *dwpe, const float *dx, const int32_t *tokens, int s, int b, int h) {
    enum { CHUNK = 64 };
    int nchunks = (h + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nchunks; ch++) {
        int c0 = ch * CHUNK, c1 = c0 + CHUNK < h ? c0 + CHUNK : h;
        for (int row = 0; row < s * b; row++) {
            const float *g = dx + (size_t)row * h;
            float *te = dwte + (size_t)tokens[row] * h, *pe = dwpe + (size_t)(row / b) * h;
            for (int c = c0; c < c1; c++) { te[c] += g[c]; pe[c] += g[c]; }
        }
    }
}
