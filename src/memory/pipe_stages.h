// Every pipeline stage's activation figures (`ctron memory --pp`, DESIGN.md §9): the layers a rank holds,
// the contexts it keeps in flight, what one context holds, and its exact peak (pipe_memory.h), plus the
// part of that peak its layers alone make up (the term the paper's Eq. 5 is about).
#ifndef CTRON_PIPE_STAGES_H
#define CTRON_PIPE_STAGES_H
#include <stddef.h>
#include "memory/pipe_memory.h"

typedef struct {
    char layers[96];          // "0-5", "0-1,8-9,16-17", "0,4,8,…" (cut with "…" when long)
    int n_layers;
    int contexts;             // activation contexts in flight at once (pipe_assign_slots)
    size_t chunk_min, chunk_max;  // layers' bytes one context holds for one of the rank's chunks (the plan)
    size_t chunk_keep_all;    // the largest in a keep-all context (--recompute-microbatches); 0 when none
    size_t embedding;         // + the embedding mask, in the contexts of global chunk 0 (stage 0's first)
    size_t head;              // + final LN input and statistics, output-layer input, logits (the last chunk's)
    size_t layers_peak;       // the most bytes of its layers held at once over the schedule
    size_t peak;              // pipe_rank_act_peak: what the rank's ledger measures
} PipeStageRow;

// Fills rows[0..p−1] for pm; returns the rank with the largest peak (the lowest such rank on a tie).
int pipe_stage_rows(const PipeMemory *pm, PipeStageRow *rows);
// The layers of rank r as a list of ranges, written into buf.
void pipe_stage_layers(const PipeSpec *s, int r, char *buf, size_t len);
#endif
