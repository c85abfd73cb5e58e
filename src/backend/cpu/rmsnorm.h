// RMSNorm over the last dimension, as Hugging Face's LlamaRMSNorm: y = w ⊙ (x · rstd) with
// rstd = 1/sqrt(mean(x²) + eps) (eps inside the root; the weight multiplies after normalising; no
// mean, no bias). rstd[n] (fp32, one per row) is what the forward saves for the backward.
#ifndef CTRON_RMSNORM_H
#define CTRON_RMSNORM_H
#include <stdint.h>

// x[n,h], w[h] -> y[n,h], rstd[n]. round_bf16: y rounded to bf16 in the same sweep (the value a
// tensor stored in bf16 goes on with); x is read as given (the caller keeps it, rounded or not).
void rmsnorm_forward(float *y, float *rstd, const float *x, const float *w, float eps, int n, int h, int round_bf16);
// dy[n,h], x[n,h], rstd[n], w[h] -> dx[n,h] (+= when accumulate), dw[h] +=.
// dx = rstd·(dx̂ − x̂·mean(dx̂ ⊙ x̂)) with x̂ = x·rstd, dx̂ = dy ⊙ w; dw = Σ_rows dy ⊙ x̂, summed row by
// row in order per column: the same bits for any thread count. Reads dy, x, rstd, w.
void rmsnorm_backward(float *dx, int accumulate, float *dw, const float *dy, const float *x, const float *rstd,
                      const float *w, int n, int h);
// The same with x read from its bf16 copy x16 (each row widened exactly): rmsnorm_backward's bits on those values.
void rmsnorm_backward16(float *dx, int accumulate, float *dw, const float *dy, const uint16_t *x16, const float *rstd,
                        const float *w, int n, int h);
// Tempo's in-place norm for RMSNorm: the same from the output y[n,h] instead of x, with x̂ = y / w
// (reads dy, y, rstd, w). Exact in real arithmetic when every w[c] ≠ 0; otherwise off by the rounding
// of y (and by bf16's 2⁻⁹ when y is stored in bf16). mean(dx̂ ⊙ x̂) is taken as mean(dy ⊙ y), which
// needs no division. A zero w[c] leaves x̂[:,c] unknown: it comes out 0/0 = NaN, so dx[:,c] and
// dw[c] are NaN (the other columns stay right; the step's non-finite check catches it, never
// silently wrong); a caller that may meet a zero weight uses rmsnorm_backward.
void rmsnorm_backward_from_output(float *dx, int accumulate, float *dw, const float *dy, const float *y,
                                  const float *rstd, const float *w, int n, int h);
#endif
