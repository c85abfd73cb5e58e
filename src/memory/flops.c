#include "memory/flops.h"

double flops_model(double B, double L, double s, double h, double v) {
    return 72.0 * B * L * s * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * h * L));
}

double flops_hardware(double B, double s, double h, double v, const MemoryPolicy *policy, int layers, int ctron_full) {
    double layer = 72.0 * B * s * h * h * (1.0 + s / (6.0 * h));
    double total = 6.0 * B * s * h * v;   // the output layer: 72·B·L·s·h²·v/(12hL)
    for (int l = 0; l < layers; l++) {
        LayerRecompute k = policy ? policy->kind[l] : RECOMPUTE_NONE;
        if (k == RECOMPUTE_SELECTIVE) total += 72.0 * B * s * h * h * (1.0 + s / (3.0 * h));
        else if (k == RECOMPUTE_FULL) {
            total += layer * 4.0 / 3.0;
            int g0 = policy->group_start[l];
            int last = l + 1 == layers || policy->kind[l + 1] != RECOMPUTE_FULL || policy->group_start[l + 1] != g0;
            if (ctron_full && last) total -= 8.0 * B * s * h * h;
        }
        else total += layer;
    }
    return total;
}
