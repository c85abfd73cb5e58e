// A pipeline rank's activation bytes from its schedule (DESIGN.md §9): the contexts it keeps in flight,
// each holding its chunk's bytes for one micro-batch (memory_model.h's act_chunk_bytes), walked in the
// schedule's order. What the ledger of that rank must measure.
#ifndef CTRON_PIPE_MEMORY_H
#define CTRON_PIPE_MEMORY_H
#include <stddef.h>
#include "memory/memory_model.h"
#include "train/pipe_schedule.h"

// keep_all: the contexts (slots) 0..keep_all−1 keep every activation (--recompute-microbatches), with
// the policy `everything` (policy_keep_everything of plan); NULL when keep_all is 0.
typedef struct {
    const PipeSpec *spec;
    const ActShape *sh;
    const MemoryPolicy *plan, *everything;
    int keep_all;
} PipeMemory;

// The rank's peak over its schedule.
size_t pipe_rank_act_peak(const PipeMemory *pm, int rank);
// One chunk of the rank for one micro-batch in a context of this slot: held between its forward and its
// backward, and the most during its backward.
PipeUnitBytes pipe_chunk_bytes(const PipeMemory *pm, int rank, int chunk, int slot);
#endif
