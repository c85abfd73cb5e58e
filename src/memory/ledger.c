#include "memory/ledger.h"
#include <string.h>
#include "util/common.h"

static size_t cell(const Ledger *lg, ActName name, int layer) {
    int row = layer < 0 ? lg->layers : layer;
    if (row > lg->layers) ctron_fatal("ledger: layer %d out of range (%d layers)", layer, lg->layers);
    return (size_t)row * ACT_COUNT + (size_t)name;
}

void ledger_init(Ledger *lg, int layers) {
    memset(lg, 0, sizeof *lg);
    lg->layers = layers;
    size_t n = (size_t)(layers + 1) * ACT_COUNT * sizeof(size_t);
    lg->cur = xcalloc(n);
    lg->at_peak = xcalloc(n);
    lg->at_fwd_end = xcalloc(n);
}

void ledger_free(Ledger *lg) {
    free(lg->cur);
    free(lg->at_peak);
    free(lg->at_fwd_end);
    memset(lg, 0, sizeof *lg);
}

void ledger_add(Ledger *lg, ActName name, int layer, size_t bytes) {
    lg->cur[cell(lg, name, layer)] += bytes;
    lg->total_cur += bytes;
    if (!lg->paused && lg->total_cur > lg->total_peak) {
        lg->total_peak = lg->total_cur;
        memcpy(lg->at_peak, lg->cur, (size_t)(lg->layers + 1) * ACT_COUNT * sizeof(size_t));
    }
}

void ledger_sub(Ledger *lg, ActName name, int layer, size_t bytes) {
    size_t c = cell(lg, name, layer);
    if (lg->cur[c] < bytes || lg->total_cur < bytes)
        ctron_fatal("ledger: freeing %zu bytes of %s (layer %d) that were never counted", bytes, act_name_str(name), layer);
    lg->cur[c] -= bytes;
    lg->total_cur -= bytes;
}

size_t ledger_cur_bytes(const Ledger *lg, ActName name, int layer) { return lg->cur[cell(lg, name, layer)]; }

size_t ledger_peak_bytes(const Ledger *lg, ActName name, int layer) { return lg->at_peak[cell(lg, name, layer)]; }

void ledger_snapshot_forward_end(Ledger *lg) {
    if (lg->paused) return;
    lg->total_fwd_end = lg->total_cur;
    memcpy(lg->at_fwd_end, lg->cur, (size_t)(lg->layers + 1) * ACT_COUNT * sizeof(size_t));
}

size_t ledger_stored_bytes(const Ledger *lg, ActName name, int layer) { return lg->at_fwd_end[cell(lg, name, layer)]; }

size_t ledger_layer_stored(const Ledger *lg, int layer, int core_only) {
    size_t sum = 0;
    for (int n = 0; n < (core_only ? ACT_N_CORE : ACT_COUNT); n++) sum += lg->at_fwd_end[cell(lg, (ActName)n, layer)];
    return sum;
}
