// Activation offload in the model's step (--offload): which layers send which tensors to the pool,
// where each goes in a stage slot and in the pool, and when it moves. The schedule is fixed: the
// forward fills layer l's slot and queues it to the pool when block l is done; the backward needs a
// layer's tensors at its own step (a full-recompute checkpoint at the last layer of its group) and
// fetches the next layer's while the current one computes. Bitwise: the bytes come back unchanged.
#ifndef CTRON_OFFLOAD_SCHED_H
#define CTRON_OFFLOAD_SCHED_H
#include "model/gpt.h"

// After the shape and policy are set; nothing without policy.offload, or when the policy keeps none
// of the named tensors (m->off.pool stays NULL; the pool's ledger exists and stays empty). Fatal when the pool cannot be made: a directory
// the CLI accepted but whose disk cannot hold the pool (exit 1, the size named, before any step).
void offload_init(GPT *m);
// A pool's layout for per-layer region sizes span_of(shape, policy, l) (offload's and MEMO's differ):
// each layer's offset, its slot (alternating between the layers with a region; -1: none), those layers
// last first (the backward's order) and the largest region of each slot (span[0], span[1]); returns the
// pool's bytes. Arrays xcalloc'd.
size_t pool_regions_plan(const GPT *m, size_t (*span_of)(const ActShape *, const MemoryPolicy *, int),
                         size_t **pool_at, int **slot, int **order, int *n_order, size_t span[2]);
void offload_free(GPT *m);
// A training forward begins: the stage goes on the arena (its bottom entry).
void offload_begin_forward(GPT *m);
// Where the forward writes offloaded tensor `name` of `layer` (bytes of it); counted in the pool.
void *offload_place(GPT *m, ActName name, int layer, size_t bytes);
// Block `layer`'s forward is done: its region goes to the pool while the next block computes.
void offload_layer_stored(GPT *m, int layer);
// Backward step `step`: the tensors it reads are in their slot; the next layer's are on their way.
void offload_fetch(GPT *m, int step);
// Layer `layer`'s backward is done: its tensors leave the pool.
void offload_layer_released(GPT *m, int layer);
// The step is over (backward done, or a forward released): every transfer finished, the pool empty.
void offload_end_step(GPT *m);
#endif
