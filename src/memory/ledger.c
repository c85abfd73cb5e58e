#include "memory/ledger.h"
#include <string.h>
#include "util/common.h"

// Cells per slot: (layers + 1) rows of ACT_COUNT names; the last row holds the model-level tensors.
static size_t slot_cells(const Ledger *lg) { return (size_t)(lg->layers + 1) * ACT_COUNT; }

static size_t cell_in(const Ledger *lg, int slot, ActName name, int layer) {
    int row = layer < 0 ? lg->layers : layer;
    if (row > lg->layers) ctron_fatal("ledger: layer %d out of range (%d layers)", layer, lg->layers);
    if (slot < 0 || slot >= lg->slots) ctron_fatal("ledger: slot %d out of range (%d slots)", slot, lg->slots);
    return (size_t)slot * slot_cells(lg) + (size_t)row * ACT_COUNT + (size_t)name;
}

// A cell summed over the slots.
static size_t sum_slots(const Ledger *lg, const size_t *cells, ActName name, int layer) {
    size_t sum = 0;
    for (int k = 0; k < lg->slots; k++) sum += cells[cell_in(lg, k, name, layer)];
    return sum;
}

void ledger_init_slots(Ledger *lg, int layers, int slots) {
    memset(lg, 0, sizeof *lg);
    lg->layers = layers;
    lg->slots = slots < 1 ? 1 : slots;
    size_t n = (size_t)lg->slots * slot_cells(lg) * sizeof(size_t);
    lg->cur = xcalloc(n);
    lg->at_peak = xcalloc(n);
    lg->at_fwd_end = xcalloc(n);
}

void ledger_init(Ledger *lg, int layers) { ledger_init_slots(lg, layers, 1); }

void ledger_free(Ledger *lg) {
    free(lg->cur);
    free(lg->at_peak);
    free(lg->at_fwd_end);
    memset(lg, 0, sizeof *lg);
}

void ledger_add_slot(Ledger *lg, int slot, ActName name, int layer, size_t bytes) {
    lg->cur[cell_in(lg, slot, name, layer)] += bytes;
    lg->total_cur += bytes;
    if (!lg->paused && lg->total_cur > lg->total_peak) {
        lg->total_peak = lg->total_cur;
        memcpy(lg->at_peak, lg->cur, (size_t)lg->slots * slot_cells(lg) * sizeof(size_t));
    }
}

void ledger_add(Ledger *lg, ActName name, int layer, size_t bytes) { ledger_add_slot(lg, 0, name, layer, bytes); }

void ledger_sub_slot(Ledger *lg, int slot, ActName name, int layer, size_t bytes) {
    size_t c = cell_in(lg, slot, name, layer);
    if (lg->cur[c] < bytes || lg->total_cur < bytes)
        ctron_fatal("ledger: freeing %zu bytes of %s (layer %d, slot %d) that were never counted", bytes,
                    act_name_str(name), layer, slot);
    lg->cur[c] -= bytes;
    lg->total_cur -= bytes;
}

void ledger_sub(Ledger *lg, ActName name, int layer, size_t bytes) { ledger_sub_slot(lg, 0, name, layer, bytes); }

size_t ledger_cur_bytes(const Ledger *lg, ActName name, int layer) { return sum_slots(lg, lg->cur, name, layer); }

size_t ledger_peak_bytes(const Ledger *lg, ActName name, int layer) { return sum_slots(lg, lg->at_peak, name, layer); }

size_t ledger_slot_peak_bytes(const Ledger *lg, int slot, ActName name, int layer) {
    return lg->at_peak[cell_in(lg, slot, name, layer)];
}

size_t ledger_slot_peak_total(const Ledger *lg, int slot) {
    size_t sum = 0;
    for (size_t c = 0; c < slot_cells(lg); c++) sum += lg->at_peak[(size_t)slot * slot_cells(lg) + c];
    return sum;
}

void ledger_snapshot_forward_end(Ledger *lg) {
    if (lg->paused) return;
    lg->total_fwd_end = lg->total_cur;
    memcpy(lg->at_fwd_end, lg->cur, (size_t)lg->slots * slot_cells(lg) * sizeof(size_t));
}

size_t ledger_stored_bytes(const Ledger *lg, ActName name, int layer) { return sum_slots(lg, lg->at_fwd_end, name, layer); }

size_t ledger_layer_stored(const Ledger *lg, int layer, int core_only) {
    size_t sum = 0;
    for (int n = 0; n < (core_only ? ACT_N_CORE : ACT_COUNT); n++) sum += ledger_stored_bytes(lg, (ActName)n, layer);
    return sum;
}
