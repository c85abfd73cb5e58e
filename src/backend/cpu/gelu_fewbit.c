#include "backend/cpu/gelu_fewbit.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "util/common.h"

void fewbit_gelu_grid(double *x, double *w, double *g) {
    const double pi = 3.14159265358979323846, k = sqrt(2.0 / pi), c = 0.044715, step = 0.01;
    for (int i = 0; i < FEWBIT_GRID; i++) {
        double v = -8.0 + step * i, u = k * (v + c * v * v * v), t = tanh(u);
        x[i] = v;
        w[i] = exp(-0.5 * v * v) / sqrt(2.0 * pi) * step;
        g[i] = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3.0 * c * v * v);   // tanh-form GeLU′
    }
}

// Optimal L-level piecewise-constant fit of g (weights w) over contiguous runs of the grid.
// cost[a·(G+1) + b] is the weighted squared error of run [a, b) about its mean, summed run by run
// (prefix sums would lose the tails' ~1e-16 weights to cancellation); best[l][j] is the least
// error of covering points 0..j−1 with l runs. O(L·G²) time, O(G²) memory (20 MB, once per k).
static void optimise(FewBitGelu *t) {
    enum { G = FEWBIT_GRID };
    int L = t->levels;
    double *x = xmalloc(G * sizeof(double)), *w = xmalloc(G * sizeof(double)), *g = xmalloc(G * sizeof(double));
    fewbit_gelu_grid(x, w, g);
    double *cost = xmalloc((size_t)(G + 1) * (G + 1) * sizeof(double));
#pragma omp parallel for schedule(dynamic, 16)
    for (int a = 0; a < G; a++) {
        double sw = 0.0, s1 = 0.0, s2 = 0.0;
        for (int b = a + 1; b <= G; b++) {
            sw += w[b - 1];
            s1 += w[b - 1] * g[b - 1];
            s2 += w[b - 1] * g[b - 1] * g[b - 1];
            double c = s2 - s1 * s1 / sw;
            cost[(size_t)a * (G + 1) + b] = c > 0.0 ? c : 0.0;
        }
    }
    double wsum = 0.0;
    for (int i = 0; i < G; i++) wsum += w[i];
    double *best = xmalloc((size_t)(L + 1) * (G + 1) * sizeof(double));
    int *from = xmalloc((size_t)(L + 1) * (G + 1) * sizeof(int));
    for (int j = 1; j <= G; j++) { best[1 * (G + 1) + j] = cost[j]; from[1 * (G + 1) + j] = 0; }
    for (int l = 2; l <= L; l++)
        for (int j = l; j <= G; j++) {
            double b = INFINITY;
            int arg = l - 1;
            for (int i = l - 1; i < j; i++) {
                double v = best[(l - 1) * (G + 1) + i] + cost[(size_t)i * (G + 1) + j];
                if (v < b) { b = v; arg = i; }
            }
            best[l * (G + 1) + j] = b;
            from[l * (G + 1) + j] = arg;
        }
    t->mse = best[L * (G + 1) + G] / wsum;
    int end = G;
    for (int l = L; l >= 1; l--) {   // walk the runs back: levels are run means, bounds run starts
        int start = from[l * (G + 1) + end];
        double sw = 0.0, s1 = 0.0;
        for (int i = start; i < end; i++) { sw += w[i]; s1 += w[i] * g[i]; }
        t->slope[l - 1] = (float)(s1 / sw);
        if (l > 1) t->bound[l - 2] = (float)(0.5 * (x[start - 1] + x[start]));
        end = start;
    }
    free(x); free(w); free(g); free(cost); free(best); free(from);
}

const FewBitGelu *fewbit_gelu_table(int k) {
    static FewBitGelu tables[FEWBIT_MAX_BITS + 1];
    if (k < 1 || k > FEWBIT_MAX_BITS) ctron_fatal("fewbit_gelu_table: k = %d is not in 1..%d", k, FEWBIT_MAX_BITS);
    FewBitGelu *t = &tables[k];
    if (t->k == 0) {
        FewBitGelu fresh;
        memset(&fresh, 0, sizeof fresh);
        fresh.k = k;
        fresh.levels = 1 << k;
        optimise(&fresh);
        *t = fresh;
    }
    return t;
}

static inline unsigned code_of(float v, const FewBitGelu *t) {
    unsigned c = 0;
    for (int j = 0; j < t->levels - 1; j++) c += v >= t->bound[j];
    return c;
}

void fewbit_gelu_encode(uint8_t *codes, const float *x, size_t count, const FewBitGelu *t) {
    int k = t->k;
    size_t groups = (count + 7) / 8;   // 8 elements = k whole bytes
#pragma omp parallel for schedule(static)
    for (size_t gi = 0; gi < groups; gi++) {
        uint32_t word = 0;
        for (size_t j = 0; j < 8 && 8 * gi + j < count; j++) word |= code_of(x[8 * gi + j], t) << (j * (size_t)k);
        size_t nbytes = 8 * gi + 8 <= count ? (size_t)k : ((count - 8 * gi) * (size_t)k + 7) / 8;
        for (size_t b = 0; b < nbytes; b++) codes[gi * (size_t)k + b] = (uint8_t)(word >> (8 * b));
    }
}

void fewbit_gelu_backward(float *dx, const float *dy, const uint8_t *codes, size_t count, const FewBitGelu *t) {
    int k = t->k;
    unsigned mask = (1u << k) - 1;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) {
        size_t bit = i * (size_t)k;
        unsigned two = codes[bit / 8] | (bit / 8 + 1 < (count * (size_t)k + 7) / 8 ? (unsigned)codes[bit / 8 + 1] << 8 : 0u);
        dx[i] = dy[i] * t->slope[(two >> (bit % 8)) & mask];
    }
}
