#include "memory/pipe_memory.h"

PipeUnitBytes pipe_chunk_bytes(const PipeMemory *pm, int rank, int chunk, int slot) {
    int l0 = pipe_chunk_first_layer(pm->spec, rank, chunk);
    const MemoryPolicy *pol = slot < pm->keep_all ? pm->everything : pm->plan;
    PipeUnitBytes u;
    act_chunk_bytes(pm->sh, pol, l0, l0 + pipe_layers_per_chunk(pm->spec), &u.stored, &u.backward_peak);
    return u;
}

typedef struct { const PipeMemory *pm; int rank; } RankOf;

static PipeUnitBytes unit_bytes(int mb, int chunk, int slot, void *user) {
    (void)mb;   // every micro-batch of a chunk has the same shape
    const RankOf *r = user;
    return pipe_chunk_bytes(r->pm, r->rank, chunk, slot);
}

size_t pipe_rank_act_peak(const PipeMemory *pm, int rank) {
    RankOf r = {pm, rank};
    return pipe_stage_peak(pm->spec, rank, unit_bytes, &r);
}
