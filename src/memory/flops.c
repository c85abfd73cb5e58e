#include "memory/flops.h"

double flops_model(double B, double L, double s, double h, double v) {
    return 72.0 * B * L * s * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * h * L));
}

double flops_recompute_selective(double B, double s, double h) { return 12.0 * B * s * s * h; }

double flops_recompute_full(double B, double s, double h, int skip_fc2) {
    return 24.0 * B * s * h * h * (1.0 + s / (6.0 * h)) - (skip_fc2 ? 8.0 * B * s * h * h : 0.0);
}

double flops_hardware(double B, double s, double h, double v, const MemoryPolicy *policy, int layers, int ctron_full) {
    double total = flops_model(B, layers, s, h, v);
    for (int l = 0; l < layers && policy; l++) {
        LayerRecompute k = policy->kind[l];
        if (k == RECOMPUTE_SELECTIVE) total += flops_recompute_selective(B, s, h);
        if (k == RECOMPUTE_FULL) {
            int g0 = policy->group_start[l];
            int last = l + 1 == layers || policy->kind[l + 1] != RECOMPUTE_FULL || policy->group_start[l + 1] != g0;
            total += flops_recompute_full(B, s, h, ctron_full && last);
        }
    }
    return total;
}
