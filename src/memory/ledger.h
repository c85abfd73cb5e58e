// The ledger: bytes held for backward, per layer and per name, now and at peak. A pipeline stage
// holds several micro-batches at once (DESIGN.md §9): each activation context counts in its own slot,
// and the queries without a slot sum over them.
#ifndef CTRON_LEDGER_H
#define CTRON_LEDGER_H
#include <stddef.h>
#include <stdio.h>
#include "memory/act_names.h"

typedef struct {
    int layers;            // cell row `layers` holds model-level tensors (layer = -1)
    int slots;             // activation contexts (1 without a pipeline)
    size_t *cur;           // [slots · (layers+1) · ACT_COUNT] bytes held now
    size_t *at_peak;       // the same cells at the moment the total peaked
    size_t *at_fwd_end;    // the same cells at the end of the last training forward (what each layer keeps)
    size_t total_cur, total_peak, total_fwd_end;
    int paused;            // evaluation/generation forwards are not training state: not counted
} Ledger;

void ledger_init(Ledger *lg, int layers);                 // one slot
void ledger_init_slots(Ledger *lg, int layers, int slots);
void ledger_free(Ledger *lg);
void ledger_add(Ledger *lg, ActName name, int layer, size_t bytes);   // slot 0
void ledger_sub(Ledger *lg, ActName name, int layer, size_t bytes);
void ledger_add_slot(Ledger *lg, int slot, ActName name, int layer, size_t bytes);
void ledger_sub_slot(Ledger *lg, int slot, ActName name, int layer, size_t bytes);
// One slot's cell at peak, and everything the slot held at peak.
size_t ledger_slot_peak_bytes(const Ledger *lg, int slot, ActName name, int layer);
size_t ledger_slot_peak_total(const Ledger *lg, int slot);
void ledger_snapshot_forward_end(Ledger *lg);
// Bytes of one cell at the end of the last training forward; layer -1 for model-level tensors.
size_t ledger_stored_bytes(const Ledger *lg, ActName name, int layer);
// Σ over names of one layer at the end of the forward (core names only when core_only).
size_t ledger_layer_stored(const Ledger *lg, int layer, int core_only);
// Bytes of one cell now; layer -1 for model-level tensors.
size_t ledger_cur_bytes(const Ledger *lg, ActName name, int layer);
// Bytes of one cell at peak; layer -1 for model-level tensors.
size_t ledger_peak_bytes(const Ledger *lg, ActName name, int layer);
#endif
