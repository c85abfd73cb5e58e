#include "backend/cpu/embedding.h"
#include <limits.h>
#include <stddef.h>
#include "backend/cpu/vocab_parallel.h"

void embedding_forward(float *x, const int32_t *tokens, const float *wte, const float *wpe, int s, int b, int h) {
#pragma omp parallel for schedule(static)
    for (int row = 0; row < s * b; row++) {
        const float *te = wte + (size_t)tokens[row] * h, *pe = wpe + (size_t)(row / b) * h;
        float *xr = x + (size_t)row * h;
        for (int c = 0; c < h; c++) xr[c] = te[c] + pe[c];
    }
}

// The token and position gradients are independent sums: the vocabulary-parallel pair with one
// rank holding every row gives the same bits.
void embedding_backward(float *dwte, float *dwpe, const float *dx, const int32_t *tokens, int s, int b, int h) {
    embedding_vocab_backward(dwte, dx, tokens, 0, INT_MAX, s * b, h);
    embedding_positions_backward(dwpe, dx, 0, s, b, h);
}
