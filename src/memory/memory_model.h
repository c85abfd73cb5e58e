// The analytic activation model (the paper's §4, generalised; DESIGN.md §2): bytes each saved
// tensor takes, per layer and for the model-level extras. The ledger must measure exactly this.
#ifndef CTRON_MEMORY_MODEL_H
#define CTRON_MEMORY_MODEL_H
#include <stddef.h>
#include "memory/act_names.h"

typedef struct {
    long s, b, h, a, L, v;
    int elem_bytes;    // e: bytes per stored activation element (4 fp32, 2 bf16)
    int mask_bytes;    // k: bytes per dropout-mask element
    int dropout;       // 0 when p = 0: no masks and no dropped copy are kept
} ActShape;

// Elements of one saved tensor (0 when the configuration keeps none).
size_t act_elements(const ActShape *sh, ActName name);
size_t act_bytes(const ActShape *sh, ActName name);
// Σ of the paper's per-layer names (no LN statistics).
size_t act_layer_core_bytes(const ActShape *sh);
// Per layer, LN statistics included.
size_t act_layer_bytes(const ActShape *sh);
// Model-level extras: embedding mask, final LN input and statistics, output-layer input, logits.
size_t act_model_extra_bytes(const ActShape *sh);
// Everything held at the end of a training forward.
size_t act_total_bytes(const ActShape *sh);
#endif
