// Few-Bit Backward for GeLU (Novikov et al., "Few-Bit Backward: Quantized Gradients of Activation
// Functions for Memory Footprint Reduction", ICML 2023): instead of the GeLU input (4sbh elements
// kept for backward), keep a k-bit code of it (k = 1..4) and use, in backward, the optimal
// piecewise-constant approximation q of GeLU′ with 2^k levels: the boundaries and levels that
// minimise E[(GeLU′(x) − q(x))²] for x ~ N(0, 1) (the pre-activations of a LayerNorm-ed input
// through an initialised linear layer are close to that), found by dynamic programming over a grid
// of 1601 points on [−8, 8] (docs/MEMORY.md lists the tables).
#ifndef CTRON_GELU_FEWBIT_H
#define CTRON_GELU_FEWBIT_H
#include <stddef.h>
#include <stdint.h>

#define FEWBIT_MAX_BITS 4

typedef struct {
    int k, levels;
    float bound[(1 << FEWBIT_MAX_BITS) - 1];   // ascending; code c means bound[c−1] <= x < bound[c]
    float slope[1 << FEWBIT_MAX_BITS];         // q on each interval: the N(0,1)-weighted mean of GeLU′
    double mse;                                // E[(GeLU′ − q)²] on the grid: the optimum
} FewBitGelu;

// The optimal table for k bits (1..4), computed on first use and cached (thread-safe after the
// first call returns; call it once before parallel regions).
const FewBitGelu *fewbit_gelu_table(int k);
// codes: k bits per element, element i at bits i·k .. i·k+k−1 of the byte array, LSB first
// (⌈count·k/8⌉ bytes).
void fewbit_gelu_encode(uint8_t *codes, const float *x, size_t count, const FewBitGelu *t);
// dx[i] = dy[i] · q(x[i]) from the codes; dx may alias dy.
void fewbit_gelu_backward(float *dx, const float *dy, const uint8_t *codes, size_t count, const FewBitGelu *t);
// The grid the tables are optimised on (tests re-derive optima on it): G points x_i = −8 + i·0.01
// with weights φ(x_i)·0.01, and GeLU′(x_i) in double precision.
enum { FEWBIT_GRID = 1601 };
void fewbit_gelu_grid(double *x, double *w, double *g);
#endif
