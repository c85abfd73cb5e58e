#include "memory/ledger_report.h"

const char *format_bytes(double bytes, char *buf, size_t len) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) { bytes /= 1024.0; u++; }
    snprintf(buf, len, u == 0 ? "%.0f %s" : "%.2f %s", bytes, unit[u]);
    return buf;
}

int ledger_print_report(FILE *f, const Ledger *lg, const ActShape *sh) {
    int mismatches = 0;
    char b1[32], b2[32];
    fprintf(f, "activation ledger at peak: measured vs predicted (s=%ld b=%ld h=%ld a=%ld L=%ld v=%ld, "
               "e=%d bytes/element, k=%d bytes/mask element)\n",
            sh->s, sh->b, sh->h, sh->a, sh->L, sh->v, sh->elem_bytes, sh->dropout ? sh->mask_bytes : 0);
    fprintf(f, "  %-11s %15s %15s %12s  %s\n", "name", "measured/layer", "predicted", "all layers", "");
    size_t core_sum = 0, layer_sum = 0;
    for (int n = 0; n < ACT_N_CORE + 2; n++) {
        if (n == ACT_N_CORE) fprintf(f, "  -- extras per layer --\n");
        ActName name = (ActName)n;
        size_t pred = act_bytes(sh, name), total = 0;
        int same = 1;
        for (int l = 0; l < lg->layers; l++) {
            size_t got = ledger_peak_bytes(lg, name, l);
            total += got;
            if (got != pred) same = 0;
        }
        if (!same) mismatches++;
        size_t first = lg->layers > 0 ? ledger_peak_bytes(lg, name, 0) : 0;
        fprintf(f, "  %-11s %15zu %15zu %12s  %s\n", act_name_str(name), first, pred,
                format_bytes((double)total, b1, sizeof b1), same ? "ok" : "MISMATCH");
        if (n < ACT_N_CORE) core_sum += pred;
        layer_sum += pred;
    }
    fprintf(f, "  per layer: %zu bytes table names (%s), %zu with LN statistics\n", core_sum,
            format_bytes((double)core_sum, b1, sizeof b1), layer_sum);
    fprintf(f, "  -- model extras --\n");
    for (int n = ACT_EMB_MASK; n < ACT_COUNT; n++) {
        ActName name = (ActName)n;
        size_t got = ledger_peak_bytes(lg, name, -1), pred = act_bytes(sh, name);
        if (got != pred) mismatches++;
        fprintf(f, "  %-11s %15zu %15zu %12s  %s\n", act_name_str(name), got, pred,
                format_bytes((double)got, b1, sizeof b1), got == pred ? "ok" : "MISMATCH");
    }
    size_t pred_total = act_total_bytes(sh);
    if (lg->total_peak != pred_total) mismatches++;
    fprintf(f, "  total at peak: measured %zu (%s), predicted %zu (%s)  %s\n", lg->total_peak,
            format_bytes((double)lg->total_peak, b1, sizeof b1), pred_total,
            format_bytes((double)pred_total, b2, sizeof b2), lg->total_peak == pred_total ? "ok" : "MISMATCH");
    return mismatches;
}
