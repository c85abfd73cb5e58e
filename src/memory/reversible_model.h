// The analytic model of reversible blocks (model/reversible.h): the two fp32 streams at model level;
// no layer keeps anything through the forward; a layer's backward rebuilds one half at a time (the
// MLP's, then the attention's) keeping what a none layer keeps for that half.
#ifndef CTRON_REVERSIBLE_MODEL_H
#define CTRON_REVERSIBLE_MODEL_H
#include <stddef.h>
#include "memory/memory_model.h"

// Is `name` one of the attention half's tensors (Norm1 … drop1_mask), or the MLP half's?
int act_rev_attn_half(ActName name);
// What one half of a layer holds while its backward runs (attn 1: the attention half; 0: the MLP's).
size_t act_rev_half_bytes(const ActShape *sh, unsigned tempo, int attn);
// The step's peak with reversible blocks: the forward's end, or the streams plus the larger half
// (inverting); the forward's end when the layers are stored (MemoryPolicy.rev_store).
size_t act_rev_peak_bytes(const ActShape *sh, const MemoryPolicy *p);
// Hardware FLOPs the inversion adds per B sequences: every layer's forward once more (both branches,
// FC2/down included: the inversion subtracts the whole branch); 0 for the standard block or stored layers.
double flops_rev_recompute(double B, const ActShape *sh, const MemoryPolicy *p);
// Arena entries beyond act_max_entries: the two streams.
int rev_arena_entries(const ActShape *sh);
#endif
