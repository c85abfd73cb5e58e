// LayerNorm over the last dimension, eps 1e-5. stats holds (mean, rstd) per row: the backward reads them.
#ifndef CTRON_LAYERNORM_H
#define CTRON_LAYERNORM_H
#include <stdint.h>

#define LN_EPS 1e-5f

// x[n,h] -> y[n,h], stats[n,2]
void layernorm_forward(float *y, float *stats, const float *x, const float *w, const float *b, int n, int h);
// dy[n,h], x[n,h], stats[n,2] -> dx[n,h] (+= when accumulate), dw[h] +=, db[h] +=
void layernorm_backward(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *x,
                        const float *stats, const float *w, int n, int h);
// The same with x read from its bf16 copy x16 (each row widened exactly): layernorm_backward's bits on those values.
void layernorm_backward16(float *dx, int accumulate, float *dw, float *db, const float *dy, const uint16_t *x16,
                          const float *stats, const float *w, int n, int h);
// Tempo's in-place LayerNorm: the same from the output y[n,h] instead of the input (x̂ = (y − b)/w);
// equal to layernorm_backward up to the rounding of y (exact in real arithmetic; needs w ≠ 0).
void layernorm_backward_from_output(float *dx, int accumulate, float *dw, float *db, const float *dy, const float *y,
                                    const float *stats, const float *w, const float *b, int n, int h);
#endif
