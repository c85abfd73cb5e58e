// The optimizer's and the guards' sweeps over flat parameter and gradient buffers.
#ifndef CTRON_CPU_OPTIM_H
#define CTRON_CPU_OPTIM_H
#include <stddef.h>
#include <stdint.h>

// AdamW on n elements: g·grad_scale into the moments m, v; p −= lr·(m̂/(√v̂+eps) + wd·p) with
// m̂ = m/bc1, v̂ = v/bc2. w16 (may be NULL): p's bf16 copy, written in the same sweep.
void cpu_adamw_update(float *p, uint16_t *w16, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float wd, float bc1, float bc2, float grad_scale);
// Σ x² in double, over 256 fixed chunks summed in order (bitwise reproducible for any thread count).
double cpu_sum_squares(const float *x, size_t n);
size_t cpu_count_nonfinite(const float *x, size_t n);
#endif
